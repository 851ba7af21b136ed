"""Load test of the HTTP service on loopback, next to predict.py's rate on the same model and backend.

    python bench/serve_load.py --model RUN/best [--backend auto] [--requests 512] [--clients 1,4,16]

Starts ``globalpointer serve`` on 127.0.0.1, then for each number of concurrent clients
sends a fixed number of one-text requests (CLUENER dev texts; each client keeps its connection
alive) and reports texts/s, p50 / p99
latency and errors.  The reference is predict.py's path in this process (``globalpointer.load`` with
the same backend, texts predicted in chunks of 512 lines as predict.py reads them), timed while the
service is idle; the ratio column is the service's texts/s over it (target at 16 clients: >= 0.8).
The clients run in this process on the same cores as the service: "client CPU %" is their share of
one core over the load.  The service runs as configured (``serve.workers``: one process per core by
default; ``--set serve.workers=1`` for one process on every core).
The host and numpy's float32 GEMM rate are printed first: compare numbers within one run only.

With ``--heavy``, for each ``--workers`` count and each ``--service`` (``serve``, and the Label Studio
backend, which stands on the same HTTP layer): one maximal request (texts summing to
``serve.max_request_tokens``, or with ``--big-text N`` one text of N characters) is kept in flight the
whole time while the one-text clients run (their p50 / p99 and errors are what a large request costs
the others), then SIGTERM is sent while a maximal request runs, and the seconds until the service has
exited are reported next to ``serve.shutdown_timeout_s``.  ``--set model.min_score=1e-6`` makes a
model predict many spans (the decoding a long text costs then grows with them).

With ``--hostile N``, for each ``--service``: the one-text clients (``--heavy-clients``, 16) alone and
beside a hostile mix, in turns (calm, hostile, calm, hostile): N slow-header clients, each sending one
byte of its headers every 10 s and connecting again when it is let go, and a client sending malformed
JSON, deeply nested JSON and bodies over ``serve.max_body_bytes`` in a loop.  It reports the normal
clients' texts/s, p50 / p99 latency and errors under each, with what the hostile clients were answered.
"""
import argparse
import contextlib
import http.client
import json
import os
import queue
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from typing import Tuple

from common import Rows, cluener_texts
from machine import gemm_rates
import globalpointer
from globalpointer import cpu_math
import globalpointer.inference.pipeline
from globalpointer.deploy.serve import workers_serving

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# the Label Studio backend's labeling interface for the requests below: every type, text in data.text
INTERFACE = ('<View><Labels name="label" toName="text">{}</Labels><Text name="text" value="$text"/></View>')


def request_for(service: str, texts, labels=("name",)) -> Tuple[str, str]:
    """(path, JSON body) asking ``service`` for the entities of ``texts``."""
    if service == "serve":
        return "/v1/extract", json.dumps({"texts": list(texts)})
    interface = INTERFACE.format("".join(f'<Label value="{label}"/>' for label in labels))
    return "/predict", json.dumps({"tasks": [{"data": {"text": text}} for text in texts], "label_config": interface})


def start_service(model: str, backend: str, port: int, log_path: str, settings,
                  service: str = "serve") -> Tuple[subprocess.Popen, int]:
    """The service and its number of worker processes, once every worker answers (a worker still
    loading its model when the load starts would leave the others every connection)."""
    log = open(log_path, "w")
    overrides = [item for setting in settings for item in ("--set", setting)]
    extra = ["--work-dir", log_path + ".rounds"] if service != "serve" else []
    process = subprocess.Popen([sys.executable, "-m", "globalpointer", service, "--model", os.path.abspath(model),
                                "--backend", backend, "--port", str(port), *extra, *overrides],
                               cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 180
    while time.time() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the service exited; see {log_path}")
        with open(log_path) as written:
            output = written.read()
        workers = workers_serving(output) if service == "serve" else int("Application startup complete" in output)
        if workers:
            return process, workers
        time.sleep(0.3)
    process.kill()
    raise SystemExit(f"the service did not start within 180 s; see {log_path}")


def load(port: int, texts, clients: int, service: str = "serve", labels=("name",)):
    """(seconds, the clients' CPU seconds, latencies, errors) of one request per text, ``clients`` requests in flight, each
    client on one kept-alive connection (as wrk and hey send their load)."""
    work: "queue.Queue" = queue.Queue()
    for text in texts:
        work.put(text)
    latencies, errors, lock = [], [], threading.Lock()

    def client():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            try:
                text = work.get_nowait()
            except queue.Empty:
                break
            path, body = request_for(service, [text], labels)
            start = time.perf_counter()
            try:
                connection.request("POST", path, body, {"Content-Type": "application/json"})
                answer = connection.getresponse()
                ok = answer.status == 200 and len(json.loads(answer.read())["results"]) == 1
                failure = None if ok else f"status {answer.status} or a wrong number of results"
            except Exception as error:  # counted, not raised: the report says how many
                failure = repr(error)
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            with lock:
                latencies.append(time.perf_counter() - start)
                if failure:
                    errors.append(failure)
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start, cpu = time.perf_counter(), time.process_time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start, time.process_time() - cpu, latencies, errors


def maximal_request(texts, budget: int, text_chars: int):
    """CLUENER texts joined into texts of at most ``text_chars`` characters until ``budget``
    characters (for Chinese, one token each) are reached."""
    pool, joined, total = "".join(texts), [], 0
    while total < budget:
        piece = pool[:min(text_chars, budget - total)]
        joined.append(piece)
        total += len(piece)
    return joined


def heavy(args, texts, reference: float) -> None:
    config = globalpointer.inference.pipeline.inference_config(args.model, args.set, backend=args.backend).serve
    labels = globalpointer.load(args.model, args.set, backend=args.backend).labels
    if args.big_text:
        pool = "".join(texts)
        big_texts = [(pool * (args.big_text // len(pool) + 1))[:args.big_text]]
    else:
        big_texts = maximal_request(texts, config.max_request_tokens, min(config.max_text_chars, 4000))
    rows = Rows()
    for service_kind in args.service.split(","):
        for workers in (int(w) for w in args.workers.split(",")) if service_kind == "serve" else (1,):
            heavy_run(args, service_kind, workers, texts, big_texts, labels, config, rows)
    rows.finish()


def heavy_run(args, service_kind, workers, texts, big_texts, labels, config, rows) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"serve_heavy_{port}.log")
    settings = args.set + ["serve.max_body_bytes=100000000"] + [f"serve.workers={workers}"] * (service_kind == "serve")
    service, _ = start_service(args.model, args.backend, port, log_path, settings, service_kind)
    stop, big_answers = threading.Event(), []
    path, body = request_for(service_kind, big_texts, labels)

    def keep_one_big_in_flight():
        while not stop.is_set():
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            start = time.perf_counter()
            try:
                connection.request("POST", path, body, {"Content-Type": "application/json"})
                answer = connection.getresponse()
                answer.read()
                big_answers.append((answer.status, time.perf_counter() - start))
            except Exception as error:  # SIGTERM below closes it
                big_answers.append((repr(error), time.perf_counter() - start))
            connection.close()

    try:
        load(port, texts[:32], 4, service_kind, labels)  # warm up
        runner = threading.Thread(target=keep_one_big_in_flight)
        runner.start()
        time.sleep(2.0)  # the maximal request is being predicted
        seconds, _, latencies, errors = load(port, texts, args.heavy_clients, service_kind, labels)
        ordered = sorted(latencies)
        stop.set()
        time.sleep(1.0)  # the next maximal request is in flight when the signal comes
        signalled = time.perf_counter()
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=600)
        exit_seconds = time.perf_counter() - signalled
        runner.join(timeout=600)
    finally:
        if service.poll() is None:
            service.kill()
    rows.add({"service": service_kind, "workers": workers, "small clients": args.heavy_clients,
              "requests": len(texts),
              "maximal request": f"{len(big_texts)} texts, {sum(map(len, big_texts))} characters",
              "maximal s": f"{statistics.median([s for status, s in big_answers if status == 200] or [0]):.1f}",
              "small texts/s": f"{len(texts) / seconds:.1f}",
              "small p50 ms": f"{ordered[len(ordered) // 2] * 1000:.1f}",
              "small p99 ms": f"{ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000:.1f}",
              "errors": len(errors), "SIGTERM to exit s": f"{exit_seconds:.1f}",
              "shutdown_timeout_s": config.shutdown_timeout_s})
    if errors:
        print("first error:", errors[0])


def hostile_mix(port: int, stop: threading.Event, slow_clients: int, route: str, answered: dict) -> list:
    """Threads that attack the service on ``port`` until ``stop``: ``slow_clients`` connections that send
    one header byte every 10 s (connecting again when closed), and a client of malformed and oversize
    bodies; ``answered`` counts the status lines they got."""
    head = f"POST {route} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n".encode()

    def count(status: str) -> None:
        answered[status] = answered.get(status, 0) + 1

    def slow():
        sockets = {}
        while not stop.is_set():
            for index in range(slow_clients):
                if stop.is_set():
                    break
                connection, sent, due = sockets.get(index, (None, 0, 0.0))
                if time.monotonic() < due:
                    continue
                try:
                    if connection is None:
                        connection = socket.create_connection(("127.0.0.1", port), timeout=5)
                        connection.setblocking(False)
                    connection.send(head[sent % len(head):sent % len(head) + 1])
                    sockets[index] = (connection, sent + 1, time.monotonic() + 10)
                except (BlockingIOError, InterruptedError):
                    sockets[index] = (connection, sent, time.monotonic() + 10)
                except OSError:  # let go by the service: read what it said, and come back
                    if connection is not None:
                        with contextlib.suppress(OSError):
                            count(connection.recv(12).decode("latin-1")[9:12] or "closed")
                        connection.close()
                    sockets[index] = (None, 0, 0.0)
            stop.wait(0.05)
        for connection, _, _ in sockets.values():
            if connection is not None:
                connection.close()

    def malformed():
        bodies = [b'{"texts": [', b"[" * 100000 + b"]" * 100000, b'{"texts": ["' + b"x" * 10_000_001 + b'"]}']
        while not stop.is_set():
            for body in bodies:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
                        connection.sendall(head + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                                           + body)
                        count(connection.recv(12).decode("latin-1")[9:12] or "closed")
                except OSError as error:
                    count(type(error).__name__)

    threads = [threading.Thread(target=slow, daemon=True), threading.Thread(target=malformed, daemon=True)]
    for thread in threads:
        thread.start()
    return threads


def hostile(args, texts) -> None:
    labels = globalpointer.load(args.model, args.set, backend=args.backend).labels
    rows = Rows()
    for service_kind in args.service.split(","):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        log_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"serve_hostile_{port}.log")
        service, workers = start_service(args.model, args.backend, port, log_path, args.set, service_kind)
        route = request_for(service_kind, [])[0]
        measured = {"calm": [], "hostile": []}
        answered: dict = {}
        try:
            load(port, texts[:32], 4, service_kind, labels)  # warm up
            for mix in ("calm", "hostile", "calm", "hostile"):
                stop, threads = threading.Event(), []
                if mix == "hostile":
                    threads = hostile_mix(port, stop, args.hostile, route, answered)
                    time.sleep(15)  # every slow client connected and trickling
                measured[mix].append(load(port, texts, args.heavy_clients, service_kind, labels))
                stop.set()
                for thread in threads:
                    thread.join(timeout=60)
        finally:
            service.send_signal(signal.SIGTERM)
            service.wait(timeout=120)
        for mix, runs in measured.items():
            latencies = sorted(latency for run in runs for latency in run[2])
            rows.add({"service": service_kind, "workers": workers, "mix": mix,
                      "normal clients": args.heavy_clients,
                      "slow-header clients": args.hostile if mix == "hostile" else 0,
                      "requests": sum(len(run[2]) for run in runs),
                      "texts/s": f"{statistics.median(len(texts) / run[0] for run in runs):.1f}",
                      "p50 ms": f"{latencies[len(latencies) // 2] * 1000:.1f}",
                      "p99 ms": f"{latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000:.1f}",
                      "errors": sum(len(run[3]) for run in runs)})
        print(f"{service_kind}: the hostile clients were answered {dict(sorted(answered.items()))}")
    rows.finish()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a checkpoint (RUN/best) or an export")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--requests", type=int, default=512, help="one-text requests per client count")
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of predict.py's path (median)")
    parser.add_argument("--heavy", action="store_true", help="small clients while a maximal request runs; SIGTERM")
    parser.add_argument("--heavy-clients", type=int, default=16, help="--heavy: one-text clients")
    parser.add_argument("--workers", default="1,2", help="--heavy: service processes, one run each (serve)")
    parser.add_argument("--service", default="serve", help="--heavy: serve, label-studio-backend, or both (comma)")
    parser.add_argument("--hostile", type=int, default=0, metavar="N",
                        help="the one-text clients alone and beside N slow-header clients and malformed bodies")
    parser.add_argument("--big-text", type=int, default=0,
                        help="--heavy: the maximal request is one text of this many characters")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override for the service and predict.py's path, "
                             "e.g. --set serve.batch_wait_ms=10")
    args = parser.parse_args()

    print(f"host: {cpu_math.CHOSEN}; {os.cpu_count()} cores")
    texts = cluener_texts(args.requests)
    ner = globalpointer.load(args.model, args.set, backend=args.backend)
    rates = gemm_rates(args.repeats)  # after load, which gives Paddle its threads
    print(f"float32 GEMM: numpy {rates['numpy']:.1f} GFLOP/s, paddle {rates['paddle']:.1f} GFLOP/s")
    ner.pipe(texts[:64], batch_size=512)  # warm up
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in ner.pipe(texts, batch_size=512):
            pass
        times.append(time.perf_counter() - start)
    reference = len(texts) / statistics.median(times)
    print(f"predict.py's path ({ner.backend}): {reference:.1f} texts/s (median of {args.repeats})")
    del ner
    if args.heavy:
        heavy(args, texts, reference)
        return
    if args.hostile:
        hostile(args, texts)
        return

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"serve_load_{port}.log")
    service, workers = start_service(args.model, args.backend, port, log_path, args.set)
    print(f"service: {workers} worker process(es)")
    rows = Rows()
    try:
        load(port, texts[:32], 4)  # warm up
        for clients in (int(c) for c in args.clients.split(",")):
            seconds, client_cpu, latencies, errors = load(port, texts, clients)
            ordered = sorted(latencies)
            rows.add({"clients": clients, "requests": len(texts), "texts/s": f"{len(texts) / seconds:.1f}",
                      "vs predict.py": f"{len(texts) / seconds / reference:.2f}",
                      "p50 ms": f"{ordered[len(ordered) // 2] * 1000:.1f}",
                      "p99 ms": f"{ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000:.1f}",
                      "errors": len(errors), "client CPU %": f"{client_cpu / seconds * 100:.0f}"})
            if errors:
                print("first error:", errors[0])
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=60)
    rows.finish()


if __name__ == "__main__":
    main()
