"""A checkpoint predicts through a Paddle Inference program compiled from it once the input repays
the build: cached by the checkpoint's content, never stale, the same entities as the dynamic graph."""
import fcntl
import json
import os
import shutil

import pytest

import globalpointer
from globalpointer.cli import predict_main
from helpers import rerecorded


def spans(rows):
    return [[(e["start"], e["end"], e["type"]) for e in row["entities"]] for row in rows]


def predict(model, source, out, *extra):
    assert predict_main(["--model", str(model), "--input", str(source), "--output", str(out),
                         "--set", "inference.compile_from_lines=10", *extra]) == 0
    return [json.loads(line) for line in open(out, encoding="utf-8")]


def test_the_compiled_program_is_built_once_reused_and_never_stale(trained, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))
    best = trained / "run" / "best"
    source = tmp_path / "in.jsonl"
    source.write_text("".join(open(trained / "dev.jsonl", encoding="utf-8").readlines()[:20]), encoding="utf-8")
    few = tmp_path / "few.jsonl"
    few.write_text("".join(open(trained / "dev.jsonl", encoding="utf-8").readlines()[:9]), encoding="utf-8")

    with caplog.at_level("INFO"):
        predict(best, few, tmp_path / "few.out")  # 9 lines < inference.compile_from_lines: not worth a build
        dynamic = predict(best, source, tmp_path / "dynamic.out", "--backend", "dynamic")  # asked for the graph
    assert "compiled into" not in caplog.text and not os.path.exists(tmp_path / "cache" / "compiled")

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
    rerecorded(changed)
    assert globalpointer.load(str(changed)).backend == "dynamic"
    predict(changed, source, tmp_path / "changed.out")
    assert len(os.listdir(tmp_path / "cache" / "compiled")) == 2 and compiled in os.listdir(tmp_path / "cache" /
                                                                                            "compiled")


def changed_copy(best, target):
    """A copy of the checkpoint ``best`` whose head computes something else."""
    from globalpointer.model.weights import read_state, save_state

    shutil.copytree(best, target)
    state = read_state(str(target / "model.safetensors"))
    name = next(key for key in state if key.startswith("head"))
    state[name] = state[name] * 1.5
    save_state(state, str(target / "model.safetensors"))
    return rerecorded(target)


@pytest.mark.slow  # compiles three programs
def test_a_cache_entry_runs_only_for_the_checkpoint_it_was_compiled_from(trained, tmp_path, monkeypatch, caplog):
    """RELIABILITY: compiled cache trusted by its name (attack 4, cases 11-12)."""
    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))
    best = trained / "run" / "best"
    other = changed_copy(best, tmp_path / "other")
    source = tmp_path / "in.jsonl"
    source.write_text("".join(open(trained / "dev.jsonl", encoding="utf-8").readlines()[:20]), encoding="utf-8")
    dynamic = predict(best, source, tmp_path / "dynamic.out", "--backend", "dynamic")
    predict(other, source, tmp_path / "other.out")
    (foreign,) = os.listdir(tmp_path / "cache" / "compiled")
    predict(best, source, tmp_path / "first.out")
    ours = next(name for name in os.listdir(tmp_path / "cache" / "compiled") if name != foreign)

    # another model's program copied under this checkpoint's name is dropped, not run
    shutil.rmtree(tmp_path / "cache" / "compiled" / ours)
    shutil.copytree(tmp_path / "cache" / "compiled" / foreign, tmp_path / "cache" / "compiled" / ours)
    caplog.clear()
    with caplog.at_level("INFO"):
        ner = globalpointer.load(str(best))
    assert ner.backend == "dynamic" and "compiled from another checkpoint" in caplog.text
    assert not os.path.exists(tmp_path / "cache" / "compiled" / ours)
    assert spans(predict(best, source, tmp_path / "again.out")) == spans(dynamic)  # and compiled anew
    assert globalpointer.load(str(best)).backend == "paddle-inference"

    # a truncated file: dropped with a warning, the checkpoint predicts, the next long input recompiles
    params = tmp_path / "cache" / "compiled" / ours / "inference.pdiparams"
    params.write_bytes(params.read_bytes()[:100])
    caplog.clear()
    with caplog.at_level("INFO"):
        assert globalpointer.load(str(best)).backend == "dynamic"
    assert "inference.pdiparams changed since it was written" in caplog.text
    assert spans(predict(best, source, tmp_path / "third.out")) == spans(dynamic)
    assert globalpointer.load(str(best)).backend == "paddle-inference"

    # a program that the size check passes but Paddle cannot load: dropped, the checkpoint runs
    program = tmp_path / "cache" / "compiled" / ours / "inference.json"
    program.write_bytes(b"x" * program.stat().st_size)
    caplog.clear()
    with caplog.at_level("INFO"):
        assert globalpointer.load(str(best)).backend == "dynamic"
    assert "does not load" in caplog.text and not os.path.exists(tmp_path / "cache" / "compiled" / ours)


def test_a_cache_that_cannot_be_written_skips_compiling(trained, tmp_path, monkeypatch, caplog):
    best = trained / "run" / "best"
    source = tmp_path / "in.jsonl"
    source.write_text("".join(open(trained / "dev.jsonl", encoding="utf-8").readlines()[:20]), encoding="utf-8")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    dynamic = predict(best, source, tmp_path / "dynamic.out", "--backend", "dynamic")
    for cache, message in ((blocker, "which is not a folder"), (blocker / "below", "cache cannot be written")):
        monkeypatch.setenv("GLOBALPOINTER_CACHE", str(cache))
        caplog.clear()
        with caplog.at_level("INFO"):
            assert spans(predict(best, source, tmp_path / "out.jsonl")) == spans(dynamic)
        assert message in caplog.text and "compiled into" not in caplog.text
    assert blocker.read_text() == "not a folder"


def test_the_cache_key_reads_paddles_version_from_the_module_not_a_package_name(trained, monkeypatch):
    """The GPU builds install as paddlepaddle-gpu: no package named paddlepaddle is there."""
    import importlib.metadata

    from globalpointer.model_directory.opening import open_model

    real = importlib.metadata.version

    def gpu_build(name):
        if name == "paddlepaddle":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", gpu_build)
    best = trained / "run" / "best"
    digest = open_model(str(best)).digest
    assert len(digest) == 64


def test_a_cache_inside_the_model_directory_writes_nothing_into_it(checkpoint_copy, tmp_path, monkeypatch, caplog):
    """GLOBALPOINTER_CACHE inside a checkpoint wrote compiled/ into it (an output inside an input):
    the program is not cached, the checkpoint predicts itself, and nothing is added to it."""
    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(checkpoint_copy / "cache"))
    before = sorted(os.listdir(checkpoint_copy))
    source = tmp_path / "in.txt"
    source.write_text("北京大学的张三\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        assert predict_main(["--model", str(checkpoint_copy), "--input", str(source), "--output",
                             str(tmp_path / "out.jsonl"), "--set", "inference.compile_from_lines=1"]) == 0
    assert sorted(os.listdir(checkpoint_copy)) == before
    assert "lies inside the model directory" in caplog.text and "point it elsewhere" in caplog.text


def fake_entry(root, name, megabytes, ran_at):
    entry = root / name
    entry.mkdir(parents=True)
    (entry / "inference.pdiparams").write_bytes(b"\0" * (megabytes * 2 ** 20))
    if ".partial-" in name:  # as partial_directory makes them
        from globalpointer.files import mark_temporary

        mark_temporary(str(entry))
    os.utime(entry, (ran_at, ran_at))
    return entry


def test_the_cache_keeps_the_most_recently_run_programs_within_its_bound(tmp_path):
    from globalpointer.model_directory.compiled import prune_compiled

    root = tmp_path / "compiled"
    old, older, recent = (fake_entry(root, name, 3, at) for name, at in (("old", 2000), ("older", 1000),
                                                                          ("recent", 3000)))
    new = fake_entry(root, "new", 4, 500)  # the one just built, whatever its time
    building = fake_entry(root, "other.partial-x1", 3, 100)  # another process's compile, not yet swapped in
    fake_entry(root, "killed.partial-x2", 3, 100)  # a compile killed mid-write: nobody holds it
    writer = os.open(building, os.O_RDONLY)
    fcntl.flock(writer, fcntl.LOCK_EX)
    try:
        assert prune_compiled(str(new), 0) == [] and len(os.listdir(root)) == 5  # 0: no bound, the killed one gone
        assert prune_compiled(str(new), 9) == [str(old), str(older)]  # 4 + 3 fit in 9 MB, 4 + 3 + 3 do not
        assert sorted(os.listdir(root)) == ["new", "other.partial-x1", "recent"]
        assert prune_compiled(str(new), 1) == [str(recent)]  # never the new one, nor one being written
        assert sorted(os.listdir(root)) == ["new", "other.partial-x1"] and building.exists()
    finally:
        os.close(writer)


@pytest.mark.slow  # compiles programs into a full cache
def test_a_compile_makes_room_and_a_run_counts_as_recent(trained, tmp_path, monkeypatch, caplog):
    """Compiling into a full cache removes the least recently run programs; running a cached program
    makes it the most recent."""
    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))
    best = trained / "run" / "best"
    source = tmp_path / "in.jsonl"
    source.write_text("".join(open(trained / "dev.jsonl", encoding="utf-8").readlines()[:20]), encoding="utf-8")
    predict(best, source, tmp_path / "first.out")
    (compiled,) = os.listdir(tmp_path / "cache" / "compiled")
    os.utime(tmp_path / "cache" / "compiled" / compiled, (1000, 1000))
    predict(best, source, tmp_path / "second.out")  # runs it: now the most recent
    assert os.path.getmtime(tmp_path / "cache" / "compiled" / compiled) > 1000

    stale = fake_entry(tmp_path / "cache" / "compiled", "stale", 1, 1000)
    changed = changed_copy(best, tmp_path / "changed")
    with caplog.at_level("INFO"):
        predict(changed, source, tmp_path / "changed.out", "--set", "inference.compiled_cache_mb=1")
    assert "2 least recently run program(s) removed" in caplog.text and not stale.exists()  # and the first
    assert len(os.listdir(tmp_path / "cache" / "compiled")) == 1
