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

from helpers import CHROMIUM, HEADLESS, ROOT, Service, call, free_port

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
    content = weights.read_bytes()  # the files are all there, at their sizes: only loading the weights fails
    weights.write_bytes(b"\xff" * 100 + content[100:])
    process = subprocess.run([sys.executable, "-m", "globalpointer", "serve", "--model", str(broken), "--port",
                              str(free_port()), "--workers", "2"], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert process.returncode == 2 and "a worker process could not start" in process.stderr, process.stderr
    assert "safetensors" in process.stderr, process.stderr
