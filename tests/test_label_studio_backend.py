"""The Label Studio ML backend's protocol, against its application in-process and a stand-in for
Label Studio's export API (tests/test_label_studio_live.py runs it with a real Label Studio)."""
import http.server
import json
import os
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import globalpointer
from globalpointer.deploy.label_studio_backend import create_app, read_interface
from globalpointer.inference.doubt import certainty
from globalpointer.inference.label_studio import labeling_config

# a project's own names for the tags, a text field other than "text", and only two of the types
INTERFACE = """<View>
  <Labels name="ner" toName="doc"><Label value="LOC"/><Label value="PER"/></Labels>
  <Text name="doc" value="$sentence"/>
</View>"""


def texts_of(trained, count):
    return [json.loads(line)["text"] for line in open(trained / "dev.jsonl", encoding="utf-8")][:count]


@pytest.fixture(scope="module")
def client_and_model(trained, tmp_path_factory):
    from fastapi.testclient import TestClient

    model = str(trained / "run" / "best")
    ner = globalpointer.load(model)
    work = tmp_path_factory.mktemp("label-studio")
    app = create_app(model, ner, str(work / "rounds"), os.path.join(model, "config.yaml"))
    with TestClient(app) as client:
        yield client, ner, app


def test_the_interface_names_the_tags_and_the_text_field():
    assert read_interface(INTERFACE) == ("ner", "doc", "sentence", ["LOC", "PER"], [])
    assert read_interface(labeling_config(["A", "B"])) == ("label", "text", "text", ["A", "B"], [])
    assert read_interface(labeling_config(["A"], ["r", "s"])).relations == ["r", "s"]
    with pytest.raises(ValueError, match="no <Labels> tag on a <Text> tag"):
        read_interface('<View><Choices name="c" toName="t"/><Text name="t" value="$text"/></View>')
    with pytest.raises(ValueError, match="not readable XML"):
        read_interface("<View><Labels>")


def test_predictions_use_the_projects_names_and_order_the_queue(client_and_model, trained):
    client, ner, _ = client_and_model
    assert client.get("/health").json()["status"] == "UP"
    version = client.post("/setup", json={"project": "1.1700000000", "schema": INTERFACE}).json()["model_version"]
    assert version == os.path.normpath(str(trained / "run" / "best"))
    texts = texts_of(trained, 8)
    answer = client.post("/predict", json={"tasks": [{"id": i, "data": {"sentence": t}} for i, t in enumerate(texts)],
                                           "label_config": INTERFACE, "project": "1.1700000000"})
    assert answer.status_code == 200
    results = answer.json()["results"]
    assert len(results) == len(texts)
    for text, prediction in zip(texts, results):
        expected = [e for e in ner(text) if e["type"] in ("LOC", "PER")]  # ORG is not offered by the project
        regions = prediction["result"]
        # the backend scores the 8 texts in one pass, ner(text) each alone: the sums of other matrix shapes may
        # round the sixth decimal the other way (2e-6: a unit of it, which 1e-6 misses by binary rounding)
        assert [(r["value"]["start"], r["value"]["end"], r["value"]["labels"][0]) for r in regions] == \
            [(e["start"], e["end"], e["type"]) for e in expected]
        assert [r["score"] for r in regions] == pytest.approx([e["score"] for e in expected], abs=2e-6)
        assert all(r["from_name"] == "ner" and r["to_name"] == "doc" and r["type"] == "labels" for r in regions)
        assert all(text[r["value"]["start"]:r["value"]["end"]] == r["value"]["text"] for r in regions)
        assert prediction["model_version"] == version
        # every task, with entities or without: the text's certainty, which uncertainty sampling opens lowest first
        assert prediction["score"] == pytest.approx(certainty(ner.extractor.records([text], margins=True)[0]), abs=2e-6)



def test_the_backend_predict_and_select_give_a_text_the_same_score(client_and_model, trained, tmp_path, caplog):
    """One model, one file of texts: the score the backend gives each task is the certainty predict writes
    for its line, and select picks the lines in the order of those certainties."""
    from globalpointer.cli import main, predict_main

    client, _, _ = client_and_model
    texts = list(dict.fromkeys(texts_of(trained, 24)))
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    model = str(trained / "run" / "best")
    assert predict_main(["--model", model, "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.jsonl"),
                         "--certainty"]) == 0
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [line["text"] for line in written] == texts
    scores = [line["certainty"] for line in written]
    assert len(set(scores)) >= 3 and min(scores) < 1  # scores that order the texts
    answer = client.post("/predict", json={"tasks": [{"id": i, "data": {"sentence": t}} for i, t in enumerate(texts)],
                                           "label_config": INTERFACE})
    assert [result["score"] for result in answer.json()["results"]] == pytest.approx(scores, abs=2e-6)
    count = len(texts) // 2
    with caplog.at_level("INFO", logger="globalpointer"):
        assert main(["select", "--model", model, "--input", str(tmp_path / "in.txt"), "--count", str(count),
                     "--max-similarity", "1", "--output", str(tmp_path / "next.txt")]) == 0
    least_certain = sorted(range(len(texts)), key=lambda i: (scores[i], i))[:count]
    picked = (tmp_path / "next.txt").read_text(encoding="utf-8").splitlines()
    assert [scores[texts.index(text)] for text in picked] == pytest.approx([scores[i] for i in least_certain], abs=2e-6)
    assert f"certainty {scores[least_certain[0]]:.4g} to {scores[least_certain[-1]]:.4g}" in caplog.text

def test_bad_requests_are_told_what_is_wrong(client_and_model):
    client, _, _ = client_and_model
    answer = client.post("/predict", json={"tasks": [{"id": 1, "data": {"text": "x"}}], "label_config": INTERFACE})
    assert answer.status_code == 400 and "tasks[0] has no text in data.sentence" in answer.json()["detail"]
    answer = client.post("/predict", json={"tasks": [{"id": 1, "data": {"sentence": "x"}}]})
    assert answer.status_code == 400 and "no label_config" in answer.json()["detail"]
    answer = client.post("/predict", json={"tasks": "x", "label_config": INTERFACE})
    assert answer.status_code == 400 and "a list of Label Studio tasks" in answer.json()["detail"]
    answer = client.post("/webhook", json={"action": "PROJECT_UPDATED", "project": {"id": 1}})
    assert answer.status_code == 200 and answer.json()["status"] == "ignored"
    answer = client.post("/webhook", json={"action": "START_TRAINING"})
    assert answer.status_code == 400 and "needs its \"project\" object" in answer.json()["detail"]


class FakeLabelStudio(http.server.ThreadingHTTPServer):
    """Label Studio's export API for one project (7), with a legacy token: every request is recorded
    (path, Authorization); without ``tasks`` or the token, the answer is ``status`` (a redirect to
    ``location``, or 401)."""

    def __init__(self, tasks=None, token=None, status=401, location=None):
        self.tasks, self.token, self.requests, self.status, self.location = tasks, token, [], status, location
        super().__init__(("127.0.0.1", 0), ExportHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class ExportHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.requests.append((self.path, self.headers.get("Authorization")))
        ok = self.server.tasks is not None and self.path.startswith("/api/projects/7/export?exportType=JSON") and \
            self.headers.get("Authorization") == f"Token {self.server.token}"
        body = json.dumps(self.server.tasks if ok else {"detail": "no"}).encode()
        self.send_response(200 if ok else self.server.status)
        if self.server.location and not ok:
            self.send_header("Location", self.server.location)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def annotated_tasks(trained, count):
    tasks = []
    for index, line in enumerate(open(trained / "dev.jsonl", encoding="utf-8")):
        if index == count:
            break
        record = json.loads(line)
        result = [{"from_name": "label", "to_name": "text", "type": "labels",
                   "value": {"start": e["start"], "end": e["end"], "labels": [e["type"]]}} for e in record["entities"]]
        tasks.append({"id": index, "data": {"text": record["text"]}, "annotations": [{"id": index, "result": result}]})
    return tasks


@pytest.mark.slow
def test_a_training_round_swaps_in_a_new_model_and_a_failed_one_changes_nothing(trained, tmp_path):
    from fastapi.testclient import TestClient
    from synthetic import tiny_config

    model = str(trained / "run" / "best")
    base = tiny_config(tmp_path, train__epochs=1)
    label_studio = FakeLabelStudio(annotated_tasks(trained, 12), "secret-token")
    app = create_app(model, globalpointer.load(model), str(tmp_path / "rounds"), base, basic_auth=("studio", "pw"))
    interface = labeling_config(["LOC", "ORG", "PER"])
    with TestClient(app) as client:
        client.auth = ("studio", "pw")  # as Label Studio connects it: only then does /setup say where it is
        project = {"id": 7, "label_config": interface}
        answer = client.post("/webhook", json={"action": "START_TRAINING", "project": project})
        assert answer.status_code == 409 and "no Label Studio address and token" in answer.json()["detail"]
        client.post("/setup", json={"project": "7.1", "schema": interface, "hostname": label_studio.url,
                                    "access_token": "secret-token"})
        assert client.post("/webhook", json={"action": "START_TRAINING", "project": project}).status_code == 201
        assert app.state.trainer.wait_idle(300)
        health = client.get("/health").json()
        new_version = os.path.normpath(str(tmp_path / "rounds" / "round-001" / "run" / "best"))
        assert health["last_round"]["state"] == "served" and health["model_version"] == new_version
        assert client.post("/setup", json={"project": "7.1", "schema": interface}).json()["model_version"] == new_version
        answer = client.post("/predict", json={"tasks": [{"id": 1, "data": {"text": "张三在北京大学"}}],
                                               "label_config": interface})
        assert answer.json()["results"][0]["model_version"] == new_version
        round_dir = tmp_path / "rounds" / "round-001"
        assert sorted(os.listdir(round_dir)) == ["annotations.json", "config.yaml", "dev.jsonl", "run", "train.jsonl",
                                                 "train.log"]
        assert sum(1 for _ in open(round_dir / "train.jsonl")) == 240 + 12  # the base config's texts and the project's
        assert label_studio.requests[0][0] == "/api/projects/7/export?exportType=JSON&download_all_tasks=false"

        # a round that cannot train: the served model and its version stay
        label_studio.tasks = [{"id": 1, "data": {"text": "x"}, "annotations": [{"result": "not a list"}]}]
        (tmp_path / "broken").mkdir()
        broken = tiny_config(tmp_path / "broken", model__encoder=str(tmp_path / "no-such-encoder"))
        app.state.trainer.base_config = broken
        assert client.post("/webhook", json={"action": "ANNOTATION_CREATED", "project": project}).status_code == 201
        assert app.state.trainer.wait_idle(300)
        health = client.get("/health").json()
        assert health["last_round"]["state"] == "failed" and "no-such-encoder" in health["last_round"]["error"]
        assert health["model_version"] == new_version
        assert client.post("/predict", json={"tasks": [{"id": 1, "data": {"text": "张三"}}],
                                             "label_config": interface}).status_code == 200
        assert os.path.isdir(round_dir / "run" / "best")  # earlier rounds are kept
    label_studio.shutdown()


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=False) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=10)


@given(body=st.dictionaries(st.sampled_from(["tasks", "label_config", "schema", "action", "project", "params"]), JSON)
       | JSON,
       route=st.sampled_from(["/predict", "/setup", "/webhook"]))
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_body_takes_the_backend_down(client_and_model, body, route):
    """Whatever JSON reaches a route, the answer is a status that says whose fault it is, never a 500,
    and the backend answers the next request."""
    client, _, app = client_and_model
    answer = client.post(route, json=body)
    assert answer.status_code in (200, 201, 400, 409, 422), (route, body, answer.text)
    if answer.status_code >= 400:
        assert answer.json()["detail"]
    assert client.get("/health").json()["status"] == "UP"
    assert app.state.trainer.wanted is None  # no training was asked for without a connection


@given(texts=st.lists(st.text(max_size=60), min_size=1, max_size=4))
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_regions_point_at_their_text_whatever_the_text(client_and_model, texts):
    client, _, _ = client_and_model
    answer = client.post("/predict", json={"tasks": [{"id": i, "data": {"sentence": t}} for i, t in enumerate(texts)],
                                           "label_config": INTERFACE})
    assert answer.status_code == 200, answer.text
    for text, prediction in zip(texts, answer.json()["results"]):
        for region in prediction["result"]:
            value = region["value"]
            assert 0 <= value["start"] < value["end"] <= len(text) and text[value["start"]:value["end"]] == value["text"]
            assert 0 < region["score"] <= 1


@given(tasks=st.lists(st.fixed_dictionaries({"id": JSON, "data": JSON | st.dictionaries(
    st.sampled_from(["sentence", "text"]), JSON)}) | JSON, max_size=3))
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
def test_malformed_tasks_are_named_not_crashed_on(client_and_model, tasks):
    client, _, _ = client_and_model
    answer = client.post("/predict", json={"tasks": tasks, "label_config": INTERFACE})
    assert answer.status_code in (200, 400), answer.text
    if answer.status_code == 400:
        assert "tasks" in answer.json()["detail"]


def test_basic_authentication_guards_every_route(trained, tmp_path):
    """Started with BASIC_AUTH_USER / BASIC_AUTH_PASS, the backend answers only requests that carry
    them (Label Studio sends them when the model is connected with basic authentication)."""
    from fastapi.testclient import TestClient

    model = str(trained / "run" / "best")
    app = create_app(model, globalpointer.load(model), str(tmp_path / "rounds"), os.path.join(model, "config.yaml"),
                     basic_auth=("studio", "s3cret"))
    with TestClient(app) as client:
        for route, body in (("/health", None), ("/setup", {"schema": INTERFACE}),
                            ("/webhook", {"action": "START_TRAINING", "project": {"id": 1}})):
            for auth in (None, ("studio", "wrong"), ("other", "s3cret")):
                answer = client.request("GET" if body is None else "POST", route, json=body, auth=auth)
                assert answer.status_code == 401 and "basic authentication" in answer.json()["detail"]
                assert answer.headers["WWW-Authenticate"].startswith("Basic")
        assert client.get("/health", auth=("studio", "s3cret")).json()["status"] == "UP"
        answer = client.post("/predict", auth=("studio", "s3cret"), json={
            "tasks": [{"id": 1, "data": {"sentence": "张三在北京"}}], "label_config": INTERFACE})
        assert answer.status_code == 200 and len(answer.json()["results"]) == 1
    assert app.state.trainer.wanted is None


# ---- where the project owner's token may go (docs/RELIABILITY.md, attack 4, cases 1-4) -------------------

def backend(trained, tmp_path, **keywords):
    model = str(trained / "run" / "best")
    return create_app(model, globalpointer.load(model), str(tmp_path / "rounds"), os.path.join(model, "config.yaml"),
                      **keywords)


def start_training(client, app, project_id=7):
    answer = client.post("/webhook", json={"action": "START_TRAINING",
                                           "project": {"id": project_id, "label_config": INTERFACE}})
    if answer.status_code == 201:
        assert app.state.trainer.wait_idle(60)
    return answer


def test_an_unauthenticated_setup_never_chooses_where_the_token_goes(trained, tmp_path):
    from fastapi.testclient import TestClient

    attacker = FakeLabelStudio()
    app = backend(trained, tmp_path)
    with TestClient(app) as client:
        client.post("/setup", json={"schema": INTERFACE, "hostname": attacker.url, "access_token": ""})
        client.post("/setup", json={"schema": INTERFACE, "hostname": attacker.url, "access_token": "owner-token"})
        answer = start_training(client, app)
        assert answer.status_code == 409 and "--label-studio-url" in answer.json()["detail"]
        assert "owner-token" not in json.dumps(client.get("/health").json())
    assert attacker.requests == []
    attacker.shutdown()


def test_an_authenticated_setup_gives_address_and_token_together_and_once(trained, tmp_path):
    from fastapi.testclient import TestClient

    attacker, studio = FakeLabelStudio(), FakeLabelStudio()
    app = backend(trained, tmp_path, basic_auth=("studio", "pw"))
    with TestClient(app) as client:
        client.auth = ("studio", "pw")
        # the attack of case 1: its own address with an empty token first, then Label Studio's own /setup
        client.post("/setup", json={"schema": INTERFACE, "hostname": attacker.url, "access_token": ""})
        client.post("/setup", json={"schema": INTERFACE, "hostname": studio.url, "access_token": "owner-token"})
        client.post("/setup", json={"schema": INTERFACE, "hostname": attacker.url, "access_token": "other"})
        assert start_training(client, app).status_code == 201
        assert app.state.trainer.last["state"] == "failed"  # the stand-in answers 401
        assert "owner-token" not in json.dumps(client.get("/health").json())
    assert attacker.requests == []
    assert studio.requests == [("/api/projects/7/export?exportType=JSON&download_all_tasks=false",
                                "Token owner-token")]
    for path in (tmp_path / "rounds").rglob("*"):
        assert not path.is_file() or b"owner-token" not in path.read_bytes()
    attacker.shutdown()
    studio.shutdown()


@pytest.mark.parametrize("hostname", ["file:///etc/passwd#", "file:///dev/zero#", "ftp://127.0.0.1/x",
                                      "http://user:pw@127.0.0.1:1", "127.0.0.1:8080", "http:///nohost"])
def test_only_an_http_address_is_label_studios(trained, tmp_path, hostname):
    from fastapi.testclient import TestClient

    from globalpointer.deploy.label_studio_backend import label_studio_address

    app = backend(trained, tmp_path, basic_auth=("studio", "pw"))
    with TestClient(app) as client:
        client.auth = ("studio", "pw")
        answer = client.post("/setup", json={"schema": INTERFACE, "hostname": hostname, "access_token": "t"})
        assert answer.status_code == 400 and "http:// or https://" in answer.json()["detail"]
        assert start_training(client, app).status_code == 409
    with pytest.raises(ValueError, match="http:// or https://"):
        label_studio_address(hostname, "--label-studio-url")


def test_the_token_is_not_sent_on_to_another_origin(trained, tmp_path, caplog):
    from fastapi.testclient import TestClient

    elsewhere = FakeLabelStudio()
    studio = FakeLabelStudio(status=302, location=elsewhere.url + "/collect")
    app = backend(trained, tmp_path, label_studio_url=studio.url, api_key="owner-token")
    with TestClient(app) as client:
        assert start_training(client, app).status_code == 201
    assert studio.requests[0][1] == "Token owner-token"
    assert elsewhere.requests == [("/collect", None)]
    studio.location = "ftp://127.0.0.1/anything"  # urllib follows ftp: redirects of its own accord
    with TestClient(app) as client, caplog.at_level("ERROR", logger="globalpointer"):
        assert start_training(client, app).status_code == 201
        assert "annotations could not be fetched" in client.get("/health").json()["last_round"]["error"]
    assert "redirect to a ftp: URL refused" in caplog.text
    studio.shutdown()
    elsewhere.shutdown()


@pytest.mark.parametrize("project_id", ["1/../../users/1/token?x=", None, [1], True, 0, -3, 1.5, "7"])
def test_a_project_id_is_a_positive_integer(trained, tmp_path, project_id):
    from fastapi.testclient import TestClient

    studio = FakeLabelStudio()
    app = backend(trained, tmp_path, label_studio_url=studio.url, api_key="owner-token")
    with TestClient(app) as client:
        answer = start_training(client, app, project_id)
        assert answer.status_code == 400 and "project.id must be a positive integer" in answer.json()["detail"]
    assert studio.requests == [] and app.state.trainer.wanted is None
    studio.shutdown()


def test_predict_has_the_services_bounds(trained, tmp_path):
    from fastapi.testclient import TestClient

    app = backend(trained, tmp_path)
    with TestClient(app) as client:
        for texts, message in ((["a"] * 257, "serve.max_texts is 256"),
                               (["a" * 100001], "tasks[0] has 100001 characters; serve.max_text_chars is 100000"),
                               (["张三" * 20000, "李四" * 20000], "serve.max_request_tokens is 65536")):
            answer = client.post("/predict", json={"tasks": [{"data": {"sentence": t}} for t in texts],
                                                   "label_config": INTERFACE})
            assert answer.status_code == 413 and message in answer.json()["detail"]
        answer = client.post("/predict", json={"tasks": [], "label_config": INTERFACE})
        assert answer.status_code == 200 and answer.json()["results"] == []


@pytest.mark.slow
def test_a_round_keeps_the_base_configs_data_entries(trained, tmp_path):
    """A base config whose files declare their types: the round trains on those entries as they are,
    plus the project's annotations as one more entry (every type), not on one merged plain file."""
    import yaml
    from fastapi.testclient import TestClient
    from synthetic import make_records, tiny_config, write_jsonl

    model = str(trained / "run" / "best")
    per = write_jsonl(tmp_path / "per.jsonl", [{**r, "entities": [e for e in r["entities"] if e["type"] == "PER"]}
                                               for r in make_records(60, 4)])
    base = tiny_config(tmp_path, train__epochs=1, data__train=[{"path": per, "types": ["PER"]}],
                       data__labels=["LOC", "ORG", "PER"])
    label_studio = FakeLabelStudio(annotated_tasks(trained, 12), "secret-token")
    app = create_app(model, globalpointer.load(model), str(tmp_path / "rounds"), base, label_studio.url,
                     "secret-token")
    with TestClient(app) as client:
        project = {"id": 7, "label_config": labeling_config(["LOC", "ORG", "PER"])}
        assert client.post("/webhook", json={"action": "START_TRAINING", "project": project}).status_code == 201
        assert app.state.trainer.wait_idle(300)
        assert client.get("/health").json()["last_round"]["state"] == "served"
    round_dir = tmp_path / "rounds" / "round-001"
    entries = yaml.safe_load((round_dir / "config.yaml").read_text(encoding="utf-8"))["data"]["train"]
    assert entries == [{"path": per, "format": "auto", "types": ["PER"]},
                       {"path": str(round_dir / "train.jsonl"), "format": "jsonl"}]
    assert sum(1 for _ in open(round_dir / "train.jsonl")) == 12  # the project's texts alone
    label_studio.shutdown()


@pytest.mark.slow
def test_a_project_labelling_some_types_declares_them_in_its_round(trained, tmp_path):
    """The project's interface offers PER alone (a model of LOC, ORG and PER): its annotations are an
    entry declaring PER, beside the base config's file (every type), so they teach nothing about
    LOC and ORG."""
    import yaml
    from fastapi.testclient import TestClient
    from synthetic import tiny_config

    model = str(trained / "run" / "best")
    base = tiny_config(tmp_path, train__epochs=1)
    tasks = annotated_tasks(trained, 12)
    for task in tasks:
        task["annotations"][0]["result"] = [r for r in task["annotations"][0]["result"] if r["value"]["labels"] == ["PER"]]
    label_studio = FakeLabelStudio(tasks, "secret-token")
    app = create_app(model, globalpointer.load(model), str(tmp_path / "rounds"), base, label_studio.url,
                     "secret-token")
    with TestClient(app) as client:
        project = {"id": 7, "label_config": labeling_config(["PER"])}
        assert client.post("/webhook", json={"action": "START_TRAINING", "project": project}).status_code == 201
        assert app.state.trainer.wait_idle(300)
        assert client.get("/health").json()["last_round"]["state"] == "served"
    round_dir = tmp_path / "rounds" / "round-001"
    config = yaml.safe_load((round_dir / "config.yaml").read_text(encoding="utf-8"))
    assert config["data"]["labels"] == ["LOC", "ORG", "PER"]
    assert config["data"]["train"] == [{"path": str(tmp_path / "train.jsonl"), "format": "auto"},
                                       {"path": str(round_dir / "train.jsonl"), "format": "jsonl", "types": ["PER"]}]
    log = (round_dir / "train.log").read_text(encoding="utf-8")
    assert f"{round_dir / 'train.jsonl'} [PER]: 12 texts" in log  # read as the entry that declares PER
    label_studio.shutdown()


def test_a_round_that_adds_a_type_declares_the_base_files_for_the_trained_types(tmp_path):
    """The base's plain training and dev files were labelled for the model's types: in a round that adds
    one (ORG), they are entries declaring LOC and PER, so their texts do not teach that ORG is absent."""
    from globalpointer.config import load_config, with_overrides
    from globalpointer.deploy.label_studio_backend import round_data
    from globalpointer.spans import Entity, Record
    from synthetic import tiny_config

    base = load_config(tiny_config(tmp_path))
    annotated = [Record("张三在北京大学", [Entity(3, 7, "ORG")])]
    for name in ("adds", "same"):
        (tmp_path / name).mkdir()
    config = with_overrides(base, round_data(base, annotated, ["LOC", "PER"], ["LOC", "ORG", "PER"],
                                             str(tmp_path / "adds")))
    assert config.data.labels == ["LOC", "PER", "ORG"]
    assert [(s.path, s.types) for s in config.data.train] == [(str(tmp_path / "train.jsonl"), ["LOC", "PER"]),
                                                             (str(tmp_path / "adds" / "train.jsonl"), [])]
    assert [(s.path, s.types) for s in config.data.dev] == [(str(tmp_path / "dev.jsonl"), ["LOC", "PER"])]
    # the project offers the model's types and no other: one file of every type, as the base's
    config = with_overrides(base, round_data(base, annotated, ["LOC", "ORG", "PER"], ["LOC", "ORG", "PER"],
                                             str(tmp_path / "same")))
    assert [(s.path, s.format, s.types) for s in config.data.train] == [(str(tmp_path / "same" / "train.jsonl"), "jsonl", [])]
    assert [(s.path, s.format, s.types) for s in config.data.dev] == [(str(tmp_path / "same" / "dev.jsonl"), "jsonl", [])]
    # the round's files are entries of their own format, so data.format stays what the base read its
    # files in: the format evaluate and calibrate read a user's file in with the round's model
    assert config.data.format == base.data.format


def test_annotations_of_a_label_no_longer_offered_are_left_out_and_counted(caplog):
    from globalpointer.deploy.label_studio_backend import offered_only
    from globalpointer.spans import Entity, Record

    records = [Record("张三在北京", [Entity(0, 2, "PER"), Entity(3, 5, "LOC")]), Record("北京", [Entity(0, 2, "LOC")])]
    with caplog.at_level("WARNING", logger="globalpointer"):
        kept = offered_only(records, ["PER"])
    assert [[e.type for e in r.entities] for r in kept] == [["PER"], []]
    assert "2 LOC annotation(s) left out: the labeling interface no longer offers it" in caplog.text


class EchoHandler(http.server.BaseHTTPRequestHandler):
    """A Label Studio address (or a proxy) that answers 400 with the request it got, headers and all."""

    def do_GET(self):
        body = f"bad request: {self.requestline}\n{self.headers}".encode()
        self.send_response(400)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_an_echoed_token_reaches_neither_the_log_nor_health(trained, tmp_path, caplog):
    from fastapi.testclient import TestClient

    echo = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    app = backend(trained, tmp_path, label_studio_url=f"http://127.0.0.1:{echo.server_address[1]}",
                  api_key="s3cret-token-value")
    with TestClient(app) as client, caplog.at_level("ERROR", logger="globalpointer"):
        assert start_training(client, app).status_code == 201
        health = client.get("/health").text
    echo.shutdown()
    assert "HTTP 400" in caplog.text and "[redacted]" in caplog.text
    assert "s3cret-token-value" not in caplog.text and "s3cret-token-value" not in health
    assert "bad request" not in health  # no upstream text in /health


@pytest.mark.parametrize("url", ["http://127.0.0.1:abc", "http://[::1", "http://127.0.0.1:70000", "http://:80"])
def test_a_broken_label_studio_address_is_one_line_at_start(url, capsys):
    from globalpointer.cli import main

    assert main(["label-studio-backend", "--model", "runs/none", "--label-studio-url", url]) == 2
    assert "--label-studio-url" in capsys.readouterr().err
