"""Done means the next command accepts it: every artifact a command writes, read by every command that
reads it.  Writers (rows): a checkpoint from train, from train --init-from (types listed in another
order than the model's), from train --resume, from a Label Studio round that adds a type, from train
with thresholds fitted on its dev file (train.calibrate); a float32 and an INT8 export; calibrated
thresholds; and the same writers of a relation model (rows "relations: ...") and of an event model (rows
"events: ...", its Label Studio round's events labelled as triggers linked to arguments).  Readers (columns):
predict, evaluate, globalpointer.load, serve, export, calibrate, train --init-from.  Each cell checks
that the reader exits 0 (or answers 200) and that what it reads is what was written: the model's types
in labels.json's order (and its relation types in relations.json's), the same entities (and
relations, and events) as the model predicts when loaded."""
import json
import math
import os
import shutil

import pytest

import globalpointer
from globalpointer.cli import evaluate_main, main, predict_main, train_main
from helpers import label_studio_tasks
from synthetic import (event_config, event_lines, make_records, relation_config, relation_lines, tiny_config, write_jsonl,
                       write_lines)

pytestmark = pytest.mark.slow

TEXTS = ["张三去了北京大学", "李四在上海", "王五和复旦大学"]
RELATION_TEXTS = ["李四出生于广州", "王五任职于百度", "张三出生于北京" * 4]  # the last in two windows
EVENT_TEXTS = ["李四出生于上海，王五出生于广州", "百度收购华为", "张三出生于北京，" * 5]  # the last in two windows


def only(records, types):
    return [{**r, "entities": [e for e in r["entities"] if e["type"] in types]} for r in records]


def label_studio_round(base_model, root, tasks, label_config):
    """The checkpoint the backend's own round writes from ``tasks`` (Label Studio's task JSON) of a
    project whose labeling interface is ``label_config``, its base the model's own config.yaml."""
    from fastapi.testclient import TestClient

    from globalpointer.deploy.label_studio_backend import create_app
    from test_label_studio_backend import FakeLabelStudio

    label_studio = FakeLabelStudio(tasks, "secret-token")
    app = create_app(base_model, globalpointer.load(base_model), str(root / "rounds #1"),
                     os.path.join(base_model, "config.yaml"), label_studio.url, "secret-token")
    try:
        with TestClient(app) as client:
            project = {"id": 7, "label_config": label_config}
            assert client.post("/webhook", json={"action": "START_TRAINING", "project": project}).status_code == 201
            assert app.state.trainer.wait_idle(300)
            assert client.get("/health").json()["last_round"]["state"] == "served", app.state.trainer.last
    finally:
        label_studio.shutdown()
    return root / "rounds #1" / "round-001" / "run" / "best"


def entity_tasks():
    """A project's annotations that add a type (ORG) to a model of LOC and PER."""
    return [{"id": index, "data": {"text": record["text"]}, "annotations": [{"id": index, "result": [
        {"from_name": "label", "to_name": "text", "type": "labels",
         "value": {"start": e["start"], "end": e["end"], "labels": [e["type"]]}} for e in record["entities"]]}]}
        for index, record in enumerate(make_records(16, 9))]


@pytest.fixture(scope="module")
def writers(tmp_path_factory):
    """Each writer's artifact: name -> model directory."""
    from globalpointer.cli import main as cli
    from globalpointer.inference.label_studio import labeling_config

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
    # train.calibrate only adds thresholds.json to what training writes: the plain model is that run without it
    assert train_main(["--config", config, "--set", "train.calibrate=shared", "--set", f"output_dir={root / 'fitted'}"]) == 0
    assert (root / "fitted" / "best" / "thresholds.json").is_file()
    shutil.copytree(root / "fitted", root / "plain")
    (root / "plain" / "best" / "thresholds.json").unlink()
    calibrated = root / "calibrated"
    shutil.copytree(root / "plain" / "best", calibrated)
    assert cli(["calibrate", "--model", str(calibrated), "--data", dev]) == 0
    assert cli(["export", "--model", str(root / "plain" / "best"), "--output", str(root / "export"),
                "--quantize", "int8"]) == 0
    return {"train": root / "plain" / "best", "train --init-from": root / "init" / "best",
            "train --resume": root / "init" / "last", "calibrate": calibrated,
            "Label Studio round": label_studio_round(str(base), root, entity_tasks(),
                                                     labeling_config(["LOC", "ORG", "PER"])),
            "export float32": root / "export", "export int8": root / "export",
            "train train.calibrate": root / "fitted" / "best",
            "dev": dev, "texts": TEXTS, "config": lambda folder: tiny_config(folder, train__epochs=1),
            "labels": ["ORG", "PER", "LOC"]}


def writers_of(session_run, root, config: str, dev: str) -> dict:
    """The writers' artifacts of the session's relation or event model (``session_run``: its fitted model,
    and the same without thresholds.json, trained with ``config`` but for train.calibrate): name -> model
    directory, for every writer but the Label Studio round."""
    import subprocess
    import sys

    from globalpointer.cli import main as cli
    from helpers import ROOT

    plain = root / "run" / "best"
    shutil.copytree(session_run / "unfitted", plain)
    shutil.copytree(session_run / "run" / "best", root / "fitted" / "best")
    assert (root / "fitted" / "best" / "thresholds.json").is_file()
    # --init-from, then --resume of it: each in a process of its own, as users run them (the optimizer
    # state is keyed by the names Paddle gives parameters in their process)
    for epochs, resume in ((1, []), (2, ["--resume", "--resume-anyway"])):
        subprocess.run([sys.executable, os.path.join(ROOT, "train.py"), "--config", config, *resume, "--init-from",
                        str(plain), "--set", f"train.epochs={epochs}", "--set", f"output_dir={root / 'init'}"],
                       check=True, capture_output=True)
    calibrated = root / "calibrated"
    shutil.copytree(plain, calibrated)
    assert cli(["calibrate", "--model", str(calibrated), "--data", dev]) == 0
    assert cli(["export", "--model", str(plain), "--output", str(root / "export"), "--quantize", "int8"]) == 0
    return {"train": plain, "train --init-from": root / "init" / "best", "train --resume": root / "init" / "last",
            "calibrate": calibrated, "export float32": root / "export", "export int8": root / "export",
            "train train.calibrate": root / "fitted" / "best"}


@pytest.fixture(scope="module")
def relation_writers(tmp_path_factory, relation_run):
    """The writers' artifacts of a relation model (synthetic.relation_lines): name -> model directory; the
    trained ones the session's ``relation_run`` (its fitted model, and the same without thresholds.json)."""
    from globalpointer.data.readers import read_records
    from globalpointer.inference.label_studio import labeling_config

    root = tmp_path_factory.mktemp("relation-round-trips")
    dev = str(root / "dev.json")
    made = writers_of(relation_run, root, relation_config(root, train__calibrate="none"), dev)
    tasks = label_studio_tasks(read_records(write_lines(root / "tasks.json", relation_lines(40, 5))))
    model = globalpointer.load(str(made["train"]))
    made["Label Studio round"] = label_studio_round(str(made["train"]), root, tasks,
                                                    labeling_config(model.labels, model.relations))
    return {**{f"relations: {name}": path for name, path in made.items()},
            "dev": dev, "texts": RELATION_TEXTS, "labels": list(reversed(model.labels)),
            "config": lambda folder: relation_config(folder, train__epochs=1, train__calibrate="none")}


@pytest.fixture(scope="module")
def event_writers(tmp_path_factory, event_run):
    """The writers' artifacts of an event model (synthetic.event_lines), as ``relation_writers``; the
    trained ones the session's ``event_run``, the Label Studio round's tasks as ``convert`` writes them."""
    from globalpointer.data.readers import read_records
    from globalpointer.inference.file_prediction import write_records
    from globalpointer.inference.label_studio import labeling_config

    root = tmp_path_factory.mktemp("event-round-trips")
    dev = str(root / "dev.json")
    made = writers_of(event_run, root, event_config(root, train__calibrate="none"), dev)
    model = globalpointer.load(str(made["train"]))
    write_records(read_records(write_lines(root / "gold.json", event_lines(40, 5))), str(root / "tasks.json"),
                  "label-studio")
    tasks = [{**task, "id": index, "annotations": [{**task["annotations"][0], "id": index}]}
             for index, task in enumerate(json.load(open(root / "tasks.json", encoding="utf-8")))]
    made["Label Studio round"] = label_studio_round(str(made["train"]), root, tasks,
                                                    labeling_config(model.labels, model.relations))
    return {**{f"events: {name}": path for name, path in made.items()},
            "dev": dev, "texts": EVENT_TEXTS, "labels": list(reversed(model.labels)),
            "config": lambda folder: event_config(folder, train__epochs=1, train__calibrate="none")}


ENTITY_WRITERS = ["train", "train --init-from", "train --resume", "calibrate", "Label Studio round", "export float32",
                  "export int8", "train train.calibrate"]


def of_relations(writers):
    """The same writers of a relation model: their rows' names."""
    return [f"relations: {writer}" for writer in writers]


RELATION_WRITERS = of_relations(ENTITY_WRITERS)
EVENT_WRITERS = [f"events: {writer}" for writer in ENTITY_WRITERS]
WRITERS = ENTITY_WRITERS + RELATION_WRITERS + EVENT_WRITERS


def made_by(request, writer):
    """The artifacts of the writer's kind (built once a module, when a test first asks for them)."""
    return request.getfixturevalue("relation_writers" if writer in RELATION_WRITERS else
                                   "event_writers" if writer in EVENT_WRITERS else "writers")


def both(writers):
    """The writers of each kind of model."""
    return writers + of_relations(writers) + [f"events: {w}" for w in writers]


def outcome(result):
    """What a reader must give back as the model found it: the spans, the relations between them, and the
    events (the scores may differ in their last digits between engines)."""
    if not isinstance(result, dict):
        return [(e["start"], e["end"], e["type"]) for e in result], [], []
    return ([(e["start"], e["end"], e["type"]) for e in result["entities"]],
            [(r["type"], r["head"], r["tail"]) for r in result.get("relations", [])],
            [(e["type"], e["trigger"] and (e["trigger"]["start"], e["trigger"]["end"]),
              [(a["role"], a["start"], a["end"]) for a in e["arguments"]]) for e in result.get("events", [])])


def settings_of(writer):
    return ["--set", "inference.precision=int8"] if writer.endswith("export int8") else []


def labels_of(model):
    if os.path.isfile(os.path.join(model, "labels.json")):
        return json.load(open(os.path.join(model, "labels.json")))
    return None


def relations_of(model):
    path = os.path.join(model, "relations.json")
    return json.load(open(path, encoding="utf-8")) if os.path.isfile(path) else []


@pytest.mark.parametrize("writer", WRITERS)
def test_load_and_predict_read_it(request, writer, tmp_path):
    made = made_by(request, writer)
    model = str(made[writer])
    ner = globalpointer.load(model, [item for item in settings_of(writer) if item != "--set"])
    assert ner.labels == (labels_of(model) or ner.labels)
    assert ner.relations == (relations_of(model) or ner.relations)
    expected = ner(made["texts"])
    out = tmp_path / "out.jsonl"
    (tmp_path / "in.txt").write_text("\n".join(made["texts"]) + "\n", encoding="utf-8")
    assert predict_main(["--model", model, "--input", str(tmp_path / "in.txt"), "--output", str(out),
                         *settings_of(writer)]) == 0
    lines = [json.loads(line) for line in open(out, encoding="utf-8")]
    if writer in RELATION_WRITERS:
        assert [{"entities": line["entities"], "relations": line["relations"]} for line in lines] == expected
        assert any(found["relations"] for found in expected)
    elif writer in EVENT_WRITERS:
        assert [{"entities": line["entities"], "events": line["events"]} for line in lines] == expected
        assert all(found["events"] for found in expected)
    else:
        assert [line["entities"] for line in lines] == expected


@pytest.mark.parametrize("writer", WRITERS)
def test_evaluate_reads_it(request, writer, tmp_path):
    made = made_by(request, writer)
    model = str(made[writer])
    assert evaluate_main(["--model", model, "--data", made["dev"], "--output", str(tmp_path / "r.json"),
                          *settings_of(writer)]) == 0
    report = json.load(open(tmp_path / "r.json"))
    ner = globalpointer.load(model)
    assert set(report["per_type"]) <= set(ner.labels)
    if writer in RELATION_WRITERS:
        assert set(report["relations"]["per_type"]) == set(ner.relations)
        assert report["relations"]["micro"]["f1"] > 0.5  # the triples the model was trained on
    if writer in EVENT_WRITERS:
        assert set(report["events"]["per_type"]) == {"出生", "收购"}
        assert report["events"]["arguments"]["f1"] > 0.5  # the events the model was trained on


@pytest.mark.parametrize("writer", WRITERS)
def test_serve_reads_it(request, writer):
    from fastapi.testclient import TestClient

    from globalpointer.deploy import serve

    made = made_by(request, writer)
    ner = globalpointer.load(str(made[writer]), [item for item in settings_of(writer) if item != "--set"])
    with TestClient(serve.create_app(ner, ner.config.serve)) as client:
        answer = client.post("/v1/extract", json={"texts": made["texts"]})
        assert answer.status_code == 200, answer.text
        assert [outcome(result) for result in answer.json()["results"]] == [outcome(f) for f in ner(made["texts"])]
        labels = client.get("/v1/labels").json()
        assert labels["labels"] == ner.labels
        if writer in EVENT_WRITERS:  # an event model's schema: its event types and their roles
            assert labels["events"] == {"出生": ["人物", "地点"], "收购": ["收购方", "被收购方"]} and "relations" not in labels
        else:
            assert labels.get("relations", []) == ner.relations


@pytest.mark.parametrize("writer", both(["train --init-from", "calibrate", "Label Studio round",
                                         "train train.calibrate"]))
def test_export_reads_it(request, writer, tmp_path):
    made = made_by(request, writer)
    model = str(made[writer])
    assert main(["export", "--model", model, "--output", str(tmp_path / "export")]) == 0
    exported = globalpointer.load(str(tmp_path / "export"))
    assert exported.labels == labels_of(model) and exported.relations == relations_of(model)
    checkpoint = globalpointer.load(model)
    assert [outcome(f) for f in exported(made["texts"])] == [outcome(f) for f in checkpoint(made["texts"])]
    if os.path.isfile(os.path.join(model, "thresholds.json")):  # the calibrated scores travel with the export
        assert os.path.isfile(tmp_path / "export" / "thresholds.json")


@pytest.mark.parametrize("writer", both(["train --init-from", "Label Studio round", "export float32"]))
def test_calibrate_reads_it(request, writer, tmp_path):
    made = made_by(request, writer)
    model = tmp_path / "model"
    shutil.copytree(made[writer], model)
    assert main(["calibrate", "--model", str(model), "--data", made["dev"]]) == 0
    fitted = json.load(open(model / "thresholds.json"))
    assert list(fitted["min_scores"]) == globalpointer.load(str(model)).labels
    assert ("pair_min_score" in fitted) == (writer not in ENTITY_WRITERS)
    assert (fitted["kind"] == "events") == (writer in EVENT_WRITERS)


@pytest.mark.parametrize("writer", both(["train --init-from", "Label Studio round", "train train.calibrate"]))
def test_init_from_reads_it(request, writer, tmp_path):
    made = made_by(request, writer)
    config = made["config"](tmp_path)
    labels = "[" + ", ".join(made["labels"]) + "]"  # another order than the model's
    assert train_main(["--config", config, "--init-from", str(made[writer]), "--set", f"data.labels={labels}"]) == 0
    trained = str(tmp_path / "run" / "best")
    assert globalpointer.load(trained).labels == labels_of(str(made[writer]))
    assert relations_of(trained) == relations_of(str(made[writer]))
    assert not (tmp_path / "run" / "best" / "thresholds.json").exists()  # the base's scores were for the base


def _platt(pair, score):
    """An independent formula of Platt's map: sigmoid(a * logit(score) + b)."""
    a, b = pair
    return 1.0 / (1.0 + math.exp(-(a * math.log(score / (1.0 - score)) + b)))


@pytest.mark.parametrize("writer", ["calibrate", "relations: calibrate"])
def test_every_reader_gives_the_calibrated_scores(request, writer, tmp_path):
    """A stored map of calibrated scores, through load, predict, serve, an ONNX export and the Label Studio
    backend: each gives every item the map of the score the model gives without it, and keeps what it keeps.
    The map is written by hand: the tiny models are right on every dev item, and fit the identity."""
    from fastapi.testclient import TestClient

    from globalpointer.deploy import serve
    from globalpointer.deploy.label_studio_backend import create_app
    from globalpointer.inference.label_studio import labeling_config

    made = made_by(request, writer)
    model = tmp_path / "model"
    shutil.copytree(made[writer], model)
    stored = json.load(open(model / "thresholds.json"))
    assert stored["score_map"]["entities"] == [1.0, 0.0]  # what the tiny model fits: it is right on every dev item
    entities, triples = (0.5, 0.7), (0.8, -0.4)
    stored["score_map"] = {"kind": "platt", "entities": list(entities),
                           **({"triples": list(triples)} if writer in RELATION_WRITERS else {})}
    stored["min_scores"] = {label: _platt(entities, score) for label, score in stored["min_scores"].items()}
    (model / "thresholds.json").write_text(json.dumps(stored))
    texts = made["texts"]

    def expected_of(found):
        return {"entities": [{**e, "score": pytest.approx(_platt(entities, e["score"]), abs=1e-5)}
                             for e in found["entities"]],
                "relations": [{**r, "score": pytest.approx(_platt(triples, r["score"]), abs=1e-5)}
                              for r in found.get("relations", [])]}

    raw = [found if isinstance(found, dict) else {"entities": found} for found in globalpointer.load(str(made[writer]))(texts)]
    expected = [expected_of(found) for found in raw]
    assert any(found["entities"] for found in raw)

    def as_dict(found):
        found = found if isinstance(found, dict) else {"entities": found}
        return {"entities": found["entities"], "relations": found.get("relations", [])}

    ner = globalpointer.load(str(model))
    assert [as_dict(f) for f in ner(texts)] == expected
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    assert predict_main(["--model", str(model), "--input", str(tmp_path / "in.txt"), "--output",
                         str(tmp_path / "out.jsonl")]) == 0
    assert [as_dict(json.loads(line)) for line in open(tmp_path / "out.jsonl", encoding="utf-8")] == expected
    with TestClient(serve.create_app(ner, ner.config.serve)) as client:
        answer = client.post("/v1/extract", json={"texts": texts})
        assert [as_dict(found) for found in answer.json()["results"]] == expected
    assert main(["export", "--model", str(model), "--output", str(tmp_path / "export")]) == 0
    exported = globalpointer.load(str(tmp_path / "export"))
    loose = [{kind: [{**item, "score": pytest.approx(item["score"].expected, abs=1e-3)} for item in found[kind]]
              for kind in found} for found in expected]
    assert [as_dict(f) for f in exported(texts)] == loose
    app = create_app(str(model), ner, str(tmp_path / "rounds"), str(model / "config.yaml"))
    interface = labeling_config(ner.labels, ner.relations)
    with TestClient(app) as client:
        answer = client.post("/predict", json={"tasks": [{"id": i, "data": {"text": t}} for i, t in enumerate(texts)],
                                               "label_config": interface})
        regions = [[r["score"] for r in prediction["result"] if r["type"] == "labels"]
                   for prediction in answer.json()["results"]]
    assert regions == [[e["score"] for e in found["entities"]] for found in expected]
