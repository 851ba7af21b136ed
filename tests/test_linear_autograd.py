"""The encoder's linear layers in training: the hand-written backward gives autograd's gradients."""
import numpy as np
import paddle
from paddle import nn

from globalpointer.model.linear_autograd import TrainingLinear, use_training_linear


def gradients(layer, x):
    x = x.detach()
    x.stop_gradient = False
    out = layer(x)
    (out * paddle.arange(out.size, dtype="float32").reshape(out.shape) / out.size).sum().backward()
    found = [x.grad.numpy(), layer.weight.grad.numpy(), layer.bias.grad.numpy(), out.numpy()]
    layer.clear_gradients()
    return found


def test_gradients_equal_autograds():
    paddle.seed(0)
    plain = nn.Linear(8, 5)
    x = paddle.randn([3, 4, 8])
    expected = gradients(plain, x)
    use_training_linear(plain)
    assert type(plain) is TrainingLinear
    plain.train()
    for ours, reference in zip(gradients(plain, x), expected):
        np.testing.assert_allclose(ours, reference, rtol=1e-6, atol=1e-6)
    # independent of both: the bias gradient is the output weighting summed over batch and length
    weights = (np.arange(3 * 4 * 5, dtype="float32") / 60).reshape(3, 4, 5)
    np.testing.assert_allclose(expected[2], weights.sum((0, 1)), rtol=1e-6)


def test_only_plain_linears_change_and_evaluation_is_untouched():
    class Custom(nn.Linear):
        pass

    model = nn.Sequential(nn.Linear(4, 4), Custom(4, 4), nn.LayerNorm(4))
    use_training_linear(model)
    assert [type(layer).__name__ for layer in model] == ["TrainingLinear", "Custom", "LayerNorm"]
    model.eval()
    x = paddle.randn([2, 4])
    np.testing.assert_array_equal(model[0](x).numpy(), nn.functional.linear(x, model[0].weight, model[0].bias).numpy())
