"""``nn.Linear`` with a hand-written backward, for the encoder's layers in training.

Paddle 3.3.1 computes ``x @ W + b`` as a matmul and a broadcast add, and on the CPU the add's gradient
(summing the output gradient over batch and length for the bias) took 14.6% of a training step
(docs/lab/PERFORMANCE.md, op profile).  Here the bias gradient is one sum over a 2-D view, and the weight
gradient one 2-D matmul; the gradients are the same values (tests/test_linear_autograd.py compares
them with autograd's).  Only while training in the dynamic graph: evaluation, prediction and export
run the layer's own forward.
"""
import paddle
from paddle import nn
from paddle.autograd import PyLayer


class _LinearFunction(PyLayer):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return paddle.matmul(x, weight) + bias

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensor()
        grad_2d = grad.reshape([-1, grad.shape[-1]])
        grad_x = paddle.matmul(grad, weight, transpose_y=True)
        grad_weight = paddle.matmul(x.reshape([-1, x.shape[-1]]), grad_2d, transpose_x=True)
        return grad_x, grad_weight, grad_2d.sum(axis=0)


class TrainingLinear(nn.Linear):
    def forward(self, x):
        if self.training and self.bias is not None and paddle.in_dynamic_mode():
            return _LinearFunction.apply(x, self.weight, self.bias)
        # nn.Linear's forward named, not super(): Paddle 2.6's to_static (the GPU build on PyPI) cannot
        # convert a super() call without arguments
        return nn.Linear.forward(self, x)


def use_training_linear(layer: nn.Layer) -> nn.Layer:
    """Every plain ``nn.Linear`` inside ``layer`` becomes a ``TrainingLinear`` (same parameters)."""
    for sublayer in layer.sublayers(include_self=True):
        if type(sublayer) is nn.Linear:
            sublayer.__class__ = TrainingLinear
    return layer
