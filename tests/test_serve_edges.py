"""The service's edges (docs/RELIABILITY.md, cases 12-14): the micro-batcher's turns, every bad request a 4xx with a message, and a fuzz of the whole API from its own
OpenAPI schema.  What both services share (bounds, a client that leaves, SIGTERM) is
tests/test_http_layer.py."""
import asyncio
import json
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
        passes = len(log)
        big.cancel()  # what the endpoint does when the client disconnects
        for _ in range(500):  # the batcher drops the job before its next pass
            if batcher.dropped:
                break
            await asyncio.sleep(0.01)
        dropped_at = len(log)
        await asyncio.sleep(0.2)
        return passes, dropped_at

    passes, dropped_at = asyncio.run(leave_early())
    # at most the pass under way when it was read and the one under way at the cancellation; none after
    assert batcher.dropped == 1 and dropped_at <= passes + 2 and len(log) == dropped_at

    closed_at = []

    def close():
        closed_at.append(len(log))  # counted as close is called: the executor's thread may start late
        batcher.close()

    async def closing():
        big = asyncio.ensure_future(batcher.submit(["big"]))
        await asyncio.sleep(0.1)
        await asyncio.get_running_loop().run_in_executor(None, close)
        with pytest.raises(ServiceClosing):
            await big

    asyncio.run(closing())
    assert len(log) <= closed_at[0] + 1 and not batcher.thread.is_alive()  # at most the pass under way


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
