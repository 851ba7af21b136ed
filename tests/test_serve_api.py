"""The service's API as a contract (docs/RELIABILITY.md, cases 13-14): every bad request a 4xx with a
message, and a fuzz of the whole API from its own OpenAPI schema (the micro-batcher's turns, case 12,
are tests/test_batcher.py).  What both services share (bounds, a client that leaves, SIGTERM) is
tests/test_http_layer.py."""
import json

import pytest

from helpers import Service, call

pytestmark = pytest.mark.slow


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
