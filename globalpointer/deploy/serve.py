"""The HTTP service: ``globalpointer serve --model RUN/best [--host H] [--port P] [--set serve.KEY=V]``.

``POST /v1/extract`` ``{"texts": [...]}`` -> ``{"results": [{"text", "entities": [...]}]}`` (the
entities of predict.py), ``GET /v1/labels``, ``GET /health``, OpenAPI docs at ``/docs``.
Concurrent requests are micro-batched and take turns (``MicroBatcher``): one worker thread owns the
model, gathers waiting requests into jobs that share forward passes, and runs the jobs one forward
pass (``serve.rows_per_pass`` rows) at a time, so a small request never waits for all of a large one.
Limits (``serve.max_texts``, ``serve.max_text_chars``, ``serve.max_request_tokens``,
``serve.max_body_bytes``) are answered with 413, malformed requests with 422, each with a message;
SIGTERM stops accepting and lets requests in flight finish within ``serve.shutdown_timeout_s``.
``serve.workers`` processes (default: one per CPU core, each on one core) share the port, each with
its own model and micro-batcher: on the CPU, single-core processes predict the small batches of
concurrent clients faster than one process on every core (docs/lab/PERFORMANCE.md).
"""
import asyncio
import collections
import contextlib
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from typing import Callable, Deque, Generator, List, NamedTuple, Optional, Sequence

from ..config import ServeConfig

log = logging.getLogger("globalpointer")


class ServiceClosing(Exception):
    """The service stopped before this request's turn came (SIGTERM past serve.shutdown_timeout_s)."""


class Pending(NamedTuple):
    """A request waiting for its entities: its texts, their characters, and where to answer."""
    texts: List[str]
    chars: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future


class Job:
    """Requests predicted together, one forward pass per step."""

    def __init__(self, requests: List[Pending], steps: Generator):
        self.requests = requests
        self.steps = steps

    @property
    def abandoned(self) -> bool:
        """Every client of the job went away: its remaining passes would be answered to no one."""
        return all(request.future.cancelled() for request in self.requests)


# A job with this many forward passes left runs them at once: the batch of small requests gathered
# while a long job ran would otherwise take turns with it pass by pass (16 one-text clients fill two
# passes of 8 rows: they would wait for two passes of the long job, not one).
SHORT_JOB_PASSES = 3


class MicroBatcher:
    """Requests from many coroutines -> few forward passes on one thread, shared fairly.

    Waiting requests are gathered into a job of at most ``batch_texts`` texts and about one pass of
    characters (``pass_chars``; a larger request is a job of its own), waiting up to ``wait_ms`` for
    company while nothing else runs.  Jobs take turns one forward pass at a time (a job with at most
    ``SHORT_JOB_PASSES`` left finishes them at once), so a small request waits for at most one pass of
    a large one, not for all of it.  A job whose clients all left is
    dropped between passes; ``close`` stops between passes and fails what has not run."""

    def __init__(self, predict_steps: Callable[[List[str]], Generator], batch_texts: int, wait_ms: float,
                 pass_chars: int = 2048):
        self.predict_steps = predict_steps
        self.batch_texts = batch_texts
        self.pass_chars = pass_chars
        self.wait = wait_ms / 1000
        self.pending: Deque[Pending] = collections.deque()
        self.changed = threading.Condition()
        self.closing = False
        self.jobs = self.texts = self.passes = 0  # jobs and texts predicted, forward passes: how much sharing happened
        self.dropped = 0  # jobs whose clients all left before their last pass
        self.last_texts = batch_texts  # texts in the last job: how many to wait for in the next
        self.thread = threading.Thread(target=self._work, name="micro-batcher", daemon=True)
        self.thread.start()

    async def submit(self, texts: Sequence[str]) -> List[List[dict]]:
        """The entities of ``texts``; cancelling the call (the client left) drops its work."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self.changed:
            self.pending.append(Pending(list(texts), sum(map(len, texts)), loop, future))
            self.changed.notify()
        return await future

    def close(self, timeout: Optional[float] = None) -> None:
        with self.changed:
            self.closing = True
            self.changed.notify()
        self.thread.join(timeout)

    def _gather(self, idle: bool) -> List[Pending]:
        """Called holding ``changed`` with a request pending: the first request, then those behind it
        that fit; only when ``idle``, and while it has fewer texts than the last job had, it waits up
        to ``wait_ms`` for more: clients answered together come back together, and one that is alone
        is not kept waiting for company twice."""
        batch = [self.pending.popleft()]
        count, chars = len(batch[0].texts), batch[0].chars
        deadline = time.monotonic() + self.wait
        while chars < self.pass_chars and count < self.batch_texts and not self.closing:
            if self.pending:
                following = self.pending[0]
                if chars + following.chars > self.pass_chars or count + len(following.texts) > self.batch_texts:
                    break
                batch.append(self.pending.popleft())
                count, chars = count + len(following.texts), chars + following.chars
                continue
            left = deadline - time.monotonic()
            if not idle or count >= self.last_texts or left <= 0:
                break
            self.changed.wait(left)
        self.last_texts = count
        return batch

    def _work(self) -> None:
        jobs: Deque[Job] = collections.deque()
        stepped: Optional[Job] = None  # the job that ran the last pass: it queues behind any newcomer
        while True:
            with self.changed:
                while not self.pending and not jobs and stepped is None and not self.closing:
                    self.changed.wait()
                if self.closing:
                    break
                while self.pending:  # every request waiting joins the turns now
                    batch = self._gather(idle=not jobs and stepped is None)
                    jobs.append(Job(batch, self.predict_steps([t for r in batch for t in r.texts])))
            if stepped is not None:
                jobs.append(stepped)
                stepped = None
            job = jobs.popleft()
            if job.abandoned:
                job.steps.close()
                self.dropped += 1
                continue
            try:
                left = next(job.steps)
                self.passes += 1
                if left is not None and left <= SHORT_JOB_PASSES:
                    jobs.appendleft(job)  # nearly done: finish it before the next turn of a long job
                else:
                    stepped = job
            except StopIteration as done:
                self.jobs += 1
                self.texts += sum(len(r.texts) for r in job.requests)
                self._answer(job, done.value, None)
            except Exception as failure:  # answered as a 500 to the requests of this job, the service goes on
                log.exception("prediction failed for a job of %d texts", sum(len(r.texts) for r in job.requests))
                self._answer(job, [], failure)
        with self.changed:
            stranded = [*jobs, *([stepped] if stepped else []), *(Job([r], iter(())) for r in self.pending)]
            self.pending.clear()
        for job in stranded:
            self._answer(job, [], ServiceClosing("the service is shutting down; send the request again"))

    @staticmethod
    def _answer(job: Job, results: list, error: Optional[BaseException]) -> None:
        offset = 0
        for request in job.requests:
            part = results[offset:offset + len(request.texts)]
            offset += len(request.texts)
            with contextlib.suppress(RuntimeError):  # the event loop closed: nobody waits for the answer
                request.loop.call_soon_threadsafe(_settle, request.future, part, error)


def _settle(future: asyncio.Future, result, error: Optional[BaseException]) -> None:
    if future.cancelled():  # the client went away
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


# A body over serve.max_body_bytes is read and discarded up to this many bytes before the 413 is
# sent: a client that is still sending when the connection closes sees "connection reset", not the
# answer (nginx's lingering close does the same).  Past it the connection is closed.
DRAIN_BYTES = 64 * 1024 * 1024


class BodyLimit:
    """ASGI middleware: a body over ``limit`` bytes is answered with 413 before it is parsed, whether
    the client announced its length or streams it in chunks."""

    def __init__(self, app, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        announced = dict(scope.get("headers") or []).get(b"content-length")
        if announced is not None and announced.isdigit() and int(announced) > self.limit:
            await self._drain(receive, 0)
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
        body = (f'{{"detail": "request body over serve.max_body_bytes = {self.limit} bytes; send fewer or '
                f'shorter texts per request"}}').encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


async def client_left(request) -> None:
    """Returns when the client of ``request`` disconnects (its body has been read: what the server
    receives next is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def validation_messages(errors) -> List[dict]:
    """FastAPI's 422 details without the offending input, which may be a NaN or a lone surrogate
    that JSON cannot carry back (the answer would fail as a 500), and with the field named."""
    return [{"loc": list(error.get("loc", ())), "msg": error.get("msg", ""), "type": error.get("type", "")}
            for error in errors]


def create_app(ner, limits: ServeConfig):
    """The FastAPI application over a ``globalpointer.load`` pipeline."""
    from fastapi import HTTPException, Request, Response
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from fastapi_offline import FastAPIOffline
    from pydantic import BaseModel, ConfigDict, Field, field_validator
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException as StarletteHTTPException

    from ..data.readers import lone_surrogate_at
    from ..errors import json_failure

    class ExtractRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")
        # the limits in the schema too, for generated clients; over one the answer is a 413 with a
        # message (not pydantic's 422), so they are not enforced by validation
        texts: List[str] = Field(description=f"texts to extract entities from (at most {limits.max_texts}, "
                                             f"each at most {limits.max_text_chars} characters, together at most "
                                             f"{limits.max_request_tokens} tokens)",
                                 json_schema_extra={"maxItems": limits.max_texts,
                                                    "items": {"type": "string", "maxLength": limits.max_text_chars}})

        @field_validator("texts")
        @classmethod
        def characters(cls, texts: List[str]) -> List[str]:
            for index, text in enumerate(texts):
                at = lone_surrogate_at(text)
                if at is not None:
                    raise ValueError(f"texts[{index}] holds a lone surrogate at character {at} (a broken \\uXXXX "
                                     f"escape), which is no character: send the text as UTF-8")
            return texts

    class EntityOut(BaseModel):
        start: int = Field(description="character offset of the first character")
        end: int = Field(description="character offset after the last character (text[start:end] is the entity)")
        type: str
        text: str
        score: float = Field(description="sigmoid of the span's logit")

    class Result(BaseModel):
        text: str
        entities: List[EntityOut]

    class ExtractResponse(BaseModel):
        results: List[Result]

    class Health(BaseModel):
        status: str = Field(description="ok while the service answers")
        model: str = Field(description="the model directory it serves")
        backend: str = Field(description="dynamic, paddle-inference, onnxruntime or openvino")
        device: str

    class Labels(BaseModel):
        labels: List[str] = Field(description="the entity types, in the model's order")

    class Problem(BaseModel):
        detail: str = Field(description="what was wrong and what would fix it")

    featurizer = ner.extractor.featurizer
    batcher = MicroBatcher(lambda texts: ner.predict_steps(texts, limits.rows_per_pass), limits.batch_texts,
                           limits.batch_wait_ms, pass_chars=limits.rows_per_pass * featurizer.window_size)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        batcher.close(timeout=limits.shutdown_timeout_s)
        log.info("served %d texts in %d jobs of %d forward passes; dropped %d job(s) whose clients left",
                 batcher.texts, batcher.jobs, batcher.passes, batcher.dropped)

    # /docs and /redoc from the Swagger UI and ReDoc files of the fastapi-offline package: the pages
    # work without internet (FastAPI's own load them from a CDN)
    app = FastAPIOffline(title="GlobalPointer NER", lifespan=lifespan,
                         description=f"Entities of types {', '.join(ner.labels)} from {ner.directory} "
                                     f"({ner.backend} backend).")

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request, error: RequestValidationError):
        return JSONResponse({"detail": validation_messages(error.errors())}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request, error: StarletteHTTPException):
        if error.status_code == 400 and error.__cause__ is not None:  # FastAPI could not parse the body at all
            return JSONResponse({"detail": f"the body is not readable JSON ({json_failure(error.__cause__)}); send "
                                           f'UTF-8 JSON such as {{"texts": ["..."]}}'}, status_code=422)
        detail = error.detail
        if error.status_code in (404, 405):  # say what the service does answer
            detail = (f"{request.method} {request.url.path} is not served here; the service answers POST "
                      f"/v1/extract, GET /v1/labels, GET /health and GET /docs")
        return JSONResponse({"detail": detail}, status_code=error.status_code, headers=error.headers)

    @app.get("/health", response_model=Health, operation_id="health")
    async def health():
        return {"status": "ok", "model": ner.directory, "backend": ner.backend, "device": ner.runtime.device}

    @app.get("/v1/labels", response_model=Labels, operation_id="labels")
    async def labels():
        return {"labels": ner.labels}

    @app.post("/v1/extract", response_model=ExtractResponse, operation_id="extract",
              responses={413: {"model": Problem,
                               "description": "too many texts, a text too long, too many tokens, or a body too large"},
                         503: {"model": Problem, "description": "the service is shutting down"}})
    async def extract(body: ExtractRequest, request: Request):
        texts = body.texts
        if len(texts) > limits.max_texts:
            raise HTTPException(413, f"{len(texts)} texts in one request; serve.max_texts is {limits.max_texts}: "
                                     f"split the request")
        for index, text in enumerate(texts):
            if len(text) > limits.max_text_chars:
                raise HTTPException(413, f"texts[{index}] has {len(text)} characters; serve.max_text_chars is "
                                         f"{limits.max_text_chars}")
        # A token is at least one character: only a request longer than the budget in characters is tokenized.
        if sum(map(len, texts)) > limits.max_request_tokens:
            tokens = await run_in_threadpool(featurizer.count_tokens, texts)
            if tokens > limits.max_request_tokens:
                raise HTTPException(413, f"the texts hold {tokens} tokens; serve.max_request_tokens is "
                                         f"{limits.max_request_tokens}: split the request")
        if not texts:
            return Response('{"results": []}', media_type="application/json")
        work = asyncio.ensure_future(batcher.submit(texts))
        gone = asyncio.ensure_future(client_left(request))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # uvicorn cancels what still runs serve.shutdown_timeout_s after SIGTERM
            work.cancel()
            raise HTTPException(503, "the service is shutting down; send the request again") from None
        finally:
            gone.cancel()
        if not work.done():  # the client left: its passes are dropped, and nobody reads an answer
            work.cancel()
            return Response(status_code=499)
        try:
            found = work.result()
        except ServiceClosing as closing:
            raise HTTPException(503, str(closing)) from None
        # encoded here: FastAPI's validation of the response against the model costs more than the
        # model itself for small requests (the model above still documents the answer)
        answer = {"results": [{"text": text, "entities": entities} for text, entities in zip(texts, found)]}
        return Response(json.dumps(answer, ensure_ascii=False), media_type="application/json")

    app.state.batcher = batcher
    return BodyLimit(app, limits.max_body_bytes)


WORKER_ARGS = "GLOBALPOINTER_SERVE_WORKER"  # the environment variable that hands a worker its arguments


def workers_serving(output: str) -> Optional[int]:
    """The number of worker processes once the service's log ``output`` shows every one of them
    serving (its own line announcing them, then uvicorn's startup line from each), else None."""
    announced = re.search(r"(\d+) worker process\(es\)", output)
    if announced and output.count("Application startup complete") >= int(announced.group(1)):
        return int(announced.group(1))
    return None


def worker_count(requested: int, on_gpu: bool, cores: int) -> int:
    """``serve.workers``, 0 resolved: one process per core on the CPU (a process on one core
    predicts small batches more efficiently than one process on several), one on a GPU (the
    micro-batcher keeps it busy)."""
    if requested:
        return requested
    return 1 if on_gpu else cores


def worker_app():
    """The application of one worker process (uvicorn's factory): the model loaded as the parent
    process checked it, from the arguments it handed over in ``WORKER_ARGS``."""
    from uvicorn.config import STARTUP_FAILURE

    from ..errors import UserError, setup_logging
    from ..inference.pipeline import load

    setup_logging()
    # Importing paddle replaces uvicorn's graceful shutdown with an abort: uvicorn's handlers are put
    # back (a stop while the model loads still aborts this worker, which serves nothing yet).
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        ner = load(**json.loads(os.environ[WORKER_ARGS]))
    except UserError as error:  # the same in every worker: the supervisor stops instead of restarting it
        print(f"error: {error}", file=sys.stderr)
        sys.exit(STARTUP_FAILURE)
    for number, handler in handlers.items():
        signal.signal(number, handler)
    return create_app(ner, ner.config.serve)


def run_service(model: str, overrides: List[str], backend: Optional[str] = None) -> None:
    """Serve ``model`` until SIGTERM or Ctrl-C: stop accepting, finish the requests in flight (within
    ``serve.shutdown_timeout_s``), in every worker process."""
    import uvicorn

    from ..errors import UserError
    from ..inference.pipeline import inference_config, load
    from ..runtime import choose_device, cpu_thread_count

    config = inference_config(model, overrides, backend=backend)
    limits = config.serve
    on_gpu = choose_device(config.device).startswith("gpu")
    workers = worker_count(limits.workers, on_gpu, cpu_thread_count(0, 1))  # (0, 1): every core of this process
    threads = cpu_thread_count(config.cpu_threads, workers)
    log.info("%d worker process(es) on %s:%d%s", workers, limits.host, limits.port,
             "" if on_gpu else f", {threads} CPU thread(s) each")
    settings = dict(host=limits.host, port=limits.port, log_level="info",
                    timeout_graceful_shutdown=limits.shutdown_timeout_s)
    if workers == 1:
        ner = load(model, overrides, backend=backend)
        uvicorn.Server(uvicorn.Config(create_app(ner, limits), **settings)).run()
        return
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    os.environ[WORKER_ARGS] = json.dumps({"model": model, "overrides": overrides + [f"cpu_threads={threads}"],
                                          "backend": backend})
    uvicorn_config = uvicorn.Config("globalpointer.deploy.serve:worker_app", factory=True, workers=workers, **settings)
    supervisor = Multiprocess(uvicorn_config, sockets=[uvicorn_config.bind_socket()])
    supervisor.run()
    if any(process.exitcode == STARTUP_FAILURE for process in supervisor.processes):
        raise UserError("a worker process could not start: its error is above")
