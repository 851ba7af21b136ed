"""The model as a Label Studio ML backend: ``globalpointer label-studio-backend --model RUN/best``.

Label Studio's ML-backend protocol (the one its ``label-studio-ml`` package serves):

- ``GET /health`` answers at once, whatever the model is doing (Label Studio waits 1 s).
- ``POST /setup`` ``{"project", "schema", "hostname", "access_token"}`` -> ``{"model_version"}``.  The
  hostname and token are kept to fetch the project's annotations for training.
- ``POST /predict`` ``{"tasks", "label_config"}`` -> ``{"results": [prediction per task]}``.  Each
  prediction holds ``labels`` regions named as in the project's interface, a score per region, the
  task's score (its least certain region: Label Studio's uncertainty sampling opens the lowest first)
  and the ``model_version``.
- ``POST /webhook`` with ``START_TRAINING`` (the project's "Start training", or every N annotations)
  or an ``ANNOTATION_*`` event starts a training round in the background and answers at once.

A round fetches the project's annotated tasks through Label Studio's export API, writes them beside
the base config's training texts into ``WORK_DIR/round-NNN/``, and runs ``globalpointer train`` there
in its own process.  The served model keeps answering; only once the new checkpoint is written is it
loaded and swapped in, and ``/setup`` and every prediction then carry its ``model_version`` (its
directory).  A round that fails leaves the served model as it was; events that come while a round
runs start one more round after it.
"""
import base64
import contextlib
import hmac
import json
import logging
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import xml.etree.ElementTree as ElementTree
from typing import Callable, List, NamedTuple, Optional, Tuple

from ..errors import UserError
from ..inference.label_studio import prediction_for

log = logging.getLogger("globalpointer")

TRAINING_EVENTS = ("START_TRAINING", "ANNOTATION_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_DELETED")


class Interface(NamedTuple):
    """What the project's labeling interface names: the ``<Labels>`` tag, the ``<Text>`` tag it
    labels, the task field that tag shows, and the labels offered."""
    from_name: str
    to_name: str
    text_field: str
    labels: List[str]


def read_interface(label_config: str) -> Interface:
    """The project's labeling interface (its XML); ValueError naming what is missing."""
    if not isinstance(label_config, str) or not label_config.strip():
        raise ValueError("the request has no label_config (the project's labeling interface)")
    try:
        root = ElementTree.fromstring(label_config)
    except ElementTree.ParseError as error:
        raise ValueError(f"the project's labeling interface is not readable XML ({error})") from None
    texts = {tag.get("name"): tag.get("value", "") for tag in root.iter() if tag.tag in ("Text", "HyperText")}
    for labels in root.iter("Labels"):
        to_name = labels.get("toName", "")
        if to_name in texts and texts[to_name].startswith("$"):
            return Interface(labels.get("name", ""), to_name, texts[to_name][1:],
                             [label.get("value", "") for label in labels.iter("Label")])
    raise ValueError("the project's labeling interface has no <Labels> tag on a <Text> tag; use the one "
                     "`globalpointer predict --label-config FILE` writes")


class Served(NamedTuple):
    pipeline: object  # a globalpointer.load pipeline
    version: str


def api_headers(token: str, hostname: str) -> dict:
    """Authorization for Label Studio's API: a personal access token (a JWT) is exchanged for an
    access token first; a legacy token is sent as it is."""
    if token.count(".") != 2:
        return {"Authorization": f"Token {token}"}
    answer = http_json(f"{hostname}/api/token/refresh", {"refresh": token}, {})
    return {"Authorization": f"Bearer {answer['access']}"}


def http_json(url: str, body: Optional[dict], headers: dict, timeout: float = 120):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as error:
        detail = error.read(500).decode("utf-8", "replace")
        raise UserError(f"Label Studio answered {error.code} to {url}: {detail}") from None
    except (urllib.error.URLError, OSError) as error:
        raise UserError(f"Label Studio at {url} cannot be reached ({error})") from None


class Trainer:
    """Training rounds, one at a time, in a thread: fetch, write, train in a process, load, swap."""

    def __init__(self, work_dir: str, base_config: str, labels: List[str], swap: Callable[[str], None]):
        self.work_dir = work_dir
        self.base_config = base_config
        self.labels = labels
        self.swap = swap
        self.changed = threading.Condition()
        self.wanted: Optional[dict] = None  # the project of the next round, once one is asked for
        self.running = False
        self.last: dict = {}  # the last round: its directory, state and, when it failed, why
        self.process: Optional[subprocess.Popen] = None  # the training of the round that runs
        self.closing = False
        self.thread = threading.Thread(target=self._work, name="label-studio-training", daemon=True)
        self.thread.start()

    def request(self, project: dict) -> None:
        with self.changed:
            self.wanted = project
            self.changed.notify()

    def wait_idle(self, timeout: float) -> bool:
        """For tests and shutdown: True once no round runs or waits."""
        with self.changed:
            return self.changed.wait_for(lambda: not self.running and self.wanted is None, timeout)

    def close(self) -> None:
        """The service stops: a training that runs is stopped with it (its round stays unfinished)."""
        self.closing = True
        process = self.process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()

    def _work(self) -> None:
        while True:
            with self.changed:
                self.changed.wait_for(lambda: self.wanted is not None)
                project, self.wanted, self.running = self.wanted, None, True
            try:
                self.last = {"round": self._round(project), "state": "served"}
            except Exception as error:  # the served model stays: the failure is logged and shown in /health
                log.error("training round failed, the served model is unchanged: %s", error)
                self.last = {"round": self.last.get("round"), "state": "failed", "error": str(error)}
            with self.changed:
                self.running = False
                self.changed.notify_all()

    def _next_round(self) -> str:
        os.makedirs(self.work_dir, exist_ok=True)
        number = 1 + max([int(name[6:]) for name in os.listdir(self.work_dir)
                          if name.startswith("round-") and name[6:].isdigit()] or [0])
        directory = os.path.join(self.work_dir, f"round-{number:03d}")
        os.makedirs(directory)  # a new directory each round: no earlier round is overwritten
        return directory

    def _round(self, project: dict) -> str:
        from ..config import dump_config, load_config
        from ..corpus import load_records
        from ..data.readers import write_jsonl_records
        from ..files import atomic_write_text

        directory = self._next_round()
        log.info("training round %s: fetching the annotations of project %s", directory, project["id"])
        headers = api_headers(project["token"], project["hostname"])
        tasks = http_json(f"{project['hostname']}/api/projects/{project['id']}/export?exportType=JSON"
                          f"&download_all_tasks=false", None, headers)
        annotations = os.path.join(directory, "annotations.json")
        atomic_write_text(annotations, json.dumps(tasks, ensure_ascii=False))
        base = load_config(self.base_config)
        annotated = load_records(annotations, format="label-studio", on_error="skip")
        train = load_records(base.data.train, **base.data.reading) if base.data.train else []
        dev = load_records(base.data.dev, **base.data.reading) if base.data.dev else []
        write_jsonl_records(train + annotated, os.path.join(directory, "train.jsonl"))
        settings = [f"data.train={os.path.join(directory, 'train.jsonl')}", "data.format=jsonl", "data.test=",
                    f"data.labels={json.dumps(self.labels + [t for t in project['labels'] if t not in self.labels])}",
                    f"output_dir={os.path.join(directory, 'run')}"]
        if dev:
            write_jsonl_records(dev, os.path.join(directory, "dev.jsonl"))
            settings.append(f"data.dev={os.path.join(directory, 'dev.jsonl')}")
        config_path = os.path.join(directory, "config.yaml")
        atomic_write_text(config_path, dump_config(load_config(self.base_config, settings)))
        log.info("training round %s: %d annotated texts and %d of the base config; log in %s/train.log",
                 directory, len(annotated), len(train), directory)
        with open(os.path.join(directory, "train.log"), "w", encoding="utf-8") as out:
            self.process = subprocess.Popen([sys.executable, "-m", "globalpointer", "train", "--config", config_path],
                                            stdout=out, stderr=subprocess.STDOUT)
            returncode = self.process.wait()
        if self.closing:
            raise UserError("the backend stopped during the round")
        if returncode != 0:
            with open(os.path.join(directory, "train.log"), encoding="utf-8", errors="replace") as log_file:
                tail = [line.strip() for line in log_file.read().replace("\r", "\n").splitlines() if line.strip()]
            raise UserError(f"globalpointer train exited {returncode} in {directory}: "
                            f"{tail[-1] if tail else 'no output'}")
        self.swap(os.path.join(directory, "run", "best"))
        return directory


def create_app(model: str, pipeline, work_dir: str, base_config: str, label_studio_url: str = "",
               api_key: str = "", overrides: Optional[List[str]] = None,
               basic_auth: Optional[Tuple[str, str]] = None):
    """The FastAPI application of the backend, serving ``pipeline`` (loaded from ``model``).  With
    ``basic_auth`` (user, password) every request must carry them, as Label Studio sends them when
    the model is connected with basic authentication."""
    from fastapi import Body, HTTPException
    from fastapi.responses import JSONResponse
    from fastapi_offline import FastAPIOffline
    from starlette.concurrency import run_in_threadpool

    from ..inference.pipeline import load

    served = Served(pipeline, os.path.normpath(model))
    model_lock = threading.Lock()  # one Paddle user at a time: predictions, and loading a new round's model
    connection = {"hostname": label_studio_url.rstrip("/"), "token": api_key}

    def swap(directory: str) -> None:
        nonlocal served
        with model_lock:
            served = Served(load(directory, overrides), os.path.normpath(directory))
        log.info("now serving %s", served.version)

    trainer = Trainer(work_dir, base_config, list(pipeline.labels), swap)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        trainer.close()

    app = FastAPIOffline(title="GlobalPointer NER: Label Studio ML backend", lifespan=lifespan,
                         description="Label Studio's ML-backend protocol: /health, /setup, /predict, /webhook.")

    if basic_auth is not None:
        expected = "Basic " + base64.b64encode(":".join(basic_auth).encode()).decode()

        @app.middleware("http")
        async def check_credentials(request, call_next):
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), expected.encode()):
                return JSONResponse({"detail": "this backend needs Label Studio's basic authentication: connect "
                                               "it with the user and password it was started with"},
                                    status_code=401, headers={"WWW-Authenticate": 'Basic realm="globalpointer"'})
            return await call_next(request)

    @app.exception_handler(ValueError)
    async def bad_request(request, error: ValueError):
        return JSONResponse({"detail": str(error)}, status_code=400)

    @app.get("/health")
    @app.get("/")
    async def health():
        return {"status": "UP", "model_class": "GlobalPointer", "model_version": served.version,
                "training": "running" if trainer.running else "idle", "last_round": trainer.last}

    @app.post("/setup")
    async def setup(body: dict = Body(...)):
        read_interface(body.get("schema", ""))
        # Label Studio sends where it is and its project owner's token: kept to fetch annotations
        # unless given on the command line
        connection["hostname"] = connection["hostname"] or str(body.get("hostname") or "").rstrip("/")
        connection["token"] = connection["token"] or str(body.get("access_token") or "")
        return {"model_version": served.version}

    def predict_tasks(tasks: list, interface: Interface) -> dict:
        texts = []
        for index, task in enumerate(tasks):
            data = task.get("data") if isinstance(task, dict) else None
            text = data.get(interface.text_field) if isinstance(data, dict) else None
            if not isinstance(text, str):
                raise ValueError(f"tasks[{index}] has no text in data.{interface.text_field}, the field the "
                                 f"labeling interface shows")
            texts.append(text)
        with model_lock:
            now = served
            found = now.pipeline(texts)
        offered = set(interface.labels)
        return {"results": [prediction_for([e for e in entities if e["type"] in offered], now.version,
                                           interface.from_name, interface.to_name) for entities in found],
                "model_version": now.version}

    @app.post("/predict")
    async def predict(body: dict = Body(...)):
        tasks = body.get("tasks")
        if not isinstance(tasks, list):
            raise HTTPException(400, "the request needs \"tasks\": a list of Label Studio tasks")
        interface = read_interface(body.get("label_config", ""))
        return await run_in_threadpool(predict_tasks, tasks, interface)

    @app.post("/webhook")
    async def webhook(body: dict = Body(...)):
        action = body.get("action")
        if action not in TRAINING_EVENTS:
            return JSONResponse({"status": "ignored", "action": action}, status_code=200)
        project = body.get("project")
        if not isinstance(project, dict) or "id" not in project:
            raise HTTPException(400, f"a {action} event needs its \"project\" object")
        if not connection["hostname"] or not connection["token"]:
            raise HTTPException(409, "no Label Studio address and token yet: connect the backend to the project "
                                     "(Label Studio then calls /setup), or start it with --label-studio-url and "
                                     "LABEL_STUDIO_API_KEY")
        labels = read_interface(project.get("label_config", "")).labels
        trainer.request({"id": project["id"], "labels": labels, **connection})
        return JSONResponse({"status": "training", "action": action}, status_code=201)

    app.state.trainer = trainer
    return app


def run_backend(model: str, overrides: List[str], host: str, port: int, work_dir: str, base_config: str,
                label_studio_url: str, api_key: str) -> None:
    import uvicorn

    from ..inference.pipeline import load
    from .serve import BodyLimit

    if not os.path.isfile(base_config):
        raise UserError(f"--base-config: file not found: {base_config}")
    user, password = os.environ.get("BASIC_AUTH_USER", ""), os.environ.get("BASIC_AUTH_PASS", "")
    if bool(user) != bool(password):
        raise UserError("basic authentication needs both BASIC_AUTH_USER and BASIC_AUTH_PASS")
    pipeline = load(model, overrides)
    # a body over serve.max_body_bytes is answered 413 before it is read, as in the HTTP service
    app = BodyLimit(create_app(model, pipeline, work_dir, base_config, label_studio_url, api_key, overrides,
                               (user, password) if user else None), pipeline.config.serve.max_body_bytes)
    log.info("Label Studio ML backend on http://%s:%d serving %s; training rounds go to %s", host, port, model,
             work_dir)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info")).run()
