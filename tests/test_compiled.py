"""A checkpoint predicts through a Paddle Inference program compiled from it once the input repays
the build: cached by the checkpoint's content, never stale, the same entities as the dynamic graph."""
import json
import os
import shutil

import pytest

import globalpointer
from globalpointer.cli import predict_main


def spans(rows):
    return [[(e["start"], e["end"], e["type"]) for e in row["entities"]] for row in rows]


def predict(model, source, out, *extra):
    assert predict_main(["--model", str(model), "--input", str(source), "--output", str(out),
                         "--set", "inference.compile_from=10", *extra]) == 0
    return [json.loads(line) for line in open(out, encoding="utf-8")]


def test_the_compiled_program_is_built_once_reused_and_never_stale(trained, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))
    best = trained / "run" / "best"
    source = tmp_path / "in.jsonl"
    source.write_text("".join(open(trained / "dev.jsonl", encoding="utf-8").readlines()[:20]), encoding="utf-8")
    few = tmp_path / "few.jsonl"
    few.write_text("".join(open(trained / "dev.jsonl", encoding="utf-8").readlines()[:9]), encoding="utf-8")

    with caplog.at_level("INFO"):
        predict(best, few, tmp_path / "few.out")  # 9 lines < inference.compile_from: not worth a build
        dynamic = predict(best, source, tmp_path / "dynamic.out", "--backend", "dynamic")  # asked for the graph
    assert "compiled into" not in caplog.text and not os.path.exists(tmp_path / "cache")

    caplog.clear()
    with caplog.at_level("INFO"):
        first = predict(best, source, tmp_path / "first.out")
    assert "compiled into a Paddle Inference program in" in caplog.text and "paddle-inference backend" in caplog.text
    (compiled,) = os.listdir(tmp_path / "cache" / "compiled")
    assert spans(first) == spans(dynamic)  # the same entities; scores float32 sums apart
    for ours, graph in zip(first, dynamic):
        assert [e["score"] for e in ours["entities"]] == pytest.approx([e["score"] for e in graph["entities"]],
                                                                      abs=1e-5)
    caplog.clear()
    with caplog.at_level("INFO"):
        second = predict(best, source, tmp_path / "second.out")
    assert "compiled into" not in caplog.text and "running the program compiled from it" in caplog.text
    assert second == first
    ner = globalpointer.load(str(best))  # the Python API runs a cached program too, named by the checkpoint
    assert ner.backend == "paddle-inference" and ner.directory == str(best)
    assert globalpointer.load(str(best), backend="dynamic").backend == "dynamic"

    # a changed checkpoint never runs the program of the one it was
    changed = tmp_path / "changed"
    shutil.copytree(best, changed)
    from globalpointer.model.weights import read_state, save_state

    state = read_state(str(changed / "model.safetensors"))
    name = next(key for key in state if key.startswith("head"))
    state[name] = state[name] * 1.5
    save_state(state, str(changed / "model.safetensors"))
    assert globalpointer.load(str(changed)).backend == "dynamic"
    predict(changed, source, tmp_path / "changed.out")
    assert len(os.listdir(tmp_path / "cache" / "compiled")) == 2 and compiled in os.listdir(tmp_path / "cache" /
                                                                                            "compiled")
