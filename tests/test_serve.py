"""The HTTP service, started as users start it and called over real HTTP on 127.0.0.1."""
import json
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest

from helpers import CHROMIUM, HEADLESS, ROOT, Service, call, free_port, rerecorded

pytestmark = pytest.mark.slow  # subprocesses / services: python -m pytest -m "not slow" leaves them out


@pytest.fixture(scope="module")
def service(trained):
    service = Service(trained / "run" / "best", "--set", "serve.max_texts=8", "--set", "serve.max_text_chars=500",
                      "--set", "serve.max_body_bytes=20000", "--set", "serve.batch_wait_ms=50")
    yield service.base
    service.stop()


def test_extract_gives_predict_py_entities(service, trained, tmp_path):
    from globalpointer.cli import predict_main

    texts = ["北京大学的张三", "", "  李四 ", "的一是在不了有" * 30 + "上海"]
    status, answer = call(service, "/v1/extract", {"texts": texts})
    assert status == 200 and [r["text"] for r in answer["results"]] == texts
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(tmp_path / "in.txt"),
                         "--output", str(tmp_path / "out.jsonl")]) == 0
    expected = [json.loads(line) for line in open(tmp_path / "out.jsonl", encoding="utf-8")]
    assert answer["results"] == expected
    assert any(e["text"] == "张三" for e in answer["results"][0]["entities"])


def test_labels_health_and_docs(service, trained):
    assert call(service, "/v1/labels") == (200, {"labels": json.load(open(trained / "run" / "best" / "labels.json"))})
    status, health = call(service, "/health")
    assert status == 200 and health["status"] == "ok" and health["backend"] == "dynamic"
    status, spec = call(service, "/openapi.json")
    assert status == 200 and "/v1/extract" in spec["paths"]
    paths, schemas = spec["paths"], spec["components"]["schemas"]
    assert [paths[path][method]["operationId"] for path, method in
            (("/v1/extract", "post"), ("/health", "get"), ("/v1/labels", "get"))] == ["extract", "health", "labels"]
    for path, model in (("/health", "Health"), ("/v1/labels", "Labels")):  # a generated client gets typed answers
        assert paths[path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(model)
    assert paths["/v1/extract"]["post"]["responses"]["413"]["content"]["application/json"]["schema"]["$ref"] \
        .endswith("Problem")
    texts = schemas["ExtractRequest"]["properties"]["texts"]
    assert texts["maxItems"] == 8 and texts["items"]["maxLength"] == 500  # the service fixture's limits
    with urllib.request.urlopen(service + "/docs", timeout=30) as page:
        assert page.status == 200 and b"swagger" in page.read().lower()


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)")
def test_the_docs_pages_render_without_internet(service, tmp_path):
    """/docs and /redoc draw the API with every host but this machine unreachable: their scripts come
    from the service, not from a CDN."""
    offline = ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--virtual-time-budget=10000"]
    for page, drawn in (("/docs", 'class="opblock-summary-path"'), ("/redoc", "operation/")):
        dom = subprocess.run([CHROMIUM, *HEADLESS, *offline, f"--user-data-dir={tmp_path / 'profile'}",
                              "--dump-dom", service + page], capture_output=True, text=True, timeout=120).stdout
        assert drawn in dom and "/v1/extract" in dom, (page, dom[-2000:])


def test_limits_and_malformed_requests_get_a_status_and_a_message(service):
    status, answer = call(service, "/v1/extract", {"texts": ["a"] * 9})
    assert status == 413 and "serve.max_texts is 8" in answer["detail"]
    status, answer = call(service, "/v1/extract", {"texts": ["ok", "长" * 501]})
    assert status == 413 and "texts[1] has 501 characters" in answer["detail"]
    status, answer = call(service, "/v1/extract", {"texts": ["x" * 400] * 60})
    assert status == 413 and "serve.max_body_bytes = 20000" in answer["detail"]
    status, answer = call(service, "/v1/extract", raw=b'{"texts": ["unclosed"')
    assert status == 422 and "JSON" in json.dumps(answer)
    status, answer = call(service, "/v1/extract", {"text": "a typo for texts"})
    assert status == 422 and "texts" in json.dumps(answer)
    status, answer = call(service, "/v1/extract", {"texts": [1, None]})
    assert status == 422
    assert call(service, "/v1/extract", {"texts": []}) == (200, {"results": []})
    assert call(service, "/health")[0] == 200  # still serving


def test_body_streamed_without_a_length_is_limited_too(service):
    host, port = service.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(b"POST /v1/extract HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b'{"texts": [' + b'"aaaa",' * 5000 + b'"a"]}'
        connection.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n0\r\n\r\n")
        answer = connection.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413")


def test_concurrent_requests_share_forward_passes_and_get_their_own_answers(trained, service):
    """16 one-text clients at once on one worker: fewer jobs than clients (the service's own count,
    logged when it stops), and each client its own text's entities."""
    import re

    texts = [f"{name}在{place}" for name in ("张三", "李四", "王五", "赵六") for place in ("北京", "上海", "广州", "深圳")]
    answers = [None] * len(texts)
    one_worker = Service(trained / "run" / "best", "--workers", "1", "--set", "serve.batch_wait_ms=200")
    try:
        start = threading.Barrier(len(texts))

        def client(index):
            start.wait()
            answers[index] = call(one_worker.base, "/v1/extract", {"texts": [texts[index]]})

        threads = [threading.Thread(target=client, args=(i,)) for i in range(len(texts))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        code, output = one_worker.stop()
    served = re.search(r"served (\d+) texts in (\d+) jobs of (\d+) forward passes", output)
    assert served and int(served.group(1)) == len(texts), output
    assert int(served.group(2)) <= len(texts) // 2 and int(served.group(3)) < len(texts), output
    assert all(a[0] == 200 and a[1]["results"][0]["text"] == t for a, t in zip(answers, texts))
    status, alone = call(service, "/v1/extract", {"texts": texts[:8]})
    status, rest = call(service, "/v1/extract", {"texts": texts[8:]})

    def without_scores(results):  # batch composition may move a score in its last digits, never a span
        return [[(e["start"], e["end"], e["type"]) for e in r["entities"]] for r in results]

    assert without_scores([a[1]["results"][0] for a in answers]) == without_scores(alone["results"] + rest["results"])




@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_lets_the_request_in_flight_finish(trained, workers):
    service = Service(trained / "run" / "best", "--workers", str(workers), "--set", "serve.max_texts=5000", "--set",
                      "serve.max_body_bytes=10000000", "--set", "serve.max_request_tokens=100000")
    texts = ["北京大学的张三在上海" * 20] * 400  # long enough to be in flight when the signal comes
    answer = {}
    client = threading.Thread(target=lambda: answer.update(result=call(service.base, "/v1/extract", {"texts": texts})))
    client.start()
    service.wait_until_predicting()
    code, output = service.stop()
    client.join(timeout=120)
    assert answer["result"][0] == 200 and len(answer["result"][1]["results"]) == 400, output
    assert f"{workers} worker process(es)" in output, output
    # every worker shuts down cleanly; one process re-raises the signal so that its exit status says
    # SIGTERM, uvicorn's supervisor of several exits 0 once they have
    assert output.count("Waiting for application shutdown") == workers, output
    assert output.count("Finished server process") == workers and "Traceback" not in output, output
    assert code == (-signal.SIGTERM if workers == 1 else 0), output


def test_worker_count_is_one_per_core_on_the_cpu_and_one_on_a_gpu():
    from globalpointer.deploy.serve import worker_count

    assert worker_count(0, on_gpu=False, cores=2) == 2
    assert worker_count(0, on_gpu=False, cores=16) == 16
    assert worker_count(0, on_gpu=True, cores=16) == 1
    assert worker_count(3, on_gpu=False, cores=2) == 3 and worker_count(2, on_gpu=True, cores=16) == 2


def test_workers_share_the_cores_and_a_worker_that_cannot_start_stops_the_service(trained, tmp_path):
    import shutil

    from globalpointer.runtime import cpu_thread_count

    service = Service(trained / "run" / "best", "--workers", "2")
    code, output = service.stop()
    assert code == 0 and output.count(f"{cpu_thread_count(0, 2)} thread(s)") >= 2, output
    broken = tmp_path / "broken"
    shutil.copytree(trained / "run" / "best", broken)
    weights = next(broken.glob("*.safetensors"))
    content = weights.read_bytes()  # the files are all there, as recorded: only loading the weights fails
    weights.write_bytes(b"\xff" * 100 + content[100:])
    rerecorded(broken)
    process = subprocess.run([sys.executable, "-m", "globalpointer", "serve", "--model", str(broken), "--port",
                              str(free_port()), "--workers", "2"], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert process.returncode == 2 and "a worker process could not start" in process.stderr, process.stderr
    assert "safetensors" in process.stderr, process.stderr


def test_a_service_is_one_model_whatever_happens_to_its_directory(trained, tmp_path):
    """serve --workers 2 from a directory that is then replaced, then removed, a worker killed after
    each: the restarted worker serves what the others serve (the digest /health says, the same
    entities), /health says what became of the directory, and the service stays up."""
    import shutil
    import time

    import psutil

    from globalpointer.model_directory.served import content_digest

    model = tmp_path / "best"
    shutil.copytree(trained / "run" / "best", model)
    digest = content_digest(str(model))
    cache = tmp_path / "cache"
    service = Service(model, "--workers", "2", "--set", "serve.batch_wait_ms=0", env={"GLOBALPOINTER_CACHE": str(cache)})
    texts = {"texts": ["北京大学的张三", "李四在上海"]}
    try:
        status, first = call(service.base, "/v1/extract", texts)
        assert status == 200
        status, health = call(service.base, "/health")
        assert health["model_digest"] == digest and health["model_on_disk"] == "unchanged", health
        for change, state in (("replaced", "replaced"), ("removed", "removed")):
            if change == "replaced":  # another model in its place: the thresholds of a different calibration
                (model / "thresholds.json").write_text(json.dumps({"min_score": 0.9}), encoding="utf-8")
            else:
                shutil.rmtree(model)
            started = service.output.count("Application startup complete")
            victim = next(child for child in psutil.Process(service.process.pid).children()
                          if "resource_tracker" not in " ".join(child.cmdline()))
            victim.kill()
            deadline = time.time() + 120
            while service.output.count("Application startup complete") <= started:
                assert time.time() < deadline and service.process.poll() is None, service.output
                time.sleep(0.2)
            for _ in range(12):  # both workers answer, the new one among them
                status, health = call(service.base, "/health")
                assert status == 200 and health["model_digest"] == digest and health["model_on_disk"] == state, health
                assert call(service.base, "/v1/extract", texts) == (200, first)
        assert "Traceback" not in service.output
    finally:
        code, output = service.stop()
    assert code == 0, output
    assert (cache / "served").is_dir() and not list((cache / "served").iterdir())  # its copy removed at the stop


def test_a_worker_that_cannot_restart_while_others_serve_is_started_again(monkeypatch):
    """The supervisor of several workers: one whose start fails while another serves is said and started
    again after a delay; one that fails with no other serving stops the service, as at its start."""
    import time

    from uvicorn.config import STARTUP_FAILURE

    from globalpointer.deploy import serve
    from uvicorn.supervisors import multiprocess

    class Worker:
        started = []

        def __init__(self, config=None, sockets=None, alive=True, exitcode=None, ready=True):
            self.alive, self.exitcode, self.ready, self.pid = alive, exitcode, ready, len(Worker.started)
            Worker.started.append(self)

        def start(self):
            pass

        def is_alive(self, timeout=5):
            return self.alive

        def is_ready(self, timeout=5):
            return self.ready

        def kill(self):
            pass

        def join(self):
            pass

    monkeypatch.setattr(multiprocess, "Process", Worker)
    monkeypatch.setattr(serve, "RESTART_DELAY_S", 0.2)
    monkeypatch.setattr(multiprocess.signal, "signal", lambda *args: None)  # no handlers in the test process
    config = type("Config", (), {"workers": 2, "timeout_worker_healthcheck": 1})()
    supervisor = serve.supervisor(config, [])
    failed = Worker(alive=False, exitcode=STARTUP_FAILURE, ready=False)
    supervisor.processes = [failed, Worker()]
    supervisor.keep_subprocess_alive()
    assert not supervisor.should_exit.is_set() and supervisor.processes[0] is failed  # not at once
    time.sleep(0.3)
    supervisor.keep_subprocess_alive()
    assert supervisor.processes[0] is not failed and supervisor.processes[0] is Worker.started[-1]
    alone = serve.supervisor(config, [])
    alone.processes = [Worker(alive=False, exitcode=STARTUP_FAILURE, ready=False), Worker(ready=False)]
    alone.keep_subprocess_alive()
    assert alone.should_exit.is_set()
