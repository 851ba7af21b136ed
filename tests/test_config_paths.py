"""Relative paths in a config file are read from the file's folder; with --set, from the current
folder (issue "Where users really start", item 7)."""
import os

import pytest

from globalpointer.config import load_config, require_files
from globalpointer.errors import ConfigError


def test_a_configs_paths_are_read_from_its_folder_wherever_it_runs(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "configs").mkdir(parents=True)
    (project / "data").mkdir()
    (project / "data" / "train.jsonl").write_text("{}\n")
    (project / "configs" / "run.yaml").write_text("data:\n  train: ../data/train.jsonl\n  dev: ''\n"
                                                  "output_dir: ../runs/x\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_config("../project/configs/run.yaml")
    assert config.data.train == str(project / "data" / "train.jsonl") and config.output_dir == str(project / "runs/x")
    assert config.data.dev == ""
    require_files(config, ["train"])
    # --set is a command-line argument: the current folder, made absolute so that a saved config means the same
    # wherever it is read; a flag's value is a value, never YAML text ("#" starts no comment in it)
    assert load_config("../project/configs/run.yaml", ["output_dir=mine"]).output_dir == str(elsewhere / "mine")
    assert load_config("../project/configs/run.yaml", [("train.init_from", "models/base #2")]).train.init_from == \
        str(elsewhere / "models" / "base #2")
    entries = load_config(overrides=['data.train=[a.jsonl, {path: b.jsonl, types: [PER]}]']).data.train
    assert [entry.path for entry in entries] == [str(elsewhere / "a.jsonl"), str(elsewhere / "b.jsonl")]


def test_a_missing_file_names_the_absolute_path_and_the_rule(tmp_path, monkeypatch):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "run.yaml").write_text("data:\n  train: train.jsonl\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=f"data.train: file not found: {tmp_path}/configs/train.jsonl "
                                          r"\(a relative path in a config file is read from that file's folder; "
                                          r"with --set, from the current folder\)"):
        require_files(load_config("configs/run.yaml"), ["train"])


def test_an_encoder_folder_beside_the_config_is_found_and_a_name_stays_a_name(tmp_path):
    (tmp_path / "my-encoder").mkdir()
    path = tmp_path / "run.yaml"
    path.write_text("model:\n  encoder: my-encoder\n", encoding="utf-8")
    assert load_config(str(path)).model.encoder == str(tmp_path / "my-encoder")
    path.write_text("model:\n  encoder: m3e-small\n", encoding="utf-8")
    assert load_config(str(path)).model.encoder == "m3e-small"


def test_a_checkpoints_config_keeps_its_paths_as_written(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("data:\n  dev: data/dev.jsonl\n", encoding="utf-8")
    assert load_config(str(path), saved=True).data.dev == "data/dev.jsonl"
    assert load_config(str(path)).data.dev == os.path.join(str(tmp_path), "data", "dev.jsonl")
