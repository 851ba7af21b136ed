"""The paths a user of a GPU build takes, run on whichever Paddle is installed: `.ci/run` runs this file
a second time in an environment with PyPI's paddlepaddle-gpu 2.6.2, which runs on the CPU when no GPU
is visible (docs/training.md, "GPU": what was verified where).  Train (the session's fixture),
evaluate, predict, export (or its one-line refusal on Paddle 2.x), globalpointer.load, the service
and the Label Studio backend."""
import json
import os

import paddle
import pytest

import globalpointer
from globalpointer.cli import evaluate_main, main, predict_main

BUILD = f"paddle {paddle.__version__}, CUDA compiled: {paddle.device.is_compiled_with_cuda()}"


def test_the_package_name_is_no_assumption(trained):
    """evaluate and predict hash the checkpoint with Paddle's version
    (model_directory.compiled.model_digest): from the module, whatever the package is called."""
    import importlib.metadata

    names = {dist.metadata["Name"].lower() for dist in importlib.metadata.distributions()}
    assert {"paddlepaddle", "paddlepaddle-gpu"} & names, BUILD


def test_evaluate_and_predict(trained, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))  # its compiled program stays its own
    best = str(trained / "run" / "best")
    assert evaluate_main(["--model", best, "--data", str(trained / "dev.jsonl")]) == 0, BUILD
    assert "micro" in capsys.readouterr().out
    source = tmp_path / "in.txt"
    source.write_text("北京大学的张三在上海\n李四\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert predict_main(["--model", best, "--input", str(source), "--output", str(out),
                         "--set", "inference.compile_from_lines=1"]) == 0, BUILD
    assert [json.loads(line)["text"] for line in open(out, encoding="utf-8")] == ["北京大学的张三在上海", "李四"]


def test_export_or_its_refusal(trained, tmp_path, capsys):
    from globalpointer.deploy.export import paddle_writes_exports

    code = main(["export", "--model", str(trained / "run" / "best"), "--output", str(tmp_path / "export")])
    err = capsys.readouterr().err
    if paddle_writes_exports():
        assert code == 0 and globalpointer.load(str(tmp_path / "export")).backend == "paddle-inference", err
    else:
        assert code == 2 and f"this is Paddle {paddle.__version__}: install Paddle 3.3" in err, err
        assert not os.path.exists(tmp_path / "export")


def test_load_serve_and_the_label_studio_backend(trained, tmp_path):
    from fastapi.testclient import TestClient

    from globalpointer.deploy import label_studio_backend, serve
    from globalpointer.inference.label_studio import labeling_config
    from globalpointer.runtime import choose_device

    best = str(trained / "run" / "best")
    ner = globalpointer.load(best)
    assert ner.runtime.device == choose_device("auto") and ner("北京大学的张三在上海"), BUILD
    with TestClient(serve.create_app(ner, ner.config.serve)) as client:
        answer = client.post("/v1/extract", json={"texts": ["北京大学的张三在上海"]})
        assert answer.status_code == 200 and answer.json()["results"][0]["entities"] == ner("北京大学的张三在上海")
    app = label_studio_backend.create_app(best, ner, str(tmp_path / "rounds"), os.path.join(best, "config.yaml"))
    interface = labeling_config(ner.labels)
    with TestClient(app) as client:
        answer = client.post("/predict", json={"tasks": [{"data": {"text": "北京大学的张三在上海"}}],
                                               "label_config": interface})
        assert answer.status_code == 200 and len(answer.json()["results"]) == 1


@pytest.mark.skipif(paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0,
                    reason="a GPU is visible")
def test_without_a_visible_gpu_auto_is_the_cpu():
    from globalpointer.runtime import choose_device

    assert choose_device("auto") == "cpu"


@pytest.mark.slow  # starts processes of its own
def test_a_command_says_which_device_runs_it_once_without_paddles_warning(trained, tmp_path):
    """The GPU build without a visible GPU warned "your CUDA device is not set properly" at every
    command; the runtime's log line says it instead, once."""
    import subprocess
    import sys

    from helpers import ROOT

    (tmp_path / "in.txt").write_text("张三\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "globalpointer", "predict", "--model", str(trained / "run" / "best"),
                           "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.jsonl"),
                           "--set", "device=auto"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "not set properly" not in done.stderr, done.stderr[-2000:]
    said = done.stderr.count("(Paddle's GPU build; no GPU is visible)")
    assert said == (1 if paddle.is_compiled_with_cuda() else 0), BUILD


# The README's quickstart trained for one epoch (train.epochs=1: 63 steps, a dev evaluation, the fitted
# minimum score): its dev F1, the same to the digit on both builds.  The whole quickstart (70.96,
# test_package.py) trains once a session, on the CPU build; one epoch runs the same code on the same data.
QUICKSTART_FIRST_EPOCH_F1 = 43.52


@pytest.mark.slow
def test_the_quickstarts_first_epoch_gives_the_same_f1_on_either_build(quickstart_first_epoch):
    """The README's quickstart trained for one epoch on this build (PyPI's GPU build runs it on the CPU
    here): the dev F1 the CPU build gives, to the digit."""
    summary = json.loads((quickstart_first_epoch / "run" / "summary.json").read_text())
    assert round(summary["best_dev_f1"] * 100, 2) == QUICKSTART_FIRST_EPOCH_F1, BUILD
