"""Texts -> entities with a trained model: tokenize, window, batch, score, decode, merge."""
from typing import Callable, Dict, Generator, List, Optional, Sequence

import numpy as np
import paddle

from ..data.batching import collate_rows, prediction_batches, split_row
from ..data.features import Featurizer, Window, window_entities
from ..model.decode import Threshold, score_logit, select_flat
from ..model.network import model_inputs
from ..spans import Entity


class Extractor:
    """Entities for any number of texts of any length, with character offsets (end exclusive)."""

    def __init__(self, model: Callable, featurizer: Featurizer, labels: Sequence[str], decode: str = "nested",
                 threshold: Threshold = 0.0, batch_size: int = 64, pack_texts: bool = False,
                 whole_words: bool = False):
        """``model`` maps (input_ids, token_text, span_text) to head outputs, and its ``decode``
        maps (outputs, span_text, threshold) to token spans (any backend of model/backends.py).
        ``threshold``: one logit, or one per label.  ``batch_size``: rows per forward pass.
        ``pack_texts``: short windows share rows no longer than the call's longest window (so no row
        costs more than in a batch without sharing), where the model can read several texts in a row
        (its ``packs_texts``); otherwise a row per window.  ``whole_words``: no span starts or ends inside
        a word (a model trained on a file read as words, tokenized in subword pieces)."""
        self.model = model
        self.featurizer = featurizer
        self.labels = list(labels)
        self.flat = decode == "flat"
        self.threshold = threshold
        self.batch_size = batch_size
        self.pack_texts = pack_texts and getattr(model, "packs_texts", False)
        self.continuations = featurizer.continuations if whole_words else frozenset()

    @classmethod
    def for_run(cls, model: Callable, featurizer: Featurizer, trained_for, config,
                threshold: Optional[Threshold] = None, batch_size: int = 0) -> "Extractor":
        """The extractor a run's config and its training record (``model_directory.opening.TrainedFor``) describe:
        its labels and decoding, ``model.min_score`` (unless ``threshold``), ``inference.batch_size``
        (unless ``batch_size``) and ``inference.pack_texts``; whole words for a model trained on words."""
        return cls(model, featurizer, trained_for.labels, trained_for.decoding(config.model.decode),
                   score_logit(config.model.min_score) if threshold is None else threshold,
                   batch_size or config.inference.batch_size, pack_texts=config.inference.pack_texts,
                   whole_words=bool(trained_for.words))

    def extract(self, texts: Sequence[str]) -> List[List[Entity]]:
        return run_steps(self.extract_steps(texts))

    def extract_steps(self, texts: Sequence[str], batch_size: int = 0) -> Generator[int, None, List[List[Entity]]]:
        """``extract`` one forward pass at a time: the generator yields after each pass (of
        ``batch_size`` rows, default the extractor's) how many passes are left, and returns the
        entities, so that a caller can put other work between the passes of a long call (the service
        does: serve.py)."""
        was_training = getattr(self.model, "training", False)
        if was_training:
            self.model.eval()
        windows = self.featurizer.text_windows(texts)
        entities: List[List[Entity]] = [[] for _ in texts]
        lengths = [len(w.input_ids) for w in windows]
        batches = self.passes(windows, batch_size)
        for done, members in enumerate(batches, 1):
            with paddle.no_grad():
                inputs = self.pass_inputs(windows, members)
                if not getattr(self.model, "reads_arrays", False):  # an export's runtime reads numpy
                    inputs = model_inputs(inputs)
                outputs = self.model(**inputs)
                for row, spans in zip(members, self.model.decode(outputs, inputs["span_text"], self.threshold)):
                    for i, own in zip(row, split_row(spans, [lengths[i] for i in row])):
                        found = window_entities(windows[i], own, self.labels, self.continuations)
                        entities[windows[i].record_index].extend(found)
            yield len(batches) - done
        if was_training:
            self.model.train()
        if self.flat:
            return [select_flat(found) for found in entities]
        return [sorted(found, key=lambda e: (e.start, e.end, e.type)) for found in entities]

    def passes(self, windows: Sequence[Window], batch_size: int = 0) -> List[List[List[int]]]:
        """The forward passes over ``windows``: each a list of rows, each row the indices of the windows
        side by side in it."""
        return prediction_batches([len(w.input_ids) for w in windows], batch_size or self.batch_size, self.pack_texts)

    def pass_inputs(self, windows: Sequence[Window], rows: List[List[int]]) -> Dict[str, np.ndarray]:
        """What the model reads in one pass (``collate_rows``), as numpy arrays."""
        return collate_rows([[windows[i] for i in row] for row in rows], self.featurizer.pad_id)


def run_steps(steps: Generator):
    """What a generator of ``extract_steps``'s kind returns, once it has run to its end."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
