"""The loop without files, with a real Label Studio on loopback: connect the backend through Label
Studio's API, open tasks and find the model's predictions on them, annotate, start training, and
find the new model version on the tasks opened next.

Label Studio lives in its own virtualenv (its pins clash with ours): ``.ci/run`` installs it and sets
``LABEL_STUDIO_BIN``; without it the test is skipped."""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from globalpointer.inference.doubt import certainty
from globalpointer.inference.label_studio import labeling_config
from helpers import ROOT, call, free_port, label_studio_links, label_studio_result, triples
from synthetic import FILLER

pytestmark = pytest.mark.slow

LABEL_STUDIO = os.environ.get("LABEL_STUDIO_BIN") or shutil.which("label-studio")
TOKEN = "gp-live-test-token-0123456789"


def api(base, path, body=None):
    """(status, answer) of one call of Label Studio's API with the test user's token."""
    return call(base, path, body, headers={"Authorization": f"Token {TOKEN}"})


def predictions_of(base, task):
    status, predictions = api(base, f"/api/predictions?task={task['id']}")
    assert status == 200 and len(predictions) == 1, predictions
    return predictions[0]


def wait_for(url, process, seconds, log):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{url}: the process exited {process.returncode}:\n{open(log).read()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(1)
    raise AssertionError(f"{url} did not answer within {seconds} s:\n{open(log).read()[-3000:]}")


def start(command, log, env=None):
    return subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT, cwd=ROOT,
                            env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def label_studio(tmp_path_factory):
    """The address of a Label Studio started once for this module's tests, on loopback."""
    if not LABEL_STUDIO:
        pytest.skip("Label Studio is not installed (set LABEL_STUDIO_BIN)")
    tmp_path = tmp_path_factory.mktemp("label-studio")
    base = f"http://127.0.0.1:{free_port()}"
    # Label Studio refuses to call local addresses unless told (its defaults guard a hosted server)
    process = start([LABEL_STUDIO, "start", "--no-browser", "--internal-host", "127.0.0.1", "--port",
                     base.rsplit(":", 1)[1], "--data-dir", str(tmp_path / "ls-data"), "--username", "gp@example.com",
                     "--password", "gp-password-1", "--user-token", TOKEN, "--enable-legacy-api-token"],
                    tmp_path / "label-studio.log",
                    {"SSRF_PROTECTION_ENABLED": "false", "ML_BLOCK_LOCAL_IP": "false",
                     "LABEL_STUDIO_BASE_DATA_DIR": str(tmp_path / "ls-data"), "LABEL_STUDIO_HOST": base})
    try:
        wait_for(base + "/health", process, 300, tmp_path / "label-studio.log")
        yield base
    finally:
        stop(process)


def stop(process):
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def start_backend(model, work, base_config, ls_base, log):
    """The project's backend for ``model`` on a free port, fetching annotations from ``ls_base``; (process,
    address) once it answers."""
    base = f"http://127.0.0.1:{free_port()}"
    backend = start([sys.executable, "-m", "globalpointer", "label-studio-backend", "--model", model, "--port",
                     base.rsplit(":", 1)[1], "--work-dir", work, "--base-config", base_config], log,
                    {"LABEL_STUDIO_URL": ls_base, "LABEL_STUDIO_API_KEY": TOKEN})  # where the round fetches from
    try:
        wait_for(base + "/health", backend, 120, log)
    except AssertionError:
        stop(backend)
        raise
    return backend, base


def trained_round(backend_base, work):
    """The /health of the backend once the round it was asked for serves its new model (written under
    ``work``)."""
    new_version = os.path.normpath(work)
    deadline = time.time() + 600
    while time.time() < deadline:
        health = json.load(urllib.request.urlopen(backend_base + "/health", timeout=5))
        if health["training"] == "idle" and health["model_version"].startswith(new_version):
            assert health["last_round"]["state"] == "served", health
            return health
        assert health["last_round"].get("state") != "failed", health
        time.sleep(2)
    raise AssertionError(f"no new model within 600 s: {health}")


def test_label_studio_pre_annotates_opened_tasks_and_serves_the_retrained_model(label_studio, trained, tmp_path):
    from synthetic import tiny_config

    ls_base = label_studio
    model = str(trained / "run" / "best")
    backend, backend_base = start_backend(model, str(tmp_path / "rounds"), tiny_config(tmp_path, train__epochs=1),
                                          ls_base, tmp_path / "backend.log")
    try:
        labels = json.loads((trained / "run" / "best" / "labels.json").read_text())
        status, project = api(ls_base, "/api/projects", {"title": "GlobalPointer NER", "label_config": labeling_config(labels),
                                                         "evaluate_predictions_automatically": True})
        assert status == 201, project
        records = [json.loads(line) for line in open(trained / "dev.jsonl", encoding="utf-8")][:11]
        records.insert(8, {"text": FILLER[:12], "entities": []})  # a text the model finds nothing in, not annotated
        status, _ = api(ls_base, f"/api/projects/{project['id']}/import", [{"text": r["text"]} for r in records])
        assert status == 201
        status, connected = api(ls_base, "/api/ml", {"url": backend_base, "project": project["id"], "title": "gp"})
        assert status == 201, connected
        status, tasks = api(ls_base, f"/api/tasks?project={project['id']}&page_size=100")
        tasks = sorted(tasks["tasks"], key=lambda task: task["id"])
        assert len(tasks) == 12

        # opening a task puts the model's entities on it as a prediction
        import globalpointer

        ner = globalpointer.load(model)
        for task, record in zip(tasks[:4], records):
            status, opened = api(ls_base, f"/api/tasks/{task['id']}")
            assert status == 200
            status, predictions = api(ls_base, f"/api/predictions?task={task['id']}")
            assert len(predictions) == 1 and predictions[0]["model_version"] == os.path.normpath(model)
            regions = predictions[0]["result"]
            assert sorted((r["value"]["start"], r["value"]["end"], r["value"]["labels"][0]) for r in regions) == \
                sorted((e["start"], e["end"], e["type"]) for e in ner(record["text"]))
            # every task has a score, the text's certainty, so uncertainty sampling orders them all
            assert predictions[0]["score"] == pytest.approx(
                certainty(ner.extractor.records([record["text"]], margins=True)[0]), abs=1e-5)
        assert ner(FILLER[:12]) == []
        status, _ = api(ls_base, f"/api/tasks/{tasks[8]['id']}")
        assert predictions_of(ls_base, tasks[8])["score"] == pytest.approx(
            certainty(ner.extractor.records([FILLER[:12]], margins=True)[0]), abs=1e-5)

        # annotate a few (the gold spans), then start training from the project's Model settings
        for task, record in zip(tasks[:6], records):
            result = [{"from_name": "label", "to_name": "text", "type": "labels",
                       "value": {"start": e["start"], "end": e["end"], "labels": [e["type"]]}}
                      for e in record["entities"]]
            status, _ = api(ls_base, f"/api/tasks/{task['id']}/annotations", {"result": result})
            assert status == 201
        status, answer = api(ls_base, f"/api/ml/{connected['id']}/train", {})
        assert status == 200, answer

        # the backend trains in the background and swaps the new model in once it is written
        health = trained_round(backend_base, str(tmp_path / "rounds"))
        version = health["model_version"]
        round_dir = os.path.dirname(os.path.dirname(version))
        exported = json.load(open(os.path.join(round_dir, "annotations.json"), encoding="utf-8"))
        assert len(exported) == 6  # the annotated tasks, fetched from Label Studio with the token it was given
        new = globalpointer.load(version)

        # a task imported and opened now gets the new model's prediction, with its version
        record = records[11]
        status, imported = api(ls_base, f"/api/projects/{project['id']}/import", [{"text": record["text"]}])
        status, tasks = api(ls_base, f"/api/tasks?project={project['id']}&page_size=100")
        task = max(tasks["tasks"], key=lambda task: task["id"])
        status, _ = api(ls_base, f"/api/tasks/{task['id']}")
        status, predictions = api(ls_base, f"/api/predictions?task={task['id']}")
        assert [p["model_version"] for p in predictions] == [version]
        assert sorted((r["value"]["start"], r["value"]["end"], r["value"]["labels"][0])
                      for r in predictions[0]["result"]) == \
            sorted((e["start"], e["end"], e["type"]) for e in new(record["text"]))
    finally:
        stop(backend)


def test_label_studio_shows_a_relation_models_triples_and_trains_a_round_on_annotated_ones(label_studio, relation_run,
                                                                                         tmp_path):
    """Relations as Label Studio stores them: the predictions' relation results between the model's regions,
    annotations with relation results, and its export read back by the round that trains on them."""
    import globalpointer
    from globalpointer.data.readers import read_records
    from synthetic import relation_lines, write_lines

    ls_base = label_studio
    model = str(relation_run / "run" / "best")
    ner = globalpointer.load(model)
    backend, backend_base = start_backend(model, str(tmp_path / "rounds"), str(relation_run / "config.yaml"), ls_base,
                                          tmp_path / "backend.log")
    try:
        status, project = api(ls_base, "/api/projects", {"title": "GlobalPointer relations",
                                                         "label_config": labeling_config(ner.labels, ner.relations)})
        assert status == 201, project
        records = [read_records(write_lines(tmp_path / f"line{index}.json", [line]))[0]
                   for index, line in enumerate(relation_lines(6, 5))]
        status, _ = api(ls_base, f"/api/projects/{project['id']}/import", [{"text": r.text} for r in records])
        assert status == 201
        status, connected = api(ls_base, "/api/ml", {"url": backend_base, "project": project["id"], "title": "gp"})
        assert status == 201, connected
        status, tasks = api(ls_base, f"/api/tasks?project={project['id']}&page_size=100")
        tasks = sorted(tasks["tasks"], key=lambda task: task["id"])
        assert len(tasks) == len(records)

        # opening a task puts the model's triples on it: relation results between its labelled regions
        found = 0
        for task, record in zip(tasks, records):
            status, _ = api(ls_base, f"/api/tasks/{task['id']}")
            assert status == 200
            result = predictions_of(ls_base, task)["result"]
            links = label_studio_links(result)
            expected = ner(record.text)
            assert links == [(r["type"], expected["entities"][r["head"]]["text"], expected["entities"][r["tail"]]["text"])
                             for r in expected["relations"]]
            found += len(links)
        assert found, "the model predicted no relation on any task"

        # annotate every task with its gold regions and relations, then train a round on them
        for task, record in zip(tasks, records):
            status, _ = api(ls_base, f"/api/tasks/{task['id']}/annotations", {"result": label_studio_result(record)})
            assert status == 201
        status, answer = api(ls_base, f"/api/ml/{connected['id']}/train", {})
        assert status == 200, answer
        health = trained_round(backend_base, str(tmp_path / "rounds"))
        round_dir = os.path.dirname(os.path.dirname(health["model_version"]))

        # what Label Studio exported is read back with every annotated relation, its entity types too
        exported = read_records(os.path.join(round_dir, "annotations.json"))
        assert sorted(map(triples, exported)) == sorted(map(triples, records))
        assert globalpointer.load(health["model_version"]).relations == ner.relations
    finally:
        stop(backend)


@pytest.mark.parametrize("sample", ["duie-sample", "events-sample"])
def test_convert_writes_tasks_label_studio_imports_as_annotated_and_exports_back(label_studio, tmp_path, sample):
    """A labelled file as Label Studio tasks whose annotation is its labelling (relations, or events as
    triggers linked to their arguments), imported, exported by Label Studio and read back as the records
    it came from."""
    from globalpointer.cli import main as cli
    from globalpointer.data.readers import read_records

    source = os.path.join(ROOT, "data", sample, "dev.json")
    original = read_records(source)[:20]
    assert cli(["convert", source, str(tmp_path / "tasks.json"), "--take", "20", "--output-format",
                "label-studio"]) == 0
    types = sorted({e.type for r in original for e in r.entities})
    kinds = sorted({r.type for record in original for r in record.relations})
    status, project = api(label_studio, "/api/projects", {"title": sample, "label_config": labeling_config(types, kinds)})
    assert status == 201, project
    status, imported = api(label_studio, f"/api/projects/{project['id']}/import",
                           json.loads((tmp_path / "tasks.json").read_text(encoding="utf-8")))
    assert status == 201 and imported["annotation_count"] == 20, imported
    status, exported = api(label_studio, f"/api/projects/{project['id']}/export?exportType=JSON")
    assert status == 200 and len(exported) == 20
    (tmp_path / "export.json").write_text(json.dumps(exported), encoding="utf-8")
    back = read_records(str(tmp_path / "export.json"))
    assert [r.text for r in back] == [r.text for r in original]
    assert [sorted(e.key for e in r.entities) for r in back] == [sorted(e.key for e in r.entities) for r in original]
    assert [triples(r) for r in back] == [triples(r) for r in original]
    assert [sorted(e.key for e in r.events) for r in back] == [sorted(e.key for e in r.events) for r in original]
    assert any(r.events for r in back) == (sample == "events-sample")
