"""The HTTP layer's pieces in one process, on a trivial application (tests/test_http_layer.py runs
them through both services as users start them)."""
import socket
import threading
import time

import pytest

from globalpointer.config import ServeConfig
from globalpointer.deploy.http import BasicAuth, guarded, listen, server_config
from globalpointer.errors import UserError
from helpers import raw_exchange


async def echo_length(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    size, more = 0, True
    while more:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    body = str(size).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def server(caplog):
    import uvicorn

    limits = ServeConfig(max_header_bytes=4096, max_body_bytes=1000, shutdown_timeout_s=2)
    sock = listen("127.0.0.1", 0)
    running = uvicorn.Server(server_config(guarded(echo_length, limits, None, "-"), limits))
    thread = threading.Thread(target=running.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not running.started and time.time() < deadline:
        time.sleep(0.05)
    yield sock.getsockname()[1]
    running.should_exit = True
    thread.join(timeout=10)
    assert "Exception" not in caplog.text and "Traceback" not in caplog.text, caplog.text


def request(headers: bytes = b"", body: bytes = b"", extra: bytes = b"") -> bytes:
    return (b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers + b"Content-Length: " +
            str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)


def test_headers_past_the_bound_are_431_in_one_read_or_many(server):
    assert raw_exchange(server, request(body=b"abc")).endswith(b"\r\n\r\n3")
    for headers in (b"X-A: " + b"a" * 5000 + b"\r\n",  # with its body, in one read
                    b"".join(b"X-%d: %s\r\n" % (i, b"b" * 50) for i in range(100)),
                    b"X-B: " + b"c" * 300000 + b"\r\n"):  # in many reads
        answer = raw_exchange(server, request(headers, body=b"abc"))
        assert answer.startswith(b"HTTP/1.1 431 ") and b"serve.max_header_bytes = 4096" in answer, answer[:200]
    assert raw_exchange(server, request(b"X-C: " + b"d" * 3000 + b"\r\n", b"ok")).endswith(b"\r\n\r\n2")


def test_an_over_limit_body_with_expect_is_413_before_it_is_sent(server):
    answer = raw_exchange(server, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 413 ") and b"100 Continue" not in answer
    small = raw_exchange(server, b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 3\r\n"
                             b"Expect: 100-continue\r\n\r\nabc")
    assert small.endswith(b"\r\n\r\n3")


def test_a_port_is_checked_when_it_is_bound():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(UserError, match=f"port {port} on 127.0.0.1 is in use"):
            listen("127.0.0.1", port)
    for wrong in (70000, -1, True):
        with pytest.raises(UserError, match="a TCP port is 0 to 65535"):
            listen("127.0.0.1", wrong)
    with pytest.raises(UserError, match="--host 256.1.1.1: not an address of this machine|cannot listen on"):
        listen("256.1.1.1", 0)


def test_basic_authentication_answers_401_before_anything_reads_the_request():
    import asyncio

    sent = []

    async def app(scope, receive, send):
        raise AssertionError("reached the application")

    async def send(message):
        sent.append(message)

    guard = BasicAuth(app, "user", "pw", "say who you are")
    asyncio.run(guard({"type": "http", "headers": [(b"authorization", b"Basic dXNlcjp3cm9uZw==")]}, None, send))
    assert sent[0]["status"] == 401 and (b"www-authenticate", b'Basic realm="globalpointer"') in sent[0]["headers"]
    assert b"say who you are" in sent[1]["body"]
