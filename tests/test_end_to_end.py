"""train.py -> evaluate.py -> predict.py on a tiny encoder and a small learnable task, on CPU."""
import json
import os

import numpy as np
import pytest

from globalpointer.cli import evaluate_main, predict_main, train_main
from synthetic import tiny_config


def test_training_learns_nested_entities(trained):
    summary = json.load(open(trained / "run" / "summary.json"))
    assert summary["best_dev_f1"] > 0.9, summary
    assert summary["gold_spans_lost_in_alignment"] == 0 and summary["gold_spans_dropped_by_head"] == 0
    run = trained / "run"
    for name in ("config.yaml", "metrics.csv", "dev_report.json", "best/model.safetensors", "last/optimizer.safetensors",
                 "last/trainer_state.json", "best/vocab.txt", "best/labels.json"):
        assert (run / name).exists(), name
    rows = open(run / "metrics.csv").read().splitlines()
    assert rows[0].startswith("step,epochs_done,train_loss") and len(rows) == 7  # header + one row per epoch
    assert [row.split(",")[1] for row in rows[1:]] == ["1.0", "2.0", "3.0", "4.0", "5.0", "6.0"]


def test_evaluate_reproduces_dev_f1_and_writes_report(trained, capsys):
    output = trained / "eval.json"
    assert evaluate_main(["--model", str(trained / "run" / "best"), "--data", str(trained / "dev.jsonl"),
                          "--output", str(output)]) == 0
    report = json.load(open(output))
    summary = json.load(open(trained / "run" / "summary.json"))
    assert report["micro"]["f1"] == pytest.approx(summary["best_dev_f1"], abs=1e-9)
    assert "micro" in capsys.readouterr().out
    predictions = [json.loads(line) for line in open(trained / "eval.predictions.jsonl")]
    assert len(predictions) == 60
    nested = [p for p in predictions if any(e["text"] == "北京大学" for e in p["entities"])]
    assert nested and all(any(e["text"] == "北京" and e["type"] == "LOC" for e in p["entities"]) for p in nested)


def test_predict_long_lines_and_errors(trained):
    long_line = "的一是在不了有" * 20 + "张三" + "的一是在" * 10 + "上海"  # far beyond max_length 24
    source = trained / "raw.txt"
    source.write_bytes(("北京大学的张三\n\n" + long_line + "\n").encode() + b"\xff\xfe\n" + "  李四 \n".encode())
    output = trained / "pred.jsonl"
    code = predict_main(["--model", str(trained / "run" / "best"), "--input", str(source), "--output", str(output)])
    assert code == 1  # one line could not be read
    out = [json.loads(line) for line in open(output)]
    assert len(out) == 5 and not os.path.exists(str(output) + ".partial")
    assert {(e["text"], e["type"]) for e in out[0]["entities"]} >= {("北京大学", "ORG"), ("北京", "LOC"), ("张三", "PER")}
    assert out[1] == {"text": "", "entities": []}
    found = {(e["start"], e["text"]) for e in out[2]["entities"]}
    assert (len(long_line) - 2, "上海") in found and (140, "张三") in found
    assert "error" in out[3]
    assert out[4]["entities"][0]["start"] == 2 and out[4]["text"] == "  李四 "
    for line in out:
        for e in line.get("entities", []):
            assert line["text"][e["start"]:e["end"]] == e["text"] and 0.5 < e["score"] <= 1.0


def test_flat_decoding_removes_nested(trained, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("北京大学的张三\n", encoding="utf-8")
    output = tmp_path / "out.jsonl"
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(source), "--output", str(output),
                         "--set", "model.decode=flat"]) == 0
    entities = json.loads(open(output).read())["entities"]
    spans = sorted((e["start"], e["end"]) for e in entities)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])) and len(spans) >= 2


def test_print_config_and_config_errors(tmp_path, capsys):
    config = tiny_config(tmp_path)
    assert train_main(["--config", config, "--print-config", "--set", "train.lr=3e-5"]) == 0
    printed = capsys.readouterr().out
    assert "lr: 3.0e-05" in printed and "encoder: tiny" in printed
    assert train_main(["--config", config, "--set", "train.epoch=3"]) == 2
    assert "did you mean 'train.epochs'" in capsys.readouterr().err
    assert train_main(["--config", config, "--set", "data.train=/nope.json"]) == 2
    assert "data.train: file not found: /nope.json" in capsys.readouterr().err


def test_checkpoint_errors_are_clear(tmp_path, capsys):
    assert predict_main(["--model", str(tmp_path / "none"), "--input", "-"]) == 2
    assert "checkpoint directory not found" in capsys.readouterr().err
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.yaml").write_text("model:\n  encoder: tiny\n")
    assert evaluate_main(["--model", str(broken), "--data", "x"]) == 2
    assert "missing model.safetensors" in capsys.readouterr().err


@pytest.mark.slow  # trains models of its own: the full suite runs it
def test_without_dev_the_last_model_is_kept_and_reruns_start_fresh(tmp_path):
    config = tiny_config(tmp_path, train__epochs=2)
    for extra in ([], ["--overwrite"]):  # the second run replaces the first: one metrics row per epoch, not four
        assert train_main(["--config", config, "--set", "data.dev="] + extra) == 0
    rows = open(tmp_path / "run" / "metrics.csv").read().splitlines()
    assert len(rows) == 3
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["best_dev_f1"] is None and summary["best_step"] == summary["steps"]


def test_learning_curve_plot(trained):
    from globalpointer.evaluation.plot import plot_run

    import matplotlib.image

    path = plot_run(str(trained / "run"))
    pixels = matplotlib.image.imread(path)
    # three panels, 15 x 4 inches at 100 dpi: the curves and the best checkpoint's reliability diagram
    assert json.load(open(trained / "run" / "dev_report.json"))["calibration"]["items"] > 0
    assert pixels.shape[:2] == (400, 1500)
    colours = {tuple(p) for p in pixels.reshape(-1, pixels.shape[-1])[::7].round(2)}
    assert len(colours) > 20  # curves, axes and labels drawn, not a blank page


@pytest.mark.slow  # trains models of its own: the full suite runs it
def test_early_stopping_after_patience_evaluations_without_gain(tmp_path):
    # rates too small to move a prediction: the dev F1 never changes, so only the first evaluation
    # counts as an improvement (both rates 0 is a config error)
    config = tiny_config(tmp_path, train__lr=0.0, train__head_lr=1e-12, train__patience=2, train__epochs=6)
    assert train_main(["--config", config]) == 0
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    rows = open(tmp_path / "run" / "metrics.csv").read().splitlines()[1:]
    assert summary["stopped_early"] and summary["epochs_completed"] == 3 and len(rows) == 3
    assert summary["best_step"] == int(rows[0].split(",")[0])
    # train.min_steps: no early stop before it, however long the dev F1 stalls
    steps_per_epoch = int(rows[0].split(",")[0])
    assert train_main(["--config", config, "--overwrite", "--set", f"train.min_steps={4 * steps_per_epoch + 1}"]) == 0
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["stopped_early"] and summary["epochs_completed"] == 5


def test_train_trains_and_evaluates_the_model_its_builder_makes(tmp_path):
    """The ``build`` hook (bench/vs_paddlenlp_f1.py trains PaddleNLP's layer through it): its head's
    loss is what training minimises, its head's decoding what evaluation decodes."""
    from globalpointer.config import load_config
    from globalpointer.model.network import build_network
    from globalpointer.training.loop import train

    calls = {"loss": 0, "decode": 0}

    def build(settings, encoder, num_types):
        model = build_network(settings, encoder, num_types)
        loss, decode = model.head.loss, model.head.decode

        def counted_loss(*args):
            calls["loss"] += 1
            return loss(*args)

        def counted_decode(*args):
            calls["decode"] += 1
            return decode(*args)
        model.head.loss, model.head.decode = counted_loss, counted_decode
        return model

    summary = train(load_config(tiny_config(tmp_path, train__epochs=2)), build=build)
    assert calls["loss"] == summary["steps"] > 0 and calls["decode"] > 0
    assert 0 < summary["eval_seconds"] < summary["seconds"]


def test_training_throughput_leaves_evaluation_out(monkeypatch):
    from types import SimpleNamespace

    from globalpointer.training import run

    now = [100.0]
    monkeypatch.setattr(run, "time", SimpleNamespace(time=lambda: now[0]))
    progress = run.Progress()
    progress.start_clock()
    now[0] += 4.0  # four seconds of training steps over 40 windows
    progress.windows += 40
    progress.tick()
    with progress.evaluation_time():
        now[0] += 6.0  # six seconds of dev evaluation and checkpoints
    assert progress.seconds == 10.0 and progress.eval_seconds == 6.0
    assert progress.windows_per_second() == 10.0


def test_head_initialisation_does_not_depend_on_encoder_loading(tmp_path, monkeypatch):
    """A first run converts the encoder into the cache (building a model draws random numbers), later
    runs do not: both must start from the same head, or a quickstart's F1 depends on a warm cache."""
    import paddle
    import pytest

    from globalpointer.training import loop as training
    from globalpointer.config import load_config
    from globalpointer.model.network import build_network

    class Built(Exception):
        pass

    initial = []

    def build(settings, encoder, num_types):
        initial.append(build_network(settings, encoder, num_types).head.dense.weight.numpy())
        raise Built

    config = tiny_config(tmp_path)
    with pytest.raises(Built):
        training.train(load_config(config), build=build)
    load_encoder = training.load_encoder

    def converting_load(spec):
        paddle.randn([1000])  # what a conversion's model construction does to the global generator
        return load_encoder(spec)

    monkeypatch.setattr(training, "load_encoder", converting_load)
    with pytest.raises(Built):
        training.train(load_config(config, ["output_dir=" + str(tmp_path / "second")]), build=build)
    np.testing.assert_array_equal(initial[0], initial[1])


def test_the_saved_config_holds_what_training_resolved(trained, tmp_path, capsys):
    """What a run saves is what it trained (the types in the model's order, the tokenization auto
    became, absolute paths), so that every reader reads one record; the user's file is untouched."""
    import yaml

    written = yaml.safe_load(open(trained / "config.yaml"))
    assert "labels" not in written["data"] and "tokenization" not in written["data"]
    for saved in (trained / "run" / "config.yaml", trained / "run" / "best" / "config.yaml"):
        data = yaml.safe_load(open(saved))["data"]
        assert data["labels"] == ["LOC", "ORG", "PER"] and data["tokenization"] == "char"
        assert os.path.isabs(data["train"]) and os.path.isfile(data["train"])
    assert json.load(open(trained / "run" / "best" / "labels.json")) == ["LOC", "ORG", "PER"]
    assert json.load(open(trained / "run" / "best" / "checkpoint.json"))["tokenization"] == "char"
    source = tmp_path / "in.txt"
    source.write_text("张三\n", encoding="utf-8")
    for setting, message in (("data.labels=[PER,LOC]", "was trained with data.labels=[LOC, ORG, PER]"),
                             ("data.tokenization=subword", "was trained with data.tokenization=char")):
        assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(source), "--output",
                             str(tmp_path / "out.jsonl"), "--set", setting]) == 2
        assert message in capsys.readouterr().err
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(source), "--output",
                         str(tmp_path / "out.jsonl"), "--set", "data.labels=[LOC,ORG,PER]"]) == 0


def test_a_model_trained_on_words_predicts_whole_words(tmp_path):
    """A CoNLL file of English words, read in subword pieces: the checkpoint records that its training
    entities were words, and every reader of it (load, predict) gives whole words only, even with a
    minimum score that lets nearly every span through."""
    import globalpointer
    from globalpointer.cli import train_main

    words = [("Peter", "B-PER"), ("Blackburn", "I-PER"), ("visited", "O"), ("Washington", "B-LOC"), ("today", "O")]
    (tmp_path / "train.conll").write_text("".join("\n".join(f"{w} {t}" for w, t in words) + "\n\n"
                                                  for _ in range(40)), encoding="utf-8")
    assert train_main(["--config", tiny_config(tmp_path, data__train=str(tmp_path / "train.conll"), data__dev="",
                                               data__tokenization="subword", train__epochs=1)]) == 0
    best = tmp_path / "run" / "best"
    assert json.load(open(best / "checkpoint.json"))["word_boundaries"] is True
    text = "Blackburnia visited Washingtonville and Peterborough"
    ner = globalpointer.load(str(best), model__min_score=0.001, model__decode="nested")
    found = ner(text)
    assert found and ner.extractor.continuations
    starts = {0} | {i + 1 for i, c in enumerate(text) if c == " "}
    ends = {len(text)} | {i for i, c in enumerate(text) if c == " "}
    assert all(e["start"] in starts and e["end"] in ends for e in found), found
    source = tmp_path / "in.txt"
    source.write_text(text + "\n", encoding="utf-8")
    assert predict_main(["--model", str(best), "--input", str(source), "--output", str(tmp_path / "out.jsonl"),
                         "--set", "model.min_score=0.001", "--set", "model.decode=nested"]) == 0
    assert json.loads(open(tmp_path / "out.jsonl").readline())["entities"] == found


def test_a_training_text_far_longer_than_its_windows_is_said(tmp_path, caplog):
    """Sentences run together (a tagged file with too few blank lines) train as texts of hundreds of
    windows: the log names the file, the text and the likely cause."""
    sentence = "\n".join(["张 B-PER", "三 I-PER", "在 O", "北 B-LOC", "京 I-LOC", "工 O", "作 O"])
    run_together = "\n".join([sentence] * 200)
    (tmp_path / "train.bio").write_text(f"{run_together}\n\n{sentence}\n\n{run_together}\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        assert train_main(["--config", tiny_config(tmp_path, data__train=str(tmp_path / "train.bio"), data__dev="",
                                                   train__epochs=1)]) == 0
    said = [r.getMessage() for r in caplog.records if "several texts read as one" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"{tmp_path / 'train.bio'}: 2 training text(s) longer than 50 windows")
    assert "(the longest, text 1, 1,400 characters starting '张三在北京工作" in said[0]
