"""Relation triples scored: strict triple precision / recall / F1 (head entity span and type, relation,
tail entity span and type all equal a gold triple's), micro, macro and per relation type; the
string-level triple F1 of DuIE's official evaluation (head text, predicate, tail text, with a complex
object's slots joined back: ``relation_formats.split_slot``); and the error kinds of the wrong ones."""
from collections import Counter
from typing import Dict, Sequence

from ..data.relation_formats import VALUE_SLOT, split_slot
from ..spans import Record, Relation
from .events import format_event_report
from .metrics import _prf, format_report
from .reliability import format_reliability

RELATION_ERROR_KINDS = ("reversed", "wrong_relation", "wrong_boundary", "spurious", "missed")


def string_triples(record: Record, relations: Sequence[Relation]) -> set:
    """DuIE's official unit: (head text, predicate, ((slot, tail text), ...)), a complex object's slots
    (relations PREDICATE@SLOT from the same head) joined to each of the head's PREDICATE triples."""
    text = record.text
    slots: Dict[tuple, set] = {}
    for relation in relations:
        predicate, slot = split_slot(relation.type)
        if slot != VALUE_SLOT:
            slots.setdefault((text[relation.head.start:relation.head.end], predicate), set()).add(
                (slot, text[relation.tail.start:relation.tail.end]))
    found, joined = set(), set()
    for relation in relations:
        predicate, slot = split_slot(relation.type)
        if slot == VALUE_SLOT:
            head = text[relation.head.start:relation.head.end]
            extra = tuple(sorted(slots.get((head, predicate), ())))
            found.add((head, predicate, ((VALUE_SLOT, text[relation.tail.start:relation.tail.end]),) + extra))
            joined.add((head, predicate))
    # slots whose head has no PREDICATE triple count as one unit of their own, not as nothing
    found.update((head, predicate, tuple(sorted(extra))) for (head, predicate), extra in slots.items()
                 if (head, predicate) not in joined)
    return found


def judge_relations(gold: Sequence[Relation], predicted: Sequence[Relation]) -> Counter:
    """The error kinds of one text's wrong predictions (and its missed gold triples): the same two
    entities the other way round (reversed), with another relation (wrong_relation), the same relation
    between entities that overlap the gold ones (wrong_boundary); else spurious."""
    gold_keys = {r.key for r in gold}
    predicted_keys = {r.key for r in predicted}
    counts = Counter()
    taken = set()

    def overlaps(a, b) -> bool:
        return a.start < b.end and b.start < a.end

    for relation in predicted:
        if relation.key in gold_keys:
            continue
        open_gold = [g for g in gold if g.key not in predicted_keys]
        kinds = (("reversed", lambda g: g.head.key == relation.tail.key and g.tail.key == relation.head.key),
                 ("wrong_relation", lambda g: g.head.key == relation.head.key and g.tail.key == relation.tail.key),
                 ("wrong_boundary", lambda g: g.type == relation.type and overlaps(g.head, relation.head)
                  and overlaps(g.tail, relation.tail)))
        kind = next(((name, partner) for name, test in kinds for partner in open_gold if test(partner)), None)
        if kind is None:
            counts["spurious"] += 1
        else:
            counts[kind[0]] += 1
            taken.add(kind[1].key)
    counts["missed"] += sum(1 for g in gold if g.key not in predicted_keys and g.key not in taken)
    return counts


def relation_report(gold: Sequence[Record], predicted: Sequence[Record], relation_types: Sequence[str] = ()) -> dict:
    """Strict triples: micro scores, macro F1 over relation types, a per-type table; the string-level
    micro scores (``string_triples``); the error counts; and ``entities_found``, the gold triples whose
    two entities were both predicted (span and type): the most the pair cells could recall, which says
    whether a weak model misses the entities or the pairs between found ones."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold texts but {len(predicted)} predicted")
    tp, n_pred, n_gold = Counter(), Counter(), Counter()
    strings = Counter()
    errors = Counter({kind: 0 for kind in RELATION_ERROR_KINDS})
    entities_found = 0
    for truth, found in zip(gold, predicted):
        gold_keys = {r.key for r in truth.relations}
        found_keys = {r.key for r in found.relations}
        found_entities = {e.key for e in found.entities}
        entities_found += sum(head in found_entities and tail in found_entities for head, _, tail in gold_keys)
        for key in gold_keys:
            n_gold[key[1]] += 1
        for key in found_keys:
            n_pred[key[1]] += 1
            tp[key[1]] += key in gold_keys
        gold_strings, found_strings = string_triples(truth, truth.relations), string_triples(truth, found.relations)
        strings.update(gold=len(gold_strings), predicted=len(found_strings), correct=len(gold_strings & found_strings))
        errors.update(judge_relations(truth.relations, found.relations))
    types = list(relation_types) + sorted((set(n_gold) | set(n_pred)) - set(relation_types))
    per_type = {t: {**_prf(tp[t], n_pred[t], n_gold[t]), "support": n_gold[t], "predicted": n_pred[t],
                    "correct": tp[t]} for t in types}
    micro = {**_prf(sum(tp.values()), sum(n_pred.values()), sum(n_gold.values())),
             "support": sum(n_gold.values()), "predicted": sum(n_pred.values()), "correct": sum(tp.values())}
    return {"micro": micro, "macro_f1": sum(row["f1"] for row in per_type.values()) / len(per_type) if per_type else 0.0,
            "per_type": per_type,
            "string": {**_prf(strings["correct"], strings["predicted"], strings["gold"]), "support": strings["gold"],
                       "predicted": strings["predicted"], "correct": strings["correct"]},
            "errors": dict(errors), "entities_found": entities_found}


def headline(report: dict) -> dict:
    """The micro scores a model is chosen and reported by: an event model's strict arguments, a relation
    model's strict triples, else its spans."""
    if "events" in report:
        return report["events"]["micro"]
    return report["relations"]["micro"] if "relations" in report else report["micro"]


def format_reports(report: dict) -> str:
    """``metrics.format_report``'s entity table; a relation model's triples first, what it is chosen by,
    then its entities."""
    text = format_report(report)
    if "events" in report:  # its relations and entities are the encoding of its events
        return format_event_report(report["events"]) + "\n\narguments as entities:\n" + text
    return format_relation_report(report["relations"]) + "\n\nentities:\n" + text if "relations" in report else text


def entities_found_line(report: dict) -> str:
    """How many gold triples had both entities found (``relation_report``'s ``entities_found``)."""
    found, support = report["entities_found"], report["micro"]["support"]
    return (f"gold triples with both entities found: {found} of {support}"
            f"{f' ({100 * found / support:.2f}%)' if support else ''}, the recall the pair cells could reach")


def format_relation_report(report: dict) -> str:
    lines = [f"{'relation':<24}{'precision':>10}{'recall':>10}{'f1':>10}{'support':>9}{'predicted':>11}"]
    for name, row in list(report["per_type"].items()) + [("micro (strict)", report["micro"])]:
        if name == "micro (strict)":
            lines.append("-" * len(lines[0]))
        lines.append(f"{name:<24}{row['precision'] * 100:>10.2f}{row['recall'] * 100:>10.2f}{row['f1'] * 100:>10.2f}"
                     f"{row['support']:>9}{row['predicted']:>11}")
    string = report["string"]
    lines.append(f"{'micro (string, DuIE)':<24}{string['precision'] * 100:>10.2f}{string['recall'] * 100:>10.2f}"
                 f"{string['f1'] * 100:>10.2f}{string['support']:>9}{string['predicted']:>11}")
    lines.append(f"{'macro f1':<24}{'':>20}{report['macro_f1'] * 100:>10.2f}")
    lines.append("relation errors: " + ", ".join(f"{kind.replace('_', ' ')} {report['errors'][kind]}"
                                                for kind in RELATION_ERROR_KINDS))
    lines.append(entities_found_line(report))
    if report.get("calibration", {}).get("items"):
        lines.append(format_reliability(report["calibration"], "triples"))
    return "\n".join(lines)
