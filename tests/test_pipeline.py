"""The Python API a user reaches first: load a saved model, call it on text (README, "From Python")."""
import json

import pytest

import globalpointer
from helpers import unrecorded


def test_readme_example(trained):
    ner = globalpointer.load(str(trained / "run" / "best"))
    entities = ner("北京大学的张三在上海")
    assert {(e["text"], e["type"]) for e in entities} >= {("北京大学", "ORG"), ("张三", "PER"), ("上海", "LOC")}
    assert all(set(e) == {"start", "end", "type", "text", "score"} for e in entities)
    texts = ["深圳", "", "李四去了广州"] * 5
    results = list(ner.pipe(texts, batch_size=4))
    assert len(results) == len(texts) and results[1] == [] and results[0] == ner("深圳")


def test_same_entities_as_predict_py_and_overrides_like_set(trained, tmp_path):
    from globalpointer.cli import predict_main

    source = tmp_path / "in.txt"
    texts = [line for line in open(trained / "dev.jsonl", encoding="utf-8")][:20]
    source.write_text("".join(texts), encoding="utf-8")
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(source),
                         "--output", str(tmp_path / "out.jsonl")]) == 0
    expected = [json.loads(line)["entities"] for line in open(tmp_path / "out.jsonl", encoding="utf-8")]
    ner = globalpointer.load(str(trained / "run" / "best"))
    assert list(ner.pipe(json.loads(line)["text"] for line in texts)) == expected
    flat = globalpointer.load(str(trained / "run" / "best"), model__decode="flat", model__min_score=0.92)
    assert flat.config.model.decode == "flat" and flat.config.model.min_score == 0.92
    for found in flat.pipe(json.loads(line)["text"] for line in texts):
        spans = sorted((e["start"], e["end"]) for e in found)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # flat: no overlaps
        assert all(e["score"] > 0.92 for e in found)


def test_evaluate_a_labelled_file_from_python(trained):
    ner = globalpointer.load(str(trained / "run" / "best"))
    records, predicted, report, seconds = ner.evaluate(str(trained / "dev.jsonl"))
    summary = json.load(open(trained / "run" / "summary.json"))
    assert len(records) == len(predicted) == 60 and seconds > 0
    assert report["micro"]["f1"] == summary["best_dev_f1"]  # what training's dev evaluation measured
    counts, micro = report["errors"]["counts"], report["micro"]
    assert counts["correct"] == micro["correct"] and counts["missed"] <= micro["support"] - micro["correct"]


def test_what_users_pass_gets_entities_or_a_message_that_says_what_to_pass(trained):
    import pytest

    from globalpointer.errors import ConfigError

    ner = globalpointer.load(str(trained / "run" / "best"))
    texts = ["北京大学的张三在上海", "李四"]
    assert ner(texts) == [ner(texts[0]), ner(texts[1])] and ner(tuple(texts)) == ner(texts)  # the Hugging Face habit
    with pytest.raises(TypeError, match="pipe\\(\\) takes an iterable of texts, got one str"):
        list(ner.pipe("北京大学"))  # not one text per character
    with pytest.raises(TypeError, match="got NoneType"):
        ner(None)
    with pytest.raises(TypeError, match="decode them first"):
        ner("北京".encode("utf-8"))
    with pytest.raises(TypeError, match="pipe\\(\\): text 1 takes text"):
        list(ner.pipe(["北京", 3]))
    with pytest.raises(ConfigError, match="did you mean model__min_score=0.8"):
        globalpointer.load(str(trained / "run" / "best"), min_scor=0.8)
    with pytest.raises(ConfigError, match="threshold=2.0 is model.min_score=0.880797.*model__min_score"):
        globalpointer.load(str(trained / "run" / "best"), threshold=2.0)  # the old key, a logit
    with pytest.raises(ConfigError, match="^load\\(\\): device: expected a string, got 0$"):
        globalpointer.load(str(trained / "run" / "best"), device=0)  # not blamed on the model's config.yaml
    assert repr(ner).startswith(f"Pipeline({str(trained / 'run' / 'best')!r}, backend='dynamic', device='cpu'")


@pytest.mark.slow  # trains models of its own
def test_a_model_trained_on_flat_entities_predicts_flat_ones_unless_told(trained, tmp_path):
    """model.decode auto: the checkpoint records the share of training entities that overlap another;
    with none, or a stray one (CLUENER's training file: 3 of 23,971 entities), predictions have none
    either (CLUENER's quickstart pre-annotated overlapping regions)."""
    import shutil

    import yaml

    from globalpointer.cli import train_main
    from synthetic import make_records, tiny_config, write_jsonl

    def nested_city(record, entity):  # the LOC 北京 inside the ORG 北京大学
        return entity["type"] == "LOC" and record["text"].startswith("北京大学", entity["start"])

    records = make_records(240, 1)
    flat_records = [{**r, "entities": [e for e in r["entities"] if not nested_city(r, e)]} for r in records]
    config = tiny_config(tmp_path, train__epochs=1)
    write_jsonl(tmp_path / "train.jsonl", flat_records)
    assert train_main(["--config", config]) == 0
    info = json.load(open(tmp_path / "run" / "best" / "checkpoint.json"))
    assert info["overlapping_entities"] is False and info["overlapping_entity_share"] == 0
    nested = json.load(open(trained / "run" / "best" / "checkpoint.json"))
    assert nested["overlapping_entities"] is True and nested["overlapping_entity_share"] >= 0.01
    assert globalpointer.load(str(tmp_path / "run" / "best")).extractor.flat
    # one text of 240 keeps its nested city: 2 of the file's entities overlap, under 1%
    stray = next(i for i, r in enumerate(records) if len(r["entities"]) > len(flat_records[i]["entities"]))
    write_jsonl(tmp_path / "train.jsonl", flat_records[:stray] + [records[stray]] + flat_records[stray + 1:])
    assert train_main(["--config", config, "--set", f"output_dir={tmp_path / 'stray'}"]) == 0
    info_stray = json.load(open(tmp_path / "stray" / "best" / "checkpoint.json"))
    assert info_stray["overlapping_entities"] is True and 0 < info_stray["overlapping_entity_share"] < 0.01
    assert globalpointer.load(str(tmp_path / "stray" / "best")).extractor.flat
    assert not globalpointer.load(str(tmp_path / "run" / "best"), model__decode="nested").extractor.flat
    assert not globalpointer.load(str(trained / "run" / "best")).extractor.flat  # nested training data
    # a checkpoint from before the record: nested, as it predicted then
    old = tmp_path / "old"
    shutil.copytree(tmp_path / "run" / "best", old)
    (old / "checkpoint.json").write_text(json.dumps({k: v for k, v in info.items()
                                                     if k not in ("overlapping_entities", "overlapping_entity_share")}))
    assert not globalpointer.load(str(old)).extractor.flat
    # one from before the share: nested when a training text had overlapping entities, as then
    (old / "checkpoint.json").write_text(json.dumps({**info_stray, "overlapping_entity_share": None}))
    unrecorded(old)  # that version recorded no sizes either
    assert not globalpointer.load(str(old)).extractor.flat
    assert yaml.safe_load((old / "config.yaml").read_text())["model"]["decode"] == "auto"


@pytest.mark.slow  # trains models of its own: the full suite runs it
def test_min_score_is_the_probability_every_entity_shows(trained, tmp_path, caplog):
    """model.min_score replaced model.threshold (a logit): a checkpoint whose config still says
    threshold predicts exactly what it did, read as min_score = sigmoid(threshold)."""
    import math
    import shutil

    texts = [json.loads(line)["text"] for line in open(trained / "dev.jsonl", encoding="utf-8")][:30]
    best = trained / "run" / "best"
    strict = globalpointer.load(str(best), model__min_score=0.996)  # the tiny model is sure of most spans
    found = [strict(text) for text in texts]
    assert all(e["score"] > 0.996 for entities in found for e in entities)
    assert sum(map(len, found)) < sum(len(globalpointer.load(str(best))(text)) for text in texts)
    old = tmp_path / "old"
    shutil.copytree(best, old)
    config = (old / "config.yaml").read_text()
    assert "min_score: 0.5" in config
    (old / "config.yaml").write_text(config.replace("min_score: 0.5", "threshold: 5.517452896464707"))  # logit(0.996)
    unrecorded(old)  # as that version wrote it
    with caplog.at_level("WARNING"):
        converted = globalpointer.load(str(old))
    assert "read threshold 5.517452896464707 as min_score 0.996" in caplog.text
    assert math.isclose(converted.config.model.min_score, 0.996)
    assert [converted(text) for text in texts] == found


@pytest.mark.slow  # two fresh interpreters
def test_the_api_logs_warnings_only_unless_asked(trained):
    """Loading printed INFO lines on every use (PaddleNLP sets the root logger up at INFO)."""
    import subprocess
    import sys

    script = ("import logging, sys, globalpointer\n"
              "if len(sys.argv) > 1: logging.getLogger('globalpointer').setLevel('INFO')\n"
              f"print(globalpointer.load({str(trained / 'run' / 'best')!r})('北京'))\n")
    quiet = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0 and quiet.stdout.startswith("[") and "INFO" not in quiet.stderr, quiet.stderr
    told = subprocess.run([sys.executable, "-c", script, "info"], capture_output=True, text=True, timeout=300)
    assert "dynamic backend (float32) on cpu" in told.stderr


def test_a_lone_surrogate_is_refused_as_the_service_refuses_it(trained):
    import globalpointer

    ner = globalpointer.load(str(trained / "run" / "best"))
    with pytest.raises(ValueError, match=r"pipe\(\): text 1 holds a lone surrogate at character 2"):
        list(ner.pipe(["张三", "北京\udc80"]))
    with pytest.raises(ValueError, match=r"ner\(\) holds a lone surrogate at character 0"):
        ner("\ud800")
    with pytest.raises(TypeError, match=r"ner\(\): text 1 takes text"):  # the call the user made, not pipe()
        ner(["张三", None])


def test_the_package_shows_its_api_its_version_and_nothing_else():
    import inspect
    import tomllib

    from globalpointer.inference import pipeline
    from helpers import ROOT

    with open(f"{ROOT}/pyproject.toml", "rb") as handle:
        assert globalpointer.__version__ == tomllib.load(handle)["project"]["version"]
    assert dir(globalpointer) == ["__version__", "load"]
    shown = inspect.signature(globalpointer.load)
    assert list(shown.parameters.values()) == list(inspect.signature(pipeline.load).parameters.values())
    assert "model.min_score" in globalpointer.load.__doc__


def test_pipe_refuses_a_batch_size_that_predicts_nothing(trained):
    ner = globalpointer.load(str(trained / "run" / "best"))
    for wrong in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match=rf"pipe\(\): batch_size must be a whole number of at least 1, "
                                             rf"got {wrong}"):
            list(ner.pipe(["张三"], batch_size=wrong))


def test_a_min_score_the_user_sets_wins_over_the_fitted_ones(trained, tmp_path, caplog):
    """thresholds.json holds the scores calibrate fitted; a model.min_score the user sets is what they
    asked for, and wins, said in one line; asking for both is refused."""
    import shutil

    from globalpointer.cli import main as cli
    from globalpointer.errors import ConfigError
    from globalpointer.model.decode import score_logit

    model = str(tmp_path / "best")
    shutil.copytree(trained / "run" / "best", model)
    assert cli(["calibrate", "--model", model, "--data", str(trained / "dev.jsonl")]) == 0
    caplog.set_level("INFO", logger="globalpointer")
    strict = globalpointer.load(model, ["model.min_score=0.99"])
    # on the calibrated score, through the stored map's inverse (the tiny model fits the identity), for every type
    assert strict.extractor.threshold == pytest.approx([score_logit(0.99)] * len(strict.labels))
    assert "model.min_score=0.99 as set, for every type, in place of the fitted minimum scores" in caplog.text
    assert all(e["score"] >= 0.99 for found in strict.pipe(["张三在北京大学读书"] * 3) for e in found)
    assert globalpointer.load(model, model__min_score=0.99).extractor.threshold == strict.extractor.threshold
    assert globalpointer.load(model).extractor.threshold != strict.extractor.threshold  # the fitted ones
    with pytest.raises(ConfigError, match="model.min_score and model.use_calibration=true are both set"):
        globalpointer.load(model, ["model.min_score=0.99", "model.use_calibration=true"])


def test_the_training_runs_data_limit_shapes_no_reader_of_its_model(tmp_path):
    """A model trained on the first 32 texts (data.limit) is evaluated on the whole dev file, unless
    the reader sets a limit itself."""
    from globalpointer.model_directory.opening import open_model
    from globalpointer.cli import train_main
    from synthetic import tiny_config

    config = tiny_config(tmp_path, train__epochs=1, data__limit=32)
    assert train_main(["--config", config]) == 0
    model = tmp_path / "run" / "best"
    assert open_model(str(model)).record.data.limit == 32  # as trained
    dev = str(tmp_path / "dev.jsonl")
    texts = sum(1 for line in open(dev, encoding="utf-8") if line.strip())
    assert texts > 32 and globalpointer.load(str(model)).evaluate(dev).report["texts"] == texts
    assert globalpointer.load(str(model), ["data.limit=5"]).evaluate(dev).report["texts"] == 5
