"""What every request of both HTTP services gets, in one layer: ``serve`` and the Label Studio backend
are built on it, so a bound that one keeps the other keeps too.

- Request headers: at most ``serve.max_header_bytes``, counted as they arrive, else 431; the headers,
  and again the body, within ``serve.client_timeout_s``, else 408; an idle kept-alive connection closed
  after ``IDLE_KEEP_ALIVE_S``; at most ``connection_bound()`` connections open, the oldest idle (then the
  oldest still sending its request) closed to make room for a new one (``BoundedHttpProtocol``).
- The body: at most ``serve.max_body_bytes``, else 413 before it is parsed; one announced with
  ``Expect: 100-continue`` is refused before the client sends it (``BodyLimit``).
- The texts of a request: ``serve.max_texts``, ``serve.max_text_chars``, ``serve.max_request_tokens``,
  else 413 (``check_texts``).
- Prediction through the micro-batcher (``batcher.MicroBatcher``: turn-taking by forward pass), the
  work dropped when the client leaves (``predict_for``).
- Basic authentication from ``BASIC_AUTH_USER`` / ``BASIC_AUTH_PASS`` (``BasicAuth``).
- The address and port checked and bound before the model loads, one line when they cannot be
  (``listen``); SIGTERM stops accepting and finishes within ``serve.shutdown_timeout_s``
  (``run_server``).
"""
import asyncio
import base64
import errno
import hmac
import ipaddress
import json
import os
import resource
import signal
import socket
from typing import List, Optional, Sequence, Tuple

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..errors import UserError
from .batcher import MicroBatcher, ServiceClosing

CREDENTIAL_VARIABLES = ("BASIC_AUTH_USER", "BASIC_AUTH_PASS")  # the names of Label Studio's ML-backend package


async def send_json(send, status: int, body: dict, headers: Sequence[Tuple[bytes, bytes]] = ()) -> None:
    """A whole JSON answer through the ASGI ``send``."""
    encoded = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(encoded)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": encoded})


# Bytes of a chunk's framing (its size line and the line end after it) not counted against
# serve.max_header_bytes; a chunk extension longer than this counts, as trailers do
CHUNK_FRAMING_BYTES = 64


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with one bound on a request's headers and trailers together
    (request line included): past ``max_header_bytes`` (an attribute uvicorn's config carries to every
    worker) the answer is 431 and the connection closes, so a client cannot make the server hold more
    than one read beyond the bound.  httptools itself keeps every header and trailer byte it is sent,
    and uvicorn adds a chunked body's trailers to the request's headers."""

    reading_headers = False
    reading = False  # from the connection's start or a request's first byte until its body is read
    deadline = None  # the timer of serve.client_timeout_s on what is being read: the headers, then the body
    header_bytes = 0
    in_body = False  # the headers are read: what is not body from here on is chunk framing or trailers
    body_bytes = 0
    chunks = 0
    refused = False  # the connection was answered 431 and is closing

    @property
    def max_header_bytes(self) -> int:
        return getattr(self.config, "max_header_bytes", 65536)

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.start_deadline()  # a client that connects and sends nothing holds a connection too
        in_order = self.server_state.__dict__.setdefault("connections_in_order", {})  # oldest first
        in_order[self] = None
        if len(in_order) > getattr(self.config, "max_connections", len(in_order)):
            self.make_room(in_order)

    def connection_lost(self, exc) -> None:
        self.cancel_deadline()
        self.server_state.__dict__.get("connections_in_order", {}).pop(self, None)
        super().connection_lost(exc)

    @property
    def idle(self) -> bool:
        """A kept-alive connection between requests."""
        cycle = getattr(self, "cycle", None)
        return not self.reading and (cycle is None or cycle.response_complete)

    def make_room(self, in_order: dict) -> None:
        """Close the oldest idle connection, else the oldest whose request is still arriving (a slow
        client's), so that a new client is served where a full table of file descriptors would refuse
        it; a request being answered is never closed."""
        others = [connection for connection in in_order if connection is not self]
        victim = next((c for c in others if c.idle), None) or next((c for c in others if c.reading), None)
        if victim is None:
            return
        in_order.pop(victim, None)
        cycle = getattr(victim, "cycle", None)
        if victim.reading and (cycle is None or not cycle.response_started):
            body = b'{"detail": "the service has too many open connections: the request was not sent in time"}'
            victim.transport.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
                                   b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n"
                                   + body)
        victim.reading, victim.refused = False, True
        victim.cancel_deadline()
        victim.transport.close()

    def start_deadline(self) -> None:
        self.cancel_deadline()
        self.reading = True
        self.deadline = self.loop.call_later(getattr(self.config, "client_timeout_s", 60.0), self.too_slow)

    def cancel_deadline(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def too_slow(self) -> None:
        """serve.client_timeout_s ran out while the request was read: 408 where no answer has begun, and
        the connection closed."""
        self.deadline = None
        if not self.reading or self.transport.is_closing():
            return
        cycle = getattr(self, "cycle", None)
        if cycle is None or not cycle.response_started:
            body = json.dumps({"detail": f"the request was not sent within serve.client_timeout_s = "
                                         f"{getattr(self.config, 'client_timeout_s', 60.0):g} seconds"}).encode()
            self.transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: "
                                 + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)
        self.transport.close()
        self.reading, self.refused = False, True

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.start_deadline()  # the headers' time
        self.reading_headers, self.header_bytes, self.in_body, self.body_bytes, self.chunks = True, 0, False, 0, 0

    def on_headers_complete(self) -> None:
        self.start_deadline()  # the body's time
        self.reading_headers = False
        self.header_bytes = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if self.header_bytes > self.max_header_bytes:
            self.refuse_headers()
            return
        self.in_body = True
        super().on_headers_complete()

    def on_chunk_header(self) -> None:
        self.chunks += 1

    def on_body(self, body: bytes) -> None:
        self.body_bytes += len(body)
        if not self.refused:  # the body of a refused request: nobody reads it
            super().on_body(body)

    def on_message_complete(self) -> None:
        self.cancel_deadline()
        self.reading = False  # the application's time from here: no deadline on it
        self.in_body = False
        if not self.refused:
            super().on_message_complete()

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        in_body, body_before = self.in_body, self.body_bytes
        super().data_received(data)
        if self.transport.is_closing():
            return
        if self.reading_headers:  # the whole read was header bytes
            self.header_bytes += len(data)
        elif in_body:  # what was not body: chunk framing, then trailers
            self.header_bytes += max(0, len(data) - (self.body_bytes - body_before))
        if self.header_bytes > self.max_header_bytes + CHUNK_FRAMING_BYTES * self.chunks:
            self.refuse_headers()

    def refuse_headers(self) -> None:
        """431 when no answer has begun (the headers', or a request's trailers before the app answers);
        the connection closes either way."""
        cycle = getattr(self, "cycle", None)
        if self.reading_headers or cycle is None or not cycle.response_started:
            body = json.dumps({"detail": f"request headers and trailers over serve.max_header_bytes = "
                                         f"{self.max_header_bytes} bytes"}).encode()
            self.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json"
                                 b"\r\ncontent-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n"
                                 + body)
        self.transport.close()  # uvicorn then tells the app the client left
        self.reading_headers, self.in_body, self.refused = False, False, True


# A body over serve.max_body_bytes is read and discarded up to this many bytes before the 413 is
# sent: a client that is still sending when the connection closes sees "connection reset", not the
# answer (nginx's lingering close does the same).  Past it the connection is closed.
DRAIN_BYTES = 64 * 1024 * 1024


class Middleware:
    """An ASGI middleware of this layer: HTTP requests go through ``handle``, the rest (the lifespan)
    straight to the application, whose ``state`` it shows."""

    def __init__(self, app):
        self.app = app

    @property
    def state(self):
        return self.app.state

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        return await self.handle(scope, receive, send)

    async def handle(self, scope, receive, send):
        raise NotImplementedError


class BodyLimit(Middleware):
    """A body over ``limit`` bytes is answered with 413 before it is parsed, whether the client
    announced its length or streams it in chunks."""

    def __init__(self, app, limit: int):
        super().__init__(app)
        self.limit = limit

    async def handle(self, scope, receive, send):
        headers = dict(scope.get("headers") or [])
        announced = headers.get(b"content-length")
        if announced is not None and announced.isdigit() and int(announced) > self.limit:
            if headers.get(b"expect", b"").lower() != b"100-continue":
                await self._drain(receive, 0)  # reading would answer 100 Continue: a client that waits sends nothing
            return await self._refuse(send)
        received, started, refused = 0, False, False

        async def counted_receive():
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request" and not refused:
                received += len(message.get("body", b""))
                if received > self.limit:
                    refused = True
                    if message.get("more_body"):
                        await self._drain(receive, received)
                    if not started:
                        await self._refuse(send)
                    return {"type": "http.disconnect"}  # the application stops reading; its answer is dropped
            return message

        async def tracked_send(message):
            nonlocal started
            if refused:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, counted_receive, tracked_send)

    @staticmethod
    async def _drain(receive, received: int) -> None:
        while received <= DRAIN_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                return
            received += len(message.get("body", b""))
            if not message.get("more_body"):
                return

    async def _refuse(self, send):
        body = {"detail": f"request body over serve.max_body_bytes = {self.limit} bytes; send fewer or shorter texts "
                          f"per request"}
        await send_json(send, 413, body, [(b"connection", b"close")])  # the rest of the body is never read


async def client_left(request) -> None:
    """Returns when the client of ``request`` disconnects (its body has been read: what the server
    receives next is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class BasicAuth(Middleware):
    """Every request carries the user and password, or is answered 401 before anything else reads it."""

    def __init__(self, app, user: str, password: str, who: str):
        super().__init__(app)
        self.expected = ("Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()).encode()
        self.who = who

    async def handle(self, scope, receive, send):
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if not hmac.compare_digest(given, self.expected):
            return await send_json(send, 401, {"detail": f"this service needs basic authentication: {self.who}"},
                                   [(b"www-authenticate", b'Basic realm="globalpointer"')])
        return await self.app(scope, receive, send)


def validation_messages(errors, example: str = "") -> List[dict]:
    """FastAPI's 422 details without the offending input, which may be a NaN or a lone surrogate
    that JSON cannot carry back (the answer would fail as a 500), and with the field named; a body that
    is no JSON object (a list, a string) says what one looks like (``example``)."""
    messages = []
    for error in errors:
        loc, message = list(error.get("loc", ())), error.get("msg", "")
        if loc == ["body"] and error.get("type") == "dict_type":
            kind = type(error.get("input")).__name__.replace("list", "a JSON array").replace("str", "a JSON string")
            message = f"the body must be a JSON object{', such as ' + example if example else ''}, not {kind}"
        messages.append({"loc": loc, "msg": message, "type": error.get("type", "")})
    return messages


def answer_errors_as_json(app, routes: str, example: str) -> None:
    """The answers of both services to a request that is not theirs: 422 for a body that cannot be read
    (not UTF-8, not JSON, nested too deeply) or does not fit the API, said without echoing the input
    (a NaN or a lone surrogate in it would make the answer itself fail); 404 / 405 naming the
    ``routes`` the service answers.  ``example``: a body it takes."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    from ..errors import json_failure

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request, error: RequestValidationError):
        return JSONResponse({"detail": validation_messages(error.errors(), example)}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request, error: StarletteHTTPException):
        if error.status_code == 400 and error.__cause__ is not None:  # FastAPI could not parse the body at all
            return JSONResponse({"detail": f"the body is not readable JSON ({json_failure(error.__cause__)}); send "
                                           f"UTF-8 JSON such as {example}"}, status_code=422)
        detail = error.detail
        if error.status_code in (404, 405):  # say what the service does answer
            detail = f"{request.method} {request.url.path} is not served here; the service answers {routes}"
        return JSONResponse({"detail": detail}, status_code=error.status_code, headers=error.headers)


def credentials_from_environment() -> Optional[Tuple[str, str]]:
    """(user, password) from BASIC_AUTH_USER and BASIC_AUTH_PASS, None when neither is set."""
    user, password = (os.environ.get(name, "") for name in CREDENTIAL_VARIABLES)
    if bool(user) != bool(password):
        raise UserError("basic authentication needs both BASIC_AUTH_USER and BASIC_AUTH_PASS")
    return (user, password) if user else None


def guarded(app, limits, credentials: Optional[Tuple[str, str]], who: str):
    """``app`` behind the layer every request passes: authentication first (an unknown client's body
    is never read), then the body's bound."""
    app = BodyLimit(app, limits.max_body_bytes)
    return BasicAuth(app, *credentials, who) if credentials else app


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def check_texts(texts: Sequence[str], limits, featurizer, name: str = "texts") -> None:
    """The bounds of what one request may ask of the model, each answered 413 with its setting:
    ``name[i]`` names a text as the request does."""
    from fastapi import HTTPException
    from starlette.concurrency import run_in_threadpool

    if len(texts) > limits.max_texts:
        raise HTTPException(413, f"{len(texts)} texts in one request; serve.max_texts is {limits.max_texts}: "
                                 f"split the request")
    for index, text in enumerate(texts):
        if len(text) > limits.max_text_chars:
            raise HTTPException(413, f"{name}[{index}] has {len(text)} characters; serve.max_text_chars is "
                                     f"{limits.max_text_chars}")
    # A token is at least one character: only a request longer than the budget in characters is tokenized.
    if sum(map(len, texts)) > limits.max_request_tokens:
        tokens = await run_in_threadpool(featurizer.count_tokens, texts)
        if tokens > limits.max_request_tokens:
            raise HTTPException(413, f"the texts hold {tokens} tokens; serve.max_request_tokens is "
                                     f"{limits.max_request_tokens}: split the request")


async def predict_for(batcher: MicroBatcher, texts: List[str], request) -> list:
    """What ``batcher`` predicts for ``texts``, while the client of ``request`` waits: its work is
    dropped when it leaves (HTTPException 499, which nobody reads), and a service that stops first
    answers 503."""
    from fastapi import HTTPException

    work = asyncio.ensure_future(batcher.submit(texts))
    gone = asyncio.ensure_future(client_left(request))
    try:
        await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # uvicorn cancels what still runs serve.shutdown_timeout_s after SIGTERM
        work.cancel()
        raise HTTPException(503, "the service is shutting down; send the request again") from None
    finally:
        gone.cancel()
    if not work.done():  # the client left: its passes are dropped
        work.cancel()
        raise HTTPException(499, "the client left")
    try:
        return work.result()
    except ServiceClosing as closing:
        raise HTTPException(503, str(closing)) from None


def listen(host: str, port: int, flag: str = "--port") -> socket.socket:
    """A socket bound to ``host``:``port``, before anything slow (the model) happens; UserError in one
    line for a port out of range, in use, or an address this machine does not have."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise UserError(f"{flag} {port!r}: a TCP port is 0 to 65535")
    try:
        family, kind, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as error:
        raise UserError(f"--host {host}: not an address of this machine ({error})") from None
    sock = socket.socket(family, kind)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise UserError(f"port {port} on {host} is in use (another service?): stop it, or choose another "
                            f"with {flag}") from None
        raise UserError(f"cannot listen on {host}:{port} ({error.strerror or error}): choose another --host or "
                        f"{flag}") from None
    sock.set_inheritable(True)  # worker processes serve on it
    return sock


# Seconds a kept-alive connection may stay idle between requests (uvicorn's default; nginx's
# keepalive_timeout is 75): a client that wants another request soon sends it within this
IDLE_KEEP_ALIVE_S = 5

# File descriptors a service process keeps for itself (the model's files, pipes, the log) beside its
# connections
RESERVED_DESCRIPTORS = 100


def connection_bound() -> int:
    """The connections a service process keeps open at most: its file-descriptor limit (``ulimit -n``)
    less what it needs besides, so that a new client always finds one."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(16, (soft if soft != resource.RLIM_INFINITY else 65536) - RESERVED_DESCRIPTORS)


def server_config(app, limits, **settings):
    """uvicorn's config for ``app`` (or an import string, with ``factory=True``) as both services run:
    headers bounded, SIGTERM given ``serve.shutdown_timeout_s``."""
    import uvicorn

    config = uvicorn.Config(app, log_level="info", http=BoundedHttpProtocol, timeout_keep_alive=IDLE_KEEP_ALIVE_S,
                            timeout_graceful_shutdown=limits.shutdown_timeout_s, **settings)
    config.max_header_bytes = limits.max_header_bytes  # read by BoundedHttpProtocol, in every worker
    config.client_timeout_s = limits.client_timeout_s
    config.max_connections = connection_bound()
    return config


def run_server(app, limits, sock: socket.socket) -> None:
    """Serve ``app`` on the bound ``sock`` until SIGTERM or Ctrl-C."""
    import uvicorn

    # uvicorn shuts down gracefully, then puts back the handler it found and raises the signal again, so
    # that the exit status says SIGTERM: the default action, not the commands' (which would exit 143)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    uvicorn.Server(server_config(app, limits)).run(sockets=[sock])
