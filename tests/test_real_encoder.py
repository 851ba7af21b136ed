"""The bundled Chinese encoder through every command, briefly: what only a real encoder shows (its
tokenizer's files, its conversion, its ONNX graph), in a minute of the full suite (the fast subset's
tiny encoder leaves it out)."""
import json

import globalpointer
from globalpointer.cli import evaluate_main, predict_main, train_main
from globalpointer.cli import main as cli
import pytest
import yaml

from helpers import ROOT

pytestmark = pytest.mark.slow


def test_m3e_small_trains_evaluates_predicts_loads_and_exports(tmp_path, capsys):
    sample = f"{ROOT}/data/cluener-sample"
    for name, count in (("train.json", 96), ("dev.json", 32)):
        lines = open(f"{sample}/{name}", encoding="utf-8").read().splitlines()[:count]
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "data": {"train": str(tmp_path / "train.json"), "dev": str(tmp_path / "dev.json"), "max_length": 64,
                 "window_overlap": 16},
        "train": {"epochs": 2, "min_steps": 0, "patience": 0}, "device": "cpu", "output_dir": str(tmp_path / "run")}))
    assert train_main(["--config", str(config)]) == 0
    best = tmp_path / "run" / "best"
    assert json.load(open(tmp_path / "run" / "summary.json"))["best_dev_f1"] is not None
    assert "m3e-small" in (best / "config.yaml").read_text(encoding="utf-8")  # model.encoder auto, resolved
    assert evaluate_main(["--model", str(best), "--data", str(tmp_path / "dev.json")]) == 0
    assert "micro" in capsys.readouterr().out
    texts = tmp_path / "texts.txt"
    texts.write_text("张三在北京大学读书\n李四去了广州\n", encoding="utf-8")
    assert predict_main(["--model", str(best), "--input", str(texts), "--output", str(tmp_path / "a.jsonl")]) == 0
    predicted = [json.loads(line) for line in open(tmp_path / "a.jsonl", encoding="utf-8")]
    assert [row["text"] for row in predicted] == ["张三在北京大学读书", "李四去了广州"]
    loaded = globalpointer.load(str(best))
    spans = [[(e["start"], e["end"], e["type"]) for e in row["entities"]] for row in predicted]
    assert [[(e["start"], e["end"], e["type"]) for e in found] for found in loaded.pipe(["张三在北京大学读书", "李四去了广州"])] \
        == spans
    export = tmp_path / "export"
    assert cli(["export", "--model", str(best), "--output", str(export), "--onnx"]) == 0
    assert predict_main(["--model", str(export), "--input", str(texts), "--output", str(tmp_path / "b.jsonl")]) == 0
    exported = [json.loads(line) for line in open(tmp_path / "b.jsonl", encoding="utf-8")]
    assert [[(e["start"], e["end"], e["type"]) for e in row["entities"]] for row in exported] == spans
