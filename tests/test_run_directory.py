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
