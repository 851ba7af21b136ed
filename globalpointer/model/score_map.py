"""Calibrated scores: what a decoded item's score says is the share of such items that are right.

A model's raw score is the sigmoid of its logit z.  ``calibrate`` (and ``train.calibrate``) fits Platt's
map, sigmoid(a * z + b), on the dev file's predicted items (right: in its gold): one for the entities
and a relation model's one for its triples (whose raw score is the lower of their two pair cells').
Chosen by measurement on held-out texts against temperature scaling, isotonic regression and a map per
entity type (docs/results.md#calibrated-scores).
The maps are stored in thresholds.json (``score_map``) and applied after decoding, so what is kept is
what the raw scores keep, and F1 does not move; the minimum scores in thresholds.json (and
``model.min_score`` given with a map) are on the calibrated score and read back through the map's
inverse.  A pair cell's minimum score stays on its raw score: cells are never shown.
"""
import math
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..errors import quoted
from ..spans import Entity, Record, Relation, kept_relations
from .decode import score_logit, sigmoid

Platt = Tuple[float, float]  # (a, b): a > 0


def raw_logit(score: float) -> float:
    """The logit of a decoded item's score (``decode.score_logit``), a score of 0 or 1 (a logit beyond
    float64's sigmoid) read as 1e-15 from it."""
    return score_logit(min(max(score, 1e-15), 1.0 - 1e-15))


def platt_score(platt: Platt, score: float) -> float:
    a, b = platt
    return float(sigmoid(a * raw_logit(score) + b))


class ScoreMap(NamedTuple):
    entities: Platt
    triples: Optional[Platt] = None  # a relation model's

    def threshold_logits(self, min_scores: Sequence[float]) -> List[float]:
        """The raw logit above which an entity's calibrated score is above each of ``min_scores``."""
        a, b = self.entities
        return [(raw_logit(score) - b) / a for score in min_scores]

    def calibrated_min_scores(self, labels: Sequence[str], logits: Sequence[float]) -> Dict[str, float]:
        """Each type's threshold logit (raw) as the calibrated minimum score it means."""
        a, b = self.entities
        return {label: float(sigmoid(a * z + b)) for label, z in zip(labels, logits)}

    def record(self, record: Record) -> Record:
        """``record`` with calibrated scores (its relations' entities: the record's own)."""
        entities = [Entity(e.start, e.end, e.type, platt_score(self.entities, e.score)) for e in record.entities]
        relations = record.relations
        if relations:
            triples = self.triples or (1.0, 0.0)
            relations = kept_relations(entities, [Relation(r.head, r.type, r.tail, platt_score(triples, r.score))
                                                  for r in relations])
        return record._replace(entities=entities, relations=relations)

    def to_json(self) -> dict:
        out = {"kind": "platt", "entities": list(self.entities)}
        if self.triples is not None:
            out["triples"] = list(self.triples)
        return out


def score_map_from_json(stored: dict, relations: bool) -> ScoreMap:
    """The map ``to_json`` wrote; a ValueError saying what is wrong with it."""
    def pair(value, where: str) -> Platt:
        if (not isinstance(value, list) or len(value) != 2 or
                any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) for v in value)):
            raise ValueError(f"{where} must be [a, b], two finite numbers, got {quoted(value)}")
        if value[0] <= 0:
            raise ValueError(f"{where}: a must be above 0 (an increasing map), got {value[0]!r}")
        return float(value[0]), float(value[1])

    if not isinstance(stored, dict) or stored.get("kind") != "platt":
        raise ValueError(f"score_map must be an object with kind \"platt\", got {quoted(stored)}")
    unknown = set(stored) - {"kind", "entities", "triples"}
    if unknown:
        raise ValueError(f"score_map has keys no calibration writes: {', '.join(sorted(unknown))}")
    triples = stored.get("triples")
    if relations != (triples is not None):
        raise ValueError("score_map.triples is a relation model's map, and a relation model's alone")
    return ScoreMap(pair(stored.get("entities"), "score_map.entities"),
                    None if triples is None else pair(triples, "score_map.triples"))

