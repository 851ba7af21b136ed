"""The HTTP service: ``python -m globalpointer.serve --model RUN/best [--host H] [--port P] [--set serve.KEY=V]``.

``POST /v1/extract`` ``{"texts": [...]}`` -> ``{"results": [{"text", "entities": [...]}]}`` (the
entities of predict.py), ``GET /v1/labels``, ``GET /health``, OpenAPI docs at ``/docs``.
Concurrent requests are micro-batched: one worker thread owns the model, takes every request waiting
(up to ``serve.batch_texts`` texts), waits up to ``serve.batch_wait_ms`` for more while it has fewer
than its last call had, and predicts them in one call, so many small requests share forward passes.  Limits (``serve.max_texts``,
``serve.max_text_chars``, ``serve.max_body_bytes``) are answered with 413, malformed requests with
422, each with a message; SIGTERM stops accepting and lets requests in flight finish.
``serve.workers`` processes (default: one per CPU core, each on one core) share the port, each with
its own model and micro-batcher: on the CPU, single-core processes predict the small batches of
concurrent clients faster than one process on every core (docs/PERFORMANCE.md).
"""
import argparse
import asyncio
import json
import logging
import os
import queue
import re
import signal
import sys
import threading
import time
from typing import Callable, List, Optional, Sequence

from .config import ServeConfig

log = logging.getLogger("globalpointer")


class MicroBatcher:
    """Requests from many coroutines -> few ``predict`` calls on one thread."""

    def __init__(self, predict: Callable[[List[str]], List[List[dict]]], batch_texts: int, wait_ms: float):
        self.predict = predict
        self.batch_texts = batch_texts
        self.wait = wait_ms / 1000
        self.requests: "queue.Queue" = queue.Queue()
        self.calls = self.texts = 0  # predict calls and texts so far: how much sharing happened
        self.last_texts = batch_texts  # texts in the last call: how many to wait for in the next
        self.thread = threading.Thread(target=self._work, name="micro-batcher", daemon=True)
        self.thread.start()

    async def submit(self, texts: Sequence[str]) -> List[List[dict]]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.requests.put((list(texts), loop, future))
        return await future

    def close(self) -> None:
        self.requests.put(None)
        self.thread.join()

    def _gather(self, first) -> list:
        """The first request, every request already waiting (up to ``batch_texts``), then, while
        fewer texts than the last call had, what arrives within ``batch_wait_ms``: clients answered
        together come back together, and one that is alone is not kept waiting for company twice."""
        batch, count = [first], len(first[0])
        deadline = time.monotonic() + self.wait
        while count < self.batch_texts:
            try:
                item = self.requests.get_nowait()
            except queue.Empty:
                if count >= self.last_texts:
                    break
                try:
                    item = self.requests.get(timeout=max(deadline - time.monotonic(), 0))
                except queue.Empty:
                    break
            if item is None:  # closing: answer what was gathered, then stop
                self.requests.put(None)
                break
            batch.append(item)
            count += len(item[0])
        self.last_texts = count
        return batch

    def _work(self) -> None:
        while True:
            first = self.requests.get()
            if first is None:
                return
            batch = self._gather(first)
            texts = [text for item in batch for text in item[0]]
            try:
                results, error = self.predict(texts), None
                self.calls += 1
                self.texts += len(texts)
            except Exception as failure:  # answered as a 500 to the requests of this batch, the service goes on
                log.exception("prediction failed for a batch of %d texts", len(texts))
                results, error = [], failure
            offset = 0
            for request_texts, loop, future in batch:
                part = results[offset:offset + len(request_texts)]
                offset += len(request_texts)
                loop.call_soon_threadsafe(_settle, future, part, error)


def _settle(future: asyncio.Future, result, error: Optional[BaseException]) -> None:
    if future.cancelled():  # the client went away
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


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
            return await self._refuse(send)
        received, started, refused = 0, False, False

        async def counted_receive():
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit and not refused:
                    refused = True
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

    async def _refuse(self, send):
        body = (f'{{"detail": "request body over serve.max_body_bytes = {self.limit} bytes; send fewer or '
                f'shorter texts per request"}}').encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def create_app(ner, limits: ServeConfig):
    """The FastAPI application over a ``globalpointer.load`` pipeline."""
    from contextlib import asynccontextmanager

    from fastapi import FastAPI, HTTPException, Response
    from pydantic import BaseModel, ConfigDict, Field

    class ExtractRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")
        texts: List[str] = Field(description=f"texts to extract entities from (at most {limits.max_texts}, "
                                             f"each at most {limits.max_text_chars} characters)")

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

    batcher = MicroBatcher(lambda texts: [found for found in ner.pipe(texts, batch_size=len(texts) or 1)],
                           limits.batch_texts, limits.batch_wait_ms)

    @asynccontextmanager
    async def lifespan(app):
        yield
        batcher.close()
        log.info("served %d texts in %d prediction calls (%.1f texts per call)", batcher.texts, batcher.calls,
                 batcher.texts / max(batcher.calls, 1))

    app = FastAPI(title="GlobalPointer NER", lifespan=lifespan,
                  description=f"Entities of types {', '.join(ner.labels)} from {ner.directory} "
                              f"({ner.backend} backend).")

    @app.get("/health")
    async def health():
        return {"status": "ok", "model": ner.directory, "backend": ner.backend, "device": ner.runtime.device}

    @app.get("/v1/labels")
    async def labels():
        return {"labels": ner.labels}

    @app.post("/v1/extract", response_model=ExtractResponse,
              responses={413: {"description": "too many texts, a text too long, or a body too large"}})
    async def extract(request: ExtractRequest):
        texts = request.texts
        if len(texts) > limits.max_texts:
            raise HTTPException(413, f"{len(texts)} texts in one request; serve.max_texts is {limits.max_texts}: "
                                     f"split the request")
        for index, text in enumerate(texts):
            if len(text) > limits.max_text_chars:
                raise HTTPException(413, f"texts[{index}] has {len(text)} characters; serve.max_text_chars is "
                                         f"{limits.max_text_chars}")
        found = await batcher.submit(texts) if texts else []
        # encoded here: FastAPI's validation of the response against the model costs more than the
        # model itself for small requests (the model above still documents the answer)
        body = {"results": [{"text": text, "entities": entities} for text, entities in zip(texts, found)]}
        return Response(json.dumps(body, ensure_ascii=False), media_type="application/json")

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
    """The application of one worker process (uvicorn's factory): the model loaded with the arguments
    the parent process checked."""
    from uvicorn.config import STARTUP_FAILURE

    from .cli import load_for_inference, setup_logging
    from .errors import UserError

    setup_logging()
    # Importing paddle replaces uvicorn's graceful shutdown with an abort: uvicorn's handlers are put
    # back (a stop while the model loads still aborts this worker, which serves nothing yet).
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        ner = load_for_inference(argparse.Namespace(**json.loads(os.environ[WORKER_ARGS])))
    except UserError as error:  # the same in every worker: the supervisor stops instead of restarting it
        print(f"error: {error}", file=sys.stderr)
        sys.exit(STARTUP_FAILURE)
    for number, handler in handlers.items():
        signal.signal(number, handler)
    return create_app(ner, ner.config.serve)


def _serve(argv) -> int:
    from .cli import inference_arguments, load_for_inference
    from .errors import UserError
    from .pipeline import inference_config
    from .runtime import choose_device, cpu_thread_count

    parser = argparse.ArgumentParser(prog="python -m globalpointer.serve", description=__doc__.split("\n")[0])
    inference_arguments(parser)
    parser.add_argument("--host", help="same as --set serve.host=... (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="same as --set serve.port=... (default 8000)")
    parser.add_argument("--workers", type=int, help="same as --set serve.workers=... (default 0: one per CPU core)")
    args = parser.parse_args(argv)
    args.set += [f"serve.{key}={value}" for key, value in
                 (("host", args.host), ("port", args.port), ("workers", args.workers)) if value is not None]
    import uvicorn

    config = inference_config(args.model, args.set, backend=args.backend)
    limits = config.serve
    on_gpu = choose_device(config.device).startswith("gpu")
    workers = worker_count(limits.workers, on_gpu, cpu_thread_count(0, 1))  # (0, 1): every core of this process
    threads = cpu_thread_count(config.cpu_threads, workers)
    log.info("%d worker process(es) on %s:%d%s", workers, limits.host, limits.port,
             "" if on_gpu else f", {threads} CPU thread(s) each")
    settings = dict(host=limits.host, port=limits.port, log_level="info",
                    timeout_graceful_shutdown=limits.shutdown_timeout_s)
    if workers == 1:
        ner = load_for_inference(args)
        server = uvicorn.Server(uvicorn.Config(create_app(ner, limits), **settings))
        server.run()  # SIGTERM / Ctrl-C: stop accepting, finish requests in flight, run the lifespan's end
        return 0
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    os.environ[WORKER_ARGS] = json.dumps({**vars(args), "set": args.set + [f"cpu_threads={threads}"]})
    uvicorn_config = uvicorn.Config("globalpointer.serve:worker_app", factory=True, workers=workers, **settings)
    supervisor = Multiprocess(uvicorn_config, sockets=[uvicorn_config.bind_socket()])
    supervisor.run()  # SIGTERM / Ctrl-C: each worker stops accepting and finishes its requests in flight
    if any(process.exitcode == STARTUP_FAILURE for process in supervisor.processes):
        raise UserError("a worker process could not start: its error is above")
    return 0


def main(argv=None) -> int:
    from .cli import run_command

    return run_command(_serve, argv)


if __name__ == "__main__":
    sys.exit(main())
