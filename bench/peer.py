"""The peer a PaddlePaddle user has today: PaddleNLP's GlobalPointer layer over the same encoder.

PaddleNLP's ``GlobalPointer`` is the efficient variant (one shared query/key projection plus
per-type start and end biases), so this project's efficient_global_pointer is its like-for-like.
"""
from typing import List

import globalpointer  # noqa: F401  first: it quiets the warnings Paddle prints on import
from paddle import nn
from paddlenlp.layers.globalpointer import GlobalPointer

from globalpointer.model.heads import decode_span_logits
from globalpointer.spans import TokenSpan
from globalpointer.model.loss import count_masked_gold, sparse_span_loss
from globalpointer.model.masks import span_mask


class PeerHead(GlobalPointer):
    """PaddleNLP's layer as it is, plus the ``loss`` and ``decode`` this project's training loop
    and Extractor call: the same sparse loss and threshold decoding as ours.  Its logits mask
    padding and the lower triangle (-1e12) but not [CLS]/[SEP], so decoding masks those."""

    def loss(self, logits, gold, span_text):
        mask = span_mask(span_text)
        return sparse_span_loss(logits, gold, mask), count_masked_gold(gold, mask)

    def decode(self, logits, span_text, threshold: float) -> List[List[TokenSpan]]:
        return decode_span_logits(logits, span_text, True, threshold)


class Peer(nn.Layer):
    """``paddlenlp.layers.GlobalPointerForEntityExtraction`` (whose forward is these two lines)
    with this project's call signature, a ``head`` attribute and ``decode``."""

    def __init__(self, encoder: nn.Layer, num_types: int, head_size: int = 64, head: nn.Layer = None):
        super().__init__()
        self.encoder = encoder
        self.head = head or PeerHead(encoder.config["hidden_size"], num_types, head_size=head_size)

    def forward(self, input_ids, token_text, span_text):
        hidden = self.encoder(input_ids, attention_mask=token_text)[0]
        return self.head(hidden, token_text)

    def fresh_parameters(self) -> list:
        """The weights no pretrained encoder gave (trained at train.head_lr, as ours)."""
        return list(self.head.parameters())

    def decode(self, logits, span_text, threshold: float) -> List[List[TokenSpan]]:
        return self.head.decode(logits, span_text, threshold)


def build_peer(settings, encoder, num_types: int) -> Peer:
    """``training.train``'s ``build`` for the peer (``settings``: the config's model section)."""
    return Peer(encoder.model, num_types, settings.head_size)


class PeerRelationHead(nn.Layer):
    """``paddlenlp.layers.GPLinkerForRelationExtraction``'s three heads as it builds them (Efficient
    GlobalPointers: the entity head with RoPE and the lower triangle masked, the two pair heads
    without either), their outputs joined into the one tensor this project's Extractor decodes, and
    the loss PaddleNLP's UIE distillation trains the layer with (model_zoo/uie/data_distill): each
    head's sparse multilabel cross-entropy summed over its types and averaged over the batch, the three
    averaged.  Decoding is GPLinker's rule, as PaddleNLP's postprocessing applies it: an entity cell
    above 0, both pair cells above 0 (this project's Extractor, which also leaves out [CLS] and [SEP])."""

    def __init__(self, hidden_size: int, num_types: int, num_relations: int, head_size: int = 64):
        super().__init__()
        from paddlenlp.layers.globalpointer import GlobalPointer as PaddleNLPGlobalPointer

        self.num_types, self.num_relations, self.tril_mask = num_types, num_relations, True
        self.smooths_boundaries = False  # its loss takes hard targets
        self.entity_output = PaddleNLPGlobalPointer(hidden_size, num_types, head_size=head_size)
        self.head_output = PaddleNLPGlobalPointer(hidden_size, num_relations, head_size=head_size, RoPE=False,
                                                  tril_mask=False)
        self.tail_output = PaddleNLPGlobalPointer(hidden_size, num_relations, head_size=head_size, RoPE=False,
                                                  tril_mask=False)

    def forward(self, hidden, attention_mask):
        import paddle

        return paddle.concat([self.entity_output(hidden, attention_mask), self.head_output(hidden, attention_mask),
                              self.tail_output(hidden, attention_mask)], axis=1)

    def loss(self, logits, gold, span_text, planes=None, soft=None, pairs=None):
        import paddle

        if pairs is None:
            pairs = paddle.full([logits.shape[0], 1, 3], -1, dtype="int64")
        entity_mask, pair_mask = span_mask(span_text), span_mask(span_text, False)
        entities, relations = self.num_types, self.num_relations
        starts = paddle.where(pairs[..., :1] < relations, pairs, paddle.full_like(pairs, -1))
        ends = paddle.where(pairs[..., :1] >= relations, pairs - paddle.to_tensor([relations, 0, 0]),
                            paddle.full_like(pairs, -1))
        # sparse_span_loss averages over (example, type): times the types, a sum over types averaged over the batch
        parts = [sparse_span_loss(logits[:, :entities], gold, entity_mask) * entities,
                 sparse_span_loss(logits[:, entities:entities + relations], starts, pair_mask) * relations,
                 sparse_span_loss(logits[:, entities + relations:], ends, pair_mask) * relations]
        return sum(parts) / 3, count_masked_gold(gold, entity_mask) + count_masked_gold(pairs, pair_mask)

    def decode(self, logits, span_text, threshold: float) -> List[List[TokenSpan]]:
        return decode_span_logits(logits[:, :self.num_types], span_text, True, threshold)


def build_peer_relations(settings, encoder, num_types: int, num_relations: int = 0) -> Peer:
    """``training.train``'s ``build`` for PaddleNLP's GPLinker: ``Peer`` with ``PeerRelationHead``."""
    hidden = encoder.model.config["hidden_size"]
    return Peer(encoder.model, num_types, head=PeerRelationHead(hidden, num_types, num_relations, settings.head_size))


class PaddleNLPRelationPipeline:
    """PaddleNLP's GPLinker as its Taskflow predicts with it (paddlenlp/taskflow/information_extraction.py,
    GPTask): each text tokenized alone with offsets and truncated to ``max_seq_len`` tokens, padded batches
    of ``batch_size`` (``DataCollatorGP``), ``GPLinkerForRelationExtraction``'s forward and ``gp_decode``
    (a softmax over every plane for the probabilities, then a triple for every pair of found entities whose
    two pair cells are above 0).  The layer holds the trained peer's encoder and heads; it runs in the dynamic
    graph, as ours does in the comparison, where the Taskflow runs an export."""

    def __init__(self, peer: Peer, tokenizer, entity_types: List[str], relation_types: List[str],
                 max_seq_len: int = 256, batch_size: int = 64):
        from paddlenlp.layers import GPLinkerForRelationExtraction
        from paddlenlp.taskflow.utils import DataCollatorGP

        self.label_maps = {"entity2id": {name: i for i, name in enumerate(entity_types)},
                           "relation2id": {name: i for i, name in enumerate(relation_types)},
                           "id2entity": {str(i): name for i, name in enumerate(entity_types)},
                           "id2relation": {str(i): name for i, name in enumerate(relation_types)}}
        self.layer = GPLinkerForRelationExtraction(peer.encoder, self.label_maps)
        head = peer.head  # the trained heads, not the fresh ones the layer built
        self.layer.entity_output, self.layer.head_output, self.layer.tail_output = (
            head.entity_output, head.head_output, head.tail_output)
        self.layer.eval()
        self.tokenizer, self.max_seq_len, self.batch_size = tokenizer, max_seq_len, batch_size
        self.collate = DataCollatorGP(tokenizer, label_maps=self.label_maps, task_type="relation_extraction")

    def triples(self, texts: List[str]) -> List[set]:
        """Per text, its (subject, predicate, object) strings, as ``gp_decode`` gives them."""
        import paddle
        from paddlenlp.taskflow.utils import gp_decode

        found = []
        for first in range(0, len(texts), self.batch_size):
            features = []
            for text in texts[first:first + self.batch_size]:
                feature = self.tokenizer(text, max_length=self.max_seq_len, padding=False, truncation=True,
                                         return_attention_mask=True, return_offsets_mapping=True,
                                         return_token_type_ids=False)
                feature["text"] = text
                features.append(feature)
            input_ids, attention_mask, offsets, batch_texts = self.collate(features)
            with paddle.no_grad():
                outputs = self.layer(input_ids, attention_mask)
            _, relations = gp_decode(outputs, offsets, batch_texts, self.label_maps, "relation_extraction")
            found.extend({(r["subject"], r["predicate"], r["object"]) for r in text_relations}
                         for text_relations in relations)
        return found


class PeerEventHead(PeerRelationHead):
    """``paddlenlp.layers.GPLinkerForEventExtraction``'s three heads as it builds them: the argument head
    over the (event type, role) labels with RoPE, the head-to-head and tail-to-tail heads of one plane
    each, without RoPE and with the lower triangle masked, trained on each pair of one event's members as
    (min, max) cells (the published GPLinker's order), with the loss of ``PeerRelationHead``.  For this
    project's decoder, which looks a link up in its members' (start, end, type) order, the pair planes'
    lower triangle is given the upper one's values (a link's cells whichever way round)."""

    def __init__(self, hidden_size: int, num_types: int, head_size: int = 64):
        super().__init__(hidden_size, num_types, 1, head_size)
        from paddlenlp.layers.globalpointer import GlobalPointer as PaddleNLPGlobalPointer

        self.head_output = PaddleNLPGlobalPointer(hidden_size, 1, head_size=head_size, RoPE=False)
        self.tail_output = PaddleNLPGlobalPointer(hidden_size, 1, head_size=head_size, RoPE=False)

    def forward(self, hidden, attention_mask):
        import paddle

        logits = super().forward(hidden, attention_mask)
        pairs = logits[:, self.num_types:]
        length = pairs.shape[-1]
        upper = paddle.triu(paddle.ones([length, length], dtype="bool"))
        symmetric = paddle.where(upper, pairs, pairs.transpose([0, 1, 3, 2]))
        return paddle.concat([logits[:, :self.num_types], symmetric], axis=1)

    def loss(self, logits, gold, span_text, planes=None, soft=None, pairs=None):
        import paddle

        if pairs is None:
            pairs = paddle.full([logits.shape[0], 1, 3], -1, dtype="int64")
        rows, columns = pairs[..., 1:2], pairs[..., 2:3]  # each gold link as its (min, max) cell (-1 rows stay)
        pairs = paddle.concat([pairs[..., :1], paddle.minimum(rows, columns), paddle.maximum(rows, columns)], axis=-1)
        entity_mask, pair_mask = span_mask(span_text), span_mask(span_text, True)
        starts = paddle.where(pairs[..., :1] < 1, pairs, paddle.full_like(pairs, -1))
        ends = paddle.where(pairs[..., :1] >= 1, pairs - paddle.to_tensor([1, 0, 0]), paddle.full_like(pairs, -1))
        entities = self.num_types
        parts = [sparse_span_loss(logits[:, :entities], gold, entity_mask) * entities,
                 sparse_span_loss(logits[:, entities:entities + 1], starts, pair_mask),
                 sparse_span_loss(logits[:, entities + 1:], ends, pair_mask)]
        return sum(parts) / 3, count_masked_gold(gold, entity_mask) + count_masked_gold(pairs, pair_mask)


def build_peer_events(settings, encoder, num_types: int, num_relations: int = 0) -> Peer:
    """``training.train``'s ``build`` for PaddleNLP's GPLinker for events (``num_relations``: the event
    model's one link type)."""
    hidden = encoder.model.config["hidden_size"]
    return Peer(encoder.model, num_types, head=PeerEventHead(hidden, num_types, settings.head_size))
