"""The backend's service: the served model, swapped whole between rounds, and the routes of the
protocol on the HTTP layer both services share."""
import contextlib
import logging
import os
import threading
from typing import List, NamedTuple, Optional, Tuple

from ...errors import UserError
from ..batcher import MicroBatcher
from ..http import answer_errors_as_json, check_texts, guarded, predict_for

from .connection import LabelStudioConnection, label_studio_address, project_id
from .protocol import TRAINING_EVENTS, predictions, read_interface, task_texts
from .rounds import Trainer

log = logging.getLogger("globalpointer")


class Served(NamedTuple):
    pipeline: object  # a globalpointer.load pipeline
    version: str


class ServedModel:
    """The model the backend serves, swapped for each finished round's between two forward passes;
    a job ends on the model it started with, and says which (its ``version``)."""

    def __init__(self, pipeline, directory: str, overrides: Optional[List[str]]):
        self.now = Served(pipeline, os.path.normpath(directory))
        self.overrides = overrides
        self.rows_per_pass = pipeline.config.serve.rows_per_pass
        self.lock = threading.Lock()  # one Paddle user at a time: a forward pass, or loading a round's model

    def swap(self, directory: str) -> None:
        from ...inference.pipeline import load

        with self.lock:  # Paddle builds it between two forward passes, not during one
            self.now = Served(load(directory, self.overrides), os.path.normpath(directory))
        log.info("now serving %s", self.now.version)

    def predict_steps(self, texts: List[str]):
        now = self.now
        found = yield from now.pipeline.predict_steps(texts, self.rows_per_pass, certainty=True)
        return [(now.version, entities) for entities in found]


NOT_CONNECTED = ("no Label Studio address and token: start the backend with --label-studio-url and "
                 "LABEL_STUDIO_API_KEY (or with basic authentication, when Label Studio then calls /setup with them)")


def answer_errors(app) -> None:
    """The HTTP layer's answers to bodies that cannot be read and routes not served (as ``serve``
    gives them), and 400 naming what a request of the protocol lacks (the checks raise ValueError)."""
    from fastapi.responses import JSONResponse

    answer_errors_as_json(app, "GET /health, POST /setup, POST /predict and POST /webhook",
                          '{"tasks": [{"data": {"text": "..."}}], "label_config": "<View>...</View>"}')

    @app.exception_handler(ValueError)
    async def bad_request(request, error: ValueError):
        return JSONResponse({"detail": str(error)}, status_code=400)


def create_app(model: str, pipeline, work_dir: str, base_config: str, label_studio_url: str = "",
               api_key: str = "", overrides: Optional[List[str]] = None,
               basic_auth: Optional[Tuple[str, str]] = None):
    """The FastAPI application of the backend, serving ``pipeline`` (loaded from ``model``) behind the
    layer of ``http.py``, with ``pipeline.config.serve``'s bounds.  With ``basic_auth`` (user,
    password) every request must carry them, as Label Studio sends them when the model is connected
    with basic authentication; only then may ``/setup`` say where Label Studio is."""
    from fastapi import Body, HTTPException, Request
    from fastapi.responses import JSONResponse
    from fastapi_offline import FastAPIOffline

    limits = pipeline.config.serve
    served = ServedModel(pipeline, model, overrides)
    connection = LabelStudioConnection(label_studio_url, api_key, setup_allowed=basic_auth is not None)
    trainer = Trainer(work_dir, base_config, list(pipeline.labels), served.swap, connection, limits.shutdown_timeout_s)
    batcher = MicroBatcher.for_service(served.predict_steps, limits, pipeline.extractor.featurizer.window_size,
                                       served.lock)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        batcher.shut_down(limits.shutdown_timeout_s)
        trainer.close()

    app = FastAPIOffline(title="GlobalPointer NER: Label Studio ML backend", lifespan=lifespan,
                         description="Label Studio's ML-backend protocol: /health, /setup, /predict, /webhook.")

    answer_errors(app)

    @app.get("/health")
    @app.get("/")
    async def health():
        return {"status": "UP", "model_class": "GlobalPointer", "model_version": served.now.version,
                "training": "running" if trainer.running else "idle", "last_round": trainer.last}

    @app.post("/setup")
    async def setup(body: dict = Body(...)):
        read_interface(body.get("schema", ""))
        connection.from_setup(body.get("hostname"), body.get("access_token"))
        return {"model_version": served.now.version}

    @app.post("/predict")
    async def predict(request: Request, body: dict = Body(...)):
        tasks = body.get("tasks")
        if not isinstance(tasks, list):
            raise HTTPException(400, "the request needs \"tasks\": a list of Label Studio tasks")
        interface = read_interface(body.get("label_config", ""))
        texts = task_texts(tasks, interface)
        await check_texts(texts, limits, pipeline.extractor.featurizer, name="tasks")
        found = await predict_for(batcher, texts, request) if texts else []
        return {"results": predictions(found, interface), "model_version": found[0][0] if found else served.now.version}

    @app.post("/webhook")
    async def webhook(body: dict = Body(...)):
        action = body.get("action")
        if action not in TRAINING_EVENTS:
            return JSONResponse({"status": "ignored", "action": action}, status_code=200)
        project = body.get("project")
        number = project_id(project)
        if not connection.ready:
            raise HTTPException(409, NOT_CONNECTED)
        trainer.request({"id": number, "labels": read_interface(project.get("label_config", "")).labels})
        return JSONResponse({"status": "training", "action": action}, status_code=201)

    app.state.trainer = trainer
    app.state.batcher = batcher
    return guarded(app, limits, basic_auth, "connect it in Label Studio with the user and password it was "
                                            "started with (basic authentication)")


def run_backend(model: str, overrides: List[str], work_dir: str, base_config: str, label_studio_url: str,
                api_key: str, allow_unauthenticated: bool = False) -> None:
    from ...model_directory.opening import open_model
    from ...inference.pipeline import inference_config, load
    from ..http import credentials_from_environment, is_loopback, listen, run_server

    if label_studio_url:  # checked whole before anything else, as a one-line error
        try:
            label_studio_address(label_studio_url, "--label-studio-url")
        except ValueError as error:
            raise UserError(str(error)) from None
    if not os.path.isfile(base_config):
        raise UserError(f"--base-config: file not found: {base_config}")
    credentials = credentials_from_environment()
    opened = open_model(model)  # once: the config check and the model read the same files
    limits = inference_config(opened, overrides).serve
    if credentials is None and not is_loopback(limits.host) and not allow_unauthenticated:
        raise UserError(f"--host {limits.host} lets every machine that reaches it ask for predictions and start "
                        f"training rounds with your Label Studio token: set BASIC_AUTH_USER and BASIC_AUTH_PASS (and "
                        f"connect Label Studio with them), or pass --allow-unauthenticated if this network is yours")
    sock = listen(limits.host, limits.port)  # before the model loads: a port in use is one line, at once
    pipeline = load(opened, overrides)
    app = create_app(model, pipeline, work_dir, base_config, label_studio_url, api_key, overrides, credentials)
    log.info("Label Studio ML backend on http://%s:%d serving %s; training rounds go to %s", limits.host,
             sock.getsockname()[1], model, work_dir)
    run_server(app, limits, sock)
