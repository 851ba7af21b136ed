"""Thresholds fitted on labelled data: ``globalpointer calibrate --model RUN/best --data FILE``, and
training's last step (``train.calibrate``, on the dev file).

A relation model's are fitted by strict triple F1: one minimum score for every entity type and one for
the pair cells (``fit_relation_thresholds``).

``per_type``: for each entity type, the logit threshold (on a grid from -4 to 4 in steps of 0.25, plus
the logit of ``model.min_score``) that maximises the type's F1 on FILE; ``shared``: the one threshold
of that grid that maximises the micro F1 (one number, so a few hundred texts fit it without chasing
their noise).  Ties go towards ``model.min_score``.  The table and thresholds.json give each as the
minimum score it means (on the calibrated score, the unit of ``model.min_score`` and of every entity's
score).
The model scores FILE once; every candidate threshold is then tried on the spans it found above the
lowest one.  With flat decoding the types compete for characters, so the per-type search goes over
the types twice.  Then the map of calibrated scores (``model.score_map``) is fitted on what the
thresholds keep, and the minimum scores are written on the calibrated score.  Both go into the model
directory's ``thresholds.json``, which predict.py, evaluate.py, the Python API, the service and the
Label Studio backend then use (exports copy it).  Report F1 and ECE on labelled data they were not
fitted on.
"""
import copy
import logging
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..model.score_map import Platt, ScoreMap, raw_logit
from ..model.decode import score_logit, select_flat, sigmoid
from ..model.event_decode import flat_per_label
from ..spans import Entity, Record, kept_relations
from ..errors import DataError
from .evaluate import LACKING, labelled_records, scored_predictions, unmeasured
from .metrics import _prf, span_report
from .events import event_report
from .relations import relation_report
from .reliability import entity_items, entity_reliability, triple_items, triple_reliability

log = logging.getLogger("globalpointer")

GRID = tuple(step / 4 for step in range(-16, 17))
# a relation model's pair cells: a model of few texts scores them far below its entities, and their best
# minimum score lay below GRID's lowest (0.018; CoNLL04's 30 training texts: test triple F1 11.95 -> 16.64
# with this grid). An event model's links keep GRID: PHEE's test exact events tied (15.62, 15.59)
PAIR_GRID = tuple(step / 2 for step in range(-24, -8)) + GRID
KINDS = ("per_type", "shared")


def lowered(extractor, default: float, pair_grid: Sequence[float] = PAIR_GRID):
    """``extractor`` decoding what a relation or event fit tries: nested, with the raw scores, above the
    lowest of ``GRID`` (spans) and of ``pair_grid`` (pair cells); the bounds' cuts, expected that low,
    left unsaid (the best cells are kept, so each threshold tried keeps what decoding at it keeps)."""
    low = copy.copy(extractor)
    low.threshold, low.pair_threshold = min(GRID + (default,)), min(tuple(pair_grid) + (default,))
    low.flat, low.score_map, low.says_cuts = False, None, False
    return low


def candidate_entities(extractor, texts: Sequence[str], floor: float) -> List[List[Entity]]:
    """Every span whose logit exceeds ``floor``, nested, with its score."""
    nested = copy.copy(extractor)
    nested.threshold, nested.flat, nested.score_map = floor, False, None
    return nested.extract(texts)


def apply_thresholds(candidates: Sequence[Sequence[Entity]], thresholds: Dict[str, float],
                     flat: bool, records: Optional[Sequence[Record]] = None) -> List[List[Entity]]:
    """What decoding at ``thresholds`` (type -> logit) predicts, from the candidates; with the
    ``records`` they were found in, what of it is scored (``scored_predictions``: a file that
    annotates some types only is scored on those)."""
    limits = {label: float(sigmoid(value)) for label, value in thresholds.items()}
    kept = [[e for e in found if e.score > limits[e.type]] for found in candidates]
    decoded = [select_flat(found) for found in kept] if flat else kept
    return scored_predictions(records, decoded) if records is not None else decoded


def choose_thresholds(candidates: Sequence[Sequence[Entity]], gold: Sequence[Sequence[Entity]],
                      labels: Sequence[str], default: float, flat: bool, grid: Sequence[float] = GRID,
                      records: Optional[Sequence[Record]] = None) -> Dict[str, float]:
    """Type -> the grid threshold with the best F1 of that type; types without gold spans keep ``default``."""
    grid = sorted(set(grid) | {default})
    thresholds = {label: default for label in labels}
    supported = {e.type for entities in gold for e in entities}
    for _ in range(2 if flat else 1):  # nested: the types are independent, one pass finds the optimum
        for label in labels:
            if label not in supported:
                continue

            def quality(value: float):
                predicted = apply_thresholds(candidates, {**thresholds, label: value}, flat, records)
                return span_report(gold, predicted, labels)["per_type"][label]["f1"], -abs(value - default)

            thresholds[label] = max(grid, key=quality)
    return thresholds


def choose_shared_threshold(candidates: Sequence[Sequence[Entity]], gold: Sequence[Sequence[Entity]],
                            labels: Sequence[str], default: float, flat: bool, grid: Sequence[float] = GRID,
                            records: Optional[Sequence[Record]] = None) -> Dict[str, float]:
    """Type -> the one grid threshold with the best micro F1 over all types."""
    def quality(value: float):
        predicted = apply_thresholds(candidates, {label: value for label in labels}, flat, records)
        return span_report(gold, predicted, labels)["micro"]["f1"], -abs(value - default)

    best = max(sorted(set(grid) | {default}), key=quality)
    return {label: best for label in labels}


def fit_thresholds(extractor, records, labels: Sequence[str], default: float, kind: str) -> dict:
    """The thresholds of ``kind`` (KINDS) that ``extractor``'s model fits on ``records``, with the
    report thresholds.json holds (``calibration_report``) and the map of calibrated scores fitted on what
    they keep (``fit_score_map``), the minimum scores given on it; a relation model's are its two minimum
    scores fitted by triple F1, whatever ``kind`` (``fit_relation_thresholds``)."""
    if extractor.events:
        return fit_event_thresholds(extractor, records, labels, default, kind)
    if extractor.relations:
        return fit_relation_thresholds(extractor, records, labels, default)
    candidates = candidate_entities(extractor, [r.text for r in records], min(GRID + (default,)))
    return fit_entity_thresholds(extractor, records, labels, default, kind, candidates)[0]


def fit_entity_thresholds(extractor, records, labels: Sequence[str], default: float, kind: str,
                          candidates: Sequence[Sequence[Entity]]) -> Tuple[dict, List[List[Entity]]]:
    """``fit_thresholds`` of an entity model, from its ``candidates`` (every span above the lowest grid
    threshold); and what the fitted thresholds keep of them."""
    gold = [r.entities for r in records]
    choose = choose_thresholds if kind == "per_type" else choose_shared_threshold
    thresholds = choose(candidates, gold, labels, default, extractor.flat, records=records)
    report = calibration_report(candidates, gold, labels, default, thresholds, extractor.flat, records)
    kept = apply_thresholds(candidates, thresholds, extractor.flat, records)
    score_map = fit_score_map(entity_items(gold, kept))
    mapped = [score_map.record(Record("", found)).entities for found in kept]
    min_scores = score_map.calibrated_min_scores(labels, [thresholds[label] for label in labels])
    for label, row in report["per_type"].items():
        row["min_score"] = min_scores[label]
    return {"kind": kind, "texts": len(records), **report, "min_scores": min_scores,
            "score_map": score_map.to_json(),
            "ece": {"entities": {"before": entity_reliability(gold, kept, labels)["ece"],
                                 "after": entity_reliability(gold, mapped, labels)["ece"]}}}, kept


def fit_event_thresholds(extractor, records, labels: Sequence[str], default: float, kind: str) -> dict:
    """An event model's minimum scores: its argument types' as an entity model's (``kind``) on the
    candidates as event decoding keeps them, the best of one label's overlapping ones
    (``flat_per_label``; an argument is kept or not whatever the links, so these decide the strict
    argument and trigger F1), then the pair cells' one, the ``GRID`` threshold with the best exact event
    F1 given them (the links only group the kept arguments into events; ties towards ``default``)."""
    low = lowered(extractor, default, GRID)
    low.events = False
    candidates = low.records([r.text for r in records])
    # one label's overlaps resolved before a threshold or after it keep the same (the best of each overlap
    # above it); left unresolved, the ones decoding drops count as spurious and the fit chooses too high a score
    report, kept = fit_entity_thresholds(extractor, records, labels, default, kind,
                                         [flat_per_label(c.entities) for c in candidates])

    def linked(pair: float) -> List[Record]:
        pair_score = float(sigmoid(pair))
        return [Record(c.text, entities, relations=kept_relations(entities, [r for r in c.relations if r.score > pair_score]))
                for c, entities in zip(candidates, kept)]

    def event_f1(pair: float) -> float:
        return event_report(records, extractor.with_events(linked(pair)))["events"]["f1"]

    best = max(sorted(set(GRID) | {default}), key=lambda pair: (event_f1(pair), -abs(pair - default)))
    # the map of a relation model's (the links' scores too), its entity map the same as fitted above
    score_map = fit_score_map(entity_items([r.entities for r in records], kept), triple_items(records, linked(best)))
    return {**report, "kind": "events", "pair_min_score": float(sigmoid(best)), "score_map": score_map.to_json(),
            "events_f1": {"before": event_f1(default), "after": event_f1(best)}}


class CandidateTriples:
    """A relation fit's candidate triples, each once (its best score) with its two entities' positions in
    its text's candidates and whether it is gold: the strict triple F1 of every pair of thresholds is then
    two lookups per triple (``kept_relations`` and a report per pair took minutes on the relation
    quickstart's dev file with the pair cells' grid down to -12)."""

    def __init__(self, records: Sequence[Record], candidates: Sequence[Record]):
        self.support = 0
        self.texts = []
        for truth, found in zip(records, candidates):
            gold = {r.key for r in truth.relations}
            self.support += len(gold)
            position = {entity.key: i for i, entity in enumerate(found.entities)}
            best: Dict[tuple, float] = {}
            for relation in found.relations:
                if relation.head.key in position and relation.tail.key in position:
                    best[relation.key] = max(relation.score, best.get(relation.key, relation.score))
            self.texts.append((np.array([position[head] for head, _, _ in best], dtype=np.int64),
                               np.array([position[tail] for _, _, tail in best], dtype=np.int64),
                               np.array(list(best.values()), dtype=float), np.array([k in gold for k in best], dtype=bool)))

    def f1_by_pair(self, kept_entities: Sequence[np.ndarray], pair_grid: Sequence[float]) -> List[float]:
        """``relation_report``'s strict triple micro F1 at each pair threshold (a logit) of ``pair_grid``,
        the entities of each text kept where ``kept_entities`` (a mask over its candidates) says."""
        on = [kept[heads] & kept[tails] for kept, (heads, tails, _, _) in zip(kept_entities, self.texts)]
        scores = np.concatenate([text[2][mask] for text, mask in zip(self.texts, on)] + [np.zeros(0)])
        right = np.concatenate([text[3][mask] for text, mask in zip(self.texts, on)] + [np.zeros(0, dtype=bool)])
        f1 = []
        for pair in pair_grid:
            kept = scores > float(sigmoid(pair))
            f1.append(_prf(int(right[kept].sum()), int(kept.sum()), self.support)["f1"])
        return f1


def fit_relation_thresholds(extractor, records, labels: Sequence[str], default: float) -> dict:
    """A relation model's two minimum scores, one for every entity type and one for the pair cells: the
    pair of thresholds (of ``GRID``, of ``PAIR_GRID``) with the best strict triple F1 on ``records`` (ties
    towards ``default``), tried on what the model finds above the lowest of them (decoding is monotone in
    both: a higher threshold keeps a subset of the entities, and of the relations between the kept ones)."""

    low = lowered(extractor, default)
    candidates = low.records([r.text for r in records])

    def entities_above(found: Record, entity: float) -> List[Entity]:
        kept = [e for e in found.entities if e.score > float(sigmoid(entity))]
        return select_flat(kept) if extractor.flat else kept

    def decoded(entity: float, pair: float) -> List[Record]:
        """The candidates with the entities above ``entity`` and the relations between them above ``pair``
        (each relation's score its best, ``kept_relations``)."""
        pair_score = float(sigmoid(pair))
        out = []
        for found in candidates:
            kept = entities_above(found, entity)
            out.append(Record(found.text, kept, relations=tuple(
                r for r in kept_relations(kept, found.relations) if r.score > pair_score)))
        return out

    def entity_masks(entity: float) -> List[np.ndarray]:
        masks = []
        for found in candidates:
            kept = {e.key for e in entities_above(found, entity)}
            masks.append(np.array([e.key in kept for e in found.entities], dtype=bool))
        return masks

    triples = CandidateTriples(records, candidates)
    pair_grid = sorted(set(PAIR_GRID) | {default})
    best = max(((f1, -abs(entity - default) - abs(pair - default), entity, pair)
                for entity in sorted(set(GRID) | {default})
                for pair, f1 in zip(pair_grid, triples.f1_by_pair(entity_masks(entity), pair_grid))),
               key=lambda row: row[:2])[2:]
    kept = decoded(*best)
    before, after = (relation_report(records, found)["micro"]["f1"] for found in (decoded(default, default), kept))
    gold = [r.entities for r in records]
    score_map = fit_score_map(entity_items(gold, [r.entities for r in kept]), triple_items(records, kept))
    mapped = [score_map.record(found) for found in kept]
    return {"kind": "relations", "texts": len(records),
            "min_scores": score_map.calibrated_min_scores(labels, [best[0]] * len(labels)),
            "pair_min_score": float(sigmoid(best[1])), "default_min_score": float(sigmoid(default)),
            "micro_f1": {"before": before, "after": after},  # of the strict triples
            "score_map": score_map.to_json(),
            "ece": {"entities": {"before": entity_reliability(gold, [r.entities for r in kept], labels)["ece"],
                                 "after": entity_reliability(gold, [r.entities for r in mapped], labels)["ece"]},
                    "triples": {"before": triple_reliability(records, kept)["ece"],
                                "after": triple_reliability(records, mapped)["ece"]}}}


def fit_score_map(entities: Sequence[Tuple[str, float, bool]],
                  triples: Optional[Sequence[Tuple[float, bool]]] = None) -> ScoreMap:
    """Platt's maps (``fit_platt``) of predicted items: one for every entity, and one for a relation
    model's triples (``triples`` not None); a map the items cannot fit is the identity, (1, 0)."""
    identity = (1.0, 0.0)
    shared = fit_platt([s for _, s, _ in entities], [r for _, _, r in entities]) or identity
    return ScoreMap(shared, None if triples is None else (
        fit_platt([s for s, _ in triples], [r for _, r in triples]) or identity))


def fit_platt(scores: Sequence[float], right: Sequence[bool]) -> Optional[Platt]:
    """Platt's map for items scored ``scores`` (raw: sigmoid of the logit), ``right`` or not: (a, b) of the
    unpenalised logistic regression of right on the logit; None where the items fit none (all right, all
    wrong, or a map that would not increase)."""
    from sklearn.linear_model import LogisticRegression

    right = np.asarray(right, dtype="int64")
    if len(right) < 2 or right.min() == right.max():
        return None
    fitted = LogisticRegression(C=np.inf).fit(np.array([[raw_logit(score)] for score in scores]), right)
    a, b = float(fitted.coef_[0, 0]), float(fitted.intercept_[0])
    return (a, b) if a > 0 and np.isfinite([a, b]).all() else None


def calibration_report(candidates, gold, labels, default: float, thresholds: Dict[str, float], flat: bool,
                       records: Optional[Sequence[Record]] = None) -> dict:
    """F1 before and after, per type and micro; thresholds as minimum scores (probabilities)."""
    before = span_report(gold, apply_thresholds(candidates, {label: default for label in labels}, flat, records),
                         labels)
    after = span_report(gold, apply_thresholds(candidates, thresholds, flat, records), labels)
    min_scores = {label: float(sigmoid(value)) for label, value in thresholds.items()}
    return {"min_scores": min_scores, "default_min_score": float(sigmoid(default)),
            "micro_f1": {"before": before["micro"]["f1"], "after": after["micro"]["f1"]},
            "per_type": {label: {"support": before["per_type"][label]["support"], "min_score": min_scores[label],
                                 "f1_before": before["per_type"][label]["f1"],
                                 "f1_after": after["per_type"][label]["f1"]} for label in labels}}


def format_calibration(report: dict) -> str:
    ece = "; ".join(f"ECE of the {what}' scores on it {row['before']:.3f} -> {row['after']:.3f}"
                    for what, row in report["ece"].items())
    if report["kind"] == "events":
        events = report["events_f1"]
        ece += (f"\nminimum score of the pair cells {report['pair_min_score']:.3f}: exact event F1 "
                f"{events['before'] * 100:.2f} -> {events['after'] * 100:.2f}")
    if report["kind"] == "relations":
        micro, entity = report["micro_f1"], next(iter(report["min_scores"].values()))
        return (f"minimum score of every entity type {entity:.3f}, of the pair cells {report['pair_min_score']:.3f}: "
                f"strict triple F1 {micro['before'] * 100:.2f} -> {micro['after'] * 100:.2f}\n{ece}")
    lines = [f"{'type':<16}{'support':>9}{'min score':>11}{'f1 before':>11}{'f1 after':>10}{'gain':>8}"]
    for label, row in report["per_type"].items():
        lines.append(f"{label:<16}{row['support']:>9}{row['min_score']:>11.3f}"
                     f"{row['f1_before'] * 100:>11.2f}"
                     f"{row['f1_after'] * 100:>10.2f}{(row['f1_after'] - row['f1_before']) * 100:>+8.2f}")
    micro = report["micro_f1"]
    lines.append(f"{'micro':<16}{'':>9}{'':>11}{micro['before'] * 100:>11.2f}{micro['after'] * 100:>10.2f}"
                 f"{(micro['after'] - micro['before']) * 100:>+8.2f}")
    return "\n".join(lines + [ece])


def calibrate(ner, data_path: str, kind: str = "per_type") -> dict:
    """Fit thresholds of ``kind`` (KINDS: one per type, or one for all) for the model of ``ner`` (a
    ``globalpointer.load`` pipeline) on the labelled ``data_path`` and write them into the model
    directory's ``thresholds.json``; returns the report (thresholds, F1 before and after per type)."""
    from ..model_directory.layout import THRESHOLDS
    from ..files import check_output_file

    config, labels = ner.config, ner.labels
    path = os.path.join(ner.directory, THRESHOLDS)
    check_output_file(path, "--model", [data_path])
    relations = getattr(ner.extractor, "relations", ())
    records = labelled_records(data_path, config.data.reading, labels, relations=relations)
    lacking = unmeasured(records, relations)
    if lacking:
        fitted = "minimum scores fitted on it by triple F1" if relations else "minimum scores fitted on it"
        raise DataError(f"{data_path}: {len(records)} texts and {lacking}: {fitted} would fit nothing; {path} is "
                        f"left as it is. Calibrate on a labelled file with "
                        f"{LACKING[lacking]} (the dev file)")
    report = {"data": data_path, **fit_thresholds(ner.extractor, records, labels,
                                                   score_logit(config.model.min_score), kind)}
    write_thresholds(ner.directory, report, config.model.min_score)
    return report


def write_thresholds(directory: str, report: dict, min_score: float) -> None:
    """``report`` (``fit_thresholds``) as the model directory's thresholds.json."""
    from ..model_directory.layout import THRESHOLDS
    from ..files import atomic_write_json

    path = os.path.join(directory, THRESHOLDS)
    atomic_write_json(path, report)
    log.info("wrote %s: predict.py, evaluate.py and the service use these thresholds "
             "(--set model.use_calibration=false: min score %g for every type)", path, min_score)
