"""Texts -> entities (and a relation model's relations) with a trained model: tokenize, window, batch,
score, decode, merge."""
import contextlib
import logging
import math
from typing import Callable, Dict, FrozenSet, Generator, Iterable, List, Optional, Sequence

import numpy as np
import paddle

from ..data.batching import collate_rows, prediction_batches, split_row
from ..data.features import Featurizer, Window, whole_word_spans, window_entities
from ..model.decode import Threshold, best_in_groups, score_logit, select_flat, sigmoid, threshold_array
from ..model.event_decode import assemble_events, flat_per_label
from ..model.network import model_inputs
from ..model.relation_head import pair_cells, relation_pairs
from ..model.score_map import ScoreMap
from ..spans import CLS_POSITIONS, EVENT_LINK, Entity, Record, Relation, TokenSpan, from_input, kept_relations, to_entity
from .doubt import NEAR

log = logging.getLogger("globalpointer")


class Extractor:
    """Entities for any number of texts of any length, with character offsets (end exclusive)."""

    def __init__(self, model: Callable, featurizer: Featurizer, labels: Sequence[str], decode: str = "nested",
                 threshold: Threshold = 0.0, batch_size: int = 64, pack_texts: bool = False,
                 whole_words: bool = False, relations: Sequence[str] = (), pair_threshold: float = 0.0,
                 max_entities: int = 0, max_pairs: int = 0, max_events: int = 0):
        """``model`` maps (input_ids, token_text, span_text) to head outputs, and its ``decode``
        maps (outputs, span_text, threshold) to token spans (any backend of model/backends.py).
        ``threshold``: one logit, or one per label.  ``batch_size``: rows per forward pass.
        ``pack_texts``: short windows share rows no longer than the call's longest window nor than
        ``batching.PACKED_ROW_TOKENS`` (so no row costs more than in a batch without sharing), where the model can read several texts in a row
        (its ``packs_texts``); otherwise a row per window.  ``whole_words``: no span starts or ends inside
        a word (a model trained on a file read as words, tokenized in subword pieces).  ``relations``: a
        relation model's relation types, whose pair cells count above ``pair_threshold`` (one logit).
        ``max_entities``: the spans of one type a window gives at most, the best (0: no bound);
        ``max_pairs``: a relation model's cells of one pair plane in a window at most (``pair_cells``),
        an event model's per argument label (its one link plane holds the links of every label's arguments);
        ``max_events``: an event model's events of one type in a text at most (``assemble_events``)."""
        self.model = model
        self.featurizer = featurizer
        self.labels = list(labels)
        self.flat = decode == "flat"
        self.threshold = threshold
        self.batch_size = batch_size
        self.pack_texts = pack_texts and getattr(model, "packs_texts", False)
        self.continuations = featurizer.continuations if whole_words else frozenset()
        self.relations = list(relations)
        self.pair_threshold = pair_threshold
        self.events = self.relations == [EVENT_LINK]  # an event model: its records get their events
        self.max_entities, self.max_pairs = max_entities, max_pairs * (len(self.labels) if self.events else 1)
        self.max_events = max_events
        self.score_map: Optional[ScoreMap] = None  # calibrated scores (score_map.py); None: the raw ones
        self.says_cuts = True  # warn when the bounds leave cells out (a calibration's low thresholds expect it)

    @classmethod
    def for_run(cls, model: Callable, featurizer: Featurizer, trained_for, config,
                threshold: Optional[Threshold] = None, batch_size: int = 0,
                pair_threshold: Optional[float] = None) -> "Extractor":
        """The extractor a run's config and its training record (``model_directory.opening.TrainedFor``) describe:
        its labels and decoding, ``model.min_score`` (unless ``threshold``), ``inference.batch_size``
        (unless ``batch_size``); short windows side by side where the model can read them so; whole words
        for a model trained on words; a relation model's pair cells from ``model.min_score`` (unless ``pair_threshold``, a logit);
        the bounds of ``inference.max_entities_per_type`` and ``inference.max_pairs_per_relation``."""
        return cls(model, featurizer, trained_for.labels, trained_for.decoding(config.model.decode),
                   score_logit(config.model.min_score) if threshold is None else threshold,
                   batch_size or config.inference.batch_size, pack_texts=True,
                   whole_words=bool(trained_for.words), relations=trained_for.relations,
                   pair_threshold=score_logit(config.model.min_score) if pair_threshold is None else pair_threshold,
                   max_entities=config.inference.max_entities_per_type,
                   max_pairs=config.inference.max_pairs_per_relation,
                   max_events=config.inference.max_events_per_type)

    def extract(self, texts: Sequence[str]) -> List[List[Entity]]:
        return [record.entities for record in self.records(texts)]

    def records(self, texts: Sequence[str], margins: bool = False) -> List[Record]:
        return run_steps(self.record_steps(texts, margins=margins))

    def record_steps(self, texts: Sequence[str], batch_size: int = 0,
                     margins: bool = False) -> Generator[int, None, List[Record]]:
        """``records`` one forward pass at a time: the generator yields after each pass (of ``batch_size``
        rows, default the extractor's) how many passes are left, and returns a record per text, so that a
        caller can put other work between the passes of a long call (the service does: serve.py).  A
        record holds its text's entities and a relation model's relations
        (each reported by the window that owns its head entity, from entities that window holds); with
        ``margins``, each record's ``margins`` too: logit minus threshold of every cell within
        ``doubt.NEAR`` of its threshold, entity and pair cells, each counted by the window that owns its
        start (what ``doubt.certainty`` reads)."""
        was_training = getattr(self.model, "training", False)
        if was_training:
            self.model.eval()
        windows = self.featurizer.text_windows(texts)
        found = [_Found() for _ in texts]
        lengths = [len(w.input_ids) for w in windows]
        limits = threshold_array(self.threshold)
        near = _Limits(self.labels, limits, self.pair_threshold, self.score_map) if margins else None
        below = near.reach if margins else 0.0  # the cells decoded: those above the threshold, or near it too
        batches = self.passes(windows, batch_size)
        cut = _Cut()
        for done, members in enumerate(batches, 1):
            with paddle.no_grad():
                inputs = self.pass_inputs(windows, members)
                if not getattr(self.model, "reads_arrays", False):  # an export's runtime reads numpy
                    inputs = model_inputs(inputs)
                outputs = self.model(**inputs)
                decoded = self.model.decode(outputs, inputs["span_text"], limits - below if margins else self.threshold)
                cells, pairs_cut = pair_cells(outputs, inputs["span_text"], len(self.labels), self.pair_threshold - below,
                                              self.max_pairs) if self.relations else ([[] for _ in members], 0)
                cut.pair_cells += pairs_cut
                for row, spans, row_cells in zip(members, decoded, cells):
                    row_lengths = [lengths[i] for i in row]
                    for i, own, own_cells in zip(row, split_row(spans, row_lengths),
                                                 split_row(row_cells, row_lengths, ("row", "column"))):
                        own = cut.entities_of(own, self.max_entities)
                        self._read_window(windows[i], own, own_cells, found[windows[i].record_index], near)
            yield len(batches) - done
        if was_training:
            self.model.train()
        if self.says_cuts:
            cut.say(self.max_entities, self.max_pairs, self.events)
        records = [item.record(text, self.flat, margins) for text, item in zip(texts, found)]
        if self.score_map is not None:
            records = [self.score_map.record(record) for record in records]
        return self.with_events(records) if self.events else records

    def with_events(self, records: Sequence[Record]) -> List[Record]:
        """An event model's records with their events (``event_decode.assemble_events``), bounded by
        ``max_events`` per type and text (said in one warning), from their arguments with no two of one
        label overlapping (``flat_per_label``) and the links between those."""
        out, cut = [], 0
        for record in records:
            entities = flat_per_label(record.entities)
            relations = kept_relations(entities, record.relations)
            events, stopped = assemble_events(entities, relations, self.max_events)
            out.append(record._replace(entities=entities, relations=relations, events=events))
            cut += stopped
        if cut:
            log.warning("decoding bounded: %d event type(s) in a text gave more than inference.max_events_per_type (%d) "
                        "events and the first found were kept: a model early in training, or a minimum score too low, "
                        "links far more arguments than a text holds", cut, self.max_events)
        return out

    def _read_window(self, window: Window, spans: Sequence[TokenSpan], cells: Sequence, found: "_Found",
                     near: Optional["_Limits"]) -> None:
        """One window's decoded spans and pair cells into its text's ``found``; with ``near``, they were
        decoded ``NEAR`` below the thresholds: those above count, the others only give their margins."""
        if near is not None:
            found.add_margins(score_margin(entity.score, near.by_label[entity.type]) * near.entity_slope
                              for entity in window_entities(window, spans, self.labels, self.continuations))
            spans = [span for span in spans if span.score > near.scores[span.type]]
            own_from, own_to = window.owned
            found.add_margins(score_margin(cell.score, near.pair) * near.pair_slope for cell in cells
                              if own_from <= cell.row - CLS_POSITIONS < own_to)
            cells = [cell for cell in cells if cell.score > near.pair_score]
        found.entities += window_entities(window, spans, self.labels, self.continuations)
        if self.relations:
            found.relations += window_relations(window, spans, cells, self.labels, self.relations, self.continuations)

    def passes(self, windows: Sequence[Window], batch_size: int = 0) -> List[List[List[int]]]:
        """The forward passes over ``windows``: each a list of rows, each row the indices of the windows
        side by side in it."""
        return prediction_batches([len(w.input_ids) for w in windows], batch_size or self.batch_size, self.pack_texts)

    def pass_inputs(self, windows: Sequence[Window], rows: List[List[int]]) -> Dict[str, np.ndarray]:
        """What the model reads in one pass (``collate_rows``), as numpy arrays."""
        return collate_rows([[windows[i] for i in row] for row in rows], self.featurizer.pad_id)


class _Cut:
    """What the bounds of one call left out (``Extractor``'s ``max_entities`` and ``max_pairs``), said in one
    warning at its end."""

    def __init__(self):
        self.spans, self.windows, self.pair_cells = 0, 0, 0

    def entities_of(self, spans: Sequence[TokenSpan], limit: int) -> Sequence[TokenSpan]:
        """A window's spans, at most ``limit`` of each type (the best)."""
        kept = best_in_groups([span.type for span in spans], [span.score for span in spans], limit)
        if kept.all():
            return spans
        self.spans += int(len(kept) - kept.sum())
        self.windows += 1
        return [span for span, keep in zip(spans, kept) if keep]

    def say(self, max_entities: int, max_pairs: int, events: bool) -> None:
        if self.spans or self.pair_cells:
            log.warning("decoding bounded: %d span(s) in %d window(s) beyond inference.max_entities_per_type (%d) and "
                        "%d pair cell(s) beyond inference.max_pairs_per_relation (%d%s) left out, the best kept: a model "
                        "early in training, or a minimum score too low, scores far more cells than a text holds",
                        self.spans, self.windows, max_entities, self.pair_cells, max_pairs,
                        " for the event model's argument labels together" if events else "")


class _Limits:
    """The thresholds of one call, computed once for its windows: a logit per type (by label) and the
    pair cells', and each as the score a cell above it has (``_score``); the slopes of the calibrated
    score's logit against the raw one (``score_map``: entity cells by the entities' map, pair cells by
    the triples'), which make the margins calibrated ones, and how far below a threshold (in raw logits)
    the cells within ``NEAR`` of it (calibrated) reach."""

    def __init__(self, labels: Sequence[str], limits: np.ndarray, pair: float, score_map: Optional[ScoreMap] = None):
        per_type = [float(limit) for limit in np.broadcast_to(limits, (len(labels),))]
        self.by_label: Dict[str, float] = dict(zip(labels, per_type))
        self.scores = [_score(limit) for limit in per_type]
        self.pair, self.pair_score = pair, _score(pair)
        self.entity_slope, self.pair_slope = (1.0, 1.0) if score_map is None else (
            score_map.entities[0], (score_map.triples or (1.0, 0.0))[0])
        self.reach = NEAR / min(self.entity_slope, self.pair_slope)


class _Found:
    """What the windows of one text found, gathered as they are read."""

    def __init__(self):
        self.entities: List[Entity] = []
        self.relations: List[Relation] = []
        self.margins: List[float] = []

    def add_margins(self, margins: Iterable[float]) -> None:
        """Those within ``NEAR`` of the threshold (the cells decoded reach from ``NEAR`` below it)."""
        self.margins += [margin for margin in margins if abs(margin) < NEAR]

    def record(self, text: str, flat: bool, margins: bool) -> Record:
        entities = select_flat(self.entities) if flat else sorted(self.entities, key=lambda e: (e.start, e.end, e.type))
        return Record(text, entities, relations=kept_relations(entities, self.relations),
                      margins=tuple(self.margins) if margins else None)


def _score(logit: float) -> float:
    """A threshold logit as the score a decoded cell is compared with (``decode.spans_from_hits``: the
    sigmoid of a float32 logit in float64), so a cell is above it exactly when its logit is."""
    return float(sigmoid(np.float64(np.float32(logit))))


def score_margin(score: float, limit: float) -> float:
    """A decoded cell's logit (from its score) minus its threshold."""
    return math.log(score) - math.log1p(-score) - float(np.float32(limit))


class PassesStopped(Exception):
    """A call stopped between two of its forward passes (``stop_between_passes``)."""


_stop_checks: List[Callable[[], bool]] = []


@contextlib.contextmanager
def stop_between_passes(requested: Callable[[], bool]):
    """Inside, a call run by ``run_steps`` raises ``PassesStopped`` after the forward pass in which
    ``requested()`` became true (a training's dev evaluation, stopped by SIGTERM): never from inside a
    pass, whose Paddle code an exception must not unwind through."""
    _stop_checks.append(requested)
    try:
        yield
    finally:
        _stop_checks.pop()


def run_steps(steps: Generator):
    """What a generator of ``record_steps``'s kind returns, once it has run to its end."""
    while True:
        if _stop_checks and _stop_checks[-1]():
            steps.close()
            raise PassesStopped
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def window_relations(window: Window, spans: Sequence[TokenSpan], cells: Sequence, labels: Sequence[str],
                     relation_types: Sequence[str], continuations: FrozenSet[int] = frozenset()) -> List[Relation]:
    """Decoded spans and pair cells of one window -> relations between its entities (``relation_head.
    relation_pairs``), those whose head entity the window owns (as ``window_entities`` reports entities)."""
    own_from, own_to = window.owned
    found = []
    for linked in relation_pairs(whole_word_spans(window, spans, continuations), cells, len(relation_types)):
        head, tail = from_input(linked.head, 0), from_input(linked.tail, 0)
        if own_from <= head.start < own_to:
            found.append(Relation(to_entity(head, window.offsets, labels), relation_types[linked.type],
                                  to_entity(tail, window.offsets, labels), linked.score))
    return found
