"""Two data-parallel processes on CPU (gloo), through paddle.distributed.launch as a user runs it."""
import json
import math
import os
import subprocess
import sys

from synthetic import tiny_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_two_process_training(tmp_path):
    config = tiny_config(tmp_path, train__epochs=3)
    command = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2",
               "--log_dir", str(tmp_path / "log"), "train.py", "--config", config]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["world_size"] == 2
    batches = math.ceil(summary["train_windows"] / 16)
    assert summary["steps"] == 3 * math.ceil(batches / 2)  # each process takes every second batch
    assert summary["best_dev_f1"] > 0.5
    assert not os.path.exists(tmp_path / "log" / "workerlog.1") or \
        "Traceback" not in open(tmp_path / "log" / "workerlog.1").read()
