import pytest

from globalpointer.evaluation.metrics import format_report, span_report
from globalpointer.spans import Entity as E


def test_micro_counts_over_the_whole_dataset_not_per_batch():
    gold = [[E(0, 2, "PER"), E(3, 5, "LOC")], [E(0, 1, "LOC")], []]
    predicted = [[E(0, 2, "PER"), E(3, 5, "PER")], [E(0, 1, "LOC")], [E(1, 2, "LOC")]]
    report = span_report(gold, predicted, ["LOC", "PER"])
    # 2 correct of 4 predicted, 2 correct of 3 gold
    assert report["micro"]["precision"] == pytest.approx(0.5)
    assert report["micro"]["recall"] == pytest.approx(2 / 3)
    assert report["micro"]["f1"] == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    loc, per = report["per_type"]["LOC"], report["per_type"]["PER"]
    assert (loc["correct"], loc["predicted"], loc["support"]) == (1, 2, 2)
    assert (per["correct"], per["predicted"], per["support"]) == (1, 2, 1)
    assert report["macro_f1"] == pytest.approx((0.5 + 2 / 3) / 2)


def test_exact_match_needs_type_and_both_boundaries():
    report = span_report([[E(0, 3, "ORG")]], [[E(0, 2, "ORG"), E(0, 3, "LOC"), E(1, 3, "ORG")]])
    assert report["micro"]["correct"] == 0 and report["micro"]["f1"] == 0.0


def test_duplicates_count_once_and_scores_are_ignored():
    report = span_report([[E(0, 3, "ORG")]], [[E(0, 3, "ORG", 0.9), E(0, 3, "ORG", 0.6)]])
    assert report["micro"]["f1"] == 1.0


def test_types_without_gold_or_predictions_still_listed():
    report = span_report([[]], [[]], ["A", "B"])
    assert list(report["per_type"]) == ["A", "B"] and report["micro"]["f1"] == 0.0
    assert "macro f1" in format_report(report)


def test_overlapping_gold_spans_are_counted_and_their_recall_reported():
    gold = [[E(0, 4, "ORG"), E(0, 2, "LOC"), E(5, 7, "PER")], [E(0, 3, "A"), E(2, 5, "B"), E(5, 6, "C")]]
    predicted = [[E(0, 4, "ORG"), E(5, 7, "PER")], [E(2, 5, "B")]]
    nested = span_report(gold, predicted)["overlapping_gold"]
    assert nested == {"spans": 4, "found": 2, "recall": 0.5}  # ORG>LOC nested, A/B crossing; C only touches B
    assert "overlapping gold spans: 4, found 2" in format_report(span_report(gold, predicted))
