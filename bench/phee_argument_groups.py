"""PHEE's two argument groups, as its paper reports them: strict F1 of the main arguments (the roles
without a dot: Subject, Treatment, Effect; the attribute cues Speculated, Negated and Severity are
neither) and of the sub-arguments (the roles with one: Treatment.Drug, Subject.Age, ...), from a labelled
file and the predictions ``evaluate --output`` wrote beside its report (docs/results.md#phee).

    python evaluate.py --model runs/phee/best --data DATA/test.json --output runs/phee/test.json
    python bench/phee_argument_groups.py DATA/test.json runs/phee/test.predictions.jsonl
"""
import argparse

from globalpointer.data.readers import read_records
from globalpointer.evaluation.events import argument_keys

ATTRIBUTE_CUES = {"Speculated", "Negated", "Severity"}


def group_of(role: str) -> str:
    return "sub" if "." in role else "" if role in ATTRIBUTE_CUES else "main"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gold", help="the labelled file (PHEE's test.json)")
    parser.add_argument("predictions", help="evaluate --output's .predictions.jsonl for it")
    args = parser.parse_args()
    gold, predicted = read_records(args.gold), read_records(args.predictions, "events")
    if len(gold) != len(predicted):
        raise SystemExit(f"{args.predictions}: {len(predicted)} lines for the {len(gold)} texts of {args.gold}")
    for group in ("main", "sub"):
        right = found = truth = 0
        for gold_record, predicted_record in zip(gold, predicted):
            g, p = ({key for key in argument_keys(record) if group_of(key[1]) == group}
                    for record in (gold_record, predicted_record))
            right, found, truth = right + len(g & p), found + len(p), truth + len(g)
        f1 = 200 * right / (found + truth) if found + truth else 0.0
        print(f"{group}-arguments strict F1 {f1:.2f} ({right} right, {found} predicted, {truth} gold)")


if __name__ == "__main__":
    main()
