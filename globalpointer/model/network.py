"""The network: encoder -> dropout -> span head, over rows that may hold several texts.

``token_text`` and ``span_text`` number the texts of each row (masks.py), so every text of a
row is encoded and scored as if it were alone.  ``WEIGHTS`` is where a model directory keeps the
network's weights (safetensors: read as data, never executed).
"""
import inspect
import os
from typing import Tuple

import paddle
from paddle import nn

from ..errors import CheckpointError
from ..model_directory.layout import WEIGHTS
from .encoders import Encoder, encoder_architecture
from .heads import build_head
from .linear_autograd import use_training_linear
from .masks import text_attention
from .weights import mismatches, read_state, summary



# The network's inputs, in the order of its call and of an export's program
INPUTS = ("input_ids", "token_text", "span_text")


def model_inputs(batch: dict) -> dict:
    """A batch's arrays (data/batching.py) as the network's input tensors."""
    return {key: paddle.to_tensor(batch[key]) for key in INPUTS if key in batch}


class SpanNetwork(nn.Layer):
    def __init__(self, encoder: nn.Layer, head: nn.Layer, dropout: float):
        super().__init__()
        self.encoder = use_training_linear(encoder)
        self.dropout = nn.Dropout(dropout)
        self.head = head
        parameters = inspect.signature(encoder.forward).parameters
        self.takes_positions = "position_ids" in parameters
        # PaddleNLP's BERT defaults to use_cache (config.json): every layer would concatenate an empty
        # key/value cache, a copy of K and V in each forward and backward, and in the exported graph
        self.encoder_options = {"use_cache": False} if "use_cache" in parameters else {}

    @property
    def packs_texts(self) -> bool:
        """Whether a row may hold several texts: the encoder must take position ids, to start each
        text at 0 (the heads' span masks keep each text of a row to itself)."""
        return self.takes_positions

    def fresh_parameters(self) -> list:
        """The weights no pretrained encoder gave: the head's."""
        return list(self.head.parameters())

    def forward(self, input_ids, token_text, span_text):
        bias, position_ids = text_attention(token_text)
        positions = {"position_ids": position_ids} if self.takes_positions else {}
        output = self.encoder(input_ids=input_ids, attention_mask=bias, **positions, **self.encoder_options)
        hidden = output[0] if isinstance(output, (tuple, list)) else output.last_hidden_state
        return self.head(self.dropout(hidden), span_text)

    def decode(self, logits, span_text, threshold):
        return self.head.decode(logits, span_text, threshold)


def build_network(settings, encoder: Encoder, num_types: int, num_relations: int = 0) -> SpanNetwork:
    """``settings``: a run config's ``model`` section (head, head_size, rope, tril_mask, loss, dropout_rate);
    ``num_relations``: relation types, for a relation model (GPLinker, ``relation_head``)."""
    head = build_head(settings.head, encoder.hidden_size, num_types, head_size=settings.head_size,
                      rope=settings.rope, tril_mask=settings.tril_mask, loss=settings.loss, relations=num_relations)
    return SpanNetwork(encoder.model, head, settings.dropout_rate)


def load_weights(network: nn.Layer, directory: str) -> None:
    """Set ``network``'s weights from a model directory; every parameter must be there with its shape."""
    path = os.path.join(directory, WEIGHTS)
    if not os.path.isfile(path):
        raise CheckpointError(f"{directory}: not a complete checkpoint, missing {WEIGHTS}")
    state = read_state(path)
    problems = mismatches(network.state_dict(), state)
    if problems:
        raise CheckpointError(f"{path} does not match the model built from its config.yaml and labels.json "
                              f"(different head, encoder or number of types): {summary(problems)}")
    network.set_state_dict({name: paddle.to_tensor(value) for name, value in state.items()})


def load_network(directory: str, settings, num_types: int, tokenizer, architecture: dict,
                 num_relations: int = 0) -> Tuple[SpanNetwork, Encoder]:
    """The network saved in a model directory (``architecture``: its encoder's config.json, as read;
    and ``WEIGHTS``), ready to predict on the current device."""
    try:
        encoder_model = encoder_architecture(architecture)
    except Exception as error:  # PaddleNLP raises many kinds for an unreadable config.json
        raise CheckpointError(f"{directory}: cannot rebuild the encoder from config.json ({error})") from None
    encoder = Encoder(encoder_model, tokenizer, encoder_model.config.hidden_size)
    network = build_network(settings, encoder, num_types, num_relations)
    load_weights(network, directory)
    network.eval()
    return network, encoder


def start_from(network: nn.Layer, trained: nn.Layer) -> None:
    """``network``'s weights set from ``trained``'s, a network of the same encoder and head trained for
    the first of its types: a weight of the same shape is copied whole, and a head weight whose last
    axis grew with the types gets the trained part in its leading entries (both span heads lay their
    outputs out type by type along that axis), so the trained types score exactly as before and the
    new types keep their fresh initialisation."""
    state = network.state_dict()
    for name, value in trained.state_dict().items():
        target = state[name]
        if list(value.shape) == list(target.shape):
            target.set_value(value)
        elif len(value.shape) == len(target.shape) and list(value.shape[:-1]) == list(target.shape[:-1]) \
                and value.shape[-1] < target.shape[-1] and name.startswith("head."):
            grown = target.numpy()
            grown[..., :value.shape[-1]] = value.numpy()
            target.set_value(grown)
        else:
            raise CheckpointError(f"{name}: shape {list(value.shape)} in the trained model, {list(target.shape)} "
                                  f"here; start from a model of the same encoder and head")
