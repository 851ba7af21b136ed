"""doccano and Label Studio files in, Label Studio tasks out, and conlleval's repair of tag noise."""
import io
import json
import math

import pytest

from globalpointer.data.readers import detect_format, read_records
from globalpointer.data.reading import read_text
from globalpointer.errors import DataError
from globalpointer.inference.label_studio import labeling_config
from globalpointer.inference.file_prediction import PredictionWriter, predict_stream
from globalpointer.spans import Entity
from helpers import fake_records


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return str(path)


def spans(record):
    return [(e.start, e.end, e.type, record.text[e.start:e.end]) for e in record.entities]


# doccano's documented exports: sequence labeling ("label": [[start, end, type]]) and with relations

def test_doccano_sequence_labeling_export(tmp_path):
    path = write(tmp_path, "doccano.jsonl",
                 '{"id": 1, "text": "EU rejects German call to boycott British lamb.", '
                 '"label": [[0, 2, "ORG"], [11, 17, "MISC"], [34, 41, "MISC"]], "Comments": []}\n'
                 '{"id": 2, "text": "Peter Blackburn", "label": []}\n')
    assert detect_format(path, read_text(path)) == "doccano"
    first, second = read_records(path)
    assert spans(first) == [(0, 2, "ORG", "EU"), (11, 17, "MISC", "German"), (34, 41, "MISC", "British")]
    assert second.entities == []


def test_doccano_relation_export_reads_entities(tmp_path):
    path = write(tmp_path, "rel.jsonl", json.dumps(
        {"id": 6400, "text": "张三在北京大学读书", "Comments": [],
         "entities": [{"id": 1, "label": "PER", "start_offset": 0, "end_offset": 2},
                      {"id": 2, "label": "ORG", "start_offset": 3, "end_offset": 7}],
         "relations": [{"id": 3, "from_id": 1, "to_id": 2, "type": "就读"}]}, ensure_ascii=False) + "\n")
    [record] = read_records(path)
    assert spans(record) == [(0, 2, "PER", "张三"), (3, 7, "ORG", "北京大学")]


def test_doccano_bad_label_names_the_line(tmp_path):
    path = write(tmp_path, "bad.jsonl", '{"text": "abc", "label": [[0, 2, "X"]]}\n{"text": "abc", "label": [[2, 9, "X"]]}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: entity X \[2, 9\) lies outside the text of length 3"):
        read_records(path)
    assert len(read_records(path, on_error="skip")) == 1


# Label Studio's documented JSON export: a list of tasks with annotations[].result[].value

LABEL_STUDIO_EXPORT = [
    {"id": 1, "data": {"text": "Alice met Bob in Paris."},
     "annotations": [{"id": 9, "completed_by": 1, "was_cancelled": False, "ground_truth": False,
                      "result": [{"value": {"start": 0, "end": 5, "text": "Alice", "labels": ["PER"]},
                                  "id": "a1", "from_name": "label", "to_name": "text", "type": "labels",
                                  "origin": "manual"},
                                 {"value": {"start": 17, "end": 22, "text": "Paris", "labels": ["LOC"]},
                                  "id": "a2", "from_name": "label", "to_name": "text", "type": "labels"},
                                 {"value": {"choices": ["news"]}, "id": "c", "from_name": "topic",
                                  "to_name": "text", "type": "choices"}]}],
     "predictions": []},
    {"id": 2, "data": {"text": "Nothing here."},
     "annotations": [{"id": 10, "was_cancelled": True, "result": [
         {"value": {"start": 0, "end": 7, "text": "Nothing", "labels": ["PER"]}, "type": "labels"}]},
                     {"id": 11, "was_cancelled": False, "result": []}]},
]


def test_label_studio_export(tmp_path):
    path = write(tmp_path, "export.json", json.dumps(LABEL_STUDIO_EXPORT, indent=2))
    assert detect_format(path, read_text(path)) == "label-studio"
    first, second = read_records(path)
    assert spans(first) == [(0, 5, "PER", "Alice"), (17, 22, "LOC", "Paris")]
    assert second.entities == []  # the cancelled annotation is not the answer


def test_label_studio_tasks_without_annotation_or_cancelled_are_left_out_and_counted(tmp_path, caplog):
    tasks = LABEL_STUDIO_EXPORT + [{"id": 3, "data": {"text": "Unlabelled"}, "annotations": [],
                                    "predictions": [{"result": []}]},
                                   {"id": 4, "data": {"text": "Skipped"}, "annotations": [
                                       {"id": 12, "was_cancelled": True, "result": []}]}]
    path = write(tmp_path, "export.json", json.dumps(tasks, indent=1))
    assert [r.text for r in read_records(path)] == ["Alice met Bob in Paris.", "Nothing here."]
    assert "left out 1 tasks without annotation" in caplog.text and "1 cancelled tasks" in caplog.text
    only_unannotated = write(tmp_path, "none.json", json.dumps(tasks[2:], indent=1))
    with pytest.raises(DataError, match="no usable records.*1 tasks without annotation.*1 cancelled tasks"):
        read_records(only_unannotated)


def test_old_utf16_offsets_are_converted_when_the_text_says_so(tmp_path):
    # Label Studio before the fix for surrogate pairs counted the emoji as two: "annotation" at 13..23.
    text = "💩This is an annotation."
    task = {"data": {"text": text}, "annotations": [{"result": [
        {"value": {"start": 13, "end": 23, "text": "annotation", "labels": ["X"]}, "type": "labels"}]}]}
    [record] = read_records(write(tmp_path, "old.json", json.dumps([task], ensure_ascii=False)))
    assert spans(record) == [(12, 22, "X", "annotation")]


def test_label_studio_json_min_reads_like_doccano(tmp_path):
    path = write(tmp_path, "min.json", json.dumps([{"id": 1, "text": "Alice met Bob", "annotator": 1,
                                                     "label": [{"start": 10, "end": 13, "text": "Bob",
                                                                "labels": ["PER"]}]}]))
    [record] = read_records(path)
    assert spans(record) == [(10, 13, "PER", "Bob")]


# predictions -> Label Studio tasks -> (corrected in Label Studio) -> read back as training data

class FakeExtractor:
    records = fake_records
    relations, events = [], False  # an entity model's

    def extract(self, texts):
        return [[Entity(t.find(name), t.find(name) + len(name), kind, 0.75 if kind == "LOC" else 0.5)
                 for name, kind in (("Paris", "LOC"), ("Alice", "PER")) if name in t] for t in texts]


def test_label_studio_output_is_one_json_array_with_a_task_per_input_line():
    sink = io.StringIO()
    data = b'Alice in Paris\n\n{"broken\nno entity\n'
    lines, failed = predict_stream(FakeExtractor(), io.BytesIO(data), PredictionWriter(sink, "label-studio", "m1"),
                                   "text")
    out = sink.getvalue().splitlines()
    assert lines == 4 and len(out) == 4 + 2 and out[0] == "[" and out[-1] == "]"
    tasks = json.loads(sink.getvalue())
    assert [t["data"]["text"] for t in tasks] == ["Alice in Paris", "", '{"broken', "no entity"]
    [prediction] = tasks[0]["predictions"]
    # the text's certainty: margins log(0.75 / 0.25) and 0, wrong with chance 0.25 and 0.5
    doubt = -sum(p * math.log(p) + (1 - p) * math.log(1 - p) for p in (0.25, 0.5))
    assert prediction["model_version"] == "m1" and prediction["score"] == round(1 / (1 + doubt), 6)
    assert [(r["value"]["start"], r["value"]["end"], r["value"]["text"], r["value"]["labels"], r["score"],
             r["from_name"], r["to_name"], r["type"]) for r in prediction["result"]] == [
        (9, 14, "Paris", ["LOC"], 0.75, "label", "text", "labels"), (0, 5, "Alice", ["PER"], 0.5, "label", "text", "labels")]
    assert tasks[3]["predictions"][0] == {"model_version": "m1", "score": 1.0, "result": []}  # sure of no entity


def test_empty_input_is_an_empty_array():
    sink = io.StringIO()
    predict_stream(FakeExtractor(), io.BytesIO(b""), PredictionWriter(sink, "label-studio"))
    assert json.loads(sink.getvalue()) == []


def test_round_trip_through_label_studio(tmp_path):
    sink = io.StringIO()
    source = b'{"text": "Alice lives in Paris", "id": 7}\n{"text": "Paris", "id": 8}\n'
    predict_stream(FakeExtractor(), io.BytesIO(source), PredictionWriter(sink, "label-studio", "gp"))
    tasks = json.loads(sink.getvalue())
    assert tasks[0]["data"] == {"text": "Alice lives in Paris", "id": 7}
    # What Label Studio exports after an annotator accepts the pre-annotations: the prediction's
    # result becomes the annotation's result; the predictions stay beside it.
    exported = [{"id": i, **task, "annotations": [{"id": 100 + i, "result": task["predictions"][0]["result"],
                                                     "was_cancelled": False}]} for i, task in enumerate(tasks)]
    records = read_records(write(tmp_path, "export.json", json.dumps(exported)))
    assert [spans(r) for r in records] == [[(0, 5, "PER", "Alice"), (15, 20, "LOC", "Paris")], [(0, 5, "LOC", "Paris")]]
    # Without annotations (not yet reviewed) the tasks are not training data.
    with pytest.raises(DataError, match="no usable records.*2 tasks without annotation"):
        read_records(write(tmp_path, "tasks.json", sink.getvalue()))


def test_labeling_config_names_every_type_and_escapes_them():
    config = labeling_config(["PER", 'A"B'])
    assert '<Labels name="label" toName="text">' in config and '<Text name="text" value="$text"/>' in config
    assert '<Label value="PER"/>' in config and "<Label value='A\"B'/>" in config


# data.on_error=repair: conlleval's reading of a continuation tag that continues nothing

NOISY = "张 B-PER.NAM\n三 I-PER.NOM\n在 O\n\n北 M-ORG\n京 E-ORG\n好 O\n\n他 O\n们 I-PER\n\n"


def test_repair_keeps_every_sentence_and_counts_the_repairs(tmp_path, caplog):
    path = write(tmp_path, "weibo.txt", NOISY)
    with pytest.raises(DataError, match=r"weibo.txt:2: tag I-PER.NOM continues an entity but there is an open "
                                        r"PER.NAM entity; .* data.on_error=repair"):
        read_records(path, "chars")
    with pytest.raises(DataError, match="no usable records"):  # skip would drop every sentence
        read_records(path, "chars", on_error="skip")
    records = read_records(path, "chars", on_error="repair")
    assert [spans(r) for r in records] == [[(0, 1, "PER.NAM", "张"), (1, 2, "PER.NOM", "三")],
                                           [(0, 2, "ORG", "北京")], [(1, 2, "PER", "们")]]
    assert "repaired (data.on_error=repair) 3 continuation tag(s) that opened no entity" in caplog.text


def test_repair_still_stops_on_records_it_cannot_repair(tmp_path):
    path = write(tmp_path, "bad.txt", "张 B-PER\n三 X-PER\n")
    with pytest.raises(DataError, match="bad.txt:2"):
        read_records(path, "chars", on_error="repair")


def test_shares_of_several_processes_join_into_the_same_array(tmp_path):
    from globalpointer.inference.file_prediction import predict_file, predict_file_share

    source = tmp_path / "in.txt"
    source.write_text("Alice\nParis and Alice\n\nnothing\nParis\n", encoding="utf-8")
    predict_file(FakeExtractor(), str(source), str(tmp_path / "one.json"), output_format="label-studio",
                 model_version="m")
    for rank in (1, 0):  # rank 1 finishes first; rank 0 joins after the barrier
        predict_file_share(FakeExtractor(), str(source), str(tmp_path / "two.json"), "auto", 2, rank, 2,
                           lambda: None, output_format="label-studio", model_version="m")
    assert (tmp_path / "two.json").read_bytes() == (tmp_path / "one.json").read_bytes()
    assert len(json.loads((tmp_path / "one.json").read_text(encoding="utf-8"))) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "one.json", "two.json"]


def test_doccano_output_reads_back_as_the_same_entities(tmp_path):
    """--output-format doccano: doccano's sequence-labelling import line per input line, which the
    doccano reader (and so doccano's own export of the corrected lines) reads back."""
    sink = io.StringIO()
    source = '{"text": "Alice lives in Paris", "id": 7}\n{"text": "Paris 巴黎"}\n'.encode() + b'\xff\n'
    lines, failed = predict_stream(FakeExtractor(), io.BytesIO(source), PredictionWriter(sink, "doccano"))
    rows = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert (lines, failed) == (3, 1)
    rows[0]["label"].sort()
    assert rows[0] == {"text": "Alice lives in Paris", "id": 7, "label": [[0, 5, "PER"], [15, 20, "LOC"]]}
    assert rows[1] == {"text": "Paris 巴黎", "label": [[0, 5, "LOC"]]} and rows[2]["label"] == [] and "error" in rows[2]
    versioned = io.StringIO()
    predict_stream(FakeExtractor(), io.BytesIO(source), PredictionWriter(versioned, "doccano", "runs/x/best@1a2b"))
    assert [json.loads(line)["model_version"] for line in versioned.getvalue().splitlines()] == ["runs/x/best@1a2b"] * 3
    path = write(tmp_path, "doccano.jsonl", "".join(json.dumps(row) + "\n" for row in rows[:2]))
    assert [spans(r) for r in read_records(path)] == [[(0, 5, "PER", "Alice"), (15, 20, "LOC", "Paris")],
                                                      [(0, 5, "LOC", "Paris")]]


def test_doccano_export_zip_is_read_through_its_data_file(tmp_path):
    import zipfile

    line = '{"id": 1, "text": "EU rejects German lamb.", "label": [[0, 2, "ORG"], [11, 17, "MISC"]]}\n'
    one = tmp_path / "project.zip"
    with zipfile.ZipFile(one, "w") as archive:
        archive.writestr("admin.jsonl", line)  # doccano 1.8: one file per annotator
    assert [spans(r) for r in read_records(str(one))] == [[(0, 2, "ORG", "EU"), (11, 17, "MISC", "German")]]
    several = tmp_path / "team.zip"
    with zipfile.ZipFile(several, "w") as archive:
        archive.writestr("admin.jsonl", line)
        archive.writestr("anna.jsonl", line)
    with pytest.raises(DataError, match="team.zip: a zip holding admin.jsonl, anna.jsonl; unzip it and name the "
                                        "file to read"):
        read_records(str(several))
    with zipfile.ZipFile(several, "a") as archive:
        archive.writestr("all.jsonl", line)  # doccano's merged file when the project shares annotations
    assert len(read_records(str(several))) == 1
    broken = tmp_path / "cut.zip"
    broken.write_bytes(one.read_bytes()[:40])
    with pytest.raises(DataError, match="cut.zip: a zip file that cannot be read"):
        read_records(str(broken))


def test_predict_cli_to_label_studio_and_back_into_evaluate(trained, tmp_path, capsys):
    from globalpointer.cli import evaluate_main, predict_main

    texts = [json.loads(line)["text"] for line in open(trained / "dev.jsonl", encoding="utf-8")][:20]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    tasks_path = tmp_path / "tasks.json"
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(tmp_path / "in.txt"),
                         "--output", str(tasks_path), "--output-format", "label-studio",
                         "--label-config", str(tmp_path / "interface.xml")]) == 0
    labels = json.loads((trained / "run" / "best" / "labels.json").read_text())
    assert (tmp_path / "interface.xml").read_text(encoding="utf-8") == labeling_config(labels) + "\n"
    tasks = json.loads(tasks_path.read_text(encoding="utf-8"))
    assert len(tasks) == 20 and tasks[0]["predictions"][0]["model_version"] == str(trained / "run" / "best")
    assert sum(len(t["predictions"][0]["result"]) for t in tasks) > 20
    exported = [{"id": i, **t, "annotations": [{"result": t["predictions"][0]["result"]}]} for i, t in enumerate(tasks)]
    (tmp_path / "export.json").write_text(json.dumps(exported, ensure_ascii=False), encoding="utf-8")
    capsys.readouterr()
    assert evaluate_main(["--model", str(trained / "run" / "best"), "--data", str(tmp_path / "export.json"),
                          "--output", str(tmp_path / "report.json")]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["micro"]["f1"] == 1.0 and report["micro"]["support"] == report["micro"]["predicted"] > 20


def test_an_output_format_is_one_entry_in_its_table(trained, tmp_path, monkeypatch, caplog):
    """A new --output-format is its OutputFormat alone: predict offers it, writes what it converts,
    as one JSON array when it says so, and logs the labeling interface when its project needs one."""
    from globalpointer.cli import predict_main
    from globalpointer.inference.file_prediction import OUTPUT_FORMATS, OutputFormat

    def spans(payload, model_version):
        return {"t": payload["text"], "s": [[e["start"], e["end"], e["type"]] for e in payload["entities"]],
                "by": model_version}

    monkeypatch.setitem(OUTPUT_FORMATS, "spans", OutputFormat(spans, None, array=True, needs_interface=True))
    (tmp_path / "in.txt").write_text("北京大学的张三\n张三\n", encoding="utf-8")
    with caplog.at_level("INFO", logger="globalpointer"):
        assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(tmp_path / "in.txt"),
                             "--output", str(tmp_path / "out.json"), "--output-format", "spans",
                             "--model-version", "v1"]) == 0
    written = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert [row["t"] for row in written] == ["北京大学的张三", "张三"] and {row["by"] for row in written} == {"v1"}
    assert all(isinstance(row["s"], list) for row in written)
    assert "Label Studio labeling config for these tasks" in caplog.text
