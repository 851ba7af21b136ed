"""Training recipes the GlobalPointer literature reports gains with (``train.adversarial``,
``train.layer_lr_decay``; when each is on by default, and the evidence: docs/training.md), and the
defaults a training file's size decides (``applied_smoothing``, ``applied_adversarial``,
``resolved_small_set``), and an event model's loss (``weigh_event_losses``).

- FGM (Miyato et al.): after the backward pass, move the word embeddings by
  r = epsilon * g / ||g|| (g: their gradient from this batch, not from the earlier batches of a
  gradient-accumulation window), run forward and backward once more so that the gradients of both
  passes add up, then put the embeddings back.  One extra forward/backward per batch.
- Layer-wise learning-rate decay: the encoder's top layer learns at ``train.lr``, each layer below at
  ``layer_lr_decay`` times the one above, the embeddings below the lowest layer.
"""
import logging
import re
from typing import Dict, Optional

import numpy as np
import paddle

from ..config import RunConfig
from ..config.schema import AUTO, small_set_values
from ..errors import ConfigError
from ..spans import EVENT_LINK

log = logging.getLogger(__name__)
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


def applied_smoothing(train, texts: int, head_smooths: bool) -> float:
    """``train.boundary_smoothing``, or 0 for a head without span targets or a training file of more
    than ``train.large_training_set`` texts."""
    if not train.boundary_smoothing or not head_smooths:
        return 0.0
    if train.large_training_set and texts > train.large_training_set:
        log.info("boundary smoothing off: %d training texts, more than train.large_training_set (%d), "
                 "where it was level or lost F1 on the full sets measured (docs/training.md)", texts,
                 train.large_training_set)
        return 0.0
    return train.boundary_smoothing


def applied_adversarial(train, texts: int, network) -> str:
    """``train.adversarial``, with ``auto`` resolved by the training file's size: fgm on more than
    ``train.large_training_set`` texts, none on fewer, and none for an encoder without word embeddings."""
    if train.adversarial != "auto":
        return train.adversarial
    if train.large_training_set and texts > train.large_training_set:
        if find_word_embeddings(network) is None:
            log.warning("train.adversarial auto: no FGM, though %d training texts are more than "
                        "train.large_training_set (%d): this encoder has no parameter named "
                        "*word_embeddings.weight for it to move", texts, train.large_training_set)
            return "none"
        log.info("FGM on (train.adversarial auto): %d training texts, more than train.large_training_set (%d), "
                 "where it gained F1 for about twice the training time (docs/training.md)", texts,
                 train.large_training_set)
        return "fgm"
    return "none"


def resolved_small_set(config: RunConfig, texts: int, relational: bool) -> RunConfig:
    """``config`` with ``train.lr`` and ``model.dropout`` ``auto`` resolved: higher for a relation model whose
    training file has at most ``train.small_training_set`` texts (``small_set_values``)."""
    small = relational and 0 < texts <= config.train.small_training_set
    resolved = small_set_values(config, small)
    chosen = [(key, value) for key, asked, value in (("train.lr", config.train.lr, resolved.train.lr),
                                                     ("model.dropout", config.model.dropout, resolved.model.dropout))
              if asked == AUTO]
    if small and chosen:
        log.info("%s auto: %s, as for a relation model on %d training texts, at most train.small_training_set (%d), "
                 "where it gained triple F1 (docs/results.md#relations-on-small-and-new-sets)",
                 " and ".join(key for key, _ in chosen), " and ".join(f"{value:g}" for _, value in chosen), texts,
                 config.train.small_training_set)
    return resolved


def weigh_event_losses(head, num_types: int, relations) -> None:
    """An event model's (``relations``: its one link type) argument planes weigh their loss summed over its
    (event type, role) labels, as GPLinker's event loss sums it, not their mean as a relation model's
    entity planes do: with the mean, the quickstart's 37 labels of 600 PHEE texts left the rare roles
    unlearned (docs/events.md#results).  The pair planes keep a relation model's weight."""
    if list(relations) == [EVENT_LINK] and hasattr(head, "loss_weights"):  # a peer's head has its own loss
        head.loss_weights = (float(num_types), head.loss_weights[1])
