"""Whether the scores mean what they say: of the items scored about s, a share s right.  Predicted items
are put in equal-width bins of their score; a bin's gap is |its share right - its mean score|.  The
expected calibration error (ECE) is the gaps weighted by the bins' shares of the items, the maximum
calibration error (MCE) the largest gap of a bin with items.  Items: every predicted entity (right: its
span and type are gold) and every predicted triple (right: strict, as ``relations.relation_report``)."""
from typing import Dict, List, Sequence, Tuple

import numpy as np

from ..spans import Entity, Record

BINS = 10
# a type's own errors only where it has this many predicted items: with fewer, most of its bins hold a handful
MIN_TYPE_ITEMS = 100


def reliability(scores: Sequence[float], right: Sequence[bool], bins: int = BINS) -> Dict:
    """ECE, MCE and the table of the bins that hold items (``from``, ``to``, ``items``, ``mean_score``,
    ``accuracy``) of items scored ``scores`` (in [0, 1]), ``right`` or not."""
    scores, right = np.asarray(scores, dtype="float64"), np.asarray(right, dtype="float64")
    which = np.minimum((scores * bins).astype("int64"), bins - 1)  # a score of 1.0 is in the last bin
    table: List[Dict] = []
    ece = mce = 0.0
    for b in range(bins):
        members = which == b
        count = int(members.sum())
        if not count:
            continue
        mean_score, accuracy = float(scores[members].mean()), float(right[members].mean())
        gap = abs(accuracy - mean_score)
        ece += count / len(scores) * gap
        mce = max(mce, gap)
        table.append({"from": b / bins, "to": (b + 1) / bins, "items": count, "mean_score": round(mean_score, 6),
                      "accuracy": round(accuracy, 6)})
    return {"items": int(len(scores)), "ece": round(ece, 6), "mce": round(mce, 6), "bins": table}


def entity_items(gold: Sequence[Sequence[Entity]], predicted: Sequence[Sequence[Entity]]) -> List[Tuple[str, float, bool]]:
    """(type, score, right) of every predicted entity (right: its span and type are gold)."""
    items = []
    for truth, found in zip(gold, predicted):
        keys = {g.key for g in truth}
        items += [(entity.type, entity.score, entity.key in keys) for entity in found]
    return items


def triple_items(gold: Sequence[Record], predicted: Sequence[Record]) -> List[Tuple[float, bool]]:
    """(score, right) of every predicted triple (right: strictly gold)."""
    items = []
    for truth, found in zip(gold, predicted):
        keys = {g.key for g in truth.relations}
        items += [(relation.score, relation.key in keys) for relation in found.relations]
    return items


def entity_reliability(gold: Sequence[Sequence[Entity]], predicted: Sequence[Sequence[Entity]],
                       labels: Sequence[str]) -> Dict:
    """``reliability`` of every predicted entity, and of each type with ``MIN_TYPE_ITEMS`` of them."""
    items = entity_items(gold, predicted)
    by_type: Dict[str, List[Tuple[float, bool]]] = {}
    for label, score, right in items:
        by_type.setdefault(label, []).append((score, right))
    result = reliability([score for _, score, _ in items], [hit for _, _, hit in items])
    result["per_type"] = {label: reliability([s for s, _ in by_type[label]], [h for _, h in by_type[label]])
                          for label in labels if len(by_type.get(label, ())) >= MIN_TYPE_ITEMS}
    return result


def triple_reliability(gold: Sequence[Record], predicted: Sequence[Record]) -> Dict:
    """``reliability`` of every predicted triple, right when strictly gold."""
    items = triple_items(gold, predicted)
    return reliability([score for score, _ in items], [hit for _, hit in items])


def format_reliability(result: Dict, what: str) -> str:
    """One line: the errors and what they are over."""
    return (f"calibration of the {what}' scores: ECE {result['ece']:.3f}, MCE {result['mce']:.3f} over "
            f"{result['items']:,} predicted ({BINS} equal-width bins)")
