"""Bad data, bad configs and damaged checkpoints stop with a message that says what and where."""
import json
import logging
import shutil

import pytest

from globalpointer.cli import evaluate_main, predict_main, train_main
from globalpointer.errors import CheckpointError
from globalpointer.checkpoint import load_checkpoint
from synthetic import tiny_config


def test_dev_type_missing_from_train_names_file_and_line(tmp_path, capsys):
    config = tiny_config(tmp_path)
    dev = tmp_path / "dev.jsonl"
    lines = dev.read_text(encoding="utf-8").splitlines()
    lines[2] = json.dumps({"text": "复旦大学", "entities": [{"start": 0, "end": 4, "type": "SCHOOL"}]}, ensure_ascii=False)
    dev.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert train_main(["--config", config]) == 2
    err = capsys.readouterr().err
    assert "dev.jsonl:3: entity type 'SCHOOL' is not among the training data" in err and "data.labels" in err


def test_bad_training_record_stops_or_is_skipped_and_counted(tmp_path, capsys, caplog):
    config = tiny_config(tmp_path, train__epochs=1)
    train = tmp_path / "train.jsonl"
    with open(train, "a", encoding="utf-8") as out:
        out.write('{"text": "张三", "entities": [{"start": 0, "end": 5, "type": "PER"}]}\n')
    assert train_main(["--config", config]) == 2
    assert "train.jsonl:241: entity PER [0, 5) lies outside the text of length 2" in capsys.readouterr().err
    with caplog.at_level(logging.WARNING):
        assert train_main(["--config", config, "--set", "data.on_error=skip"]) == 0
    assert "skipped 1 malformed record(s)" in caplog.text


def test_unknown_encoder_is_a_clear_error(tmp_path, capsys):
    config = tiny_config(tmp_path, model__encoder="./no-such-encoder")
    assert train_main(["--config", config]) == 2
    assert "encoder directory not found: ./no-such-encoder" in capsys.readouterr().err


@pytest.fixture
def checkpoint_copy(trained, tmp_path):
    target = tmp_path / "best"
    shutil.copytree(trained / "run" / "best", target)
    return target


def test_truncated_weights(checkpoint_copy):
    weights = checkpoint_copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="model.safetensors is corrupted or unreadable"):
        load_checkpoint(str(checkpoint_copy))


def test_corrupted_labels_and_missing_files(checkpoint_copy, capsys):
    (checkpoint_copy / "labels.json").write_text("{oops")
    with pytest.raises(CheckpointError, match="labels.json is corrupted"):
        load_checkpoint(str(checkpoint_copy))
    (checkpoint_copy / "vocab.txt").unlink()
    assert predict_main(["--model", str(checkpoint_copy), "--input", "-"]) == 2
    assert "not a complete checkpoint, missing vocab.txt" in capsys.readouterr().err


def test_weights_of_another_model(checkpoint_copy, trained):
    labels = json.loads((checkpoint_copy / "labels.json").read_text())
    (checkpoint_copy / "labels.json").write_text(json.dumps(labels + ["EXTRA"]))
    with pytest.raises(CheckpointError, match=r"does not match the model built from its config.yaml and labels.json.*"
                                              r"head.dense.weight is \[64, 96\] in the file but \[64, 128\]"):
        load_checkpoint(str(checkpoint_copy))


def test_interrupted_save_falls_back_to_previous(checkpoint_copy, trained, tmp_path):
    """A kill between the two renames of a checkpoint save leaves DIR.previous-XXXX: loading finds it."""
    previous = tmp_path / "best.previous-k1ll3d"
    checkpoint_copy.rename(previous)
    loaded = load_checkpoint(str(checkpoint_copy))
    assert loaded.directory == str(previous)
    assert evaluate_main(["--model", str(checkpoint_copy), "--data", str(trained / "dev.jsonl")]) == 0


def test_a_model_directory_of_a_later_format_is_refused(checkpoint_copy, tmp_path):
    import globalpointer
    from globalpointer.cli import main as cli

    info = json.loads((checkpoint_copy / "checkpoint.json").read_text())
    assert info["format_version"] == 1
    (checkpoint_copy / "checkpoint.json").write_text(json.dumps({**info, "format_version": 2}))
    with pytest.raises(CheckpointError, match="format_version 2, but this globalpointer reads up to 1"):
        load_checkpoint(str(checkpoint_copy))
    (checkpoint_copy / "checkpoint.json").write_text(json.dumps(info))
    export = tmp_path / "export"
    assert cli(["export", "--model", str(checkpoint_copy), "--output", str(export)]) == 0
    manifest = json.loads((export / "export.json").read_text())
    assert manifest["format_version"] == 1 and "inference.json" in manifest["files"]
    (export / "export.json").write_text(json.dumps({**manifest, "format_version": 7}))
    with pytest.raises(CheckpointError, match="export.json: format_version 7"):
        globalpointer.load(str(export))
