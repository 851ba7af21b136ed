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
    (["PER"] * 5 + ["PRE"] * 25, "'PER' (5 entities) is close to 'PRE' (25)"),  # whatever the counts
    (["person"] * 12 + ["persn"] * 10, "'persn' (10 entities) is close to 'person' (12)"),
    (["company"] * 12 + ["compamy"] * 10, "'compamy' (10 entities) is close to 'company' (12)"),
    (["name"] * 30 + ["game"] * 20, None),  # two real types of four letters, one letter changed
    (["PER"] * 30 + ["LOC"] * 2, None),
])
def test_a_near_miss_of_another_type_is_warned_about_whatever_their_counts(caplog, types, warned):
    infer_labels(records(types), source="t")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert (warned in warnings[0]) if warned else warnings == [], warnings


def test_types_listed_in_data_labels_are_not_warned_about(caplog):
    infer_labels(records(["PER"] * 20 + ["PRE"]), labels=["PER", "PRE"], source="t")
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


@pytest.mark.parametrize("entity, message", [  # the hint turns the file's name into the format's, not backwards
    ({"start": 0, "end": 2, "label": "PER"}, re.escape("an entity has no 'type' (it has 'start', 'end', 'label'); "
                                                       "rename 'label' to 'type' (this format's name for it)")),
    ({"begin": 0, "end": 2, "type": "PER"}, "no 'start' .*rename 'begin' to 'start'"),
    ({"start": 0, "end_": 2, "type": "PER"}, "no 'end' .*rename 'end_' to 'end'"),
])
def test_another_tools_key_says_what_to_rename(tmp_path, entity, message):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"text": "张三在北京", "entities": [entity]}, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    with pytest.raises(DataError, match=message):
        read_records(str(path), format="jsonl")


def test_a_character_and_its_position_in_the_word_is_read_as_the_character(tmp_path):
    """Weibo NER's layout: 口0 腔1 (the character, then its place in its word)."""
    path = tmp_path / "weibo.txt"
    path.write_text("口0\tB-PER\n腔1\tI-PER\n溃0\tO\n疡1\tO\n\n北0\tB-LOC\n京1\tI-LOC\n", encoding="utf-8")
    records = read_records(str(path))
    assert [r.text for r in records] == ["口腔溃疡", "北京"]
    found = [(r.text[e.start:e.end], e.type) for r in records for e in r.entities]
    assert found == [("口腔", "PER"), ("北京", "LOC")]
    path.write_text("口0\tB-PER\n腔1\tI-PER\n溃疡\tO\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"weibo.txt:3: data.format chars-position expects a character and its "
                                        r"position in the word \(口0\), got '溃疡'; data.format: conll"):
        read_records(str(path), format="chars-position")


WEIBO_AS_SHIPPED = ("今0\tO\n天1\tO\n20\tO\n01\tO\n12\tO\n63\tO\n年4\tO\n和0\tO\n老0\tB-PER.NOM\n妈1\tI-PER.NOM\n"
                    "去0\tO\n了1\tO\n\ufffd\ufffd0\tO\nK0\tB-LOC.NAM\nT1\tI-LOC.NAM\nV2\tI-LOC.NAM\n\n"
                    "第0\tO\n11\tO\n02\tO\n" + "".join(f"{c}{i}\tO\n" for i, c in enumerate("一二三四五六七八")) +
                    "p10\tB-ORG.NAM\n310\tI-ORG.NAM\n\n")


def test_chars_position_reads_the_release_as_it_ships(tmp_path, caplog):
    """Digits and Latin letters are characters followed by their position (20 01 12 63: "2016"), positions
    reach two digits (p10, 310), and a character broken into two U+FFFD is one token of two characters:
    kept, with its tag, under data.on_error=repair; one line naming repair otherwise."""
    path = tmp_path / "weibo.txt"
    path.write_text(WEIBO_AS_SHIPPED, encoding="utf-8")
    with pytest.raises(DataError, match=r"weibo.txt:13: '\ufffd\ufffd0' is 2 characters before its position 0, "
                                        r".*set data.on_error=repair to keep them"):
        read_records(str(path))
    with caplog.at_level("INFO", logger="globalpointer"):
        records = read_records(str(path), on_error="repair")
    assert "weibo.txt: format chars-position (detected" in caplog.text  # not words, although digits abound
    assert [r.text for r in records] == ["今天2016年和老妈去了\ufffd\ufffdKTV", "第10一二三四五六七八p3"]
    assert [[(r.text[e.start:e.end], e.type) for e in r.entities] for r in records] == \
        [[("老妈", "PER.NOM"), ("KTV", "LOC.NAM")], [("p3", "ORG.NAM")]]
    assert "1 token(s) of several characters before their position, kept as their characters" in caplog.text


@pytest.mark.parametrize("alias", ["bio", "bioes", "iob2", "char"])
def test_common_names_of_the_character_format_are_accepted(tmp_path, alias):
    from globalpointer.config import load_config

    assert load_config(overrides=[f"data.format={alias}"]).data.format == "chars"
    path = tmp_path / "t.txt"
    path.write_text("张 B-PER\n三 I-PER\n", encoding="utf-8")
    assert [r.text for r in read_records(str(path), format=alias)] == ["张三"]


def test_evaluating_a_type_the_model_lacks_says_what_can_be_done_now(trained, tmp_path, capsys):
    from globalpointer.cli import evaluate_main

    path = tmp_path / "other.jsonl"
    path.write_text(json.dumps({"text": "张三在北京", "entities": [{"start": 0, "end": 2, "type": "PERSON"}]},
                               ensure_ascii=False) + "\n", encoding="utf-8")
    assert evaluate_main(["--model", str(trained / "run" / "best"), "--data", str(path)]) == 2
    err = capsys.readouterr().err
    assert "entity type 'PERSON' is not in the model's types" in err and "data.labels" not in err
    assert "rename or remove those entities, or evaluate a model trained with 'PERSON'" in err


def test_a_whitespace_only_line_ends_a_sentence_and_is_counted(tmp_path, caplog):
    """As an English social-media release separates its sentences (a tab alone), and as spaCy's, Hugging
    Face's and flair's CoNLL readers read it."""
    path = tmp_path / "t.txt"
    path.write_text("张\tB-PER\n三\tI-PER\n\t\n在\tO\n \t \n北\tB-LOC\n京\tI-LOC\n", encoding="utf-8")
    with caplog.at_level("INFO", logger="globalpointer"):
        records = read_records(str(path))
    assert [r.text for r in records] == ["张三", "在", "北京"]
    assert "t.txt: 2 whitespace-only lines read as sentence ends" in caplog.text


def test_a_file_without_blank_lines_is_said(tmp_path, caplog):
    path = tmp_path / "t.txt"
    path.write_text("".join(f"{c}\tO\n" for c in "在北京" * 400), encoding="utf-8")
    with caplog.at_level("WARNING", logger="globalpointer"):
        assert len(read_records(str(path))) == 1
    assert "t.txt: no blank line in the file: its 1,200 tokens are read as one text" in caplog.text
    caplog.clear()  # 35 short sentences run together: sentence ends inside the one text say it too
    path.write_text("".join(f"{c}\tO\n" for c in "我们在北京。" * 35), encoding="utf-8")
    with caplog.at_level("WARNING", logger="globalpointer"):
        assert len(read_records(str(path))) == 1
    assert "t.txt: no blank line in the file: its 210 tokens are read as one text" in caplog.text
    caplog.clear()  # 290 characters without a sentence end: longer than any sentence of a character file
    path.write_text("".join(f"{c}\tO\n" for c in "在北京" * 96 + "在京"), encoding="utf-8")
    with caplog.at_level("WARNING", logger="globalpointer"):
        assert len(read_records(str(path))) == 1
    assert "t.txt: no blank line in the file: its 290 tokens are read as one text" in caplog.text
    caplog.clear()  # 130 words without a full stop: longer than any CoNLL-2003 sentence
    path.write_text("".join(f"word{i} O\n" for i in range(130)), encoding="utf-8")
    with caplog.at_level("WARNING", logger="globalpointer"):
        assert len(read_records(str(path), format="conll")) == 1
    assert "t.txt: no blank line in the file: its 130 tokens are read as one text" in caplog.text
    caplog.clear()  # one sentence of a file: nothing to say
    path.write_text("".join(f"{c}\tO\n" for c in "我们在北京。"), encoding="utf-8")
    with caplog.at_level("WARNING", logger="globalpointer"):
        read_records(str(path))
    assert "no blank line" not in caplog.text


def test_skip_counts_what_it_skipped_by_kind(tmp_path, caplog):
    """A line without its tag spoils its own sentence, not the rest of the file."""
    path = tmp_path / "t.txt"
    path.write_text("张 B-PER\n三\n\n李 X-PER\n\n北 B-LOC\n京 I-LOC\n\n在 I-LOC\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="globalpointer"):
        records = read_records(str(path), on_error="skip")
    assert [r.text for r in records] == ["北京"]
    assert re.search(r"skipped 3 malformed record\(s\) \(data.on_error=skip\): 1 for their lines \(first: .*t.txt:2: "
                     r"expected a token and a tag.*\); 2 for their tags \(first: .*t.txt:4: tag 'X-PER'", caplog.text)
