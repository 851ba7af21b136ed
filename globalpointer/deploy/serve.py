"""The HTTP service: ``globalpointer serve --model RUN/best [--host H] [--port P] [--set serve.KEY=V]``.

``POST /v1/extract`` ``{"texts": [...]}`` -> ``{"results": [{"text", "entities": [...]}]}`` (the
entities of predict.py), ``GET /v1/labels``, ``GET /health``, OpenAPI docs at ``/docs``.
Concurrent requests are micro-batched and take turns (``MicroBatcher``): one worker thread owns the
model, gathers waiting requests into jobs that share forward passes, and runs the jobs one forward
pass (``serve.rows_per_pass`` rows) at a time, so a small request never waits for all of a large one.
The bounds every request gets (413 and 431 with a message, authentication, work dropped when its
client leaves, SIGTERM within ``serve.shutdown_timeout_s``) are the layer of ``http.py``, which the
Label Studio backend shares; malformed requests are answered 422.
``serve.workers`` processes (default: one per CPU core, each on one core) share the port, each with
its own model and micro-batcher: on the CPU, single-core processes predict the small batches of
concurrent clients faster than one process on every core (docs/lab/PERFORMANCE.md).
"""
import contextlib
import json
import logging
import os
import re
import signal
import sys
from types import SimpleNamespace
from typing import List, Optional

from ..config import ServeConfig
from .batcher import MicroBatcher
from .http import (answer_errors_as_json, check_texts, credentials_from_environment, guarded, listen, predict_for,
                   run_server, server_config)

log = logging.getLogger("globalpointer")


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

    class Result(BaseModel):
        text: str
        entities: List[EntityOut]

    class ExtractResponse(BaseModel):
        results: List[Result]

    class Health(BaseModel):
        status: str = Field(description="ok while the service answers")
        model: str = Field(description="the model directory it serves")
        backend: str = Field(description=f"one of {', '.join(BACKENDS)}")
        device: str

    class Labels(BaseModel):
        labels: List[str] = Field(description="the entity types, in the model's order")

    class Problem(BaseModel):
        detail: str = Field(description="what was wrong and what would fix it")

    return SimpleNamespace(ExtractRequest=ExtractRequest, ExtractResponse=ExtractResponse, Health=Health,
                           Labels=Labels, Problem=Problem)


def create_app(ner, limits: ServeConfig, credentials=None):
    """The FastAPI application over a ``globalpointer.load`` pipeline, behind the layer of ``http``
    (with ``credentials``, (user, password), every request must carry them)."""
    from fastapi import Request, Response
    from fastapi_offline import FastAPIOffline

    models = api_models(limits)
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
                         description=f"Entities of types {', '.join(ner.labels)} from {ner.directory} "
                                     f"({ner.backend} backend).")
    answer_errors_as_json(app, "POST /v1/extract, GET /v1/labels, GET /health and GET /docs", '{"texts": ["..."]}')

    @app.get("/health", response_model=models.Health, operation_id="health")
    async def health():
        return {"status": "ok", "model": ner.directory, "backend": ner.backend, "device": ner.runtime.device}

    @app.get("/v1/labels", response_model=models.Labels, operation_id="labels")
    async def labels():
        return {"labels": ner.labels}

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
        answer = {"results": [{"text": text, "entities": entities} for text, entities in zip(texts, found)]}
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
    """The application of one worker process (uvicorn's factory): the model loaded as the parent
    process checked it, from the arguments it handed over in ``WORKER_ARGS``."""
    from uvicorn.config import STARTUP_FAILURE

    from ..errors import UserError, memory_detail, setup_logging
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
    except MemoryError as error:  # Python's, and Paddle's ResourceExhausted
        print(f"error: out of memory loading the model in a worker process ({memory_detail(error)}); each worker holds a copy "
              f"of it: run fewer (--workers, serve.workers) or on a machine with more memory", file=sys.stderr)
        sys.exit(STARTUP_FAILURE)
    for number, handler in handlers.items():
        signal.signal(number, handler)
    return create_app(ner, ner.config.serve, credentials_from_environment())


def run_service(model: str, overrides: List[str], backend: Optional[str] = None) -> None:
    """Serve ``model`` until SIGTERM or Ctrl-C: stop accepting, finish the requests in flight (within
    ``serve.shutdown_timeout_s``), in every worker process."""
    from ..model_directory.opening import open_model
    from ..errors import UserError
    from ..inference.pipeline import inference_config, load
    from ..runtime import choose_device, cpu_thread_count

    opened = open_model(model)  # once: this process's config check and its model read the same files
    config = inference_config(opened, overrides, backend=backend)
    limits = config.serve
    credentials = credentials_from_environment()
    sock = listen(limits.host, limits.port)  # before the model loads: a port in use is one line, at once
    on_gpu = choose_device(config.device).startswith("gpu")
    workers = worker_count(limits.workers, on_gpu, cpu_thread_count(0, 1))  # (0, 1): every core of this process
    threads = cpu_thread_count(config.cpu_threads, workers)
    log.info("%d worker process(es) on %s:%d%s", workers, limits.host, sock.getsockname()[1],
             "" if on_gpu else f", {threads} CPU thread(s) each")
    if workers == 1:
        ner = load(opened, overrides, backend=backend)
        run_server(create_app(ner, limits, credentials), limits, sock)
        return
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    os.environ[WORKER_ARGS] = json.dumps({"model": model, "overrides": overrides + [f"cpu_threads={threads}"],
                                          "backend": backend})
    supervisor = Multiprocess(server_config("globalpointer.deploy.serve:worker_app", limits, factory=True,
                                            workers=workers), sockets=[sock])
    supervisor.run()
    if any(process.exitcode == STARTUP_FAILURE for process in supervisor.processes):
        raise UserError("a worker process could not start: its error is above")
