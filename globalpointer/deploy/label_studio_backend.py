"""The model as a Label Studio ML backend: ``globalpointer label-studio-backend --model RUN/best``.

Label Studio's ML-backend protocol (the one its ``label-studio-ml`` package serves):

- ``GET /health`` answers at once, whatever the model is doing (Label Studio waits 1 s).
- ``POST /setup`` ``{"project", "schema", "hostname", "access_token"}`` -> ``{"model_version"}``.
  Label Studio's address and token, which a training round uses to fetch the project's annotations,
  come from the command line and the environment (``--label-studio-url``, ``LABEL_STUDIO_API_KEY``);
  ``/setup`` supplies them only to a backend that requires basic authentication, both together and
  once (``LabelStudioConnection``): an unauthenticated caller never chooses where the token goes.
- ``POST /predict`` ``{"tasks", "label_config"}`` -> ``{"results": [prediction per task]}``.  Each
  prediction holds ``labels`` regions named as in the project's interface, a score per region, the
  task's score (its least certain region: Label Studio's uncertainty sampling opens the lowest first)
  and the ``model_version``.
- ``POST /webhook`` with ``START_TRAINING`` (the project's "Start training", or every N annotations)
  or an ``ANNOTATION_*`` event starts a training round in the background and answers at once.

A round fetches the project's annotated tasks through Label Studio's export API, writes them beside
the base config's training texts into ``WORK_DIR/round-NNN/``, and runs ``globalpointer train`` there
in its own process.  A project whose labeling interface offers only some of the model's types makes
its annotations a data entry declaring those types, so they teach nothing about the others.  The
served model keeps answering; only once the new checkpoint is written is it
loaded and swapped in, and ``/setup`` and every prediction then carry its ``model_version`` (its
directory).  A round that fails leaves the served model as it was; events that come while a round
runs start one more round after it.

Every request passes the layer of ``http.py`` that ``serve`` passes too (bounds answered 413/431,
authentication, predictions through the micro-batcher, work dropped when its client leaves, SIGTERM
within ``serve.shutdown_timeout_s``).
"""
import contextlib
import dataclasses
import json
import logging
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ElementTree
from collections import Counter
from typing import Callable, List, NamedTuple, Optional, Tuple

from ..errors import UserError
from ..files import parse_json
from ..spans import Record
from ..web import OutgoingError, check_address, fetch
from ..inference.label_studio import prediction_for
from .batcher import MicroBatcher
from .http import answer_errors_as_json, check_texts, guarded, predict_for

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


def task_texts(tasks: list, interface: Interface) -> List[str]:
    """The text of every task, from the field the labeling interface shows; ValueError naming a task without one."""
    texts = []
    for index, task in enumerate(tasks):
        data = task.get("data") if isinstance(task, dict) else None
        text = data.get(interface.text_field) if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise ValueError(f"tasks[{index}] has no text in data.{interface.text_field}, the field the "
                             f"labeling interface shows")
        texts.append(text)
    return texts


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
        from ..inference.pipeline import load

        with self.lock:  # Paddle builds it between two forward passes, not during one
            self.now = Served(load(directory, self.overrides), os.path.normpath(directory))
        log.info("now serving %s", self.now.version)

    def predict_steps(self, texts: List[str]):
        now = self.now
        found = yield from now.pipeline.predict_steps(texts, self.rows_per_pass)
        return [(now.version, entities) for entities in found]


def label_studio_address(url: str, where: str) -> str:
    """``url`` as the base of Label Studio's API: http or https with a host, nothing else (a file: URL
    would make a round read a local file, and its token would go wherever the URL says)."""
    try:
        parts = check_address(url, where)  # scheme, host and port
    except OutgoingError as error:
        raise ValueError(str(error)) from None
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError(f"{where}: Label Studio's address must be http:// or https:// with a host and no user, "
                         f"query or fragment, e.g. http://127.0.0.1:8080; got {url!r}")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


class LabelStudioConnection:
    """Where Label Studio is and the token its API takes, set once: from the command line and the
    environment, or else by the first ``/setup`` that carries both over an authenticated request.  The
    token is sent to that address only; it is in no log, answer or file of the backend."""

    def __init__(self, url: str = "", token: str = "", setup_allowed: bool = False):
        self.url = label_studio_address(url, "--label-studio-url") if url else ""
        self.token = token
        self.setup_allowed = setup_allowed  # only over basic authentication
        self.lock = threading.Lock()
        self.said_why = False  # Label Studio calls /setup again and again: why it is not used is said once

    @property
    def ready(self) -> bool:
        return bool(self.url and self.token)

    def from_setup(self, hostname, token) -> None:
        """What ``/setup`` sends, taken only if nothing is set yet, both are there, and the request was
        authenticated; a hostname that is no http(s) address is a ValueError (400)."""
        if not (hostname and token) or not isinstance(hostname, str) or not isinstance(token, str):
            return
        url = label_studio_address(hostname, "/setup hostname")
        with self.lock:
            if self.url or self.token:
                return
            if not self.setup_allowed:
                if self.said_why:
                    return
                self.said_why = True
                log.warning("/setup sent Label Studio's address and a token: not used, as the backend does not require "
                         "basic authentication; start it with --label-studio-url and LABEL_STUDIO_API_KEY (or with "
                         "BASIC_AUTH_USER and BASIC_AUTH_PASS)")
                return
            self.url, self.token = url, token
        log.info("Label Studio at %s (from /setup)", url)


# What one export of a project may weigh: past it the round fails (its tasks would not fit a training run anyway)
MAX_EXPORT_BYTES = 1 << 30


def api_headers(token: str, url: str) -> dict:
    """Authorization for Label Studio's API: a personal access token (a JWT) is exchanged for an
    access token first; a legacy token is sent as it is."""
    if token.count(".") != 2:
        return {"Authorization": f"Token {token}"}
    answer = http_json(f"{url}/api/token/refresh", {"refresh": token}, {})
    return {"Authorization": f"Bearer {answer['access']}"}


def http_json(url: str, body: Optional[dict], headers: dict, timeout: float = 120):
    """Label Studio's JSON answer to a request (web.fetch: every failure one error, credentials never quoted)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **headers})
    secrets = [value.split(" ", 1)[-1] for value in headers.values()] + ([body.get("refresh", "")] if body else [])
    content = fetch(request, timeout, MAX_EXPORT_BYTES, secrets=secrets,
                    what_to_check="Label Studio's address (--label-studio-url), its token (LABEL_STUDIO_API_KEY) "
                                  "and that it runs")
    try:
        return parse_json(content)
    except ValueError as error:
        raise UserError(f"Label Studio's answer to {url} is not JSON ({error})") from None


def project_id(project) -> int:
    """The id of a webhook's project: a positive integer (it goes into the export's URL)."""
    if not isinstance(project, dict) or "id" not in project:
        raise ValueError("the event needs its \"project\" object with its \"id\"")
    value = project["id"]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"project.id must be a positive integer, got {value!r}")
    return value


class Trainer:
    """Training rounds, one at a time, in a thread: fetch, write, train in a process, load, swap."""

    def __init__(self, work_dir: str, base_config: str, labels: List[str], swap: Callable[[str], None],
                 connection: LabelStudioConnection, stop_timeout: float = 30):
        self.work_dir = work_dir
        self.connection = connection
        self.stop_timeout = stop_timeout
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
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()

    def _work(self) -> None:
        while True:
            with self.changed:
                self.changed.wait_for(lambda: self.wanted is not None)
                project, self.wanted, self.running = self.wanted, None, True
            try:
                self.last = {"round": self._round(project), "state": "served"}
            except Exception as error:  # the served model stays: the failure is logged, and /health says where
                log.error("training round failed, the served model is unchanged: %s", error)
                self.last = {"round": self.last.get("round"), "state": "failed", "error": round_failure(error)}
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
        from ..model_directory.layout import CONFIG
        from ..model_directory.opening import read_config
        from ..config import dump_config, with_overrides
        from ..corpus import load_records
        from ..files import atomic_write_text

        directory = self._next_round()
        log.info("training round %s: fetching the annotations of project %d", directory, project["id"])
        url = self.connection.url
        tasks = http_json(f"{url}/api/projects/{int(project['id'])}/export?exportType=JSON&download_all_tasks=false",
                          None, api_headers(self.connection.token, url))
        annotations = os.path.join(directory, "annotations.json")
        atomic_write_text(annotations, json.dumps(tasks, ensure_ascii=False))
        base = read_config(self.base_config)
        # data.limit shaped the base model's run: a round reads every annotation and every base text
        base = dataclasses.replace(base, data=dataclasses.replace(base.data, limit=0))
        annotated = offered_only(load_records(annotations, format="label-studio", on_error="skip"), project["labels"])
        settings = round_data(base, annotated, self.labels, project["labels"], directory)
        config_path = os.path.join(directory, CONFIG)
        atomic_write_text(config_path, dump_config(with_overrides(base, settings, overrides_from=None)))
        log.info("training round %s: %d annotated texts and the base config's training data; log in %s/train.log",
                 directory, len(annotated), directory)
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


def round_failure(error: Exception) -> str:
    """What /health, which needs no login on loopback, says of a failed round: the kind of failure, no
    text from Label Studio (an address that echoes requests would show the token there)."""
    if isinstance(error, OutgoingError):
        return "Label Studio's annotations could not be fetched; the backend's log says why"
    if isinstance(error, UserError):  # the round's own training: its last line, from this machine
        return str(error)
    return f"the round failed ({error.__class__.__name__}); the backend's log says why"


def offered_only(records: List[Record], offered: List[str]) -> List[Record]:
    """The annotations without the entities of labels the project's interface no longer offers (tasks
    annotated before a label was removed): skipped and counted, so that one old annotation does not
    fail every later round."""
    kept = [record._replace(entities=[e for e in record.entities if e.type in offered]) for record in records]
    dropped = Counter(e.type for record in records for e in record.entities if e.type not in offered)
    if dropped:
        log.warning("training round: %s left out: the labeling interface no longer offers %s",
                    ", ".join(f"{count} {kind} annotation(s)" for kind, count in sorted(dropped.items())),
                    "them" if len(dropped) > 1 else "it")
    return kept


def round_data(base, annotated: List[Record], trained: List[str], offered: List[str], directory: str) -> list:
    """The overrides of the base config for a round in ``directory``: its types (the model's, then those
    the project adds), and its training and dev data as entries that say what each file annotates.
    The project's annotations annotate the types its interface ``offers``; a base file given as a plain
    path annotates the types the model was ``trained`` for, so when the project adds a type, that file
    is declared for them (its texts would otherwise teach that the new type is absent)."""
    from ..corpus import load_records
    from ..data.readers import write_jsonl_records
    from ..data.sources import DataSource, source_entries

    labels = trained + [t for t in offered if t not in trained]
    settings = [("data.test", ""), ("output_dir", os.path.join(directory, "run")), ("data.labels", labels)]
    round_file = os.path.join(directory, "train.jsonl")
    adds_types, annotates_some = len(labels) > len(trained), set(offered) != set(labels)
    if isinstance(base.data.train, list) or adds_types or annotates_some:
        write_jsonl_records(annotated, round_file)
        entries = [declared_entry(source, base.data.format, trained if adds_types else [])
                   for source in source_entries(base.data.train)]
        settings.append(("data.train", entries + [DataSource(round_file, "jsonl",
                                                             list(offered) if annotates_some else [])]))
    else:  # one file of every type, as the base's
        train = load_records(base.data.train, **base.data.reading) if base.data.train else []
        write_jsonl_records(train + annotated, round_file)
        settings += [("data.train", round_file), ("data.format", "jsonl")]
    if isinstance(base.data.dev, list) or (base.data.dev and adds_types):  # scored on what each file annotates
        settings.append(("data.dev", [declared_entry(source, base.data.format, trained if adds_types else [])
                                      for source in source_entries(base.data.dev)]))
    elif base.data.dev:
        dev_file = os.path.join(directory, "dev.jsonl")
        write_jsonl_records(load_records(base.data.dev, **base.data.reading), dev_file)
        settings.append(("data.dev", dev_file))
    return settings


def declared_entry(source, data_format: str, types: List[str]):
    """A base config's data entry as a round names it: with the format the base read it in, and, when it
    declares no types, ``types`` (none: every type)."""
    return dataclasses.replace(source, format=source.format or data_format, types=source.types or list(types))


def predictions(found: List[Tuple[str, list]], interface) -> List[dict]:
    """Label Studio's prediction of each task from its (model version, entities), with the types the
    project's interface offers."""
    offered = set(interface.labels)
    return [prediction_for([e for e in entities if e["type"] in offered], version, interface.from_name,
                           interface.to_name) for version, entities in found]


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
    from ..model_directory.opening import open_model
    from ..inference.pipeline import inference_config, load
    from .http import credentials_from_environment, is_loopback, listen, run_server

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
