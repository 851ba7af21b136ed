"""Events scored: trigger precision / recall / F1 (event type and trigger span equal a gold trigger's);
argument F1 strict (event type, role and span); DuEE's official measure (an argument is matched to a gold
one of its event type and role, one to one, the best first, and counts the character-level F1 of its
string against the gold string or the best of its aliases; precision and recall are those sums over the
predicted and the gold arguments); event-level exact match (type, trigger, every argument's role and
span); a table per event type; and the wrong arguments by kind.  Each text's triggers and arguments are
sets: an argument two events share counts once, as in ACE's argument classification."""
from collections import Counter
from typing import Dict, List, Sequence, Tuple

from ..spans import Record
from .metrics import _prf

EVENT_ERROR_KINDS = ("wrong_role", "wrong_event", "wrong_boundary", "spurious", "missed")


def trigger_keys(record: Record) -> set:
    return {(e.type, e.trigger.start, e.trigger.end) for e in record.events if e.trigger}


def argument_keys(record: Record) -> set:
    """(event type, role, start, end) of every argument of the record's events."""
    return {(e.type, a.role, a.start, a.end) for e in record.events for a in e.arguments}


def char_f1(predicted: str, gold: str) -> float:
    """DuEE's character-level F1 of two strings, case-insensitive: their common characters (with
    multiplicity) over each."""
    predicted, gold = predicted.lower(), gold.lower()
    common = sum((Counter(predicted) & Counter(gold)).values())
    if not common:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def duee_matches(truth: Record, found: Record) -> Tuple[float, int, int]:
    """DuEE's measure on one text: the summed character F1 of the predicted arguments matched one to one to
    gold ones of their (event type, role), the best pairs first; and how many arguments each side has."""
    def strings(record: Record, aliases: bool) -> Dict[tuple, List[tuple]]:
        grouped: Dict[tuple, List[tuple]] = {}
        seen = set()
        for event in record.events:
            for a in event.arguments:
                key = (event.type, a.role, a.start, a.end)
                if key not in seen:
                    seen.add(key)
                    names = (record.text[a.start:a.end],) + (tuple(a.aliases) if aliases else ())
                    grouped.setdefault((event.type, a.role), []).append(names)
        return grouped

    gold, predicted = strings(truth, True), strings(found, False)
    total = 0.0
    for group, found_names in predicted.items():
        pairs = sorted(((max(char_f1(p[0], g) for g in gold_names), i, j)
                        for i, p in enumerate(found_names) for j, gold_names in enumerate(gold.get(group, ()))),
                       reverse=True)
        used_found, used_gold = set(), set()
        for score, i, j in pairs:
            if score > 0 and i not in used_found and j not in used_gold:
                used_found.add(i)
                used_gold.add(j)
                total += score
    return total, sum(len(v) for v in predicted.values()), sum(len(v) for v in gold.values())


def judge_arguments(gold: set, predicted: set) -> Counter:
    """The kinds of one text's wrong arguments (keys (event type, role, start, end)): the gold span and event
    type with another role (wrong_role), the gold span and role in another event type (wrong_event), the
    gold event type and role over an overlapping span (wrong_boundary), else spurious; and the gold ones no
    prediction found or came near (missed)."""
    counts = Counter()
    open_gold = gold - predicted
    explained = set()
    for kind, start, end, role in ((k[0], k[2], k[3], k[1]) for k in sorted(predicted - gold)):
        tests = (("wrong_role", lambda g: g[0] == kind and g[2:] == (start, end) and g[1] != role),
                 ("wrong_event", lambda g: g[0] != kind and g[2:] == (start, end) and g[1] == role),
                 ("wrong_boundary", lambda g: g[:2] == (kind, role) and g[2] < end and start < g[3]))
        match = next(((name, g) for name, test in tests for g in sorted(open_gold) if test(g)), None)
        if match is None:
            counts["spurious"] += 1
        else:
            counts[match[0]] += 1
            explained.add(match[1])
    counts["missed"] += len(open_gold - explained)
    return counts


def event_report(records: Sequence[Record], found: Sequence[Record]) -> dict:
    """The measures of the module's docstring, for ``found`` (an event model's records) against the
    labelled ``records``."""
    tallies = {name: [0, 0, 0] for name in ("triggers", "arguments", "events")}  # correct, predicted, gold
    per_type: Dict[str, List[int]] = {}
    duee = [0.0, 0, 0]
    errors = Counter({kind: 0 for kind in EVENT_ERROR_KINDS})
    for truth, prediction in zip(records, found):
        pairs = (("triggers", trigger_keys(truth), trigger_keys(prediction)),
                 ("arguments", argument_keys(truth), argument_keys(prediction)),
                 ("events", {e.key for e in truth.events}, {e.key for e in prediction.events}))
        for name, gold, predicted in pairs:
            tally = tallies[name]
            tally[0] += len(gold & predicted)
            tally[1] += len(predicted)
            tally[2] += len(gold)
            if name == "events":
                continue
            for key in gold | predicted:  # per event type: triggers then arguments, correct/predicted/gold
                row = per_type.setdefault(key[0], [0] * 6)
                offset = 0 if name == "triggers" else 3
                row[offset] += key in gold and key in predicted
                row[offset + 1] += key in predicted
                row[offset + 2] += key in gold
        score, n_found, n_gold = duee_matches(truth, prediction)
        duee[0] += score
        duee[1] += n_found
        duee[2] += n_gold
        errors.update(judge_arguments(argument_keys(truth), argument_keys(prediction)))
    report = {name: {**_prf(*tally), "correct": tally[0], "predicted": tally[1], "support": tally[2]}
              for name, tally in tallies.items()}
    report["arguments_duee"] = {**_prf(*duee), "matched": round(duee[0], 6), "predicted": duee[1], "support": duee[2]}
    report["per_type"] = {kind: {"trigger_f1": _prf(*row[:3])["f1"], "trigger_support": row[2],
                                 "argument_f1": _prf(*row[3:])["f1"], "argument_support": row[5],
                                 "argument_predicted": row[4]} for kind, row in sorted(per_type.items())}
    report["errors"] = {kind: errors[kind] for kind in EVENT_ERROR_KINDS}
    report["micro"] = report["arguments"]  # what an event model is chosen by
    return report


def format_event_report(report: dict) -> str:
    lines = [f"{'events':<28}{'precision':>10}{'recall':>10}{'f1':>10}{'support':>9}{'predicted':>11}"]
    for name, label in (("triggers", "triggers (type, span)"), ("arguments", "arguments (strict)"),
                        ("arguments_duee", "arguments (DuEE)"), ("events", "events (exact)")):
        row = report[name]
        lines.append(f"{label:<28}{row['precision'] * 100:>10.2f}{row['recall'] * 100:>10.2f}{row['f1'] * 100:>10.2f}"
                     f"{row['support']:>9}{row['predicted']:>11}")
    lines.append("")
    lines.append(f"{'event type':<28}{'trigger f1':>12}{'support':>9}{'argument f1':>13}{'support':>9}")
    for kind, row in report["per_type"].items():
        lines.append(f"{kind:<28}{row['trigger_f1'] * 100:>12.2f}{row['trigger_support']:>9}"
                     f"{row['argument_f1'] * 100:>13.2f}{row['argument_support']:>9}")
    lines.append("argument errors: " + ", ".join(f"{kind.replace('_', ' ')} {report['errors'][kind]}"
                                                for kind in EVENT_ERROR_KINDS))
    return "\n".join(lines)
