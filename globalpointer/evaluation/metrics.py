"""Exact-match span precision / recall / F1, counted over the whole dataset."""
from collections import Counter
from typing import Dict, List, NamedTuple, Optional, Sequence

from ..spans import Entity, overlapping_spans
from .reliability import format_reliability

ERROR_KINDS = ("missed", "spurious", "wrong_type", "wrong_boundary")


def _prf(tp: int, n_pred: int, n_gold: int) -> Dict[str, float]:
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def types_scores(report: dict, types: Sequence[str]) -> Dict[str, float]:
    """Micro precision / recall / F1 over ``types`` alone, from a ``span_report``'s per-type counts."""
    rows = [report["per_type"][kind] for kind in types if kind in report["per_type"]]
    return _prf(sum(row["correct"] for row in rows), sum(row["predicted"] for row in rows),
                sum(row["support"] for row in rows))


def span_report(gold: Sequence[Sequence[Entity]], predicted: Sequence[Sequence[Entity]],
                labels: Sequence[str] = ()) -> dict:
    """Micro scores over all spans, macro F1 over types, and a per-type table.  A prediction is
    correct only if start, end and type all equal a gold span's."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold texts but {len(predicted)} predicted")
    tp, n_pred, n_gold = Counter(), Counter(), Counter()
    overlapping = overlapping_found = 0
    for gold_entities, predicted_entities in zip(gold, predicted):
        gold_keys = {e.key for e in gold_entities}
        predicted_keys = {e.key for e in predicted_entities}
        for key in overlapping_spans(gold_keys):
            overlapping += 1
            overlapping_found += key in predicted_keys
        for key in gold_keys:
            n_gold[key[2]] += 1
        for key in predicted_keys:
            n_pred[key[2]] += 1
            tp[key[2]] += key in gold_keys
    types = list(labels) + sorted((set(n_gold) | set(n_pred)) - set(labels))
    per_type = {t: {**_prf(tp[t], n_pred[t], n_gold[t]), "support": n_gold[t], "predicted": n_pred[t],
                    "correct": tp[t]} for t in types}
    micro = {**_prf(sum(tp.values()), sum(n_pred.values()), sum(n_gold.values())),
             "support": sum(n_gold.values()), "predicted": sum(n_pred.values()), "correct": sum(tp.values())}
    macro_f1 = sum(row["f1"] for row in per_type.values()) / len(per_type) if per_type else 0.0
    return {"micro": micro, "macro_f1": macro_f1, "per_type": per_type, "texts": len(gold),
            "overlapping_gold": {"spans": overlapping, "found": overlapping_found,
                                 "recall": overlapping_found / overlapping if overlapping else 0.0}}


def format_report(report: dict) -> str:
    lines = [f"{'type':<16}{'precision':>10}{'recall':>10}{'f1':>10}{'support':>9}{'predicted':>11}"]
    rows: List = list(report["per_type"].items()) + [("micro", report["micro"])]
    for name, row in rows:
        if name == "micro":
            lines.append("-" * len(lines[0]))
        lines.append(f"{name:<16}{row['precision'] * 100:>10.2f}{row['recall'] * 100:>10.2f}{row['f1'] * 100:>10.2f}"
                     f"{row['support']:>9}{row['predicted']:>11}")
    lines.append(f"{'macro f1':<16}{'':>20}{report['macro_f1'] * 100:>10.2f}")
    if "errors" in report:
        counts = report["errors"]["counts"]
        lines.append("errors: " + ", ".join(f"{kind.replace('_', ' ')} {counts[kind]}" for kind in ERROR_KINDS))
    nested = report["overlapping_gold"]
    if nested["spans"]:
        lines.append(f"overlapping gold spans: {nested['spans']}, found {nested['found']} ({nested['recall'] * 100:.2f}%)")
    for origin, part in report.get("sources", {}).items():  # data entries (data/sources.py)
        micro = part["micro"]
        lines.append(f"{origin}: precision {micro['precision'] * 100:.2f}, recall {micro['recall'] * 100:.2f}, "
                     f"F1 {micro['f1'] * 100:.2f} ({micro['support']} entities)")
    if report.get("calibration", {}).get("items"):
        lines.append(format_reliability(report["calibration"], "entities"))
    return "\n".join(lines)


class Judgement(NamedTuple):
    """One entity of a text and what evaluation made of it.  ``kind``: ``correct``, or one of
    ERROR_KINDS; ``partner``: the gold span a wrong prediction was taken for (or None)."""
    entity: Entity
    gold: bool
    kind: str
    partner: Optional[Entity] = None


def judge_text(gold: Sequence[Entity], predicted: Sequence[Entity]) -> List[Judgement]:
    """Every gold and predicted entity of one text, each classified once: a prediction equal to a gold
    span is correct; else with a gold span's exact boundaries it is a wrong type; else overlapping a
    gold span of its type, a wrong boundary; else spurious.  A gold span neither found exactly nor
    taken up by a wrong type or boundary is missed."""
    gold_keys = {e.key for e in gold}
    predicted_keys = {e.key for e in predicted}
    open_gold = [e for e in gold if e.key not in predicted_keys]
    judged: List[Judgement] = []
    taken_for: Dict[tuple, str] = {}  # gold key -> the kind of the first wrong prediction taken for it
    for entity in predicted:
        if entity.key in gold_keys:
            judged.append(Judgement(entity, False, "correct"))
            continue
        same_span = [g for g in open_gold if (g.start, g.end) == (entity.start, entity.end)]
        overlapping = [g for g in open_gold if g.type == entity.type and g.start < entity.end and entity.start < g.end]
        partner = (same_span or overlapping or [None])[0]
        kind = "wrong_type" if same_span else "wrong_boundary" if overlapping else "spurious"
        if partner is not None:
            taken_for.setdefault(partner.key, kind)
        judged.append(Judgement(entity, False, kind, partner))
    for entity in gold:
        kind = "correct" if entity.key in predicted_keys else taken_for.get(entity.key, "missed")
        judged.append(Judgement(entity, True, kind))
    return judged


def error_summary(gold: Sequence[Sequence[Entity]], predicted: Sequence[Sequence[Entity]],
                  labels: Sequence[str]) -> dict:
    """Counts of each error kind (over predictions, and ``missed`` over gold spans) and the type
    confusion table: ``confusion[gold type][predicted type]`` counts predictions with a gold span's
    exact boundaries (the diagonal is the correct ones)."""
    counts = Counter({kind: 0 for kind in ("correct",) + ERROR_KINDS})
    confusion: Dict[str, Counter] = {label: Counter() for label in labels}
    for gold_entities, predicted_entities in zip(gold, predicted):
        for judgement in judge_text(gold_entities, predicted_entities):
            if judgement.gold:
                counts["missed"] += judgement.kind == "missed"
                continue
            counts[judgement.kind] += 1
            if judgement.kind in ("correct", "wrong_type"):
                truth = judgement.entity.type if judgement.kind == "correct" else judgement.partner.type
                confusion.setdefault(truth, Counter())[judgement.entity.type] += 1
    return {"counts": dict(counts), "confusion": {t: dict(row) for t, row in confusion.items()}}
