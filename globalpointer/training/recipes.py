"""Training recipes the GlobalPointer literature reports gains with (``train.adversarial``,
``train.layer_lr_decay``; when each is on by default, and the evidence: docs/training.md).

- FGM (Miyato et al.): after the backward pass, move the word embeddings by
  r = epsilon * g / ||g|| (g: their gradient from this batch, not from the earlier batches of a
  gradient-accumulation window), run forward and backward once more so that the gradients of both
  passes add up, then put the embeddings back.  One extra forward/backward per batch.
- Layer-wise learning-rate decay: the encoder's top layer learns at ``train.lr``, each layer below at
  ``layer_lr_decay`` times the one above, the embeddings below the lowest layer.
"""
import re
from typing import Dict, Optional

import numpy as np
import paddle

from ..errors import ConfigError

LAYER = re.compile(r"\.layers?\.(\d+)\.")


def find_word_embeddings(model) -> Optional[paddle.Tensor]:
    """The encoder's word embeddings (the parameter FGM moves), or None for an encoder without them."""
    return next((parameter for name, parameter in model.named_parameters()
                 if name.endswith("word_embeddings.weight")), None)


def word_embeddings(model) -> paddle.Tensor:
    parameter = find_word_embeddings(model)
    if parameter is not None:
        return parameter
    raise ConfigError("train.adversarial=fgm needs the encoder's word embeddings (a parameter named "
                      "*word_embeddings.weight); this encoder has none: set train.adversarial=none")


class FGM:
    """The fast gradient method on one parameter (the word embeddings)."""

    def __init__(self, parameter: paddle.Tensor, epsilon: float):
        self.parameter = parameter
        self.epsilon = epsilon
        self.backup = None
        self.earlier = None  # the gradient of the window's earlier batches, left out of the next attack

    @paddle.no_grad()
    def remember_gradient(self) -> None:
        """Call before a batch's backward when earlier batches' gradients are being accumulated in
        the parameter: the next attack then follows this batch's gradient alone."""
        grad = self.parameter.grad
        self.earlier = None if grad is None else grad.clone()

    @paddle.no_grad()
    def attack(self) -> bool:
        """Move the parameter along its gradient; False (and nothing moved) when the gradient is
        missing, zero or not finite."""
        grad, earlier, self.earlier = self.parameter.grad, self.earlier, None
        if grad is None:
            return False
        if earlier is not None:
            grad = grad - earlier
        norm = float(paddle.linalg.norm(grad.astype("float32")))
        if not np.isfinite(norm) or norm == 0.0:
            return False
        self.backup = self.parameter.clone()
        self.parameter.add_((grad.astype(self.parameter.dtype) * (self.epsilon / norm)))
        return True

    @paddle.no_grad()
    def restore(self) -> None:
        if self.backup is not None:
            self.parameter.set_value(self.backup)
            self.backup = None


def layer_depth(name: str, num_layers: int) -> int:
    """0 for the embeddings, k + 1 for encoder layer k, ``num_layers`` for anything above (pooler)."""
    if ".embeddings." in name or name.startswith("embeddings."):
        return 0
    match = LAYER.search(name)
    return int(match.group(1)) + 1 if match else num_layers


def layer_rates(named_parameters, lr: float, decay: float) -> Dict[str, float]:
    """Parameter name -> learning rate: lr * decay ** (num_layers - depth), with num_layers counted
    from the names (decay 1: lr for every parameter)."""
    names = [name for name, _ in named_parameters]
    num_layers = max((layer_depth(name, 0) for name in names), default=0)  # the deepest encoder layer's depth
    return {name: lr * decay ** (num_layers - layer_depth(name, num_layers)) for name in names}
