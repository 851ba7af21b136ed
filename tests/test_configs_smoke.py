"""Every shipped config trains, evaluates and checkpoints on a few dozen sentences of its real data,
with its real encoder (the full runs are in docs/lab/RESULTS.md)."""
import glob
import json
import os

import pytest

from globalpointer.cli import train_main
from globalpointer.cli import main as cli
from conftest import ROOT

pytestmark = pytest.mark.slow  # subprocesses / services: python -m pytest -m "not slow" leaves them out

CONFIGS = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(ROOT, "configs", "*.yaml")))


@pytest.mark.parametrize("name", CONFIGS)
def test_config_smoke(name, shared_data, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # configs name their files relative to the project root
    overrides = ["data.limit=24", "train.epochs=1", "train.batch_size=8", f"output_dir={tmp_path / 'run'}"]
    if name == "cmeee":  # its split is written by the converter first (see the config)
        source = os.path.join(shared_data, "cmeee", "CMeEE_dev.json")
        for target, args in (("train.jsonl", ["--take", "4000"]), ("test.jsonl", ["--skip", "4000"])):
            assert cli(["convert", source, str(tmp_path / target), *args]) == 0
        overrides += [f"data.train={tmp_path / 'train.jsonl'}", f"data.dev={tmp_path / 'test.jsonl'}"]
    arguments = ["--config", f"configs/{name}.yaml"]
    for override in overrides:
        arguments += ["--set", override]
    assert train_main(arguments) == 0
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["steps"] >= 1 and os.path.isfile(tmp_path / "run" / "best" / "model.safetensors")
