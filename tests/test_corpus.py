"""corpus.py: a run's files as records, with errors that name the file and line."""
import json
import re
import logging

import pytest

from globalpointer.cli import train_main
from synthetic import tiny_config, write_jsonl


def test_training_data_without_entities_is_an_error_even_with_labels(tmp_path, capsys):
    config = tiny_config(tmp_path, data__labels=["PER"])
    write_jsonl(tmp_path / "train.jsonl", [{"text": "没有实体的句子"}] * 10)
    assert train_main(["--config", config]) == 2
    assert "no entities in 10 training texts" in capsys.readouterr().err


def test_dev_type_missing_from_train_names_file_and_line(tmp_path, capsys):
    config = tiny_config(tmp_path)
    dev = tmp_path / "dev.jsonl"
    lines = dev.read_text(encoding="utf-8").splitlines()
    lines[2] = json.dumps({"text": "复旦大学", "entities": [{"start": 0, "end": 4, "type": "SCHOOL"}]}, ensure_ascii=False)
    dev.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert train_main(["--config", config]) == 2
    err = capsys.readouterr().err
    assert "dev.jsonl:3: entity type 'SCHOOL' is not in the training data's types (" in err
    assert "fix the record, or add training texts of that type" in err


def test_a_typo_in_data_labels_is_blamed_on_the_first_file_that_holds_the_type(tmp_path, capsys):
    config = tiny_config(tmp_path, data__labels=["LOC", "OGR", "PER"])
    assert train_main(["--config", config]) == 2
    err = capsys.readouterr().err
    assert re.search(r"train.jsonl:\d+: entity type 'ORG' is not in data.labels \(LOC, OGR, PER, a near miss of "
                     r"'OGR': a typo there, or in the record\?\); add it to data.labels", err), err
    assert "dev.jsonl" not in err


@pytest.mark.slow  # trains models of its own: the full suite runs it
def test_bad_training_record_stops_or_is_skipped_and_counted(tmp_path, capsys, caplog):
    config = tiny_config(tmp_path, train__epochs=1)
    train = tmp_path / "train.jsonl"
    with open(train, "a", encoding="utf-8") as out:
        out.write('{"text": "张三", "entities": [{"start": 0, "end": 5, "type": "PER"}]}\n')
    assert train_main(["--config", config]) == 2
    assert "train.jsonl:241: entity PER [0, 5) lies outside the text of length 2" in capsys.readouterr().err
    with caplog.at_level(logging.WARNING):
        assert train_main(["--config", config, "--set", "data.on_error=skip"]) == 0
    assert "skipped 1 malformed record(s)" in caplog.text


def test_a_type_missing_from_data_labels_names_the_near_miss(tmp_path):
    from globalpointer.corpus import check_types
    from globalpointer.errors import DataError
    from globalpointer.spans import Entity, Record

    with pytest.raises(DataError, match=r"dev.jsonl:1: entity type 'PER' is not in data.labels \(PRE, LOC, "
                                        r"a near miss of 'PRE': a typo there, or in the record\?\)"):
        check_types([Record("张三", [Entity(0, 2, "PER")], "dev.jsonl:1")], ["PRE", "LOC"], declared=True)
