"""FGM and layer-wise learning-rate decay, each against its formula, then in the loop."""
import json
import os

import numpy as np
import paddle
import pytest

from globalpointer.config import load_config
from globalpointer.model.encoders import load_encoder
from globalpointer.model.network import build_network
from globalpointer.model.smoothing import smoothed_targets
from globalpointer.training.recipes import FGM, layer_depth, layer_rates, word_embeddings
from globalpointer.training.step import build_optimizer, forward_backward
from synthetic import tiny_config


def tiny_model(*overrides):
    paddle.seed(0)
    config = load_config(overrides=["model.encoder=tiny", "model.head_size=8", *overrides])
    return config, build_network(config.model, load_encoder("tiny"), 2)


def tiny_batch():
    ids = paddle.to_tensor([[2, 10, 11, 12, 13, 3], [2, 14, 15, 3, 0, 0]])
    attention = paddle.to_tensor([[1] * 6, [1, 1, 1, 1, 0, 0]])
    span_text = paddle.to_tensor([[False, True, True, True, True, False], [False, True, True, False, False, False]])
    gold = paddle.to_tensor([[[0, 1, 2], [1, 3, 4]], [[1, 1, 2], [-1, -1, -1]]])
    return {"input_ids": ids, "token_text": attention, "span_text": span_text}, gold


def test_fgm_moves_the_embeddings_by_epsilon_along_the_gradient_and_back():
    _, model = tiny_model()
    model.eval()  # no dropout: the two passes below are comparable
    inputs, gold = tiny_batch()
    embeddings = word_embeddings(model)
    before = embeddings.numpy().copy()
    forward_backward(model, model.head, inputs, gold, None, None, 1)
    first = embeddings.grad.numpy().copy()
    fgm = FGM(embeddings, epsilon=0.5)
    assert fgm.attack()
    moved = embeddings.numpy() - before
    np.testing.assert_allclose(moved, 0.5 * first / np.linalg.norm(first), atol=1e-6)
    forward_backward(model, model.head, inputs, gold, None, None, 1)
    total = embeddings.grad.numpy().copy()
    model.clear_gradients()
    forward_backward(model, model.head, inputs, gold, None, None, 1)  # the second pass alone
    np.testing.assert_allclose(total, first + embeddings.grad.numpy(), rtol=1e-5, atol=1e-7)
    fgm.restore()
    assert (embeddings.numpy() == before).all()  # exactly back
    model.clear_gradients()
    assert not FGM(embeddings, 0.5).attack()  # no gradient: nothing moves


def test_fgm_in_an_accumulation_window_follows_the_current_batch_gradient_alone():
    _, model = tiny_model()
    model.eval()
    inputs, gold = tiny_batch()
    other = {key: value[:1] for key, value in inputs.items()}, gold[:1]
    embeddings = word_embeddings(model)
    before = embeddings.numpy().copy()
    forward_backward(model, model.head, inputs, gold, None, None, 2)  # the window's first batch
    fgm = FGM(embeddings, epsilon=0.5)
    fgm.remember_gradient()
    forward_backward(model, model.head, *other, None, None, 2)  # its second batch
    assert fgm.attack()
    moved = embeddings.numpy() - before
    fgm.restore()
    model.clear_gradients()
    forward_backward(model, model.head, *other, None, None, 2)  # the second batch alone
    alone = embeddings.grad.numpy()
    np.testing.assert_allclose(moved, 0.5 * alone / np.linalg.norm(alone), atol=1e-6)


def test_layer_wise_rates():
    assert layer_depth("encoder.embeddings.word_embeddings.weight", 4) == 0
    assert layer_depth("encoder.encoder.layers.0.self_attn.q_proj.weight", 4) == 1
    assert layer_depth("encoder.encoder.layers.3.linear2.bias", 4) == 4
    assert layer_depth("encoder.pooler.dense.weight", 4) == 4
    config, model = tiny_model("train.layer_lr_decay=0.5", "train.lr=1e-4", "train.head_lr=1e-3")
    optimizer, _ = build_optimizer(model, config, 10)
    rate_of = {p.name: group["learning_rate"] for group in optimizer._param_groups for p in group["params"]}
    for name, parameter in model.named_parameters():
        if name.startswith("head."):
            expected = 1e-3
        elif ".embeddings." in name:
            expected = 1e-4 * 0.5 ** 2  # the tiny encoder has 2 layers
        elif ".layers.0." in name:
            expected = 1e-4 * 0.5
        else:
            expected = 1e-4
        assert rate_of[parameter.name] == pytest.approx(expected), name
    assert layer_rates([("x.layers.1.w", None)], 1.0, 0.5) == {"x.layers.1.w": 1.0}  # 2 layers, counted from the names


@pytest.mark.slow  # trains models of its own: the full suite runs it
def test_recipes_in_the_loop_and_their_keys_in_print_config(tmp_path, capsys):
    from globalpointer.cli import train_main

    config = tiny_config(tmp_path, train__epochs=4, train__adversarial="fgm", train__layer_lr_decay=0.8)
    assert train_main(["--config", config]) == 0
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["best_dev_f1"] > 0.5 and summary["adversarial"] == "fgm"
    # every recipe key shows in --print-config, with the value the run used
    capsys.readouterr()
    assert train_main(["--config", config, "--print-config"]) == 0
    printed = capsys.readouterr().out
    for line in ("adversarial: fgm", "adversarial_epsilon: 1.0", "layer_lr_decay: 0.8"):
        assert f"\n  {line}  # " in printed, line


@pytest.mark.slow  # trains models of its own: the full suite runs it
def test_fgm_with_gradient_accumulation_in_the_loop(tmp_path, monkeypatch):
    """Every batch but the first of an accumulation window sets its earlier gradient aside for the attack."""
    from globalpointer.cli import train_main

    calls = {"attack": 0, "remember_gradient": 0}
    for method in calls:
        original = getattr(FGM, method)

        def counted(self, _original=original, _method=method):
            calls[_method] += 1
            return _original(self)

        monkeypatch.setattr(FGM, method, counted)
    config = tiny_config(tmp_path, train__epochs=4, train__adversarial="fgm", train__batch_size=8,
                         train__grad_accum_steps=2)
    assert train_main(["--config", config]) == 0
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["best_dev_f1"] > 0.5
    assert calls["attack"] > summary["steps"] > 0  # one attack per batch, two batches per step
    assert calls["remember_gradient"] == calls["attack"] - summary["steps"]


@pytest.mark.slow  # trains models of its own: the full suite runs it
def test_boundary_smoothing_in_the_loop_trains_on_the_smoothed_targets(tmp_path, monkeypatch):
    from globalpointer.cli import train_main
    from globalpointer.training import step

    seen = []

    def recorded(gold, span_text, tril_mask, epsilon, size):
        seen.append((epsilon, size))
        return smoothed_targets(gold, span_text, tril_mask, epsilon, size)

    monkeypatch.setattr(step, "smoothed_targets", recorded)
    config = tiny_config(tmp_path, train__epochs=4, train__boundary_smoothing=0.2, train__boundary_smoothing_size=2)
    assert train_main(["--config", config]) == 0
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["best_dev_f1"] > 0.5
    assert len(seen) >= summary["steps"] and set(seen) == {(0.2, 2)}
    assert summary["boundary_smoothing"] == 0.2


@pytest.mark.parametrize("max_texts, applied", [(240, 0.2), (239, 0.0),
                                               pytest.param(0, 0.2, marks=pytest.mark.slow)])  # the fast tier: each side once
def test_boundary_smoothing_is_off_for_a_training_file_beyond_its_size(tmp_path, monkeypatch, max_texts, applied):
    """train.large_training_set: a file of more texts trains on hard targets (0: no file is that large),
    and the summary says what was applied (tiny_config: 240 training texts)."""
    from globalpointer.cli import train_main
    from globalpointer.training import step

    seen = []
    monkeypatch.setattr(step, "smoothed_targets", lambda *args: seen.append(args[3]) or smoothed_targets(*args))
    config = tiny_config(tmp_path, train__epochs=1, train__boundary_smoothing=0.2,
                         train__large_training_set=max_texts)
    assert train_main(["--config", config]) == 0
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["boundary_smoothing"] == applied and set(seen) == ({applied} if applied else set())


@pytest.mark.parametrize("adversarial, min_texts, applied", [  # the fast tier: auto's two sides
    ("auto", 239, "fgm"), ("auto", 240, "none"), *(pytest.param(*row, marks=pytest.mark.slow)
                                                   for row in (("auto", 0, "none"), ("fgm", 10000, "fgm"), ("none", 0, "none")))])
def test_fgm_by_default_on_a_training_file_beyond_its_size(tmp_path, monkeypatch, adversarial, min_texts, applied):
    """train.adversarial auto: FGM on a file of more than train.large_training_set texts, none on a
    smaller one (0: no file is that large); fgm and none whatever the size; the summary says what was applied (tiny_config: 240
    training texts)."""
    from globalpointer.cli import train_main
    from globalpointer.training import step

    attacks = []
    monkeypatch.setattr(step.FGM, "attack", lambda self, real=step.FGM.attack: attacks.append(1) or real(self))
    config = tiny_config(tmp_path, train__epochs=1, train__adversarial=adversarial,
                         train__large_training_set=min_texts)
    assert train_main(["--config", config]) == 0
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["adversarial"] == applied
    assert len(attacks) == (summary["steps"] if applied == "fgm" else 0)


class WithEmbeddings(paddle.nn.Layer):
    """The one parameter FGM looks for, named as PaddleNLP's encoders name it."""

    def __init__(self):
        super().__init__()
        self.word_embeddings = paddle.nn.Embedding(10, 4)


def test_auto_trains_without_fgm_for_an_encoder_without_word_embeddings(caplog):
    """auto never asks for what an encoder lacks: with no *word_embeddings.weight, a large file trains
    without FGM and says why, where train.adversarial=fgm is an error naming the fix."""
    from types import SimpleNamespace

    from globalpointer.errors import ConfigError
    from globalpointer.training.recipes import applied_adversarial

    train = SimpleNamespace(adversarial="auto", large_training_set=100)
    assert applied_adversarial(train, 101, WithEmbeddings()) == "fgm"
    assert applied_adversarial(train, 100, WithEmbeddings()) == "none"
    with caplog.at_level("WARNING"):
        assert applied_adversarial(train, 101, paddle.nn.Linear(4, 4)) == "none"
    assert "word_embeddings" in caplog.text
    with pytest.raises(ConfigError, match="train.adversarial=none"):
        word_embeddings(paddle.nn.Linear(4, 4))


def test_the_recipe_comparisons_default_rows_train_what_their_names_say_on_a_large_file(tmp_path):
    """bench/recipes.py's baseline row is without FGM at any size (auto would add it above
    train.large_training_set)."""
    import importlib.util

    from globalpointer.training.recipes import applied_adversarial
    from helpers import ROOT

    spec = importlib.util.spec_from_file_location("bench_recipes", os.path.join(ROOT, "bench", "recipes.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    config = tiny_config(tmp_path)
    for row in bench.DEFAULT_ROWS:
        name, _, overrides = row.partition("=")
        train = load_config(config, [item for item in overrides.split(",") if item]).train
        assert applied_adversarial(train, train.large_training_set + 1, WithEmbeddings()) == \
            ("fgm" if "fgm" in name else "none"), row

