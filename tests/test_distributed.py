"""Two data-parallel processes on CPU (gloo), through paddle.distributed.launch as a user runs it."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from synthetic import tiny_config

# train.py with paddle.DataParallel.no_sync either counted (MODE=no_sync) or replaced by a context
# that syncs (MODE=synced: the all-reduce in every micro-batch, as before micro-batches skipped it)
TRAIN_COUNTING_NO_SYNC = """
import contextlib, os, sys
import paddle
from globalpointer.cli import main

skipped = []
no_sync = paddle.DataParallel.no_sync


def counted(self):
    skipped.append(1)
    with open(os.environ["COUNT"] + os.environ["PADDLE_TRAINER_ID"], "w") as out:  # main() ends the process
        out.write(str(len(skipped)))
    return no_sync(self) if os.environ["MODE"] == "no_sync" else contextlib.nullcontext()


paddle.DataParallel.no_sync = counted
sys.exit(main(["train", *sys.argv[1:]]))
"""


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
    from globalpointer.training.loop import evaluate_on_main

    class Counting:
        calls = 0
        relations, events = [], False  # an entity model's

        def records(self, texts):
            Counting.calls += 1
            return [Record(text, [Entity(0, 1, "A")]) for text in texts]

    records = [Record("ab", [Entity(0, 1, "A")]), Record("cd", [])]
    main = SimpleNamespace(is_main=True, world_size=1)
    other = SimpleNamespace(is_main=False, world_size=1)
    report, f1 = evaluate_on_main(Counting(), records, ["A"], main)
    assert report["micro"]["f1"] == f1 == 2 / 3 and Counting.calls == 1
    assert evaluate_on_main(Counting(), records, ["A"], other) == (None, 0.0) and Counting.calls == 1
    assert evaluate_on_main(Counting(), [], ["A"], main) == (None, None)


@pytest.mark.slow
def test_accumulation_under_data_parallel_all_reduces_once_per_step(tmp_path):
    """With train.grad_accum_steps=2 each step's first micro-batch skips the all-reduce (no_sync) and
    the run ends with the weights of a run that all-reduces every micro-batch."""
    from globalpointer.model.weights import read_state

    config = tiny_config(tmp_path, train__epochs=2, train__grad_accum_steps=2)
    script = tmp_path / "train_counting.py"
    script.write_text(TRAIN_COUNTING_NO_SYNC)
    weights, summaries = {}, {}
    for mode in ("no_sync", "synced"):
        command = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2", "--log_dir",
                   str(tmp_path / f"log-{mode}"), str(script), "--config", config, "--set",
                   f"output_dir={tmp_path / mode}"]
        env = {**os.environ, "MODE": mode, "COUNT": str(tmp_path / f"count-{mode}-")}
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        weights[mode] = read_state(str(tmp_path / mode / "last" / "model.safetensors"))
        summaries[mode] = json.load(open(tmp_path / mode / "summary.json"))
        batches = math.ceil(summaries[mode]["train_windows"] / 16 / 2)  # per process and epoch
        steps = summaries[mode]["steps"]
        assert steps == 2 * math.ceil(batches / 2)
        for rank in "01":  # a step of two batches skips once, an epoch's last step of one batch never
            assert int(open(tmp_path / f"count-{mode}-{rank}").read()) == 2 * (batches // 2)
    assert summaries["no_sync"]["best_dev_f1"] == summaries["synced"]["best_dev_f1"]
    for name, value in weights["synced"].items():
        np.testing.assert_allclose(weights["no_sync"][name], value, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.slow
def test_a_data_parallel_process_ends_with_its_exit_code_and_its_output(tmp_path):
    """A process of a launch leaves through os._exit (cli.end_data_parallel_process): its exit code,
    standard output and error, and the files it wrote are all there."""
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "张三", "entities": [{"start": 0, "end": 2, "type": "name"}]}\n', encoding="utf-8")
    env = {**os.environ, "PADDLE_TRAINERS_NUM": "2"}
    done = subprocess.run([sys.executable, "-m", "globalpointer", "convert", str(source), str(tmp_path / "out.jsonl")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out.jsonl").read_text(encoding="utf-8"))["text"] == "张三"
    refused = subprocess.run([sys.executable, "-m", "globalpointer", "convert", str(tmp_path / "missing.jsonl"),
                              str(tmp_path / "other.jsonl")], cwd=ROOT, capture_output=True, text=True, timeout=120,
                             env=env)
    assert refused.returncode == 2 and "error:" in refused.stderr and "missing.jsonl" in refused.stderr


@pytest.mark.slow
def test_two_nodes_train_what_two_processes_on_one_machine_train(tmp_path):
    """The multi-node recipe (docs/training.md): two launchers, one process each, meeting at the
    master's address, here on loopback; the run equals the one-machine run with two processes."""
    from globalpointer.model.weights import read_state
    from helpers import free_port

    config = tiny_config(tmp_path, train__epochs=2)
    one = subprocess.run([sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2", "--log_dir",
                          str(tmp_path / "log-one"), "train.py", "--config", config, "--set",
                          f"output_dir={tmp_path / 'one-machine'}"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert one.returncode == 0, one.stdout[-3000:] + one.stderr[-3000:]
    master = f"127.0.0.1:{free_port()}"
    nodes = [subprocess.Popen([sys.executable, "-m", "paddle.distributed.launch", "--master", master, "--nnodes", "2",
                               "--rank", str(rank), "--nproc_per_node", "1", "--log_dir", str(tmp_path / f"log-{rank}"),
                               "train.py", "--config", config, "--set", f"output_dir={tmp_path / 'two-nodes'}"],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank in (0, 1)]
    outputs = [node.communicate(timeout=600)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], "\n".join(output[-3000:] for output in outputs)
    summaries = {name: json.load(open(tmp_path / name / "summary.json")) for name in ("one-machine", "two-nodes")}
    assert summaries["two-nodes"]["world_size"] == 2
    assert summaries["two-nodes"]["best_dev_f1"] == summaries["one-machine"]["best_dev_f1"]
    assert summaries["two-nodes"]["steps"] == summaries["one-machine"]["steps"]
    expected = read_state(str(tmp_path / "one-machine" / "last" / "model.safetensors"))
    found = read_state(str(tmp_path / "two-nodes" / "last" / "model.safetensors"))
    for name, value in expected.items():
        np.testing.assert_allclose(found[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
