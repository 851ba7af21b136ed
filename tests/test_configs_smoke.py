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
# where the public sets are on this machine (the configs read data/<set>/, docs/data-formats.md)
SHARED_FILES = {"cluener": {"train": "cluener/train.json", "dev": "cluener/dev.json"},
                "msra": {"train": "msra/msra_train_bio.txt", "test": "msra/msra_test_bio.txt"},
                "conll2003": {"train": "conll2003/train.txt", "dev": "conll2003/valid.txt",
                              "test": "conll2003/test.txt"}}
# the relation sets (no records count is kept for them: a missing file skips); their first texts do not
# hold every type of the others, so the few trained on stand for the dev and test files too
RELATION_FILES = {"conll04": "relations/conll04/train.json", "duie": "relations/duie2-subset/train.json",
                  "scierc": "relations/scierc/train.json",
                  "relations-quickstart": os.path.join(ROOT, "data", "duie-sample", "train.json"),
                  # the event sets likewise (DuEE's config on the format sample of its lines)
                  "phee": "events/phee/train.json", "duee": "events/duee-sample/train.json",
                  "events-quickstart": os.path.join(ROOT, "data", "events-sample", "train.json")}


@pytest.mark.parametrize("name", CONFIGS)
def test_config_smoke(name, shared_data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a config reads its files from its own folder, wherever it runs
    needed = list(SHARED_FILES.get(name, {}).values()) + (["cmeee/CMeEE_dev.json"] if name == "cmeee" else [])
    shared_data = shared_data(*needed)
    overrides = ["data.limit=24", "train.epochs=1", "train.min_steps=0", "train.batch_size=8",
                 f"output_dir={tmp_path / 'run'}"]
    overrides += [f"data.{key}={os.path.join(shared_data, path)}" for key, path in SHARED_FILES.get(name, {}).items()]
    if name == "cmeee":  # its split is written by the converter first (see the config)
        source = os.path.join(shared_data, "cmeee", "CMeEE_dev.json")
        for target, args in (("train.jsonl", ["--take", "4000"]), ("test.jsonl", ["--skip", "4000"])):
            assert cli(["convert", source, str(tmp_path / target), *args]) == 0
        overrides += [f"data.train={tmp_path / 'train.jsonl'}", f"data.dev={tmp_path / 'test.jsonl'}"]
    if name in RELATION_FILES:
        from conftest import SHARED_DATA

        train = os.path.join(SHARED_DATA, RELATION_FILES[name])  # an absolute path stays as it is
        if not os.path.isfile(train):
            pytest.skip(f"{train} is missing")
        overrides += [f"data.{key}={train}" for key in ("train", "dev", "test")]
    arguments = ["--config", os.path.join(ROOT, "configs", f"{name}.yaml")]
    for override in overrides:
        arguments += ["--set", override]
    assert train_main(arguments) == 0
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["steps"] >= 1 and os.path.isfile(tmp_path / "run" / "best" / "model.safetensors")
