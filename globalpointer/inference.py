"""Texts -> entities with a trained model: tokenize, window, batch, score, decode, merge."""
from typing import Callable, List, Sequence

import paddle

from .data.batching import collate, padding_aware_batches
from .data.features import TextEncoder, Window, window_entities
from .decode import Threshold, select_flat
from .spans import Entity


def model_inputs(batch: dict) -> dict:
    return {key: paddle.to_tensor(batch[key]) for key in ("input_ids", "attention_mask", "token_mask")}


class Extractor:
    """Entities for any number of texts of any length, with character offsets (end exclusive)."""

    def __init__(self, model: Callable, text_encoder: TextEncoder, labels: Sequence[str], decode: str = "nested",
                 threshold: Threshold = 0.0, batch_size: int = 64, decoder: Callable = None):
        """``model`` maps (input_ids, attention_mask, token_mask) to head outputs, ``decoder`` maps
        (outputs, token_mask, threshold) to token spans: the model's head's by default.
        ``threshold``: one logit, or one per label."""
        self.model = model
        self.decoder = decoder or model.head.decode
        self.text_encoder = text_encoder
        self.labels = list(labels)
        self.flat = decode == "flat"
        self.threshold = threshold
        self.batch_size = batch_size

    @paddle.no_grad()
    def extract(self, texts: Sequence[str]) -> List[List[Entity]]:
        was_training = getattr(self.model, "training", False)
        if was_training:
            self.model.eval()
        windows: List[Window] = []
        for index, text in enumerate(texts):
            windows.extend(self.text_encoder.windows(index, self.text_encoder.tokenize(text)))
        entities: List[List[Entity]] = [[] for _ in texts]
        lengths = [len(w.input_ids) for w in windows]
        for indices in padding_aware_batches(lengths, self.batch_size):
            batch = collate([windows[i] for i in indices], self.text_encoder.pad_id)
            inputs = model_inputs(batch)
            outputs = self.model(**inputs)
            for i, spans in zip(indices, self.decoder(outputs, inputs["token_mask"], self.threshold)):
                entities[windows[i].record_index].extend(window_entities(windows[i], spans, self.labels))
        if was_training:
            self.model.train()
        if self.flat:
            return [select_flat(found) for found in entities]
        return [sorted(found, key=lambda e: (e.start, e.end, e.type)) for found in entities]
