"""Helpers the test modules share: fakes, a crafted pickle, file snapshots, the service as users start it."""
import json
import math
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from globalpointer.deploy.serve import workers_serving
from globalpointer.spans import Entity, Record

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
HEADLESS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fake_records(extractor, texts, margins=False):
    """``Extractor.records`` of a fake that has ``extract``: the margins of its entities (threshold 0.5)."""
    return [Record(text, found, margins=tuple(math.log(e.score) - math.log1p(-e.score) for e in found)
                   if margins else None) for text, found in zip(texts, extractor.extract(texts))]


class FakeExtractor:
    """Finds every occurrence of the word 'Paris' (the stream logic is what is under test)."""

    records = fake_records
    relations, events = [], False  # an entity model's

    def __init__(self):
        self.calls = []

    def extract(self, texts):
        self.calls.append(len(texts))
        out = []
        for text in texts:
            found, start = [], text.find("Paris")
            while start >= 0:
                found.append(Entity(start, start + 5, "LOC", 0.875))
                start = text.find("Paris", start + 1)
            out.append(found)
        return out


class _Payload:
    """Unpickling this calls open(marker, 'w'): proof that code ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return open, (self.marker, "w")


def write_malicious_pickle(path, marker):
    with open(path, "wb") as out:
        pickle.dump({"embeddings.word_embeddings.weight": _Payload(str(marker))}, out)


def snapshot(directory):
    """Every file under ``directory`` with its bytes."""
    found = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            found[os.path.relpath(path, directory)] = open(path, "rb").read()
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def raw_exchange(port: int, data: bytes, seconds: float = 10) -> bytes:
    """Everything a server on 127.0.0.1:``port`` answers to the bytes ``data``, until it closes the
    connection or ``seconds`` pass (a server that refuses may close before it has read them all)."""
    with socket.create_connection(("127.0.0.1", port), timeout=seconds) as connection:
        try:
            connection.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = b""
        try:
            while chunk := connection.recv(65536):
                answer += chunk
        except (ConnectionResetError, socket.timeout):
            pass
    return answer


def call(base, path, body=None, raw: bytes = None, headers=None, timeout: float = 60):
    """(status, JSON answer) of one request: None for an empty answer, the text of an error that is no JSON."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json",
                                                                       **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            content = answer.read()
            return answer.status, json.loads(content) if content else None
    except urllib.error.HTTPError as error:
        content = error.read()
        try:
            return error.code, json.loads(content)
        except ValueError:
            return error.code, content.decode("utf-8", "replace")


class Service:
    """``globalpointer serve`` (or ``command``: label-studio-backend) started as users start it; its
    output read as it comes."""

    def __init__(self, model, *extra, command="serve", port=None, env=None):
        port = port or free_port()
        self.command = command
        self.base = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen([sys.executable, "-m", "globalpointer", command, "--model", str(model),
                                         "--port", str(port), *extra], env={**os.environ, **(env or {})},
                                        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.process.stdout), daemon=True)
        self.reader.start()
        self.wait_until_every_worker_serves()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_until_every_worker_serves(self) -> None:
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.process.poll() is not None:
                self.reader.join(timeout=10)
                raise AssertionError(f"the service exited: {self.output}")
            if workers_serving(self.output) or (self.command != "serve" and
                                                "Application startup complete" in self.output):
                assert call(self.base, "/health")[0] == 200
                return
            time.sleep(0.2)
        self.process.kill()
        raise AssertionError(f"the service's workers did not all start within 120 s: {self.output}")

    def cpu_seconds(self) -> float:
        """CPU time the service's processes (the supervisor and its workers) have used."""
        import psutil

        processes = [psutil.Process(self.process.pid)]
        processes += processes[0].children(recursive=True)
        total = 0.0
        for process in processes:
            try:
                total += sum(process.cpu_times()[:2])
            except psutil.NoSuchProcess:
                pass
        return total

    def wait_until_predicting(self, cpu_seconds: float = 0.5, timeout: float = 120) -> None:
        """Return once the service has used ``cpu_seconds`` of CPU since the call: a request sent
        before is being predicted (an idle service uses next to none)."""
        start, deadline = self.cpu_seconds(), time.time() + timeout
        while self.cpu_seconds() - start < cpu_seconds:
            if time.time() > deadline or self.process.poll() is not None:
                raise AssertionError(f"the service did not start predicting within {timeout} s: {self.output}")
            time.sleep(0.05)

    def stop(self):
        """(exit status, output) after SIGTERM."""
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=60)
            self.reader.join(timeout=10)
            return code, self.output
        finally:
            if self.process.poll() is None:
                self.process.kill()


def unrecorded(checkpoint):
    """``checkpoint`` (a Path) as a model of an earlier version writes it: checkpoint.json without the
    sizes and digests of the other files, which every open checks (``model_directory.layout.check_model_files``)."""
    from globalpointer.model_directory.layout import CHECKED_DIGESTS, CHECKED_FILES

    info = json.loads((checkpoint / "checkpoint.json").read_text())
    info.pop(CHECKED_FILES, None)
    info.pop(CHECKED_DIGESTS, None)
    (checkpoint / "checkpoint.json").write_text(json.dumps(info))
    return checkpoint


def rerecorded(checkpoint):
    """``checkpoint`` (a Path) whose files a test changed, recorded as a save records them: another model
    in its place, not a damaged one."""
    from globalpointer.model_directory.layout import CHECKED_DIGESTS, CHECKED_FILES, file_digests, file_record

    info = json.loads((checkpoint / "checkpoint.json").read_text())
    info[CHECKED_FILES] = file_record(str(checkpoint))
    info[CHECKED_DIGESTS] = file_digests(str(checkpoint), info[CHECKED_FILES])
    (checkpoint / "checkpoint.json").write_text(json.dumps(info))
    return checkpoint


def triples(record):
    """A record's relations as sorted (head text, head type, relation, tail text, tail type)."""
    return sorted((record.text[r.head.start:r.head.end], r.head.type, r.type, record.text[r.tail.start:r.tail.end],
                   r.tail.type) for r in record.relations)


def label_studio_result(record):
    """A gold record as a Label Studio annotation's result: a ``labels`` region per entity (ids r0, r1, ...)
    and a ``relation`` result between two of them per relation."""
    regions = [{"id": f"r{k}", "from_name": "label", "to_name": "text", "type": "labels",
                "value": {"start": e.start, "end": e.end, "text": record.text[e.start:e.end], "labels": [e.type]}}
               for k, e in enumerate(record.entities)]
    links = [{"type": "relation", "from_id": f"r{record.entities.index(r.head)}",
              "to_id": f"r{record.entities.index(r.tail)}", "direction": "right", "labels": [r.type]}
             for r in record.relations]
    return regions + links


def label_studio_tasks(records):
    """Gold records as Label Studio tasks, each with one annotation: its record's ``label_studio_result``."""
    return [{"id": index, "data": {"text": record.text},
             "annotations": [{"id": index, "result": label_studio_result(record)}]} for index, record in enumerate(records)]


def label_studio_links(result):
    """The (relation, head text, tail text) of a Label Studio result's ``relation`` results, in order."""
    regions = {r["id"]: r["value"]["text"] for r in result if r["type"] == "labels"}
    return [(r["labels"][0], regions[r["from_id"]], regions[r["to_id"]]) for r in result if r["type"] == "relation"]
