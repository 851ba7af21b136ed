"""training/loop.py and step.py: a run that diverges stops in one line and keeps nothing from the
diverged weights."""
import pytest
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from globalpointer.model_directory.opening import load_checkpoint
from globalpointer.cli import train_main
from synthetic import tiny_config


def test_a_diverging_run_stops_and_saves_nothing_from_it(tmp_path, capsys):
    """The loss turns nan before the first evaluation: one line naming the rate, exit 2, and no
    checkpoint (an evaluation would have saved the diverged weights as best and last)."""
    config = tiny_config(tmp_path, train__epochs=1)
    assert train_main(["--config", config, "--set", "train.lr=1e30", "--set", "train.head_lr=1e30"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("error: step ")
    assert "training diverged" in err and "lower it, e.g. --set train.lr=1e+29" in err
    assert not (tmp_path / "run" / "best").exists() and not (tmp_path / "run" / "last").exists()


def test_a_rate_of_five_trains_to_finite_weights(tmp_path, capsys):
    """lr=5 (a user's typo for 5e-5) crashed at the first evaluation once (decoding past the text, see
    below); now it trains, and what it saves is finite."""
    config = tiny_config(tmp_path, train__epochs=1)
    assert train_main(["--config", config, "--set", "train.lr=5", "--set", "train.head_lr=5"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    state = load_checkpoint(str(tmp_path / "run" / "best")).network.state_dict()
    assert all(np.isfinite(value.numpy()).all() for value in state.values())


@pytest.mark.slow  # trains models of its own
def test_early_stopping_without_a_dev_file_says_training_runs_every_epoch(tmp_path, caplog):
    """train.patience watches the dev F1: with no data.dev the run trains every epoch and keeps the
    last, and says so with what to do; with a dev file, or patience 0, nothing is said."""
    config = tiny_config(tmp_path, train__epochs=1)
    warned = ("no dev F1 to choose by: train.patience (2) has no dev F1 to watch, so training runs all "
              "1 planned epoch(s) (train.epochs 1, train.max_steps 3000)")
    assert train_main(["--config", config, "--set", "data.dev=", "--set", "train.patience=2"]) == 0
    assert warned in caplog.text and "name one with data.dev" in caplog.text
    caplog.clear()
    assert train_main(["--config", config, "--overwrite", "--set", "train.patience=2"]) == 0
    assert "no dev F1 to choose by" not in caplog.text
    assert train_main(["--config", config, "--overwrite", "--set", "data.dev="]) == 0  # tiny_config: patience 0
    assert "no dev F1 to choose by" not in caplog.text


@given(st.integers(1, 50), st.integers(1, 500), st.integers(0, 5000), st.integers(0, 1000))
def test_the_planned_length_is_the_whole_epochs_that_reach_max_steps_or_min_steps(epochs, steps_per_epoch,
                                                                                  max_steps, min_steps):
    from globalpointer.config import TrainConfig
    from globalpointer.training.loop import epochs_per_evaluation, planned_epochs

    train = TrainConfig(epochs=epochs, max_steps=max_steps, min_steps=min_steps)
    planned, repeats = planned_epochs(train, steps_per_epoch), epochs_per_evaluation(train, steps_per_epoch)
    if min_steps and epochs * steps_per_epoch < min_steps:  # a small file: each evaluation after `repeats` epochs
        assert planned == epochs * repeats and planned * steps_per_epoch >= min_steps
        assert (repeats - 1) * epochs * steps_per_epoch < min_steps
        return
    assert 1 <= planned <= epochs and repeats == 1
    if max_steps == 0 or epochs * steps_per_epoch <= max_steps:
        assert planned == epochs
    else:  # the first whole epoch at or past max_steps
        assert planned * steps_per_epoch >= max_steps > (planned - 1) * steps_per_epoch


@pytest.mark.slow  # trains models of its own: the full suite runs it
def test_max_steps_trains_what_as_many_epochs_would(tmp_path):
    """A run cut to 2 epochs by train.max_steps is the run of train.epochs 2: the same steps, the same
    schedule, the same weights; its summary says what it planned."""
    import json

    from globalpointer.model.weights import read_state

    def run(name, *settings):
        config = tiny_config(tmp_path / name)
        assert train_main(["--config", config, *settings]) == 0
        summary = json.loads((tmp_path / name / "run" / "summary.json").read_text())
        return summary, read_state(str(tmp_path / name / "run" / "best" / "model.safetensors"))

    for name in ("one", "two", "cut"):
        (tmp_path / name).mkdir()
    steps_per_epoch = run("one", "--set", "train.epochs=1")[0]["steps"]
    two, two_weights = run("two", "--set", "train.epochs=2")
    cut, cut_weights = run("cut", "--set", f"train.max_steps={2 * steps_per_epoch - 1}")  # tiny_config: 6 epochs
    assert (cut["epochs_planned"], cut["epochs_completed"], cut["steps"]) == (2, 2, 2 * steps_per_epoch)
    assert two["epochs_planned"] == 2 and two_weights.keys() == cut_weights.keys()
    for key in two_weights:
        np.testing.assert_array_equal(two_weights[key], cut_weights[key])


def test_training_into_a_file_logs_a_line_per_epoch_and_draws_no_bar(tmp_path, capfd, caplog):
    """A log file or a pipe gets one line per epoch; the progress bar, a redraw per step, is for a terminal."""
    from globalpointer.cli import train_main

    caplog.set_level("INFO", logger="globalpointer")
    config = tiny_config(tmp_path, train__epochs=2)
    assert train_main(["--config", config]) == 0
    written = capfd.readouterr()
    assert "\r" not in written.err + written.out and "step/s" not in written.err
    epochs = [r.getMessage() for r in caplog.records if " done: step " in r.getMessage()]
    assert [line.split(":")[0] for line in epochs] == ["epoch 1 of 2 done", "epoch 2 of 2 done"], epochs


@pytest.mark.slow  # trains models of its own
def test_a_dev_file_that_cannot_measure_is_said_and_chooses_nothing(tmp_path, caplog):
    """A dev file without entities (F1 0 at every evaluation) or made of training texts (F1 of memory)
    is said before training, and the run trains every epoch and keeps the last, as without one."""
    import json

    from synthetic import write_jsonl

    config = tiny_config(tmp_path, train__epochs=2, train__patience=1)
    write_jsonl(tmp_path / "empty-dev.jsonl", [{"text": "没有实体的句子", "entities": []}] * 5)
    caplog.set_level("INFO", logger="globalpointer")
    assert train_main(["--config", config, "--set", f"data.dev={tmp_path / 'empty-dev.jsonl'}"]) == 0
    assert "empty-dev.jsonl: 5 texts and no entity: its F1 would be 0 at every evaluation" in caplog.text
    assert "no dev F1 to choose by" in caplog.text
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["epochs_completed"] == 2 and summary["best_dev_f1"] is None
    caplog.clear()
    assert train_main(["--config", config, "--overwrite", "--set", f"data.dev={tmp_path / 'train.jsonl'}"]) == 0
    assert "train.jsonl: every one of its 240 texts is a training text" in caplog.text


@pytest.mark.slow  # trains models of its own
def test_a_small_file_reaches_min_steps_with_train_epochs_evaluations(tmp_path):
    """24 texts, 3 steps an epoch (18 in train.epochs 6): train.min_steps 40 repeats the epochs so that each
    of the 6 evaluations follows 3 epochs (9 steps), 54 steps in all."""
    import csv
    import json

    config = tiny_config(tmp_path, data__limit=24, train__min_steps=40)
    assert train_main(["--config", config]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["epochs_planned"], summary["steps"]) == (18, 54)
    with open(tmp_path / "run" / "metrics.csv") as metrics:
        assert [int(row["step"]) for row in csv.DictReader(metrics)] == [9, 18, 27, 36, 45, 54]
