"""Same seed, same result; a run killed with SIGKILL and resumed ends where an uninterrupted one does."""
import csv
import fcntl
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from globalpointer.cli import train_main
from conftest import ROOT
from globalpointer.files import mark_temporary
from helpers import snapshot, unrecorded
from synthetic import tiny_config

pytestmark = pytest.mark.slow  # subprocesses / services: python -m pytest -m "not slow" leaves them out



def train(config, *extra):
    return subprocess.Popen([sys.executable, "train.py", "--config", config, *extra], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def config_in(directory, **settings):
    directory.mkdir()
    return tiny_config(directory, output_dir=str(directory / "run"), **settings)


def wait_for_step(state_file, step, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if json.load(open(state_file))["global_step"] >= step:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"no checkpoint at step {step} within {timeout} s")


def metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.csv")) as handle:
        return [{k: row[k] for k in ("step", "train_loss", "f1")} for row in csv.DictReader(handle)]


@pytest.mark.parametrize("recipes", [{}, {"train__adversarial": "fgm"}], ids=["plain", "fgm"])
def test_same_seed_same_run_and_resume_after_sigkill(tmp_path, recipes):
    settings = dict(train__epochs=3, train__eval_every=5, train__seed=11, **recipes)
    first, second, killed = (config_in(tmp_path / name, **settings) for name in "abc")

    for config in (first, second):
        process = train(config)
        output = process.communicate(timeout=600)[0]
        assert process.returncode == 0, output[-3000:]
    reference = metrics(tmp_path / "a" / "run")
    assert reference == metrics(tmp_path / "b" / "run")  # bit for bit: losses and F1 at every evaluation
    assert len(reference) >= 6

    # Kill mid-run, after at least two checkpoints, then resume.
    process = train(killed)
    state = tmp_path / "c" / "run" / "last" / "trainer_state.json"
    wait_for_step(state, 10)
    process.send_signal(signal.SIGKILL)
    process.wait()
    stopped_at = json.load(open(state))["global_step"]
    assert 10 <= stopped_at < int(reference[-1]["step"])
    process = train(killed, "--resume")
    output = process.communicate(timeout=600)[0]
    assert process.returncode == 0, output[-3000:]
    # rows logged after the last checkpoint and before the kill are dropped and logged again
    assert metrics(tmp_path / "c" / "run") == reference
    summaries = [json.load(open(tmp_path / name / "run" / "summary.json")) for name in ("a", "c")]
    assert summaries[0]["best_dev_f1"] == summaries[1]["best_dev_f1"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])  # Ctrl-C; what schedulers send first
def test_a_stop_signal_saves_a_checkpoint_and_exits(tmp_path, signum):
    config = config_in(tmp_path / "run", train__epochs=50, train__eval_every=5)
    process = train(config)
    state = tmp_path / "run" / "run" / "last" / "trainer_state.json"
    wait_for_step(state, 5)
    process.send_signal(signum)
    output = process.communicate(timeout=300)[0]
    assert process.returncode == 130, output[-2000:]
    step = json.load(open(state))["global_step"]
    assert f"interrupted at step {step}" in output and "--resume" in output


def test_a_stop_inside_a_dev_evaluation_ends_it_and_the_resumed_run_makes_it(tmp_path, monkeypatch):
    """SIGTERM while the dev set is decoded (an under-trained relation model's took minutes) stops the
    evaluation at once; the resumed run evaluates that step first and ends as an uninterrupted one."""
    from globalpointer.training import loop

    settings = dict(train__epochs=3, train__eval_every=5, train__seed=11)
    reference, stopped = config_in(tmp_path / "a", **settings), config_in(tmp_path / "b", **settings)
    assert train_main(["--config", reference]) == 0
    evaluate, calls = loop.evaluate_on_main, []

    def endless_second_evaluation(extractor, *args):
        calls.append(time.time())
        if len(calls) == 2:  # an evaluation far longer than the test: only the stop ends it, between passes
            os.kill(os.getpid(), signal.SIGTERM)
            while time.time() < calls[-1] + 120:
                extractor.records(["Alice met Bob in Paris"] * 64)
        return evaluate(extractor, *args)

    monkeypatch.setattr(loop, "evaluate_on_main", endless_second_evaluation)
    assert train_main(["--config", stopped]) == 130
    assert time.time() - calls[-1] < 30
    state = json.load(open(tmp_path / "b" / "run" / "last" / "trainer_state.json"))
    assert state["global_step"] == 10 and state["evaluation_due"] and state["evaluated_step"] == 5
    process = train(stopped, "--resume")  # as a scheduler restarts a job: in a process of its own
    output = process.communicate(timeout=600)[0]
    assert process.returncode == 0 and "resumed from" in output, output[-3000:]
    assert metrics(tmp_path / "b" / "run") == metrics(tmp_path / "a" / "run")
    assert (json.load(open(tmp_path / "b" / "run" / "summary.json"))["best_dev_f1"]
            == json.load(open(tmp_path / "a" / "run" / "summary.json"))["best_dev_f1"])


def test_a_stopped_recipes_comparison_resumes_its_run(tmp_path):
    """bench/recipes.py, stopped with SIGTERM to its train.py, continues that run from its checkpoint
    (hours of a comparison are not lost between sessions) and then reports it."""
    import psutil

    config = tiny_config(tmp_path, train__epochs=12, train__eval_every=5)
    out = tmp_path / "runs"
    command = [sys.executable, "bench/recipes.py", "--config", config, "--seeds", "1", "--out", str(out),
               "--row", "plain="]
    comparison = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for_step(out / "plain-s1" / "last" / "trainer_state.json", 5)
    trainer, = psutil.Process(comparison.pid).children()
    trainer.send_signal(signal.SIGTERM)
    assert comparison.wait(timeout=300) != 0
    stopped_at = json.load(open(out / "plain-s1" / "last" / "trainer_state.json"))["global_step"]
    assert not (out / "plain-s1" / "summary.json").exists()

    output = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert output.returncode == 0, output.stdout[-2000:] + output.stderr[-2000:]
    log = (out / "plain-s1.log").read_text()
    assert f"interrupted at step {stopped_at}" in log and f"resumed from {out / 'plain-s1' / 'last'} at step {stopped_at}" in log
    steps = [int(row["step"]) for row in metrics(out / "plain-s1")]
    assert steps == sorted(set(steps)) and steps[-1] > stopped_at
    assert "plain seed 1: dev F1" in output.stdout


def test_a_garbage_row_in_metrics_then_resume(tmp_path, capsys):
    config = tiny_config(tmp_path, train__epochs=1)
    assert train_main(["--config", config]) == 0
    with open(tmp_path / "run" / "metrics.csv", "a", encoding="utf-8") as out:
        out.write("garbage,,,\n")
    assert train_main(["--config", config, "--resume"]) == 2
    assert "metrics.csv:3: step 'garbage' is not a whole number" in capsys.readouterr().err


def test_resume_refuses_a_changed_config_and_names_the_keys(tmp_path, capsys):
    config = tiny_config(tmp_path, train__epochs=1)
    assert train_main(["--config", config]) == 0
    before = snapshot(tmp_path / "run")
    assert train_main(["--config", config, "--resume", "--set", "model.head=efficient_global_pointer",
                       "--set", "data.labels=[LOC,ORG,PER,X]"]) == 2
    err = capsys.readouterr().err
    assert "model.head was 'global_pointer', now 'efficient_global_pointer'" in err and "data.labels was" in err
    # forced on, the weights still cannot be loaded into another head: named, not skipped
    assert train_main(["--config", config, "--resume", "--resume-anyway",
                       "--set", "model.head=efficient_global_pointer"]) == 2
    assert "head.bias_dense.weight missing" in capsys.readouterr().err
    assert snapshot(tmp_path / "run") == before


def test_resuming_a_finished_run_adds_no_evaluation(tmp_path, caplog):
    config = tiny_config(tmp_path, train__epochs=1, train__eval_every=4)  # 15 steps: the last is no multiple of 4
    assert train_main(["--config", config]) == 0
    rows = list(csv.DictReader(open(tmp_path / "run" / "metrics.csv")))
    with caplog.at_level("INFO", logger="globalpointer"):
        assert train_main(["--config", config, "--resume", "--set", "model.min_score=0.6"]) == 0
    assert list(csv.DictReader(open(tmp_path / "run" / "metrics.csv"))) == rows
    assert "its 1 epoch(s) are done, nothing is left to train" in caplog.text  # not "(epoch 2)"


def test_resume_removes_the_checkpoint_a_killed_save_left_half_written(tmp_path):
    """A run killed while saving (SIGKILL, out of memory) leaves ``last.partial-XXXX``: nothing reads
    it, and under the run's lock nobody else writes it, so --resume removes it; one a process holds
    (a writer's lock) and the finished checkpoints stay."""
    config = tiny_config(tmp_path, train__epochs=1)
    assert train_main(["--config", config]) == 0
    killed, held = tmp_path / "run" / "last.partial-k1ll3d_0", tmp_path / "run" / "best.partial-h3ld0000"
    mine = tmp_path / "run" / "last.partial-mine"  # a user's folder, not named as a temporary is
    snapshot = tmp_path / "run" / "last.partial-snapshot"  # nor one named as one, which it did not write
    for path in (killed, held, mine, snapshot):
        path.mkdir()
        (path / "model.safetensors").write_bytes(b"half")
    mark_temporary(str(killed))
    mark_temporary(str(held))
    writer = os.open(held, os.O_RDONLY)
    fcntl.flock(writer, fcntl.LOCK_EX)
    try:
        assert train_main(["--config", config, "--resume"]) == 0
    finally:
        os.close(writer)
    assert not killed.exists() and held.exists() and mine.exists() and snapshot.exists()
    assert (tmp_path / "run" / "last" / "model.safetensors").stat().st_size > 4


def test_a_users_backup_named_like_a_previous_checkpoint_is_neither_removed_nor_loaded(tmp_path, capsys):
    """best.previous-20240131, a user's copy of best/, has the shape of a swap's temporary but not its
    marker: --overwrite keeps it, and predict does not take it for best/ when best/ is gone."""
    from globalpointer.cli import predict_main

    config = tiny_config(tmp_path, train__epochs=1)
    assert train_main(["--config", config]) == 0
    backup = tmp_path / "run" / "best.previous-20240131"
    shutil.copytree(tmp_path / "run" / "best", backup)
    assert train_main(["--config", config, "--overwrite"]) == 0
    assert (backup / "model.safetensors").is_file()
    shutil.rmtree(tmp_path / "run" / "best")
    capsys.readouterr()
    assert predict_main(["--model", str(tmp_path / "run" / "best"), "--input", "-"]) == 2
    assert "not found" in capsys.readouterr().err


def test_resume_from_an_empty_weights_file(tmp_path, capsys):
    config = tiny_config(tmp_path, train__epochs=1)
    assert train_main(["--config", config]) == 0
    (tmp_path / "run" / "last" / "model.safetensors").write_bytes(b"")
    assert train_main(["--config", config, "--resume"]) == 2
    assert "last/model.safetensors is emptied (checkpoint.json records it)" in capsys.readouterr().err
    unrecorded(tmp_path / "run" / "last")  # as a run of an earlier version: the weights' reader says it
    assert train_main(["--config", config, "--resume"]) == 2
    assert "last/model.safetensors is corrupted or unreadable" in capsys.readouterr().err


@pytest.mark.parametrize("key, earlier, now", [("boundary_smoothing", "0.0", "0.2"), ("max_steps", "0", "3000"),
                                               ("large_training_set", "0", "5000")])
def test_a_run_saved_before_a_key_resumes_as_it_began(tmp_path, capsys, key, earlier, now):
    """A run of an earlier version saved no train.boundary_smoothing (train.max_steps, train.large_training_set
    or either key it merges) and trained without it; the default is now 0.2 (3000, 5000),
    so its record reads 0 and a resume with the default is refused by name."""
    import yaml

    config = tiny_config(tmp_path, train__epochs=1)
    assert train_main(["--config", config]) == 0
    for path in [config, *glob.glob(str(tmp_path / "run" / "**" / "config.yaml"), recursive=True)]:
        tree = yaml.safe_load(open(path, encoding="utf-8"))
        tree["train"].pop(key, None)  # as an earlier version wrote it (the user's config too)
        with open(path, "w", encoding="utf-8") as out:
            yaml.safe_dump(tree, out)
    for checkpoint in ("best", "last"):
        unrecorded(tmp_path / "run" / checkpoint)  # as that version wrote them: no sizes to check
    capsys.readouterr()
    assert train_main(["--config", config, "--resume"]) == 2
    assert f"train.{key} was {earlier}, now {now}" in capsys.readouterr().err
    code = train_main(["--config", config, "--resume", "--set", f"train.{key}={earlier}"])
    assert code == 0, capsys.readouterr().err


def test_a_stopped_relation_comparison_resumes_its_run(tmp_path):
    """bench/vs_paddlenlp_relations.py, stopped with SIGTERM, continues its run from the checkpoint (a DuIE
    run takes longer than a session) and ends as if it had never stopped: PaddleNLP's layer (a network
    built by the bench, not by the config) logs the same losses and F1 at every evaluation, bit for bit."""
    from synthetic import relation_config

    config = relation_config(tmp_path, train_lines=120, dev_lines=30, output_dir=None, train__epochs=12,
                             train__eval_every=4, train__seed=3, train__calibrate="none")

    def command(out):
        return [sys.executable, "bench/vs_paddlenlp_relations.py", "--config", config,
                "--seeds", "0", "--models", "paddlenlp GPLinker", "--repeats", "0", "--out", str(tmp_path / out)]

    whole = subprocess.run(command("whole"), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stdout[-2000:] + whole.stderr[-2000:]
    run = tmp_path / "stopped" / "paddlenlp-GPLinker-0"
    stopped = subprocess.Popen(command("stopped"), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for_step(run / "last" / "trainer_state.json", 8)
    stopped.send_signal(signal.SIGTERM)
    assert stopped.wait(timeout=300) != 0
    stopped_at = json.load(open(run / "last" / "trainer_state.json"))["global_step"]
    reference = metrics(tmp_path / "whole" / "paddlenlp-GPLinker-0")
    assert not (run / "summary.json").exists() and stopped_at < int(reference[-1]["step"])

    again = subprocess.run(command("stopped"), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert f"{run}: continued from its last checkpoint" in again.stderr
    assert metrics(run) == reference
    rows = [json.load(open(tmp_path / name / "paddlenlp-GPLinker-0" / "result.json")) for name in ("whole", "stopped")]
    assert rows[0]["dev_f1"] == rows[1]["dev_f1"] and rows[0]["epochs"] == rows[1]["epochs"]


def test_can_resume_reads_last_as_restore_does(tmp_path):
    """What the bench scripts ask before --resume: last/ with its trainer state, or the copy a kill
    between a save's two renames left; not a run without one, nor a user's folder named like that copy."""
    from globalpointer.training.run import can_resume

    assert not can_resume(str(tmp_path))
    kept = tmp_path / "last.previous-2024"  # the user's: not marked
    kept.mkdir()
    (kept / "trainer_state.json").write_text("{}")
    assert not can_resume(str(tmp_path))
    killed = tmp_path / "last.previous-k1ll3d"
    shutil.copytree(kept, killed)
    mark_temporary(str(killed))  # as swap_in_directory marks it
    assert can_resume(str(tmp_path))
    (tmp_path / "last").mkdir()
    assert not can_resume(str(tmp_path))  # last/ itself wins, and it holds no trainer state
    (tmp_path / "last" / "trainer_state.json").write_text("{}")
    assert can_resume(str(tmp_path))
