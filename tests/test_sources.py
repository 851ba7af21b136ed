"""data/sources.py and what it feeds: files that declare the types they annotate, a loss that learns
nothing about the others, and reports per entry."""
import json
import re

import numpy as np
import paddle
import pytest
import yaml

from globalpointer.cli import evaluate_main, train_main
from globalpointer.config import load_config
from globalpointer.corpus import load_sources
from globalpointer.data.sources import DataSource
from globalpointer.errors import ConfigError, DataError
from globalpointer.model.loss import dense_span_loss, gold_to_dense, sparse_span_loss
from globalpointer.model.masks import span_mask
from globalpointer.model.reference import multilabel_cross_entropy, multilabel_cross_entropy_gradient
from synthetic import make_records, write_jsonl


def plane_batch(seed=0, batch=3, types=4, length=6):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 3, (batch, types, length, length)).astype("float32")
    span_text = np.ones((batch, length), dtype="int64")
    span_text[:, 0] = span_text[:, -1] = 0  # [CLS], [SEP]
    gold = np.array([[[0, 1, 2], [2, 3, 3]], [[1, 2, 4], [-1, -1, -1]], [[3, 1, 1], [0, 4, 4]]], dtype="int64")
    planes = np.array([[1, 0, 1, 0], [0, 1, 1, 1], [1, 1, 0, 1]], dtype="float32")
    return logits, span_text, gold, planes


@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_the_loss_counts_only_the_annotated_planes_and_gives_the_others_no_gradient(kind):
    logits, span_text, gold, planes = plane_batch()
    mask = span_mask(paddle.to_tensor(span_text), True)
    scores = paddle.to_tensor(logits, stop_gradient=False)
    masked = paddle.where(mask, scores, paddle.full_like(scores, -1e12))
    if kind == "sparse":
        loss = sparse_span_loss(masked, paddle.to_tensor(gold), mask, paddle.to_tensor(planes))
    else:
        loss = dense_span_loss(masked, gold_to_dense(paddle.to_tensor(gold), 4, 6), mask, paddle.to_tensor(planes))
    loss.backward()
    labels = gold_to_dense(paddle.to_tensor(gold), 4, 6).numpy()
    cells = mask.numpy()
    assert abs(float(loss) - multilabel_cross_entropy(logits, labels, cells, planes)) < 1e-4
    gradient = scores.grad.numpy()
    np.testing.assert_allclose(gradient, multilabel_cross_entropy_gradient(logits, labels, cells, planes), atol=1e-6)
    for b, t in zip(*np.nonzero(planes == 0)):
        assert not gradient[b, t].any()  # exactly zero: an undeclared type learns nothing from this text


def test_every_plane_annotated_is_the_loss_as_before():
    logits, span_text, gold, _ = plane_batch(1)
    mask = span_mask(paddle.to_tensor(span_text), True)
    masked = paddle.where(mask, paddle.to_tensor(logits), paddle.full_like(paddle.to_tensor(logits), -1e12))
    before = sparse_span_loss(masked, paddle.to_tensor(gold), mask)
    ones = sparse_span_loss(masked, paddle.to_tensor(gold), mask, paddle.ones([3, 4]))
    assert abs(float(before) - float(ones)) < 1e-6


def write_yaml(path, tree):
    path.write_text(yaml.safe_dump(tree, allow_unicode=True), encoding="utf-8")
    return str(path)


def test_entries_rename_declare_and_name_themselves_in_errors(tmp_path, capsys):
    path = write_jsonl(tmp_path / "people.jsonl", [{"text": "张三在北京", "entities": [
        {"start": 0, "end": 2, "type": "PER"}, {"start": 3, "end": 5, "type": "LOC"}]}])
    records = load_sources([DataSource(path, types=["name", "address"], rename={"PER": "name", "LOC": "address"})],
                           {"format": "auto", "on_error": "raise", "limit": 0})
    assert [(e.type, records[0].text[e.start:e.end]) for e in records[0].entities] == [("name", "张三"),
                                                                                     ("address", "北京")]
    assert records[0].types == ("name", "address") and records[0].origin.startswith(path)
    with pytest.raises(DataError, match=r"people.jsonl:1: entity type 'LOC', which the data entry .* does not declare"):
        load_sources([DataSource(path, types=["name"], rename={"PER": "name"})],
                     {"format": "auto", "on_error": "raise", "limit": 0})
    config = tmp_path / "c.yaml"
    with pytest.raises(ConfigError, match=r"data.train\[0\]: unknown key 'type'; did you mean 'types'\?"):
        load_config(write_yaml(config, {"data": {"train": [{"path": path, "type": ["name"]}]}}))
    with pytest.raises(ConfigError, match=r"data.train\[1\].rename: renames onto name, which its types do not list"):
        load_config(write_yaml(config, {"data": {"train": [path, {"path": path, "types": ["x"],
                                                                      "rename": {"PER": "name"}}]}}))
    assert train_main(["--config", write_yaml(config, {
        "data": {"train": path, "dev": [{"path": path, "types": ["ghost"], "rename": {"PER": "ghost"}}],
                 "labels": ["PER", "LOC"]},
        "model": {"encoder": "tiny"}, "output_dir": str(tmp_path / "run")})]) == 2
    assert re.search(r"data.dev\[0\] \(.*people.jsonl\): types ghost are not among", capsys.readouterr().err)


def half_and_half(tmp_path):
    """The synthetic task's texts in two files, the first keeping only its PER entities, the second
    only its LOC ones: each file is labelled for one type."""
    records = make_records(240, 1)
    first = [{**r, "entities": [e for e in r["entities"] if e["type"] == "PER"]} for r in records[:120]]
    second = [{**r, "entities": [e for e in r["entities"] if e["type"] == "LOC"]} for r in records[120:]]
    return write_jsonl(tmp_path / "per.jsonl", first), write_jsonl(tmp_path / "loc.jsonl", second)


@pytest.mark.slow  # trains models of its own
def test_training_and_evaluating_on_entries_that_declare_their_types(tmp_path, capsys):
    per, loc = half_and_half(tmp_path)
    dev = write_jsonl(tmp_path / "dev.jsonl", [{**r, "entities": [e for e in r["entities"] if e["type"] != "ORG"]}
                                               for r in make_records(60, 2)])
    config = write_yaml(tmp_path / "config.yaml", {
        "data": {"train": [{"path": per, "types": ["PER"]}, {"path": loc, "types": ["LOC"]}],
                 "dev": [dev, {"path": per, "types": ["PER"]}], "max_length": 24, "window_overlap": 8},
        "model": {"encoder": "tiny", "head_size": 16},
        "train": {"epochs": 2, "min_steps": 0, "batch_size": 16, "lr": 2e-3, "head_lr": 2e-3, "seed": 7},
        "device": "cpu", "output_dir": str(tmp_path / "run")})
    assert train_main(["--config", config]) == 0
    report = json.load(open(tmp_path / "run" / "dev_report.json"))
    assert set(report["sources"]) == {dev, f"{per} [PER]"}
    assert set(report["sources"][f"{per} [PER]"]["per_type"]) == {"PER"}  # scored on its declared type only
    assert evaluate_main(["--model", str(tmp_path / "run" / "best"), "--output", str(tmp_path / "eval.json")]) == 0
    assert "sources" in json.load(open(tmp_path / "eval.json"))
    # every text declared for PER alone: the report's types, and its macro F1, are PER's
    assert evaluate_main(["--model", str(tmp_path / "run" / "best"), "--output", str(tmp_path / "per.json"),
                          "--set", f"data.test={json.dumps([{'path': per, 'types': ['PER']}])}"]) == 0
    report = json.load(open(tmp_path / "per.json"))
    assert set(report["per_type"]) == {"PER"} and report["macro_f1"] == report["per_type"]["PER"]["f1"]


def trained_without_org(tmp_path):
    """A tiny model trained on LOC and PER (the synthetic task's ORG entities left out); its best/."""
    records = [{**r, "entities": [e for e in r["entities"] if e["type"] != "ORG"]} for r in make_records(240, 1)]
    config = write_yaml(tmp_path / "first.yaml", {
        "data": {"train": write_jsonl(tmp_path / "no-org.jsonl", records), "max_length": 24, "window_overlap": 8},
        "model": {"encoder": "tiny", "head_size": 16},
        "train": {"epochs": 2, "min_steps": 0, "batch_size": 16, "lr": 2e-3, "head_lr": 2e-3, "seed": 7},
        "device": "cpu", "output_dir": str(tmp_path / "first")})
    assert train_main(["--config", config]) == 0
    return tmp_path / "first" / "best"


def test_init_from_keeps_the_trained_types_exactly_and_adds_the_new_ones(tmp_path, caplog):
    from globalpointer.model_directory.opening import load_checkpoint
    from globalpointer.data.batching import collate
    from globalpointer.model.network import build_network, model_inputs
    from globalpointer.training.loop import prepare

    first = trained_without_org(tmp_path)
    orgs = [{**r, "entities": [e for e in r["entities"] if e["type"] == "ORG"]} for r in make_records(120, 3)]
    config = load_config(write_yaml(tmp_path / "second.yaml", {
        "data": {"train": [{"path": write_jsonl(tmp_path / "org.jsonl", orgs), "types": ["ORG"]}],
                 "max_length": 24, "window_overlap": 8},
        "model": {"encoder": "tiny", "head_size": 16}, "train": {"init_from": str(first), "seed": 3, "min_steps": 0},
        "device": "cpu", "output_dir": str(tmp_path / "second")}))
    with caplog.at_level("WARNING", logger="globalpointer"):
        state = prepare(config, False, build_network, False, False)
    assert state.labels == ["LOC", "PER", "ORG"]  # the trained types keep their places
    assert "no training file annotates LOC, PER" in caplog.text  # they would forget: said before the run
    old = load_checkpoint(str(first)).network
    state.network.eval()
    batch = model_inputs(collate(state.windows[:8], state.featurizer.pad_id))
    with paddle.no_grad():
        before, after = old(**batch).numpy(), state.network(**batch).numpy()
    np.testing.assert_array_equal(after[:, :2], before)  # bit for bit, until trained
    assert np.abs(after[:, 2]).max() > 0  # the new type's rows are its own, freshly initialised
    assert state.planes is not None and state.planes[:, :2].sum() == 0  # the ORG file teaches nothing of LOC, PER


@pytest.mark.slow  # trains models of its own
def test_init_from_trains_and_refuses_another_head(tmp_path, capsys):
    first = trained_without_org(tmp_path)
    orgs = [{**r, "entities": [e for e in r["entities"] if e["type"] == "ORG"]} for r in make_records(120, 3)]
    tree = {"data": {"train": [{"path": write_jsonl(tmp_path / "org.jsonl", orgs), "types": ["ORG"]}],
                     "max_length": 24, "window_overlap": 8},
            "model": {"encoder": "tiny", "head_size": 16}, "train": {"epochs": 1, "min_steps": 0, "batch_size": 16},
            "device": "cpu", "output_dir": str(tmp_path / "second")}
    config = write_yaml(tmp_path / "second.yaml", tree)
    assert train_main(["--config", config, "--init-from", str(first)]) == 0
    assert json.load(open(tmp_path / "second" / "best" / "labels.json")) == ["LOC", "PER", "ORG"]
    capsys.readouterr()
    assert train_main(["--config", config, "--init-from", str(first), "--overwrite", "--set",
                       "model.head=efficient_global_pointer"]) == 2
    assert "was trained with model.head=global_pointer, the config says efficient_global_pointer" in \
        capsys.readouterr().err


@pytest.mark.slow  # trains models of its own: the full suite runs it
def test_init_from_scores_the_added_types_apart_at_each_evaluation_and_in_the_summary(tmp_path, capsys, caplog):
    first = trained_without_org(tmp_path)
    records = make_records(120, 3)
    orgs = [{**r, "entities": [e for e in r["entities"] if e["type"] == "ORG"]} for r in records]
    tree = {"data": {"train": [{"path": write_jsonl(tmp_path / "org.jsonl", orgs), "types": ["ORG"]}],
                     "dev": write_jsonl(tmp_path / "dev.jsonl", make_records(40, 5)),
                     "max_length": 24, "window_overlap": 8},
            "model": {"head_size": 16}, "train": {"epochs": 2, "min_steps": 0, "batch_size": 16, "init_from": str(first)},
            "device": "cpu", "output_dir": str(tmp_path / "second")}  # model.encoder auto: the trained model's
    caplog.set_level("INFO", logger="globalpointer")
    assert train_main(["--config", write_yaml(tmp_path / "second.yaml", tree)]) == 0
    captured = capsys.readouterr()
    err = captured.out + captured.err
    lines = [line for line in err.splitlines() if line.startswith("step ")]
    assert len(lines) == 2 and all("; the added types (ORG) F1 " in line for line in lines), lines
    summary = json.load(open(tmp_path / "second" / "summary.json"))
    report = json.load(open(tmp_path / "second" / "dev_report.json"))
    assert summary["added_types"]["types"] == ["ORG"]
    assert summary["added_types"]["f1"] == pytest.approx(report["per_type"]["ORG"]["f1"], abs=1e-6)
    said = caplog.text
    assert f"the added types (ORG): dev F1 {100 * report['per_type']['ORG']['f1']:.2f} at the best checkpoint" in said
    assert "model.encoder auto" not in said and yaml.safe_load(
        open(tmp_path / "second" / "best" / "config.yaml"))["model"]["encoder"] == "tiny"


@pytest.mark.parametrize("head, shared", [("global_pointer", False), ("efficient_global_pointer", True)])
def test_the_untaught_types_warning_names_what_drifts(head, shared, caplog):
    from globalpointer.training.checks import warn_untaught

    planes = np.array([[0, 1, 1], [0, 0, 1]], dtype="float32")  # LOC annotated by no file; PER by one; ORG new
    with caplog.at_level("WARNING", logger="globalpointer"):
        warn_untaught(["LOC", "PER"], planes, head)
    assert "no training file annotates LOC;" in caplog.text
    assert ("span scores all types share" in caplog.text) == shared
    caplog.clear()
    warn_untaught(["LOC", "PER"], np.ones((2, 3), dtype="float32"), head)
    assert caplog.text == ""


def test_init_from_never_writes_into_the_model_it_starts_from(tmp_path, capsys):
    """The output policy knows train.init_from: a run into the model's run directory (--overwrite would
    remove best/ and last/) or into the checkpoint itself is refused before any work."""
    from helpers import snapshot

    first = trained_without_org(tmp_path)
    before = snapshot(first.parent)
    config = write_yaml(tmp_path / "again.yaml", {
        "data": {"train": str(tmp_path / "no-org.jsonl"), "max_length": 24, "window_overlap": 8},
        "model": {"encoder": "tiny", "head_size": 16}, "train": {"epochs": 1, "min_steps": 0}, "device": "cpu"})
    for output_dir in (first.parent, first):
        assert train_main(["--config", config, "--init-from", str(first), "--overwrite", "--set",
                           f"output_dir={output_dir}"]) == 2
        assert f"{first} is an input of this run" in capsys.readouterr().err
    assert snapshot(first.parent) == before


@pytest.mark.slow  # trains models of its own
def test_init_from_refuses_what_the_run_would_not_honour(tmp_path, capsys):
    """The trained model fixes its tokenization and its encoder: another value is one line, before any work."""
    first = trained_without_org(tmp_path)
    config = write_yaml(tmp_path / "again.yaml", {
        "data": {"train": str(tmp_path / "no-org.jsonl"), "max_length": 24, "window_overlap": 8},
        "model": {"encoder": "tiny", "head_size": 16}, "train": {"epochs": 1, "min_steps": 0}, "device": "cpu",
        "output_dir": str(tmp_path / "again")})
    for setting, message in (("data.tokenization=subword", "was trained with data.tokenization=char, the config "
                                                           "says subword"),
                             ("model.encoder=m3e-small", "was trained with model.encoder=tiny")):
        assert train_main(["--config", config, "--init-from", str(first), "--set", setting]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "again" / "best").exists()
