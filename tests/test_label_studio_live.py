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
from helpers import ROOT, call, free_port
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


@pytest.mark.skipif(not LABEL_STUDIO, reason="Label Studio is not installed (set LABEL_STUDIO_BIN)")
def test_label_studio_pre_annotates_opened_tasks_and_serves_the_retrained_model(trained, tmp_path):
    from synthetic import tiny_config

    ls_port, backend_port = free_port(), free_port()
    ls_base, backend_base = f"http://127.0.0.1:{ls_port}", f"http://127.0.0.1:{backend_port}"
    # Label Studio refuses to call local addresses unless told (its defaults guard a hosted server)
    label_studio = start([LABEL_STUDIO, "start", "--no-browser", "--internal-host", "127.0.0.1", "--port",
                          str(ls_port), "--data-dir", str(tmp_path / "ls-data"), "--username", "gp@example.com",
                          "--password", "gp-password-1", "--user-token", TOKEN, "--enable-legacy-api-token"],
                         tmp_path / "label-studio.log",
                         {"SSRF_PROTECTION_ENABLED": "false", "ML_BLOCK_LOCAL_IP": "false",
                          "LABEL_STUDIO_BASE_DATA_DIR": str(tmp_path / "ls-data"), "LABEL_STUDIO_HOST": ls_base})
    model = str(trained / "run" / "best")
    backend = start([sys.executable, "-m", "globalpointer", "label-studio-backend", "--model", model, "--port",
                     str(backend_port), "--work-dir", str(tmp_path / "rounds"),
                     "--base-config", tiny_config(tmp_path, train__epochs=1)], tmp_path / "backend.log",
                    {"LABEL_STUDIO_URL": ls_base, "LABEL_STUDIO_API_KEY": TOKEN})  # where the round fetches from
    try:
        wait_for(backend_base + "/health", backend, 120, tmp_path / "backend.log")
        wait_for(ls_base + "/health", label_studio, 300, tmp_path / "label-studio.log")
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
        new_version = os.path.normpath(str(tmp_path / "rounds"))
        deadline = time.time() + 600
        while time.time() < deadline:
            health = json.load(urllib.request.urlopen(backend_base + "/health", timeout=5))
            if health["training"] == "idle" and health["model_version"].startswith(new_version):
                break
            assert health["last_round"].get("state") != "failed", health
            time.sleep(2)
        else:
            raise AssertionError(f"no new model within 600 s: {health}")
        assert health["last_round"]["state"] == "served"
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
        for process in (backend, label_studio):
            process.terminate()
        for process in (backend, label_studio):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
