"""Training rounds: a project's annotations beside the base config's data, trained by ``globalpointer
train`` in a process of its own, the new model swapped in once written."""
import dataclasses
import json
import logging
import os
import subprocess
import sys
import threading
from collections import Counter
from typing import Callable, List, Optional

from ...data.event_formats import event_record
from ...errors import UserError
from ...spans import Record, argument_label
from ...web import OutgoingError

from .connection import LabelStudioConnection, api_headers, http_json

log = logging.getLogger("globalpointer")


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
        from ...model_directory.layout import CONFIG
        from ...model_directory.opening import read_config
        from ...config import dump_config, with_overrides
        from ...corpus import load_records
        from ...files import atomic_write_text

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
    kept = [offered_events(record, offered) if record.events else
            record._replace(entities=[e for e in record.entities if e.type in offered],
                            relations=tuple(r for r in record.relations if r.head.type in offered
                                            and r.tail.type in offered)) for record in records]
    dropped = Counter(e.type for record in records for e in record.entities if e.type not in offered)
    if dropped:
        log.warning("training round: %s left out: the labeling interface no longer offers %s",
                    ", ".join(f"{count} {kind} annotation(s)" for kind, count in sorted(dropped.items())),
                    "them" if len(dropped) > 1 else "it")
    return kept


def offered_events(record: Record, offered: List[str]) -> Record:
    """An event record without the triggers and arguments whose labels (EVENT_TYPE:ROLE) are not offered."""
    events = []
    for event in record.events:
        trigger, arguments = [[a for a in group if argument_label(event.type, a.role) in offered]
                              for group in ((event.trigger,) if event.trigger else (), event.arguments)]
        if trigger or arguments:
            events.append(event._replace(trigger=trigger[0] if trigger else None, arguments=tuple(arguments)))
    return event_record(record.text, events, record.source)


def round_data(base, annotated: List[Record], trained: List[str], offered: List[str], directory: str) -> list:
    """The overrides of the base config for a round in ``directory``: its types (the model's, then those
    the project adds), and its training and dev data as entries that say what each file annotates.
    The project's annotations annotate the types its interface ``offers``; a base file given as a plain
    path annotates the types the model was ``trained`` for, so when the project adds a type, that file
    is declared for them (its texts would otherwise teach that the new type is absent)."""
    from ...corpus import load_records
    from ...data.readers import write_jsonl_records
    from ...data.sources import DataSource, source_entries

    labels = trained + [t for t in offered if t not in trained]
    settings = [("data.test", ""), ("output_dir", os.path.join(directory, "run")), ("data.labels", labels)]
    round_file = os.path.join(directory, "train.jsonl")
    adds_types, annotates_some = len(labels) > len(trained), set(offered) != set(labels)
    if isinstance(base.data.train, list) or adds_types or annotates_some:
        write_jsonl_records(annotated, round_file)
        written = written_as(annotated)
        entries = [declared_entry(source, base.data.format, trained if adds_types else [])
                   for source in source_entries(base.data.train)]
        settings.append(("data.train", entries + [DataSource(round_file, written,
                                                             list(offered) if annotates_some else [])]))
    else:  # one file of every type, as the base's
        train = load_records(base.data.train, **base.data.reading) if base.data.train else []
        write_jsonl_records(train + annotated, round_file)
        written = written_as(train + annotated)
        # an entry of its own format: data.format stays the base's, the format evaluate and calibrate
        # read a user's file in with the round's model
        settings.append(("data.train", [DataSource(round_file, written, [])]))
    if isinstance(base.data.dev, list) or (base.data.dev and adds_types):  # scored on what each file annotates
        settings.append(("data.dev", [declared_entry(source, base.data.format, trained if adds_types else [])
                                      for source in source_entries(base.data.dev)]))
    elif base.data.dev:
        dev_file = os.path.join(directory, "dev.jsonl")
        dev = load_records(base.data.dev, **base.data.reading)
        write_jsonl_records(dev, dev_file)
        settings.append(("data.dev", [DataSource(dev_file, written_as(dev), [])]))
    return settings


def written_as(records: List[Record]) -> str:
    """The format of the lines ``write_jsonl_records`` wrote of ``records``: ``events`` for event records."""
    return "events" if any(record.events for record in records) else "jsonl"


def declared_entry(source, data_format: str, types: List[str]):
    """A base config's data entry as a round names it: with the format the base read it in, and, when it
    declares no types, ``types`` (none: every type)."""
    return dataclasses.replace(source, format=source.format or data_format, types=source.types or list(types))
