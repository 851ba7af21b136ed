"""The Python API a user reaches first: load a saved model, call it on text (README, "From Python")."""
import json

import globalpointer


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
    flat = globalpointer.load(str(trained / "run" / "best"), model__decode="flat", model__threshold=2.5)
    assert flat.config.model.decode == "flat" and flat.config.model.threshold == 2.5
    for found in flat.pipe(json.loads(line)["text"] for line in texts):
        spans = sorted((e["start"], e["end"]) for e in found)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # flat: no overlaps
        assert all(e["score"] > 0.92 for e in found)  # sigmoid(2.5) = 0.924


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
    with pytest.raises(ConfigError, match="did you mean model__threshold=0.5"):
        globalpointer.load(str(trained / "run" / "best"), threshold=0.5)
    with pytest.raises(ConfigError, match="^load\\(\\): device: expected a string, got 0$"):
        globalpointer.load(str(trained / "run" / "best"), device=0)  # not blamed on the model's config.yaml
    assert repr(ner).startswith(f"Pipeline({str(trained / 'run' / 'best')!r}, backend='dynamic', device='cpu'")
