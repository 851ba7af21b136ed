"""The HTTP service: ``globalpointer serve --model RUN/best [--host H] [--port P] [--set serve.KEY=V]``.

``POST /v1/extract`` ``{"texts": [...]}`` -> ``{"results": [{"text", "entities": [...]}]}`` (the
entities of predict.py, and a relation model's ``relations``), ``GET /v1/labels``, ``GET /health``,
OpenAPI docs at ``/docs``.
Concurrent requests are micro-batched and take turns (``MicroBatcher``): one worker thread owns the
model, gathers waiting requests into jobs that share forward passes, and runs the jobs one forward
pass (``serve.rows_per_pass`` rows) at a time, so a small request never waits for all of a large one.
The bounds every request gets (413 and 431 with a message, authentication, work dropped when its
client leaves, SIGTERM within ``serve.shutdown_timeout_s``) are the layer of ``http.py``, which the
Label Studio backend shares; malformed requests are answered 422.
``serve.workers`` processes (default: one per CPU core, each on one core) share the port, each with
its own model and micro-batcher: on the CPU, single-core processes predict the small batches of
concurrent clients faster than one process on every core (docs/lab/PERFORMANCE.md).  A service is one
model: every worker loads the service's private copy of the directory it was started with
(``model_directory.served``), so a worker restarted after the directory was replaced or removed serves
what the others serve; ``/health`` says its digest and whether the directory still holds it.
"""
import contextlib
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from types import SimpleNamespace
from typing import Dict, List, NamedTuple, Optional

from ..config import ServeConfig
from ..spans import event_roles
from ..model_directory.served import UNCHANGED, DirectoryWatch, ServedCopy, content_digest, directory_status
from .batcher import MicroBatcher
from .http import (answer_errors_as_json, check_texts, credentials_from_environment, guarded, listen, predict_for,
                   run_server, server_config)

log = logging.getLogger("globalpointer")


def event_model():
    """An event as the API answers it (``spans.Record.event_dicts``)."""
    from pydantic import BaseModel, Field

    class TriggerOut(BaseModel):
        start: int
        end: int
        text: str
        score: float

    class ArgumentOut(TriggerOut):
        role: str

    class EventOut(BaseModel):
        type: str
        trigger: Optional[TriggerOut] = Field(description="null: an event found without a trigger")
        arguments: List[ArgumentOut]
        score: float = Field(description="the lowest of its members' and of the links between them")

    return EventOut


def api_models(limits: ServeConfig) -> SimpleNamespace:
    """The request and answer models of the API (its OpenAPI schema), with ``limits`` in their
    descriptions."""
    from pydantic import BaseModel, ConfigDict, Field, field_validator

    from ..data.reading import lone_surrogate_at
    from ..model.backends import BACKENDS

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

    class RelationOut(BaseModel):
        type: str
        head: int = Field(description="the index of its head entity (the subject) in entities")
        tail: int = Field(description="the index of its tail entity (the object) in entities")
        score: float = Field(description="the lower of its two pair cells' sigmoids")

    class Result(BaseModel):
        text: str
        entities: List[EntityOut]
        relations: Optional[List[RelationOut]] = Field(None, description="a relation model's triples (absent for "
                                                                          "an entity model)")
        events: Optional[List[event_model()]] = Field(None, description="an event model's events (docs/events.md)")

    class ExtractResponse(BaseModel):
        results: List[Result]

    class Health(BaseModel):
        status: str = Field(description="ok while the service answers")
        model: str = Field(description="the model directory the service was started with")
        model_digest: str = Field(description="SHA-256 of the model's files as read at start, alike in every worker")
        model_on_disk: str = Field(description="whether that directory still holds them: unchanged, replaced or "
                                               "removed (the service serves what it read either way)")
        backend: str = Field(description=f"one of {', '.join(BACKENDS)}")
        device: str

    class Labels(BaseModel):
        labels: List[str] = Field(description="the entity types, in the model's order")
        relations: Optional[List[str]] = Field(None, description="a relation model's relation types")
        events: Optional[Dict[str, List[str]]] = Field(None, description="an event model's event types, each's roles")

    class Problem(BaseModel):
        detail: str = Field(description="what was wrong and what would fix it")

    return SimpleNamespace(ExtractRequest=ExtractRequest, ExtractResponse=ExtractResponse, Health=Health,
                           Labels=Labels, Problem=Problem)


class ServedModel(NamedTuple):
    """What ``/health`` says of the model: the directory the service was started with, the digest of
    what it read, and the watch on that directory."""
    directory: str
    digest: str
    watch: DirectoryWatch

    @classmethod
    def of(cls, directory: str, digest: str, status: Optional[tuple] = None) -> "ServedModel":
        """``status``: the directory's ``directory_status`` taken before ``digest`` was (None: unknown)."""
        return cls(directory, digest, DirectoryWatch(directory, digest, status))


def create_app(ner, limits: ServeConfig, credentials=None, served: Optional[ServedModel] = None):
    """The FastAPI application over a ``globalpointer.load`` pipeline, behind the layer of ``http``
    (with ``credentials``, (user, password), every request must carry them).  ``served``: the model
    as the service was started with it (default: the pipeline's directory as it is now)."""
    from starlette.concurrency import run_in_threadpool
    from fastapi import Request, Response
    from fastapi_offline import FastAPIOffline

    models = api_models(limits)
    served = served or ServedModel.of(ner.directory, content_digest(ner.directory))
    featurizer = ner.extractor.featurizer
    batcher = MicroBatcher.for_service(lambda texts: ner.predict_steps(texts, limits.rows_per_pass), limits,
                                       featurizer.window_size)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        batcher.shut_down(limits.shutdown_timeout_s)

    # /docs and /redoc from the Swagger UI and ReDoc files of the fastapi-offline package: the pages
    # work without internet (FastAPI's own load them from a CDN)
    app = FastAPIOffline(title="GlobalPointer NER", lifespan=lifespan,
                         description=f"Entities of types {', '.join(ner.labels)} from {served.directory} "
                                     f"({ner.backend} backend).")
    answer_errors_as_json(app, "POST /v1/extract, GET /v1/labels, GET /health and GET /docs", '{"texts": ["..."]}')

    @app.get("/health", response_model=models.Health, operation_id="health")
    async def health():
        return {"status": "ok", "model": served.directory, "model_digest": served.digest,
                "model_on_disk": await run_in_threadpool(served.watch.state), "backend": ner.backend,
                "device": ner.runtime.device}

    @app.get("/v1/labels", response_model=models.Labels, response_model_exclude_none=True, operation_id="labels")
    async def labels():
        if ner.extractor.events:
            return {"labels": ner.labels, "events": event_roles(ner.labels)}
        return {"labels": ner.labels, **({"relations": ner.relations} if ner.relations else {})}

    @app.post("/v1/extract", response_model=models.ExtractResponse, operation_id="extract",
              responses={413: {"model": models.Problem,
                               "description": "too many texts, a text too long, too many tokens, or a body too large"},
                         503: {"model": models.Problem, "description": "the service is shutting down"}})
    async def extract(body: models.ExtractRequest, request: Request):
        texts = body.texts
        await check_texts(texts, limits, featurizer)
        if not texts:
            return Response('{"results": []}', media_type="application/json")
        found = await predict_for(batcher, texts, request)
        # encoded here: FastAPI's validation of the response against the model costs more than the
        # model itself for small requests (the model above still documents the answer)
        answer = {"results": [{"text": text, **item} if ner.relations else {"text": text, "entities": item}
                              for text, item in zip(texts, found)]}
        return Response(json.dumps(answer, ensure_ascii=False), media_type="application/json")

    app.state.batcher = batcher
    return guarded(app, limits, credentials, "send the user and password it was started with")


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
    """The application of one worker process (uvicorn's factory): the service's copy of the model,
    loaded as the parent process checked it, from the arguments it handed over in ``WORKER_ARGS``."""
    from uvicorn.config import STARTUP_FAILURE

    from ..errors import UserError, memory_detail, setup_logging
    from ..inference.pipeline import load

    setup_logging()
    # Importing paddle replaces uvicorn's graceful shutdown with an abort: uvicorn's handlers are put
    # back (a stop while the model loads still aborts this worker, which serves nothing yet).
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    arguments = json.loads(os.environ[WORKER_ARGS])
    served = arguments.pop("served", None)
    try:
        if served and content_digest(arguments["model"]) != served["digest"]:
            raise UserError(f"the service's copy of {served['directory']} ({arguments['model']}) changed since the "
                            f"service started: restart the service")
        ner = load(**arguments)
    except UserError as error:  # the same in every worker: the supervisor stops instead of restarting it
        print(f"error: {error}", file=sys.stderr)
        sys.exit(STARTUP_FAILURE)
    except MemoryError as error:  # Python's, and Paddle's ResourceExhausted
        print(f"error: out of memory loading the model in a worker process ({memory_detail(error)}); each worker holds a copy "
              f"of it: run fewer (--workers, serve.workers) or on a machine with more memory", file=sys.stderr)
        sys.exit(STARTUP_FAILURE)
    except OSError as error:  # the copy gone (removed by hand)
        print(f"error: the service's copy of the model cannot be read ({error}): restart the service", file=sys.stderr)
        sys.exit(STARTUP_FAILURE)
    for number, handler in handlers.items():
        signal.signal(number, handler)
    return create_app(ner, ner.config.serve, credentials_from_environment(),
                      served and ServedModel.of(served["directory"], served["digest"]))


# A worker that could not start while others serve is started again after this many seconds (a
# failure at the service's start stops it instead: every worker would fail the same way)
RESTART_DELAY_S = 5.0


def supervisor(config, sockets):
    """uvicorn's supervisor of worker processes, except that a worker that cannot start while others
    serve (out of memory at a restart, say) is said and started again after ``RESTART_DELAY_S``, the
    others serving meanwhile, instead of taking the service down."""
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors.multiprocess import Multiprocess, Process

    class Supervisor(Multiprocess):
        def __init__(self, *args, **keywords):
            super().__init__(*args, **keywords)
            self.pending = {}  # worker index -> when its replacement starts

        def keep_subprocess_alive(self) -> None:
            if self.should_exit.is_set():
                return
            for index, process in enumerate(self.processes):
                if index in self.pending:
                    if time.monotonic() >= self.pending[index]:
                        del self.pending[index]
                        self.processes[index] = Process(self.config, self.sockets)
                        self.processes[index].start()
                    continue
                if process.is_alive(timeout=self.config.timeout_worker_healthcheck):
                    continue
                process.kill()  # hung, or gone
                process.join()
                failed = process.exitcode == STARTUP_FAILURE
                others = [other for number, other in enumerate(self.processes)
                          if number != index and number not in self.pending]
                if failed and not any(other.is_ready(timeout=1) for other in others):
                    log.error("worker process [%s] could not start, and no other serves: stopping the service",
                              process.pid)
                    self.should_exit.set()
                    return
                if self.should_exit.is_set():
                    return
                delay = RESTART_DELAY_S if failed else 0.0
                log.warning("worker process [%s] %s: another starts in %g s, the other workers serving meanwhile",
                            process.pid, "could not start (its error is above)" if failed else
                            f"ended (exit status {process.exitcode})", delay)
                self.pending[index] = time.monotonic() + delay

    return Supervisor(config, sockets=sockets)


# How often the service looks at the directory it was started from, to say once that it was replaced or removed
WATCH_EVERY_S = 10.0


def watch_directory(served: ServedModel, stopped: threading.Event) -> None:
    """Say in the log, once per change, that the directory the service was started from no longer holds
    the model it serves (which it keeps serving, whole)."""
    said = UNCHANGED
    while not stopped.wait(WATCH_EVERY_S):
        state = served.watch.state()
        if state != said:
            if state == UNCHANGED:
                log.info("%s holds the served model again (digest %s)", served.directory, served.digest[:12])
            else:
                log.warning("%s was %s since the service started: it keeps serving the model it started with "
                            "(digest %s, every worker alike); restart it to serve what is there now",
                            served.directory, state, served.digest[:12])
            said = state


def run_service(model: str, overrides: List[str], backend: Optional[str] = None) -> None:
    """Serve ``model`` until SIGTERM or Ctrl-C: stop accepting, finish the requests in flight (within
    ``serve.shutdown_timeout_s``), in every worker process."""
    from ..model_directory.opening import open_model
    from ..errors import UserError
    from ..inference.pipeline import inference_config, load
    from ..runtime import choose_device, cpu_thread_count

    opened = open_model(model)  # the user's directory checked first: an error names its files
    config = inference_config(opened, overrides, backend=backend)
    limits = config.serve
    credentials = credentials_from_environment()
    sock = listen(limits.host, limits.port)  # before the model loads: a port in use is one line, at once
    on_gpu = choose_device(config.device).startswith("gpu")
    workers = worker_count(limits.workers, on_gpu, cpu_thread_count(0, 1))  # (0, 1): every core of this process
    threads = cpu_thread_count(config.cpu_threads, workers)
    log.info("%d worker process(es) on %s:%d%s", workers, limits.host, sock.getsockname()[1],
             "" if on_gpu else f", {threads} CPU thread(s) each")
    stopped = threading.Event()
    status = directory_status(opened.path)  # before the digest: a change from here on is seen by the watch
    if workers == 1:  # the model is read once, here: no copy needed, but no change while it is read either
        served = ServedModel.of(opened.path, content_digest(opened.path), status)
        ner = load(opened, overrides, backend=backend)
        if served.watch.state() != UNCHANGED:
            raise UserError(f"{opened.path} changed while the service read it: start the service again")
        threading.Thread(target=watch_directory, args=(served, stopped), daemon=True).start()
        run_server(create_app(ner, limits, credentials, served), limits, sock)
        return
    from uvicorn.config import STARTUP_FAILURE

    with ServedCopy(opened.path) as copy:  # what every worker loads, whenever it starts
        served = ServedModel.of(opened.path, copy.digest, status)
        log.info("serving %s as read at the start (digest %s)", opened.path, copy.digest[:12])
        threading.Thread(target=watch_directory, args=(served, stopped), daemon=True).start()
        os.environ[WORKER_ARGS] = json.dumps({"model": copy.path, "backend": backend,
                                              "overrides": overrides + [f"cpu_threads={threads}"],
                                              "served": {"directory": opened.path, "digest": copy.digest}})
        workers_supervisor = supervisor(server_config("globalpointer.deploy.serve:worker_app", limits, factory=True,
                                                      workers=workers), [sock])
        try:
            workers_supervisor.run()
        finally:
            stopped.set()
    if any(process.exitcode == STARTUP_FAILURE for process in workers_supervisor.processes):
        raise UserError("a worker process could not start: its error is above")
