"""Data as users bring it: their typos and their tools' key names are noticed before training learns
them (issue "Where users really start", item 4)."""
import json
import re

import pytest

from globalpointer.corpus import infer_labels
from globalpointer.data.readers import read_records
from globalpointer.errors import DataError
from globalpointer.spans import Entity, Record


def records(types):
    return [Record("张三在北京", [Entity(0, 2, kind)]) for kind in types]


def test_types_are_logged_with_their_counts_and_a_typo_is_named(caplog):
    with caplog.at_level("INFO", logger="globalpointer"):
        labels = infer_labels(records(["PER"] * 20 + ["LOC"] * 10 + ["PRE"]), source="train.jsonl")
    assert labels == ["LOC", "PER", "PRE"]
    assert "train.jsonl: entity types LOC 10, PER 20, PRE 1" in caplog.text
    assert "type 'PRE' (1 entities) is close to 'PER' (20): a typo?" in caplog.text


@pytest.mark.parametrize("types, warned", [
    (["name"] * 30 + ["Name"], "'Name' (1 entities) is close to 'name' (30)"),
    (["ORG"] * 30 + ["ORGS"] * 2, "'ORGS' (2 entities) is close to 'ORG' (30)"),
    (["name"] * 30 + ["game"] * 20, None),  # two real types one letter apart, both frequent
    (["PER"] * 30 + ["LOC"] * 2, None),
])
def test_only_a_rare_near_miss_of_a_frequent_type_is_warned_about(caplog, types, warned):
    infer_labels(records(types), source="t")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert (warned in warnings[0]) if warned else warnings == [], warnings


def test_types_listed_in_data_labels_are_not_warned_about(caplog):
    infer_labels(records(["PER"] * 20 + ["PRE"]), labels=["PER", "PRE"], source="t")
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


@pytest.mark.parametrize("entity, message", [
    ({"start": 0, "end": 2, "label": "PER"}, re.escape("an entity has no 'type' (it has 'start', 'end', 'label'); "
                                                       "did you mean 'label'?")),
    ({"begin": 0, "end": 2, "type": "PER"}, "no 'start' .*did you mean 'begin'?"),
    ({"start": 0, "end_": 2, "type": "PER"}, "no 'end' .*did you mean 'end_'?"),
])
def test_another_tools_key_gets_a_did_you_mean(tmp_path, entity, message):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"text": "张三在北京", "entities": [entity]}, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    with pytest.raises(DataError, match=message):
        read_records(str(path), format="jsonl")
