"""Done means the next command accepts it: every artifact a command writes, read by every command that
reads it.  Writers (rows): a checkpoint from train, from train --init-from (types listed in another
order than the model's), from train --resume, from a Label Studio round that adds a type, from train
with thresholds fitted on its dev file
(train.calibrate); a float32 and an INT8 export; calibrated thresholds.  Readers (columns): predict, evaluate, globalpointer.load,
serve, export, calibrate, train --init-from.  Each cell checks that the reader exits 0 (or answers
200) and that what it reads is what was written: the model's types in labels.json's order, the same
entities as the model predicts when loaded."""
import json
import os
import shutil

import pytest

import globalpointer
from globalpointer.cli import evaluate_main, main, predict_main, train_main
from synthetic import make_records, tiny_config, write_jsonl

pytestmark = pytest.mark.slow

TEXTS = ["张三去了北京大学", "李四在上海", "王五和复旦大学"]


def only(records, types):
    return [{**r, "entities": [e for e in r["entities"] if e["type"] in types]} for r in records]


def label_studio_round(base_model, root):
    """The checkpoint a Label Studio round writes when the project adds a type (ORG) to a model of LOC
    and PER, through the backend's own round, its base the model's own config.yaml."""
    from fastapi.testclient import TestClient

    from globalpointer.deploy.label_studio_backend import create_app
    from globalpointer.inference.label_studio import labeling_config
    from test_label_studio_backend import FakeLabelStudio

    tasks = [{"id": index, "data": {"text": record["text"]}, "annotations": [{"id": index, "result": [
        {"from_name": "label", "to_name": "text", "type": "labels",
         "value": {"start": e["start"], "end": e["end"], "labels": [e["type"]]}} for e in record["entities"]]}]}
        for index, record in enumerate(make_records(16, 9))]
    label_studio = FakeLabelStudio(tasks, "secret-token")
    app = create_app(base_model, globalpointer.load(base_model), str(root / "rounds #1"),
                     os.path.join(base_model, "config.yaml"), label_studio.url, "secret-token")
    try:
        with TestClient(app) as client:
            project = {"id": 7, "label_config": labeling_config(["LOC", "ORG", "PER"])}
            assert client.post("/webhook", json={"action": "START_TRAINING", "project": project}).status_code == 201
            assert app.state.trainer.wait_idle(300)
            assert client.get("/health").json()["last_round"]["state"] == "served", app.state.trainer.last
    finally:
        label_studio.shutdown()
    return root / "rounds #1" / "round-001" / "run" / "best"


@pytest.fixture(scope="module")
def writers(tmp_path_factory):
    """Each writer's artifact: name -> model directory."""
    from globalpointer.cli import main as cli

    root = tmp_path_factory.mktemp("round-trips")
    config = tiny_config(root, train__epochs=2)
    dev = str(root / "dev.jsonl")
    # a base without ORG, trained from a relative --set path (read from the current folder)
    write_jsonl(root / "no-org.jsonl", only(make_records(240, 1), {"LOC", "PER"}))
    write_jsonl(root / "dev-no-org.jsonl", only(make_records(60, 2), {"LOC", "PER"}))
    cwd = os.getcwd()
    os.chdir(root)
    try:
        assert train_main(["--config", config, "--set", "data.train=no-org.jsonl", "--set", "data.dev=dev-no-org.jsonl",
                           "--set", "data.labels=[LOC, PER]", "--set", "output_dir='base #1'"]) == 0
    finally:
        os.chdir(cwd)
    base = root / "base #1" / "best"
    # the recipe of docs/merging.md: the new type's file declared for it, the old file for the old types,
    # data.labels in alphabetical order (the model's order is LOC, PER, ORG)
    orgs = write_jsonl(root / "org.jsonl", only(make_records(120, 3), {"ORG"}))
    entries = [{"path": orgs, "types": ["ORG"]}, {"path": str(root / "no-org.jsonl"), "types": ["LOC", "PER"]}]
    assert train_main(["--config", config, "--init-from", str(base), "--set", f"data.train={json.dumps(entries)}",
                       "--set", "data.labels=[LOC, ORG, PER]", "--set", f"output_dir={root / 'init'}",
                       "--set", "train.epochs=1"]) == 0
    # --resume of the --init-from run: its saved record and the config resolve alike
    assert train_main(["--config", config, "--init-from", str(base), "--set", f"data.train={json.dumps(entries)}",
                       "--set", "data.labels=[LOC, ORG, PER]", "--set", f"output_dir={root / 'init'}",
                       "--set", "train.epochs=1", "--resume"]) == 0
    assert train_main(["--config", config, "--set", f"output_dir={root / 'plain'}"]) == 0
    assert train_main(["--config", config, "--set", "train.calibrate=shared", "--set", f"output_dir={root / 'fitted'}"]) == 0
    assert (root / "fitted" / "best" / "thresholds.json").is_file()
    calibrated = root / "calibrated"
    shutil.copytree(root / "plain" / "best", calibrated)
    assert cli(["calibrate", "--model", str(calibrated), "--data", dev]) == 0
    assert cli(["export", "--model", str(root / "plain" / "best"), "--output", str(root / "export"),
                "--quantize", "int8"]) == 0
    return {"train": root / "plain" / "best", "train --init-from": root / "init" / "best",
            "train --resume": root / "init" / "last", "calibrate": calibrated,
            "Label Studio round": label_studio_round(str(base), root),
            "export float32": root / "export", "export int8": root / "export",
            "train train.calibrate": root / "fitted" / "best",
            "dev": dev}


WRITERS = ["train", "train --init-from", "train --resume", "calibrate", "Label Studio round", "export float32",
           "export int8", "train train.calibrate"]


def settings_of(writer):
    return ["--set", "inference.precision=int8"] if writer == "export int8" else []


def labels_of(model):
    if os.path.isfile(os.path.join(model, "labels.json")):
        return json.load(open(os.path.join(model, "labels.json")))
    return None


@pytest.mark.parametrize("writer", WRITERS)
def test_load_and_predict_read_it(writers, writer, tmp_path):
    model = str(writers[writer])
    ner = globalpointer.load(model, [item for item in settings_of(writer) if item != "--set"])
    assert ner.labels == (labels_of(model) or ner.labels)
    expected = ner(TEXTS)
    out = tmp_path / "out.jsonl"
    (tmp_path / "in.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    assert predict_main(["--model", model, "--input", str(tmp_path / "in.txt"), "--output", str(out),
                         *settings_of(writer)]) == 0
    assert [json.loads(line)["entities"] for line in open(out, encoding="utf-8")] == expected


@pytest.mark.parametrize("writer", WRITERS)
def test_evaluate_reads_it(writers, writer, tmp_path):
    model = str(writers[writer])
    assert evaluate_main(["--model", model, "--data", writers["dev"], "--output", str(tmp_path / "r.json"),
                          *settings_of(writer)]) == 0
    report = json.load(open(tmp_path / "r.json"))
    assert set(report["per_type"]) <= set(globalpointer.load(model).labels)


@pytest.mark.parametrize("writer", WRITERS)
def test_serve_reads_it(writers, writer):
    from fastapi.testclient import TestClient

    from globalpointer.deploy import serve

    ner = globalpointer.load(str(writers[writer]), [item for item in settings_of(writer) if item != "--set"])
    with TestClient(serve.create_app(ner, ner.config.serve)) as client:
        answer = client.post("/v1/extract", json={"texts": TEXTS})
        assert answer.status_code == 200, answer.text
        assert client.get("/v1/labels").json()["labels"] == ner.labels


@pytest.mark.parametrize("writer", ["train --init-from", "calibrate", "Label Studio round", "train train.calibrate"])
def test_export_reads_it(writers, writer, tmp_path):
    model = str(writers[writer])
    assert main(["export", "--model", model, "--output", str(tmp_path / "export")]) == 0
    exported = globalpointer.load(str(tmp_path / "export"))
    assert exported.labels == labels_of(model)
    checkpoint = globalpointer.load(model)
    for found, expected in zip(exported(TEXTS), checkpoint(TEXTS)):
        assert [(e["start"], e["end"], e["type"]) for e in found] == [(e["start"], e["end"], e["type"])
                                                                      for e in expected]
    if os.path.isfile(os.path.join(model, "thresholds.json")):  # the calibrated scores travel with the export
        assert os.path.isfile(tmp_path / "export" / "thresholds.json")


@pytest.mark.parametrize("writer", ["train --init-from", "Label Studio round", "export float32"])
def test_calibrate_reads_it(writers, writer, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(writers[writer], model)
    assert main(["calibrate", "--model", str(model), "--data", writers["dev"]]) == 0
    scores = json.load(open(model / "thresholds.json"))["min_scores"]
    assert list(scores) == globalpointer.load(str(model)).labels


@pytest.mark.parametrize("writer", ["train --init-from", "Label Studio round", "train train.calibrate"])
def test_init_from_reads_it(writers, writer, tmp_path):
    config = tiny_config(tmp_path, train__epochs=1)
    assert train_main(["--config", config, "--init-from", str(writers[writer]), "--set",
                       "data.labels=[ORG, PER, LOC]"]) == 0
    assert globalpointer.load(str(tmp_path / "run" / "best")).labels == labels_of(str(writers[writer]))
    assert not (tmp_path / "run" / "best" / "thresholds.json").exists()  # the base's scores were for the base
