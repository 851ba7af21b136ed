"""evaluation/reliability.py: the calibration errors against their definition written another way, and
on data whose answer is known."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from globalpointer.evaluation.reliability import BINS, entity_reliability, reliability, triple_reliability
from globalpointer.spans import Entity, Record, Relation

SCORE = st.floats(0, 1, allow_nan=False, allow_subnormal=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(SCORE, st.booleans()), min_size=1, max_size=60))
def test_ece_is_the_summed_gap_of_each_bin_over_all_items(items):
    """ECE = sum over bins of |right - score| summed in the bin, over the items; MCE the largest bin's mean
    gap; and 0 <= ECE <= MCE <= 1."""
    scores, right = [s for s, _ in items], [r for _, r in items]
    result = reliability(scores, right)
    gaps = {}
    for score, hit in items:
        gaps.setdefault(min(math.floor(score * BINS), BINS - 1), []).append(hit - score)
    assert result["ece"] == pytest.approx(sum(abs(sum(g)) for g in gaps.values()) / len(items), abs=2e-6)
    assert result["mce"] == pytest.approx(max(abs(sum(g)) / len(g) for g in gaps.values()), abs=2e-6)
    assert 0 <= result["ece"] <= result["mce"] + 1e-6 <= 1 + 1e-6
    assert sum(row["items"] for row in result["bins"]) == len(items) == result["items"]


def test_scores_right_as_often_as_they_say_have_no_error_and_overconfident_ones_have_it():
    scores = [0.55] * 20 + [0.85] * 20
    calibrated = [True] * 11 + [False] * 9 + [True] * 17 + [False] * 3
    assert reliability(scores, calibrated)["ece"] == pytest.approx(0.0, abs=1e-6)
    everything_wrong = reliability(scores, [False] * 40)
    assert everything_wrong["ece"] == pytest.approx(0.7) and everything_wrong["mce"] == pytest.approx(0.85)
    assert [(row["from"], row["items"], row["accuracy"]) for row in everything_wrong["bins"]] == [(0.5, 20, 0.0),
                                                                                               (0.8, 20, 0.0)]


def test_entities_are_right_by_span_and_type_and_a_type_has_its_own_errors_from_enough_items():
    gold = [[Entity(0, 2, "PER")]] * 100
    predicted = [[Entity(0, 2, "PER", 0.9), Entity(0, 2, "LOC", 0.9), Entity(3, 4, "ORG", 0.6)]] * 100
    result = entity_reliability(gold, predicted, ["PER", "LOC", "ORG", "X"])
    # the 0.9 bin: 200 items, half right (gap 0.4); the 0.6 bin: 100, none right (gap 0.6)
    assert result["items"] == 300 and result["ece"] == pytest.approx((200 * 0.4 + 100 * 0.6) / 300)
    assert set(result["per_type"]) == {"PER", "LOC", "ORG"}  # X predicted 0 times: no row
    assert result["per_type"]["PER"]["ece"] == pytest.approx(0.1)
    assert entity_reliability(gold[:99], predicted[:99], ["PER"])["per_type"] == {}  # 99 items: too few


def test_triples_are_right_when_strictly_gold():
    head, tail = Entity(0, 2, "PER"), Entity(3, 5, "LOC")
    gold = [Record("ab cd", [head, tail], relations=[Relation(head, "lives_in", tail)])]
    found = [Record("ab cd", [head, tail], relations=[Relation(head, "lives_in", tail, 0.8),
                                                       Relation(tail, "lives_in", head, 0.7)])]
    result = triple_reliability(gold, found)
    assert result["items"] == 2 and result["ece"] == pytest.approx((0.2 + 0.7) / 2)
