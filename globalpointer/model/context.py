"""Layers between the encoder and the span head (``model.context``): the encoder's output read in
context once more, by fresh weights trained at the head's rate.  A small encoder (m3e-small: 4
layers) lacks depth more than a 12-layer one; the published gains of a BiLSTM or one or two fresh
transformer layers on noisy Chinese text are +1.7 to +4.2 F1 (issue #57, bench/recipes.py measures
them here).
"""
from typing import Optional

from paddle import nn


class TransformerContext(nn.Layer):
    """Transformer encoder layers over the encoder's output, attending within each text of a row by
    the encoder's own attention bias (so rows may hold several texts)."""
    packs_texts = True

    def __init__(self, hidden_size: int, layers: int, dropout: float):
        super().__init__()
        heads = max(1, hidden_size // 64)  # BERT's head size
        self.layers = nn.LayerList([nn.TransformerEncoderLayer(hidden_size, heads, 4 * hidden_size, dropout=dropout,
                                                               activation="gelu") for _ in range(layers)])

    def forward(self, hidden, bias, token_text):
        for layer in self.layers:
            hidden = layer(hidden, bias)
        return hidden


class BiLSTMContext(nn.Layer):
    """A bidirectional LSTM over each row's tokens (its padding left out by the row's length).  It reads
    a row from end to end, so a row holds one text."""
    packs_texts = False

    def __init__(self, hidden_size: int, layers: int, dropout: float):
        super().__init__()
        if hidden_size % 2:
            raise ValueError(f"model.context=bilstm needs an even hidden size (its two directions), got {hidden_size}")
        self.lstm = nn.LSTM(hidden_size, hidden_size // 2, num_layers=layers, direction="bidirect",
                            dropout=dropout if layers > 1 else 0.0)

    def forward(self, hidden, bias, token_text):
        lengths = (token_text > 0).astype("int32").sum(-1)
        output, _ = self.lstm(hidden, sequence_length=lengths)
        return output


CONTEXTS = {"none": None, "bilstm": BiLSTMContext, "transformer": TransformerContext}


def build_context(name: str, hidden_size: int, layers: int, dropout: float) -> Optional[nn.Layer]:
    """The context layers ``model.context`` names (None for none), each keeping the hidden size."""
    kind = CONTEXTS[name]
    return None if kind is None else kind(hidden_size, layers, dropout)
