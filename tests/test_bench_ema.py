"""bench/ema.py, the average of the weights the relation study measures: the recursion it names, and a
training run that evaluates and saves the average, not the trained weights."""
import os

import numpy as np
import paddle

from ema import EMA, averaged_weights
from synthetic import tiny_config


def test_the_shadow_follows_the_recursion_with_its_early_rates():
    paddle.seed(0)
    layer = paddle.nn.Linear(3, 2)
    rng = np.random.default_rng(0)
    decay = 0.9
    ema = EMA(layer, decay)
    expected = layer.weight.numpy().astype(np.float64)
    for t in range(30):  # the rate is (1 + t) / (10 + t) until it reaches decay (t = 80 here: never)
        weight = rng.normal(size=(3, 2))
        layer.weight.set_value(weight.astype("float32"))
        ema.update(layer)
        d = min(decay, (1 + t) / (10 + t))
        expected = d * expected + (1 - d) * weight
    np.testing.assert_allclose(ema.shadow["weight"].numpy(), expected, rtol=1e-5, atol=1e-6)


def test_applied_holds_the_shadow_inside_and_the_trained_weights_after():
    layer = paddle.nn.Linear(3, 2)
    ema = EMA(layer, 0.5)
    trained = np.full((3, 2), 7.0, "float32")
    layer.weight.set_value(trained)
    with ema.applied(layer):
        np.testing.assert_array_equal(layer.weight.numpy(), ema.shadow["weight"].numpy())
        assert not np.array_equal(layer.weight.numpy(), trained)
    np.testing.assert_array_equal(layer.weight.numpy(), trained)


def test_training_evaluates_and_saves_the_average(tmp_path):
    from unittest import mock

    from globalpointer.config import load_config
    from globalpointer.model.weights import read_state
    from globalpointer.model_directory.layout import WEIGHTS
    from globalpointer.training import loop

    own, steppers = loop.Stepper, []
    with averaged_weights(0.99):
        class Seen(loop.Stepper):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                steppers.append(self)

        with mock.patch.object(loop, "Stepper", Seen):
            summary = loop.train(load_config(tiny_config(tmp_path, train__epochs=1)))  # one evaluation, at the end
    stepper, = steppers
    assert stepper.ema.updates == summary["steps"] > 0
    best = read_state(os.path.join(tmp_path, "run", "best", WEIGHTS))
    trained = dict(stepper.network.named_parameters())  # train.calibrate none: nothing reloads best/
    name = next(name for name in stepper.ema.shadow if name.endswith("weight") and "head" in name)
    np.testing.assert_array_equal(np.asarray(best[name]), stepper.ema.shadow[name].numpy())
    assert not np.allclose(np.asarray(best[name]), trained[name].numpy())
    assert loop.Stepper is own  # the context put the loop's own pieces back on leaving
