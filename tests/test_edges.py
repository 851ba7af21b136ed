"""Trust at the edges: the numbered cases of docs/RELIABILITY.md's second attack (data lost or
overwritten, code run from data, silent wrong results, lines lost, tracebacks).  Each test builds the
attack as a user would meet it and asserts what the user is promised; the service's cases are in
tests/test_serve_edges.py."""
import json
import os
import resource
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml

from globalpointer.cli import main as cli
from globalpointer.cli import evaluate_main, predict_main, train_main
from globalpointer.config import load_config
from globalpointer.data.readers import read_records
from globalpointer.errors import CheckpointError, ConfigError, DataError, EncoderError
from globalpointer.checkpoint import load_checkpoint
from synthetic import tiny_config, write_jsonl
from helpers import snapshot, write_malicious_pickle
from conftest import ROOT



def entity_keys(found):
    return [[(e["start"], e["end"], e["type"]) for e in entities] for entities in found]


# 1. export replaces only what it wrote -----------------------------------------------------------

def test_export_onto_the_checkpoint_a_kill_left_is_refused(run_copy, capsys):
    """A kill between a save's two renames leaves only best.previous-XXXX, which predict loads: the
    export must not take best/ as a free name and then delete the only checkpoint."""
    best = run_copy / "best"
    best.rename(run_copy / "best.previous-k1ll3d")
    before = snapshot(run_copy)
    assert cli(["export", "--model", str(best), "--output", str(best)]) == 2
    assert "would replace the checkpoint" in capsys.readouterr().err
    assert snapshot(run_copy) == before


def test_re_export_keeps_files_the_user_added_and_folders_named_like_temporaries(run_copy, tmp_path, capsys):
    target = tmp_path / "export"
    assert cli(["export", "--model", str(run_copy / "best"), "--output", str(target)]) == 0
    mine = {"export.partial": "partial", "export.previous": "previous", "export.partial-x": "x"}
    for name, content in mine.items():  # folders of the user's that look like the temporaries of old
        (tmp_path / name).mkdir()
        (tmp_path / name / "mine.txt").write_text(content)
    assert cli(["export", "--model", str(run_copy / "best"), "--output", str(target)]) == 0  # a clean export: replaced
    (target / "NOTES.txt").write_text("my notes")
    (target / "mydata").mkdir()
    (target / "mydata" / "a.txt").write_text("data")
    before = snapshot(tmp_path)
    assert cli(["export", "--model", str(run_copy / "best"), "--output", str(target)]) == 2
    assert "holds files that no export of this project wrote" in capsys.readouterr().err
    assert snapshot(tmp_path) == before
    for name, content in mine.items():
        assert (tmp_path / name / "mine.txt").read_text() == content


def test_export_refuses_another_tools_paddle_model(run_copy, tmp_path, capsys):
    other = tmp_path / "their_model"
    other.mkdir()
    (other / "inference.json").write_text("{}")
    (other / "train_log.txt").write_text("3 days of training")
    assert cli(["export", "--model", str(run_copy / "best"), "--output", str(other)]) == 2
    assert "no export of this project wrote" in capsys.readouterr().err
    assert (other / "train_log.txt").read_text() == "3 days of training"


def test_export_of_a_checkpoint_named_like_a_temporary_keeps_it(run_copy, tmp_path):
    checkpoint = tmp_path / "X.partial"
    shutil.copytree(run_copy / "best", checkpoint)
    before = snapshot(checkpoint)
    assert cli(["export", "--model", str(checkpoint), "--output", str(tmp_path / "X")]) == 0
    assert snapshot(checkpoint) == before and (tmp_path / "X" / "inference.json").is_file()


def test_export_does_not_follow_symbolic_links(run_copy, tmp_path, caplog):
    secret = tmp_path / "id_ed25519"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----")
    os.symlink(secret, run_copy / "best" / "README.txt")
    assert cli(["export", "--model", str(run_copy / "best"), "--output", str(tmp_path / "export")]) == 0
    assert not os.path.lexists(tmp_path / "export" / "README.txt")
    assert all(b"OPENSSH" not in content for content in snapshot(tmp_path / "export").values())
    assert "symbolic links not copied into the export: README.txt" in caplog.text


# 2. no command writes over its own input -------------------------------------------------------

def test_convert_onto_its_input_is_refused(tmp_path, capsys):
    source = write_jsonl(tmp_path / "in.jsonl", [{"text": f"张三{i}", "entities": []} for i in range(20)])
    before = open(source, "rb").read()
    assert cli(["convert", source, source, "--take", "10"]) == 2
    assert "is the input" in capsys.readouterr().err and open(source, "rb").read() == before


@pytest.mark.parametrize("flags, message", [(["--take", "-1"], "must be 0 or more"), (["--skip", "-5"], "must be 0 or more")])
def test_convert_refuses_negative_counts(tmp_path, capsys, flags, message):
    source = write_jsonl(tmp_path / "in.jsonl", [{"text": "张三", "entities": []}])
    with pytest.raises(SystemExit) as stop:
        cli(["convert", source, str(tmp_path / "out.jsonl"), *flags])
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_convert_refuses_a_skip_that_leaves_nothing(tmp_path, capsys):
    source = write_jsonl(tmp_path / "in.jsonl", [{"text": "张三", "entities": []}] * 3)
    assert cli(["convert", source, str(tmp_path / "out.jsonl"), "--skip", "999999"]) == 2
    assert "--skip 999999 leaves none of its 3 records" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()


def test_predict_from_a_file_named_like_its_old_temporary(trained, tmp_path):
    source = tmp_path / "work.jsonl.partial"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in ["张三在北京", "李四"]), encoding="utf-8")
    before = source.read_bytes()
    output = tmp_path / "work.jsonl"
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(source), "--output", str(output)]) == 0
    assert source.read_bytes() == before and len(output.read_text().splitlines()) == 2


def test_predict_refuses_the_same_file_for_output_and_html(trained, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("张三\n", encoding="utf-8")
    out = tmp_path / "out"
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(source), "--output", str(out),
                         "--html", str(out)]) == 2
    assert "name the same file" in capsys.readouterr().err and not out.exists()


def test_predict_refuses_an_output_inside_the_model(run_copy, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("张三\n", encoding="utf-8")
    before = snapshot(run_copy / "best")
    assert predict_main(["--model", str(run_copy / "best"), "--input", str(source),
                         "--output", str(run_copy / "best" / "config.yaml")]) == 2
    assert "lies inside the input" in capsys.readouterr().err and snapshot(run_copy / "best") == before


def test_training_from_the_runs_own_config_is_refused(run_copy, capsys):
    config = run_copy / "config.yaml"
    tree = yaml.safe_load(config.read_text())
    tree["output_dir"] = str(run_copy)
    config.write_text(yaml.safe_dump(tree), encoding="utf-8")
    before = snapshot(run_copy)
    assert train_main(["--config", str(config), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "is an input of this run" in err and "config.yaml" in err
    assert snapshot(run_copy) == before


# 3. one writer per run directory ----------------------------------------------------------------

def test_a_second_training_into_a_run_being_written_is_refused(tmp_path, capsys):
    from globalpointer.files import RunLock

    config = tiny_config(tmp_path, train__epochs=1)
    run = tmp_path / "run"
    run.mkdir()
    with RunLock(str(run)):  # what the first train.py holds while it runs
        assert train_main(["--config", config]) == 2
        assert f"is being written by train.py (pid {os.getpid()})" in capsys.readouterr().err
        assert os.listdir(run) == [".lock"]
    assert train_main(["--config", config]) == 0  # released: the next run may write


# 4. no code from a model directory's tokenizer files -------------------------------------------

def test_a_tokenizer_that_would_unpickle_is_never_built(tmp_path):
    from globalpointer.model.encoders import build_tiny, load_encoder

    marker = tmp_path / "ran"
    directory = tmp_path / "ernie_tiny_like"
    tiny = build_tiny()
    tiny.model.save_pretrained(str(directory))  # PaddleNLP format: model_state.pdparams + config
    (directory / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "ErnieTinyTokenizer"}))
    write_malicious_pickle(directory / "dict.wordseg.pickle", marker)
    (directory / "spm_cased_simp_sampled.model").write_bytes(b"")
    with pytest.raises(EncoderError, match="no vocab.txt or tokenizer.json.*dict.wordseg.pickle"):
        load_encoder(str(directory))
    assert not marker.exists()
    tiny.tokenizer.save_pretrained(str(directory))  # with its plain vocabulary it loads
    assert load_encoder(str(directory)).tokenizer.vocab_size == tiny.tokenizer.vocab_size


# 6. the format is read from every record ---------------------------------------------------------

def write_lines(path, objects):
    path.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects), encoding="utf-8")
    return str(path)


def json_min(task_id, text, regions=None):
    task = {"id": task_id, "text": text, "annotator": 1, "annotation_id": 100 + task_id, "lead_time": 3.5}
    if regions is not None:
        task["label"] = [{"start": s, "end": e, "text": text[s:e], "labels": [t]} for s, e, t in regions]
    return task


def test_json_min_whose_first_tasks_are_unannotated_keeps_every_entity(tmp_path, caplog):
    caplog.set_level("INFO")
    tasks = [json_min(i, f"没有标注{i}") for i in range(79)] + [json_min(100, "张三在北京", [(0, 2, "PER"), (3, 5, "LOC")])]
    records = read_records(write_lines(tmp_path / "min.json", tasks))
    assert [(r.text, [e.key for e in r.entities]) for r in records] == \
        [("张三在北京", [(0, 2, "PER"), (3, 5, "LOC")])]
    assert "format doccano" in caplog.text and "left out 79 tasks without annotation" in caplog.text


def test_a_file_mixing_formats_names_the_first_line_of_each(tmp_path):
    path = write_lines(tmp_path / "mixed.jsonl", [
        {"text": "张三", "entities": [{"start": 0, "end": 2, "type": "PER"}]},
        {"text": "北京", "label": {"LOC": {"北京": [[0, 1]]}}}])
    with pytest.raises(DataError, match=r"two formats, jsonl \(first on line 1\) and cluener \(first on line 2\)"):
        read_records(path)


def test_a_misspelt_entity_key_is_an_error_not_a_text_without_entities(tmp_path):
    path = write_lines(tmp_path / "typo.jsonl", [
        {"text": "张三", "entities": [{"start": 0, "end": 2, "type": "PER"}]},
        {"text": "北京", "entitys": [{"start": 0, "end": 2, "type": "LOC"}]}])
    with pytest.raises(DataError, match=r"typo.jsonl:2: unknown key 'entitys'; did you mean 'entities'"):
        read_records(path)


def test_the_ground_truth_annotation_wins(tmp_path):
    region = lambda s, e, t: {"value": {"start": s, "end": e, "text": "张三在北京"[s:e], "labels": [t]}, "type": "labels"}  # noqa: E731
    task = {"id": 1, "data": {"text": "张三在北京"}, "annotations": [
        {"id": 1, "result": [region(0, 2, "LOC")], "ground_truth": False},
        {"id": 2, "result": [region(0, 2, "PER"), region(3, 5, "LOC")], "ground_truth": True}]}
    [record] = read_records(write_lines(tmp_path / "ls.json", [task]))
    assert [e.key for e in record.entities] == [(0, 2, "PER"), (3, 5, "LOC")]


def test_conflicting_annotations_of_one_task_name_both_lines(tmp_path):
    same = json_min(7, "张三在北京", [(0, 2, "PER")])
    path = write_lines(tmp_path / "min.json", [same, dict(same), json_min(7, "张三在北京", [(0, 2, "LOC")])])
    with pytest.raises(DataError, match=r"min.json:3: task 7 was already read on 1 with other entities"):
        read_records(path)
    agreeing = read_records(write_lines(tmp_path / "agree.json", [same, dict(same)]))
    assert len(agreeing) == 1  # the same annotation twice is one example


# 7. training never keeps non-finite weights ------------------------------------------------------

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


def test_scores_above_the_mask_never_decode_outside_the_text():
    """A diverging model (lr=5 on the quickstart) scores padding and [CLS] far above the additive
    mask; decoding them gave positions outside the text (an IndexError at the first evaluation)."""
    import paddle

    from globalpointer.model.heads import decode_span_logits

    span_text = paddle.to_tensor([[0, 1, 1, 0, 0]])  # [CLS], two text tokens, [SEP], padding
    logits = paddle.full([1, 2, 5, 5], 1e6)
    [spans] = decode_span_logits(logits, span_text, True, 0.0)
    assert sorted((s.type, s.start, s.end) for s in spans) == [(t, i, j) for t in (0, 1) for i, j in
                                                                ((1, 1), (1, 2), (2, 2))]


def test_nothing_to_learn_is_a_config_error():
    with pytest.raises(ConfigError, match="train.lr and train.head_lr are both 0"):
        load_config(None, ["train.lr=0", "train.head_lr=0"])
    load_config(None, ["train.lr=0"])  # a frozen encoder under a learning head is a real setting


def test_training_data_without_entities_is_an_error_even_with_labels(tmp_path, capsys):
    config = tiny_config(tmp_path, data__labels=["PER"])
    write_jsonl(tmp_path / "train.jsonl", [{"text": "没有实体的句子"}] * 10)
    assert train_main(["--config", config]) == 2
    assert "no entities in 10 training texts" in capsys.readouterr().err


# 8. types and thresholds that cannot work ------------------------------------------------------

@pytest.mark.parametrize("labels, message", [(["LOC", "PER", "LOC", "ORG"], "names LOC more than once"),
                                             (["LOC", "", "PER"], "labels.json is corrupted")])
def test_labels_json_with_a_repeated_or_empty_type(run_copy, labels, message):
    (run_copy / "best" / "labels.json").write_text(json.dumps(labels))
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(str(run_copy / "best"))


def test_an_empty_type_in_the_config_is_an_error():
    with pytest.raises(ConfigError, match="every type needs a name"):
        load_config(None, ["data.labels=[PER, '']"])


@pytest.mark.parametrize("value", ["-1e308", True, "0.5"])
def test_thresholds_must_be_numbers(run_copy, value):
    from globalpointer.checkpoint import read_thresholds

    labels = json.loads((run_copy / "best" / "labels.json").read_text())
    thresholds = {label: 0.0 for label in labels}
    thresholds[labels[0]] = value
    (run_copy / "best" / "thresholds.json").write_text(json.dumps({"thresholds": thresholds}))
    with pytest.raises(CheckpointError, match="thresholds must be JSON numbers"):
        read_thresholds(str(run_copy / "best"), labels)


# 9. lines are split on \n only ---------------------------------------------------------------------

def test_json_lines_with_raw_line_separators_read_back(tmp_path):
    text = "张三\u2028在北京\u2029工作\x85了"
    source = write_lines(tmp_path / "in.jsonl", [{"text": text, "entities": [{"start": 0, "end": 2, "type": "PER"}]},
                                                 {"text": "李四", "entities": []}])
    assert "\u2028" in open(source, encoding="utf-8").read()  # written raw, as json.dumps(ensure_ascii=False) does
    assert cli(["convert", source, str(tmp_path / "out.jsonl")]) == 0
    for path in (source, str(tmp_path / "out.jsonl")):
        records = read_records(path)
        assert [r.text for r in records] == [text, "李四"] and records[0].entities[0].key == (0, 2, "PER")


# 10. predict keeps one line out per line in ------------------------------------------------------

def test_lines_json_cannot_read_get_an_error_field(trained, tmp_path):
    source = tmp_path / "in.jsonl"
    lines = ['{"text": "张三在北京"}', '{"text": "abc\\ud800def"}', '{"text": "a", "n": ' + "1" * 5001 + "}",
             "[" * 100000 + "]" * 100000, '{"text": "ok", "meta": "\\udfff"}', '{"text": "李四"}']
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / "out.jsonl"
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(source), "--output", str(output)]) == 1
    raw = output.read_bytes()
    raw.decode("utf-8")  # valid UTF-8 throughout
    rows = [json.loads(line) for line in raw.decode("utf-8").splitlines()]
    assert len(rows) == 6 and [("error" in row) for row in rows] == [False, True, True, True, True, False]
    assert "lone surrogate" in rows[1]["error"] and "4300 digits" in rows[2]["error"] and "nested" in rows[3]["error"]


def test_evaluate_refuses_a_lone_surrogate_before_the_work(trained, tmp_path, capsys):
    data = tmp_path / "dev.jsonl"
    data.write_text('{"text": "张三\\ud800", "entities": []}\n', encoding="utf-8")
    assert evaluate_main(["--model", str(trained / "run" / "best"), "--data", str(data),
                          "--html", str(tmp_path / "page.html")]) == 2
    assert "dev.jsonl:1: the text holds a lone surrogate" in capsys.readouterr().err
    assert not (tmp_path / "page.html").exists()


# 11. one line, not a traceback -----------------------------------------------------------------

def run_limited(args, tmp_path, file_size_limit):
    """A command in a child process whose files may not grow past ``file_size_limit`` bytes (ulimit -f)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, preexec_fn=limit, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["predict", "export"])
def test_a_full_disk_is_one_line(trained, tmp_path, command):
    model = str(trained / "run" / "best")
    if command == "predict":
        (tmp_path / "in.txt").write_text("张三在北京大学读书\n" * 3000, encoding="utf-8")
        args = [os.path.join(ROOT, "predict.py"), "--model", model, "--input", "in.txt", "--output", "out.jsonl"]
    else:
        args = ["-m", "globalpointer", "export", "--model", model, "--output", "export"]
    done = run_limited(args, tmp_path, 20_000)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "File too large; free space" in done.stderr
    assert not os.path.exists(tmp_path / "out.jsonl") and not os.path.exists(tmp_path / "export")
    assert [name for name in os.listdir(tmp_path) if "partial" in name and command == "export"] == []


def test_a_read_only_location_is_one_line(trained, tmp_path, monkeypatch, capsys):
    import errno

    def read_only(*args):
        raise OSError(errno.EROFS, "Read-only file system", args[-1])

    monkeypatch.setattr(os, "replace", read_only)
    (tmp_path / "in.txt").write_text("张三\n", encoding="utf-8")
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(tmp_path / "in.txt"),
                         "--output", str(tmp_path / "out.jsonl")]) == 2
    assert "Read-only file system; choose a location that can be written" in capsys.readouterr().err


def test_a_garbage_row_in_metrics_then_resume(tmp_path, capsys):
    config = tiny_config(tmp_path, train__epochs=1)
    assert train_main(["--config", config]) == 0
    with open(tmp_path / "run" / "metrics.csv", "a", encoding="utf-8") as out:
        out.write("garbage,,,\n")
    assert train_main(["--config", config, "--resume"]) == 2
    assert "metrics.csv:3: step 'garbage' is not a whole number" in capsys.readouterr().err


@pytest.mark.parametrize("info", [None, {"packs_texts": 0}, "{not json"])
def test_an_export_whose_export_json_is_missing_or_wrong_still_predicts(trained, tmp_path, info):
    import globalpointer

    target = tmp_path / "export"
    assert cli(["export", "--model", str(trained / "run" / "best"), "--output", str(target), "--onnx"]) == 0
    if info is None:
        os.remove(target / "export.json")
    else:
        (target / "export.json").write_text(info if isinstance(info, str) else json.dumps(info))
    texts = [json.loads(line)["text"] for line in open(trained / "dev.jsonl", encoding="utf-8")][:20]
    expected = entity_keys(globalpointer.load(str(trained / "run" / "best")).pipe(texts))
    for backend in ("paddle-inference", "onnxruntime"):
        assert entity_keys(globalpointer.load(str(target), backend=backend).pipe(texts)) == expected


def test_a_max_length_beyond_an_exports_positions_is_refused_before_the_work(trained, tmp_path, capsys):
    target = tmp_path / "export"
    assert cli(["export", "--model", str(trained / "run" / "best"), "--output", str(target)]) == 0
    (tmp_path / "in.txt").write_text("张三\n", encoding="utf-8")
    assert predict_main(["--model", str(target), "--input", str(tmp_path / "in.txt"), "--output",
                         str(tmp_path / "out.jsonl"), "--set", "data.max_length=100000"]) == 2
    assert "exceeds the 512 positions" in capsys.readouterr().err and not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("override, message", [("serve.port=70000", "serve.port must be >= 0 and <= 65535"),
                                               ("serve.batch_wait_ms=1e12", "serve.batch_wait_ms must be >= 0 and "
                                                                            "<= 1000")])
def test_service_settings_that_cannot_work(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])
