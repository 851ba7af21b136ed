import io
import json
import logging

import pytest

from globalpointer.cli import main as cli
from globalpointer.data.readers import detect_format, read_records, write_jsonl_records
from globalpointer.data.reading import read_text
from globalpointer.data.tags import tags_to_spans
from globalpointer.errors import DataError
from globalpointer.inference.file_prediction import PredictionWriter, predict_stream
from globalpointer.spans import Entity, Record
from helpers import FakeExtractor
from synthetic import write_jsonl, write_lines


def write(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return str(path)


def spans(record):
    return [(record.text[e.start:e.end], e.type) for e in record.entities]


def test_cluener_inclusive_ends(tmp_path):
    line = {"text": "浙商银行企业信贷部叶老桂博士", "label": {"name": {"叶老桂": [[9, 11]]}, "company": {"浙商银行": [[0, 3]]}}}
    path = write(tmp_path, "c.json", json.dumps(line, ensure_ascii=False) + "\n")
    [record] = read_records(path)
    assert detect_format(path, read_text(path)) == "cluener"
    assert spans(record) == [("浙商银行", "company"), ("叶老桂", "name")]


def test_cmeee_array_with_nested_entities(tmp_path):
    data = [{"text": "研究证实，肺内病变程度", "entities": [
        {"start_idx": 5, "end_idx": 5, "type": "bod", "entity": "肺"},
        {"start_idx": 5, "end_idx": 8, "type": "sym", "entity": "肺内病变"}]},
        {"text": "无实体。", "entities": []}]
    dumped = json.dumps(data, ensure_ascii=False, indent=2)
    path = write(tmp_path, "m.json", dumped)
    records = read_records(path)
    second_object_line = dumped.splitlines().index("  {", 2) + 1
    assert detect_format(path, read_text(path)) == "cmeee"
    assert spans(records[0]) == [("肺", "bod"), ("肺内病变", "sym")]
    assert records[1].entities == [] and records[1].source.endswith(f":{second_object_line}")


def test_canonical_jsonl_with_spaces_emoji_fullwidth_and_english(tmp_path):
    text = "我在 New York 用ｉＰｈｏｎｅ😀买了 Apple 股票"
    start = text.index("New York")
    entities = [{"start": start, "end": start + 8, "type": "LOC"},
                {"start": text.index("ｉＰｈｏｎｅ"), "end": text.index("ｉＰｈｏｎｅ") + 6, "type": "PRODUCT"},
                {"start": text.index("Apple"), "end": text.index("Apple") + 5, "type": "ORG", "text": "Apple"}]
    path = write(tmp_path, "j.jsonl", json.dumps({"text": text, "entities": entities}, ensure_ascii=False) + "\n")
    [record] = read_records(path)
    assert detect_format(path, read_text(path)) == "jsonl"
    assert spans(record) == [("New York", "LOC"), ("ｉＰｈｏｎｅ", "PRODUCT"), ("Apple", "ORG")]
    out = tmp_path / "round.jsonl"
    write_jsonl_records([record], str(out))
    assert read_records(str(out)) == [record._replace(source=f"{out}:1")]


def test_chars_format_bio_with_tabs(tmp_path):
    path = write(tmp_path, "msra.txt", "中\tB-LOC\n国\tI-LOC\n人\tO\n\n王\tB-PER\n五\tI-PER\n")
    records = read_records(path)
    assert detect_format(path, read_text(path)) == "chars"
    assert [r.text for r in records] == ["中国人", "王五"]
    assert spans(records[0]) == [("中国", "LOC")] and spans(records[1]) == [("王五", "PER")]


def test_chars_format_bioes_and_bmes(tmp_path):
    path = write(tmp_path, "bmes.txt", "北 B-LOC\n京 E-LOC\n的 O\n张 S-PER\n小 B-PER\n明 M-PER\n同 E-PER\n")
    [record] = read_records(path, "chars")
    assert spans(record) == [("北京", "LOC"), ("张", "PER"), ("小明同", "PER")]


def test_conll_rebuilds_text_with_spaces(tmp_path):
    text = "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n\n" \
           "Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n"
    path = write(tmp_path, "conll.txt", text)
    records = read_records(path)
    assert detect_format(path, read_text(path)) == "conll"
    assert records[0].text == "EU rejects German"
    assert spans(records[0]) == [("EU", "ORG"), ("German", "MISC")]
    assert spans(records[1]) == [("Peter Blackburn", "PER")]


def test_tag_continuing_nothing_is_an_error_with_line():
    with pytest.raises(DataError, match=r"f:2: tag I-PER continues an entity but there is no open entity"):
        tags_to_spans(["O", "I-PER"], ["f:1", "f:2"])
    with pytest.raises(DataError, match="open LOC entity"):
        tags_to_spans(["B-LOC", "I-PER"], ["f:1", "f:2"])
    with pytest.raises(DataError, match="f:1: tag 'X-PER'"):
        tags_to_spans(["X-PER"], ["f:1"])


@pytest.mark.parametrize("line, message", [
    ('{"text": "abc", "entities": [{"start": 1, "end": 9, "type": "X"}]}', r"outside the text of length 3"),
    ('{"text": "abc", "entities": [{"start": 2, "end": 1, "type": "X"}]}', r"ends before it starts"),
    ('{"text": "abc", "entities": [{"start": 0, "end": 2, "type": "X", "text": "bc"}]}', r"says 'bc' but the text"),
    ('{"text": "", "entities": []}', r"the text is empty"),
    ('{"text": "   ", "entities": []}', r"only whitespace"),
    ('{"text": "abc", "entities": [', r"malformed JSON"),
    ('{"entities": []}', r'needs a "text" field'),
])
def test_bad_records_name_file_and_line(tmp_path, line, message):
    path = write(tmp_path, "bad.jsonl", '{"text": "ok", "entities": []}\n' + line + "\n")
    with pytest.raises(DataError, match=rf"bad.jsonl:2: .*{message}|bad.jsonl:2:.*{message}"):
        read_records(path, "jsonl")
    kept = read_records(path, "jsonl", on_error="skip")
    assert [r.text for r in kept] == ["ok"]


@pytest.mark.parametrize("name, line, message", [
    # inclusive ends: the error quotes the span as the file wrote it, not as converted
    ("c.json", {"text": "张三", "label": {"name": {"张三": [[0, 2]]}}},
     r"entity name \[0, 2\] lies outside the text of length 2"),
    ("c.json", {"text": "张三", "label": {"name": {"三": [[1, 0]]}}}, r"entity name \[1, 0\] ends before it starts"),
    ("m.json", {"text": "肺内", "entities": [{"start_idx": 0, "end_idx": 0, "type": "bod", "entity": "肺内"}]},
     r"entity bod says '肺内' but the text at \[0, 0\] is '肺'"),
    # true is no offset, though Python counts it as the integer 1
    ("c.json", {"text": "张三", "label": {"name": {"三": [[1, True]]}}}, r"offsets must be whole numbers"),
    ("m.json", {"text": "肺内", "entities": [{"start_idx": 0, "end_idx": True, "type": "bod"}]},
     r"offsets must be whole numbers, got start=0 end=True"),
    ("j.jsonl", {"text": "abc", "entities": [{"start": 0, "end": True, "type": "X"}]},
     r"offsets must be whole numbers, got start=0 end=True"),
])
def test_offsets_are_checked_as_the_file_wrote_them(tmp_path, name, line, message):
    path = write(tmp_path, name, json.dumps(line, ensure_ascii=False) + "\n")
    with pytest.raises(DataError, match=rf"{name}:1: {message}"):
        read_records(path)


def test_inclusive_ends_at_the_text_edges(tmp_path):
    line = {"text": "张三李四", "label": {"name": {"张": [[0, 0]], "李四": [[2, 3]]}}}
    [record] = read_records(write(tmp_path, "c.json", json.dumps(line, ensure_ascii=False) + "\n"))
    assert [(e.start, e.end) for e in record.entities] == [(0, 1), (2, 4)]


def test_file_level_errors(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        read_records(str(tmp_path / "missing.json"))
    with pytest.raises(DataError, match="the file is empty"):
        read_records(write(tmp_path, "empty.json", "\n\n"))
    bad = write(tmp_path, "latin1.jsonl", '{"text": "ok"}\n{"text": "caf\xe9"}\n', encoding="latin-1")
    with pytest.raises(DataError, match=r"latin1.jsonl:2: bytes that are not UTF-8 at byte offset 28"):
        read_records(bad)


def test_limit_reads_first_records(tmp_path):
    path = write(tmp_path, "many.jsonl", "".join(json.dumps({"text": f"t{i}"}) + "\n" for i in range(10)))
    assert [r.text for r in read_records(path, limit=3)] == ["t0", "t1", "t2"]


@pytest.mark.slow  # reads whole public sets
def test_real_dataset_counts(shared_data):
    """Entity counts of the shared files match their published statistics."""
    shared_data = shared_data("cmeee/CMeEE_dev.json", "msra", "conll2003/valid.txt", "cluener/train.json")
    assert sum(len(r.entities) for r in read_records(f"{shared_data}/cmeee/CMeEE_dev.json")) == 20300
    assert sum(len(r.entities) for r in read_records(f"{shared_data}/msra/msra_test_bio.txt")) == 2886 + 1331 + 1973
    assert sum(len(r.entities) for r in read_records(f"{shared_data}/conll2003/valid.txt")) == 5942
    first = read_records(f"{shared_data}/cluener/train.json", limit=1)[0]
    assert first.entities[:2] == [Entity(0, 4, "company"), Entity(9, 12, "name")]


# ---- what attack 4 found in the readers (docs/RELIABILITY.md, case 14) ----------------------------

@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_a_tagged_file_reads_the_same_whatever_its_line_ends(tmp_path, end):
    text = end.join(["张 B-PER", "三 I-PER", "在 O", "", "北 B-LOC", "京 I-LOC", ""])
    records = read_records(write(tmp_path, "t.txt", text))
    assert [r.text for r in records] == ["张三在", "北京"]
    assert [spans(r) for r in records] == [[("张三", "PER")], [("北京", "LOC")]]


def test_a_full_width_space_is_a_token_not_a_separator(tmp_path):
    text = "张 B-PER\n三 I-PER\n\u3000 O\n在 O\n\n北\tB-LOC\n\u3000\tO\n"
    records = read_records(write(tmp_path, "t.txt", text), format="chars")
    assert [r.text for r in records] == ["张三\u3000在", "北\u3000"]
    with pytest.raises(DataError, match=r"t2.txt:2: expected a token and a tag .*a line of whitespace other than "
                                        r"spaces and tabs"):
        read_records(write(tmp_path, "t2.txt", "张 B-PER\n\u3000\n"), format="chars")


def test_a_zip_member_is_unpacked_only_up_to_its_bound(tmp_path, monkeypatch):
    import zipfile

    from globalpointer.data import reading

    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("all.jsonl", json.dumps({"text": "张三", "label": []}) + "\n" + " " * 50000)
    monkeypatch.setattr(reading, "MAX_UNZIPPED_BYTES", 10000)
    with pytest.raises(DataError, match="all.jsonl unpacks to more than 10000 bytes; unzip it yourself"):
        read_records(str(path))
    monkeypatch.setattr(reading, "MAX_UNZIPPED_BYTES", 60000)
    assert [r.text for r in read_records(str(path))] == ["张三"]


def test_a_limited_read_stops_where_its_records_end(tmp_path):
    """calibration reads 256 texts of a training file: the rest of a big file is never read (here, a
    broken last line that a whole read would stop at)."""
    line = json.dumps({"text": "张三在北京" * 20, "label": {"name": {"张三": [[0, 1]]}}}, ensure_ascii=False)
    path = write(tmp_path, "big.json", (line + "\n") * 30000 + "{broken\n")
    assert len(read_records(path, limit=256)) == 256
    with pytest.raises(DataError, match=r"big.json:30001: malformed JSON"):
        read_records(path)
    tagged = write(tmp_path, "big.txt", "张 B-PER\n三 I-PER\n\n" * 400000 + "broken-line-without-tag\n")
    assert [r.text for r in read_records(tagged, format="chars", limit=3)] == ["张三"] * 3


def json_min(task_id, text, regions=None):
    task = {"id": task_id, "text": text, "annotator": 1, "annotation_id": 100 + task_id, "lead_time": 3.5}
    if regions is not None:
        task["label"] = [{"start": s, "end": e, "text": text[s:e], "labels": [t]} for s, e, t in regions]
    return task


def test_json_min_whose_first_tasks_are_unannotated_keeps_every_entity(tmp_path, caplog):
    caplog.set_level("INFO", logger="globalpointer")
    tasks = [json_min(i, f"没有标注{i}") for i in range(79)] + [json_min(100, "张三在北京", [(0, 2, "PER"), (3, 5, "LOC")])]
    records = read_records(write_lines(tmp_path / "min.json", tasks))
    assert [(r.text, [e.key for e in r.entities]) for r in records] == \
        [("张三在北京", [(0, 2, "PER"), (3, 5, "LOC")])]
    assert "format doccano" in caplog.text and "left out 79 tasks without annotation" in caplog.text


def test_a_file_mixing_formats_names_the_first_line_of_each(tmp_path):
    path = write_lines(tmp_path / "mixed.jsonl", [
        {"text": "张三", "entities": [{"start": 0, "end": 2, "type": "PER"}]},
        {"text": "北京", "label": {"LOC": {"北京": [[0, 1]]}}}])
    with pytest.raises(DataError, match=r"two formats, jsonl \(first on line 1\) and cluener \(first on line 2\)"):
        read_records(path)


def test_a_misspelt_entity_key_is_an_error_not_a_text_without_entities(tmp_path):
    path = write_lines(tmp_path / "typo.jsonl", [
        {"text": "张三", "entities": [{"start": 0, "end": 2, "type": "PER"}]},
        {"text": "北京", "entitys": [{"start": 0, "end": 2, "type": "LOC"}]}])
    with pytest.raises(DataError, match=r"typo.jsonl:2: unknown key 'entitys'; did you mean 'entities'"):
        read_records(path)


def test_the_ground_truth_annotation_wins(tmp_path):
    region = lambda s, e, t: {"value": {"start": s, "end": e, "text": "张三在北京"[s:e], "labels": [t]}, "type": "labels"}  # noqa: E731
    task = {"id": 1, "data": {"text": "张三在北京"}, "annotations": [
        {"id": 1, "result": [region(0, 2, "LOC")], "ground_truth": False},
        {"id": 2, "result": [region(0, 2, "PER"), region(3, 5, "LOC")], "ground_truth": True}]}
    [record] = read_records(write_lines(tmp_path / "ls.json", [task]))
    assert [e.key for e in record.entities] == [(0, 2, "PER"), (3, 5, "LOC")]


def test_conflicting_annotations_of_one_task_name_both_lines(tmp_path):
    same = json_min(7, "张三在北京", [(0, 2, "PER")])
    path = write_lines(tmp_path / "min.json", [same, dict(same), json_min(7, "张三在北京", [(0, 2, "LOC")])])
    with pytest.raises(DataError, match=r"min.json:3: task 7 was already read on 1 with other entities"):
        read_records(path)
    agreeing = read_records(write_lines(tmp_path / "agree.json", [same, dict(same)]))
    assert len(agreeing) == 1  # the same annotation twice is one example


def test_json_lines_with_raw_line_separators_read_back(tmp_path):
    text = "张三\u2028在北京\u2029工作\x85了"
    source = write_lines(tmp_path / "in.jsonl", [{"text": text, "entities": [{"start": 0, "end": 2, "type": "PER"}]},
                                                 {"text": "李四", "entities": []}])
    assert "\u2028" in open(source, encoding="utf-8").read()  # written raw, as json.dumps(ensure_ascii=False) does
    assert cli(["convert", source, str(tmp_path / "out.jsonl")]) == 0
    for path in (source, str(tmp_path / "out.jsonl")):
        records = read_records(path)
        assert [r.text for r in records] == [text, "李四"] and records[0].entities[0].key == (0, 2, "PER")


@pytest.mark.parametrize("content, message", [
    ('[{"text": "a"}]\n{"text": "b"}\n', ":2: text after the JSON array that ends on line 1"),
    ('[{"text": "a"}]\n[{"text": "b"}]\n', ":2: text after the JSON array"),
    ('[{"text": "a"}] trailing\n', ":1: text after the JSON array"),
    ('[{"text": "a"},\n{"text": "b"}\n', ":1: the JSON array opened here is never closed"),
    ('[{"text": "a"}\n{"text": "b"}]\n', ":2: expected ',' or ']'"),
])
def test_json_arrays_must_be_whole(tmp_path, content, message):
    path = tmp_path / "data.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        read_records(str(path), "auto", on_error="skip")


@pytest.mark.parametrize("record, message", [
    ({"text": "叶老桂来了", "label": {"name": ["叶老桂"]}}, "label 'name' must map each entity text"),
    ({"text": "叶老桂来了", "label": "name"}, "must map types"),
    ({"text": "叶老桂来了", "label": 7}, "must map types"),
    ({"text": "叶老桂来了", "label": {"name": {"叶老桂": "0,2"}}}, "expected a list of \\[start, end\\]"),
    ({"text": "头痛", "entities": ["头痛"]}, "each entity must be an object"),
    ({"text": "头痛", "entities": "头痛"}, '"entities" must be a list'),
])
def test_malformed_entities_are_named_errors_and_skippable(tmp_path, record, message):
    path = tmp_path / "data.json"
    fmt = "cluener" if "label" in record else "jsonl"
    good = {"text": "张三", "label": {"PER": {"张三": [[0, 1]]}}} if fmt == "cluener" else \
        {"text": "张三", "entities": [{"start": 0, "end": 2, "type": "PER"}]}
    write_jsonl(path, [good, record])
    with pytest.raises(DataError, match=f"data.json:2: .*{message}"):
        read_records(str(path), fmt)
    assert len(read_records(str(path), fmt, on_error="skip")) == 1


def test_cmeee_entity_as_a_bare_string(tmp_path):
    path = tmp_path / "cmeee.json"
    path.write_text(json.dumps([{"text": "头痛", "entities": [{"start_idx": 0, "end_idx": 1, "type": "sym"}]},
                                {"text": "头痛", "entities": ["头痛"]}], ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DataError, match="cmeee.json:1: each entity must be an object with start_idx"):
        read_records(str(path), "cmeee")
    assert len(read_records(str(path), "cmeee", on_error="skip")) == 1


def test_detected_format_is_said_once_per_file(tmp_path, caplog):
    path = tmp_path / "weibo.txt"
    path.write_text("口0\tO\n腔1\tO\n\n", encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="globalpointer"):
        records = read_records(str(path))
    # a character and its position in the word (Weibo NER's layout): read as the characters
    assert caplog.text.count("weibo.txt: format chars-position (detected; set data.format") == 1
    assert records[0].text == "口腔"


def test_jsonl_with_a_byte_order_mark_keeps_its_fields():
    sink = io.StringIO()
    data = b'\xef\xbb\xbf{"text": "Paris", "id": 1}\n{"text": "Lyon", "id": 2}\n'
    predict_stream(FakeExtractor(), io.BytesIO(data), PredictionWriter(sink))
    first = json.loads(sink.getvalue().splitlines()[0])
    assert first["text"] == "Paris" and first["id"] == 1 and first["entities"][0]["type"] == "LOC"


def test_a_json_format_is_one_entry_in_its_table(tmp_path, monkeypatch):
    """A new JSON format (here spans as [start, end, type] under "spans") is its JsonFormat alone:
    read, recognised among the others, and its entity key guarded in the other formats' files."""
    from globalpointer.data.json_formats import JSON_FORMATS, JsonFormat

    def parse_spans(obj, where):
        return Record(obj["text"], [Entity(s, e, t) for s, e, t in obj["spans"]], where)

    monkeypatch.setitem(JSON_FORMATS, "spans", JsonFormat(parse_spans, ("spans",), lambda o: "spans" in o))
    path = write_jsonl(tmp_path / "spans.jsonl", [{"text": "张三在北京", "spans": [[0, 2, "PER"], [3, 5, "LOC"]]},
                                                  {"text": "无", "spans": []}])
    records = read_records(path)
    assert [(r.text, [e.key for e in r.entities]) for r in records] == \
        [("张三在北京", [(0, 2, "PER"), (3, 5, "LOC")]), ("无", [])]
    mixed = write_jsonl(tmp_path / "mixed.jsonl", [{"text": "张三", "entities": [{"start": 0, "end": 2, "type": "PER"}],
                                                    "spans": [[0, 2, "PER"]]}])
    with pytest.raises(DataError, match="'spans' holds entities in another format than jsonl"):
        read_records(mixed)


def test_a_tagged_file_whose_later_sentences_are_words_is_named_not_run_together(tmp_path):
    """The shape is decided from the first lines: characters, one a line; English words after them
    would read as "JohnSmithlivesinNewYork".  Such a sentence is an error naming its line."""
    chinese = "".join(f"{char}\t{tag}\n" for char, tag in zip("张三在北京", ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]))
    english = "".join(f"{word}\t{tag}\n" for word, tag in zip(["John", "Smith", "lives", "in", "New", "York"],
                                                               ["B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC"]))
    path = tmp_path / "mixed.bio"
    path.write_text((chinese + "\n") * 250 + english, encoding="utf-8")
    with pytest.raises(DataError, match=r"mixed.bio:1501: most tokens of this sentence are words, in a file read "
                                        r"as one character a line .*set data.format: conll"):
        read_records(str(path))
    assert [r.text for r in read_records(str(path), format="conll")][-1] == "John Smith lives in New York"
    skipped = read_records(str(path), on_error="skip")
    assert len(skipped) == 250 and skipped[0].text == "张三在北京"
    # a Latin word inside a Chinese sentence stays one token among characters
    path.write_text((chinese + "\n") * 250 + "看\tO\nNBA\tB-ORG\n比\tO\n赛\tO\n", encoding="utf-8")
    assert read_records(str(path))[-1].text == "看NBA比赛"


def test_a_byte_order_mark_mid_file_is_no_part_of_a_token(tmp_path):
    """Two files joined with cat, each with its BOM: the second's would make its first token two
    characters long, and the file read as words ("我 们 在 北 京")."""
    part = "\ufeff" + "".join(f"{char}\tO\n" for char in "我们在北京") + "\n"
    path = tmp_path / "joined.bio"
    path.write_bytes((part + part).encode("utf-8"))
    assert [r.text for r in read_records(str(path))] == ["我们在北京", "我们在北京"]
