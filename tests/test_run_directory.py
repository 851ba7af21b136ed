"""training/run.py: a run directory has one writer, and a finished run or the run's own config is
never written over by accident."""
import pytest
import os

import yaml

from globalpointer.cli import train_main
from helpers import snapshot
from synthetic import tiny_config


def test_training_from_the_runs_own_config_is_refused(run_copy, capsys):
    config = run_copy / "config.yaml"
    tree = yaml.safe_load(config.read_text())
    tree["output_dir"] = str(run_copy)
    config.write_text(yaml.safe_dump(tree), encoding="utf-8")
    before = snapshot(run_copy)
    assert train_main(["--config", str(config), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "is an input of this run" in err and "config.yaml" in err
    assert snapshot(run_copy) == before


def test_a_second_training_into_a_run_being_written_is_refused(tmp_path, capsys):
    from globalpointer.files import RunLock

    config = tiny_config(tmp_path, train__epochs=1)
    run = tmp_path / "run"
    run.mkdir()
    with RunLock(str(run)):  # what the first train.py holds while it runs
        assert train_main(["--config", config]) == 2
        assert f"is being written by a training run (pid {os.getpid()})" in capsys.readouterr().err
        assert os.listdir(run) == [".lock"]
    assert train_main(["--config", config]) == 0  # released: the next run may write


@pytest.mark.slow  # trains models of its own: the full suite runs it
def test_training_into_a_finished_run_is_refused_without_overwrite(tmp_path, capsys):
    config = tiny_config(tmp_path, train__epochs=1)
    assert train_main(["--config", config]) == 0
    before = snapshot(tmp_path / "run")
    assert train_main(["--config", config, "--set", "train.lr=0"]) == 2
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--resume" in err and "--overwrite" in err
    assert snapshot(tmp_path / "run") == before
    (tmp_path / "run" / "mine.txt").write_text("keep me")
    assert train_main(["--config", config, "--overwrite", "--set", "data.dev="]) == 0
    assert not (tmp_path / "run" / "dev_report.json").exists()  # the old run's files went
    assert (tmp_path / "run" / "mine.txt").read_text() == "keep me"  # the user's did not


def test_output_dir_that_is_a_file(tmp_path, capsys):
    (tmp_path / "taken").write_text("mine")
    assert train_main(["--config", tiny_config(tmp_path, output_dir=str(tmp_path / "taken"))]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    assert (tmp_path / "taken").read_text() == "mine"


def test_a_checkpoint_that_is_a_link_is_refused_before_any_work(tmp_path, capsys):
    """A run's last/ linked to another disk trained an epoch, then failed to save it (and --overwrite was
    a traceback): a link among the checkpoints is one line, before any work, on every way in."""
    from globalpointer.cli import train_main
    from synthetic import tiny_config

    elsewhere = tmp_path / "other-disk" / "last"
    elsewhere.mkdir(parents=True)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "last").symlink_to(elsewhere)
    config = tiny_config(tmp_path, train__epochs=1)
    for extra in ([], ["--overwrite"], ["--resume"]):
        assert train_main(["--config", config, *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "run/last is a link (to " in err and err.count("\n") == 1, err
    assert elsewhere.is_dir() and not os.listdir(elsewhere) and not (tmp_path / "run" / "metrics.csv").exists()


def test_optimizer_state_is_keyed_by_the_parameters_paths_not_paddles_counters():
    """Paddle names a parameter by a process-wide count of layers (``linear_7.w_0``): the same network built
    after another gets other names, and a state keyed by them could not be loaded into it."""
    import numpy as np
    import paddle

    from globalpointer.training.run import keyed_by_name, keyed_by_path

    def network_and_optimizer():
        network = paddle.nn.Sequential(paddle.nn.Linear(3, 4), paddle.nn.LayerNorm(4), paddle.nn.Linear(4, 2))
        return network, paddle.optimizer.AdamW(parameters=network.parameters(), learning_rate=0.1)

    first, optimizer = network_and_optimizer()
    first(paddle.ones([2, 3])).sum().backward()
    optimizer.step()
    saved = keyed_by_path(optimizer.state_dict(), first)
    assert {key.partition(":")[0] for key in saved if ":" in key} == {path for path, _ in first.named_parameters()}
    second, fresh = network_and_optimizer()  # built after the first: other names
    assert [p.name for p in second.parameters()] != [p.name for p in first.parameters()]
    fresh.set_state_dict(keyed_by_name(saved, second))
    loaded = fresh.state_dict()
    for (path, _), after in zip(first.named_parameters(), second.parameters()):
        assert np.array_equal(loaded[f"{after.name}_moment1_0"].numpy(), saved[f"{path}:moment1_0"].numpy()), path


def test_every_key_read_from_a_runs_summary_is_one_training_writes(trained):
    """The bench scripts read summary.json by hand: a key its writer (``loop.run_summary``) never writes
    would fail a comparison hours in, or read as missing."""
    import json
    import pathlib
    import re

    written = set(json.loads((trained / "run" / "summary.json").read_text()))
    bench = pathlib.Path(__file__).resolve().parent.parent / "bench"
    read = {(path.name, key) for path in bench.glob("*.py")
            for key in re.findall(r'summary(?:\["|\.get\(")(\w+)"', path.read_text(encoding="utf-8"))}
    assert {key for _, key in read} >= {"best_dev_f1", "seconds", "eval_seconds", "steps"}  # the search finds them
    assert not {(name, key) for name, key in read if key not in written}, sorted(written)


def test_every_key_read_from_thresholds_json_is_one_calibration_writes(relation_run):
    """model_directory/opening.py reads a relation model's thresholds.json by key; train.calibrate (and
    calibrate, with the same fit_thresholds) writes it."""
    import inspect
    import json
    import re

    from globalpointer.model_directory import opening

    written = set(json.loads((relation_run / "run" / "best" / "thresholds.json").read_text()))
    readers = inspect.getsource(opening.read_min_scores) + inspect.getsource(opening.ModelDirectory.pair_min_score.func)
    read = set(re.findall(r'(?:stored\["|\.get\("|key = ")(\w+)"', readers))
    assert {"min_scores", "pair_min_score"} <= read
    assert read - written <= {"thresholds"}, written  # "thresholds": logits, as files of earlier versions hold them
