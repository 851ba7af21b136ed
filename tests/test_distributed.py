"""Two data-parallel processes on CPU (gloo), through paddle.distributed.launch as a user runs it."""
import json
import math
import os
import subprocess
import sys

import pytest

from synthetic import tiny_config
from conftest import ROOT



@pytest.mark.slow
def test_two_process_training(tmp_path):
    config = tiny_config(tmp_path, train__epochs=3)
    command = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2",
               "--log_dir", str(tmp_path / "log"), "train.py", "--config", config,
               "--set", f"data.test={tmp_path / 'dev.jsonl'}"]  # dev and test are decoded by rank 0 alone
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["test"]["f1"] == summary["best_dev_f1"]  # the best model, on the same file
    assert summary["world_size"] == 2
    batches = math.ceil(summary["train_windows"] / 16)
    assert summary["steps"] == 3 * math.ceil(batches / 2)  # each process takes every second batch
    assert summary["best_dev_f1"] > 0.5
    assert not os.path.exists(tmp_path / "log" / "workerlog.1") or \
        "Traceback" not in open(tmp_path / "log" / "workerlog.1").read()


@pytest.mark.slow
def test_two_process_prediction_equals_one_process(trained, tmp_path):
    """Each process predicts a contiguous share of the lines; the joined output is the single-process one."""
    from synthetic import make_records

    lines = [r["text"] for r in make_records(37, 5)] + ["", "no entity here"]
    lines[3] = json.dumps({"oops": 1})  # a JSON line in a text file is text: predicted like any other
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines), encoding="utf-8")  # no newline after the last line
    single, double = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    model = str(trained / "run" / "best")
    result = subprocess.run([sys.executable, "predict.py", "--model", model, "--input", str(source),
                             "--output", str(single), "--lines-per-chunk", "4"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    command = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2",
               "--log_dir", str(tmp_path / "log"), "predict.py", "--model", model, "--input", str(source),
               "--output", str(double), "--lines-per-chunk", "4"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert double.read_text(encoding="utf-8") == single.read_text(encoding="utf-8")
    assert len(single.read_text(encoding="utf-8").splitlines()) == len(lines)
    assert sorted(os.listdir(tmp_path)) == sorted(["in.txt", "one.jsonl", "two.jsonl", "log"])  # parts removed


def test_only_the_main_process_decodes_the_dev_set():
    from types import SimpleNamespace

    from globalpointer.spans import Entity, Record
    from globalpointer.training.loop import evaluate

    class Counting:
        calls = 0

        def extract(self, texts):
            Counting.calls += 1
            return [[Entity(0, 1, "A")] for _ in texts]

    records = [Record("ab", [Entity(0, 1, "A")]), Record("cd", [])]
    main = SimpleNamespace(is_main=True, world_size=1)
    other = SimpleNamespace(is_main=False, world_size=1)
    assert evaluate(Counting(), records, ["A"], main)["micro"]["f1"] == 2 / 3 and Counting.calls == 1
    assert evaluate(Counting(), records, ["A"], other) is None and Counting.calls == 1
    assert evaluate(Counting(), [], ["A"], main) is None
