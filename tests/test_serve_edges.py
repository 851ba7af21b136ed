"""The service's edges (docs/RELIABILITY.md, cases 12-14): a large request cannot starve small ones,
work for a client that left is dropped, SIGTERM ends the service in time whatever runs, every bad
request gets a 4xx with a message, an over-limit body is read so that the client sees its 413; and a
fuzz of the whole API from its own OpenAPI schema."""
import asyncio
import json
import socket
import threading
import time

import pytest

from helpers import Service, call

pytestmark = pytest.mark.slow


def batcher_of_passes(passes: int, seconds: float):
    """A MicroBatcher over fake forward passes: a request whose first text is "big" takes ``passes``
    passes of ``seconds``, any other two; ``log`` names the request of every pass run."""
    from globalpointer.deploy.batcher import MicroBatcher

    log = []

    def predict_steps(texts):
        count = passes if texts[0] == "big" else 2
        for done in range(1, count + 1):
            time.sleep(seconds)
            log.append(texts[0])
            yield count - done
        return [[] for _ in texts]

    return MicroBatcher(predict_steps, batch_texts=128, wait_ms=5, pass_chars=100), log


def test_a_small_request_waits_for_one_pass_of_a_large_one_not_all_of_it():
    batcher, log = batcher_of_passes(50, 0.02)

    async def scenario():
        big = asyncio.ensure_future(batcher.submit(["big"]))
        await asyncio.sleep(0.1)
        passes_before = len(log)
        await batcher.submit(["small"])
        return passes_before, big.done(), await big

    passes_before, big_done, _ = asyncio.run(scenario())
    batcher.close()
    assert not big_done and log.index("small") <= passes_before + 1  # the pass under way, then its own
    assert log[log.index("small") + 1] == "small"  # its last pass follows at once (SHORT_JOB_PASSES)
    assert log.count("big") == 50


def test_work_for_a_client_that_left_is_dropped_and_close_stops_between_passes():
    from globalpointer.deploy.batcher import ServiceClosing

    batcher, log = batcher_of_passes(1000, 0.01)

    async def leave_early():
        big = asyncio.ensure_future(batcher.submit(["big"]))
        await asyncio.sleep(0.1)
        big.cancel()  # what the endpoint does when the client disconnects
        await asyncio.sleep(0.05)  # the cancellation reaches the request's future on the loop's next turn
        passes = len(log)
        await asyncio.sleep(0.2)
        return passes

    passes = asyncio.run(leave_early())
    assert len(log) <= passes + 1 and batcher.dropped == 1  # at most the pass under way

    async def closing():
        big = asyncio.ensure_future(batcher.submit(["big"]))
        await asyncio.sleep(0.1)
        passes = len(log)
        await asyncio.get_running_loop().run_in_executor(None, batcher.close)
        with pytest.raises(ServiceClosing):
            await big
        return passes

    passes = asyncio.run(closing())
    assert len(log) <= passes + 1 and not batcher.thread.is_alive()


# ---- the real service, over HTTP on 127.0.0.1 ---------------------------------------------------------

@pytest.fixture(scope="module")
def slow_service(trained):
    """Two rows per forward pass: on the tiny model a long request then takes seconds, pass by pass."""
    service = Service(trained / "run" / "best", "--workers", "1", "--set", "serve.rows_per_pass=2",
                      "--set", "serve.max_body_bytes=400000", "--set", "serve.max_request_tokens=60000",
                      "--set", "serve.shutdown_timeout_s=3")
    yield service
    if service.process.poll() is None:
        service.stop()


BIG = {"texts": ["北京大学的张三在上海工作了很多年" * 120] * 30}  # 57,600 tokens: just within the budget


def test_small_requests_are_answered_while_a_maximal_one_runs(slow_service):
    big = {}
    started = time.monotonic()
    client = threading.Thread(target=lambda: big.update(answer=call(slow_service.base, "/v1/extract", BIG),
                                                        seconds=time.monotonic() - started))
    client.start()
    time.sleep(0.5)
    latencies = []
    for _ in range(10):
        begun = time.monotonic()
        status, answer = call(slow_service.base, "/v1/extract", {"texts": ["张三在北京"]})
        latencies.append(time.monotonic() - begun)
        assert status == 200 and answer["results"][0]["text"] == "张三在北京"
    small_done = time.monotonic() - started
    client.join(timeout=300)
    assert big["answer"][0] == 200 and len(big["answer"][1]["results"]) == 30
    assert max(latencies) < 2.0 and small_done < big["seconds"], (latencies, big["seconds"])


def test_a_request_over_the_token_budget_is_413_with_the_limit(slow_service):
    status, answer = call(slow_service.base, "/v1/extract", {"texts": ["张三" * 20000, "李四" * 10001]})
    assert status == 413 and "60002 tokens; serve.max_request_tokens is 60000" in answer["detail"]


@pytest.mark.parametrize("raw, message", [
    (b'{"texts": ["\\ud800"]}', "lone surrogate"),
    (b'{"texts": [NaN]}', "valid string"),
    (b'{"texts": ["\xff\xfe"]}', "not UTF-8"),
    (b'{"texts": ' + b"[" * 100000 + b"]" * 100000 + b"}", "nested too deeply"),
])
def test_unreadable_requests_are_422_with_a_message(slow_service, raw, message):
    status, answer = call(slow_service.base, "/v1/extract", raw=raw)
    assert status == 422 and message in json.dumps(answer), answer
    assert call(slow_service.base, "/health")[0] == 200


def test_a_wrong_route_or_method_says_what_is_served(slow_service):
    for path, body in (("/v1/extrct", {"texts": ["a"]}), ("/v1/labels", {"texts": ["a"]})):
        status, answer = call(slow_service.base, path, body)
        assert status in (404, 405) and "the service answers POST /v1/extract" in answer["detail"]


def test_an_over_limit_body_is_read_so_the_client_sees_the_413(slow_service):
    status, answer = call(slow_service.base, "/v1/extract", raw=b'{"texts": ["' + b"a" * 3_000_000 + b'"]}')
    assert status == 413 and "serve.max_body_bytes = 400000" in answer["detail"]


def test_a_client_that_leaves_takes_its_work_along(slow_service):
    import psutil

    host, port = slow_service.base.split("//")[1].split(":")
    body = json.dumps(BIG).encode()
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(b"POST /v1/extract HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(1.0)  # the request is being predicted (it takes seconds), then the client goes
    time.sleep(0.5)
    process = psutil.Process(slow_service.process.pid)
    before = sum(process.cpu_times()[:2])
    time.sleep(2.0)
    busy = sum(process.cpu_times()[:2]) - before
    assert busy < 0.3, f"the service worked {busy:.2f} CPU seconds for a client that had left"
    begun = time.monotonic()
    assert call(slow_service.base, "/v1/extract", {"texts": ["张三在北京"]})[0] == 200
    assert time.monotonic() - begun < 1.0


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_ends_the_service_within_its_timeout_whatever_runs(trained, workers):
    service = Service(trained / "run" / "best", "--workers", str(workers), "--set", "serve.rows_per_pass=1",
                      "--set", "serve.shutdown_timeout_s=3", "--set", "serve.max_body_bytes=400000")
    answers = []
    clients = [threading.Thread(target=lambda: answers.append(call(service.base, "/v1/extract", BIG)))
               for _ in range(3)]
    for client in clients:
        client.start()
    time.sleep(1.0)
    started = time.monotonic()
    code, output = service.stop()
    stopped = time.monotonic() - started
    for client in clients:
        client.join(timeout=60)
    assert stopped < 3 + 5, output
    assert output.count("dropped") == workers and "Traceback" not in output, output
    assert all(status in (200, 503) for status, _ in answers) and 503 in [status for status, _ in answers], answers


def test_the_api_fuzzed_from_its_own_schema_never_answers_500(slow_service):
    """Schemathesis generates requests from /openapi.json (valid and invalid bodies): none may get a
    5xx or hang."""
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, given, settings

    schema = schemathesis.openapi.from_url(slow_service.base + "/openapi.json")
    failures = []
    for operation in schema.get_all_operations():
        strategy = operation.ok().as_strategy()

        @given(case=strategy)
        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
        def fuzz(case):
            response = case.call(timeout=30)
            if response.status_code >= 500:
                failures.append((case.method, case.path, case.body, response.status_code, response.text[:200]))

        fuzz()
    assert failures == []
