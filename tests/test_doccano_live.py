"""Relations through a real doccano on loopback: ``convert --output-format doccano`` imported into a
relation project through doccano's API, exported by doccano, and read back as the records it came from.

doccano lives in its own virtualenv (its pins clash with ours): ``.ci/run`` installs it
(requirements-doccano.txt) and sets ``DOCCANO_BIN``; without it the test is skipped."""
import io
import json
import os
import subprocess
import time
import zipfile

import pytest

from helpers import ROOT, free_port, triples

pytestmark = pytest.mark.slow

DOCCANO = os.environ.get("DOCCANO_BIN")
PASSWORD = "gp-password-1"


def started(command, log, env):
    return subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)


def stop(process):
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="module")
def doccano(tmp_path_factory):
    """A requests session logged in to a doccano started for this module (its web server and its task
    queue, which runs imports and exports), and its address."""
    requests = pytest.importorskip("requests")
    if not DOCCANO:
        pytest.skip("doccano is not installed (set DOCCANO_BIN)")
    home = tmp_path_factory.mktemp("doccano")
    bin_dir = os.path.dirname(DOCCANO)
    env = {**os.environ, "DOCCANO_HOME": str(home), "DATABASE_URL": f"sqlite:///{home}/db.sqlite3",
           "MEDIA_ROOT": str(home / "media"), "STANDALONE": "True",
           "DJANGO_SETTINGS_MODULE": "config.settings.production"}
    for step in (["init"], ["createuser", "--username", "gp", "--password", PASSWORD]):
        subprocess.run([DOCCANO, *step], env=env, check=True, capture_output=True, timeout=300)
    backend = subprocess.run([os.path.join(bin_dir, "python"), "-c", "import backend, os; "
                              "print(os.path.dirname(backend.__file__))"], env=env, check=True, capture_output=True,
                             text=True).stdout.strip()
    base = f"http://127.0.0.1:{free_port()}"
    # doccano's own `webserver` listens on every interface; its gunicorn app is started on loopback instead
    web = started([os.path.join(bin_dir, "gunicorn"), "--bind", base[len("http://"):], "--workers", "1", "--chdir",
                   backend, "config.wsgi"], home / "web.log", env)
    tasks = started([os.path.join(bin_dir, "celery"), "--app=config", f"--workdir={backend}", "worker",
                     "--concurrency=1"], home / "tasks.log", env)
    try:
        session = requests.Session()
        deadline = time.time() + 300
        while True:  # the health page answers 200 once the task queue answers too
            assert web.poll() is None and tasks.poll() is None, (home / "web.log").read_text()[-3000:]
            try:
                if session.get(base + "/v1/health/", timeout=5).status_code == 200:
                    break
            except (requests.ConnectionError, requests.Timeout):  # not up yet, or slow on a busy machine
                pass
            assert time.time() < deadline, (home / "tasks.log").read_text()[-3000:]
            time.sleep(1)
        answer = session.post(base + "/v1/auth/login/", json={"username": "gp", "password": PASSWORD})
        session.headers["Authorization"] = f"Token {answer.json()['key']}"
        session.cookies.clear()  # with the login's session cookie, doccano asks every call for a CSRF token
        yield session, base
    finally:
        stop(web)
        stop(tasks)


def finished(session, base, task_id):
    deadline = time.time() + 120
    while time.time() < deadline:
        status = session.get(f"{base}/v1/tasks/status/{task_id}").json()
        if status["ready"]:
            assert status["error"] is None, status
            return status["result"]
        time.sleep(0.5)
    raise AssertionError(f"doccano's task {task_id} did not finish within 120 s")


@pytest.mark.parametrize("sample, links", [("duie-sample", 340), ("events-sample", 2451)])
def test_convert_writes_what_doccano_imports_and_doccanos_export_reads_back(doccano, tmp_path, caplog, sample, links):
    """Relations, and events as triggers linked to their arguments."""
    from globalpointer.cli import main as cli
    from globalpointer.data.readers import read_records

    session, base = doccano
    source = os.path.join(ROOT, "data", sample, "dev.json")
    assert cli(["convert", source, str(tmp_path / "import.jsonl"), "--output-format", "doccano"]) == 0
    assert "'Allow overlapping spans'" in caplog.text  # mentions nest: the project must allow it
    project = session.post(base + "/v1/projects", json={
        "name": sample, "description": sample, "guideline": "", "project_type": "SequenceLabeling",
        "resourcetype": "SequenceLabelingProject", "use_relation": True, "allow_overlapping": True}).json()
    assert "id" in project, project
    with open(tmp_path / "import.jsonl", "rb") as handle:
        upload = session.post(base + "/v1/fp/process/", files={"filepond": ("import.jsonl", handle)}).text
    imported = session.post(f"{base}/v1/projects/{project['id']}/upload",
                            json={"uploadIds": [upload], "format": "JSONL", "task": "RelationExtraction"}).json()
    assert finished(session, base, imported["task_id"]) == {"error": []}
    exported = session.post(f"{base}/v1/projects/{project['id']}/download",
                            json={"format": "JSONL", "exportApproved": False}).json()
    finished(session, base, exported["task_id"])
    archive = session.get(f"{base}/v1/projects/{project['id']}/download", params={"taskId": exported["task_id"]})
    (tmp_path / "export.zip").write_bytes(archive.content)
    [member] = zipfile.ZipFile(io.BytesIO(archive.content)).namelist()
    assert member == "gp.jsonl"  # one file per annotator, doccano's ids for entities and relations

    original, back = read_records(source), read_records(str(tmp_path / "export.zip"))
    assert [r.text for r in back] == [r.text for r in original]
    assert [sorted(e.key for e in r.entities) for r in back] == [sorted(e.key for e in r.entities) for r in original]
    assert [triples(r) for r in back] == [triples(r) for r in original]
    assert sum(len(r.relations) for r in back) == links  # an event file's: the links that encode its events
    assert [sorted(e.key for e in r.events) for r in back] == [sorted(e.key for e in r.events) for r in original]
    first = json.loads(zipfile.ZipFile(tmp_path / "export.zip").read(member).splitlines()[0])
    assert first["entities"][0]["id"] != 0  # doccano's own ids, not the ones convert wrote
