"""GPLinker (Su, 2022): relations on the span head.  One span head scores the entities, as an entity
model's does; per relation type r, a second head scores (head entity start, tail entity start) in
plane r and a third (head end, tail end) in plane R + r, over the same encoder.  The two pair heads are
Efficient GlobalPointers (a full GlobalPointer's projection per relation plane doubled the training step
on DuIE's 55 relation types), with RoPE as the entity head (``model.rope``), so that a pair's score sees
its two entities' distance: the published GPLinker and PaddleNLP's layer have none there, and were
behind on every seed of CoNLL04 and the DuIE subset measured (docs/results.md).  A relation of type r
from entity h to entity t is kept when h and t are decoded entities and both of its pair cells are above
the threshold (``relation_pairs``).

The three heads' logits travel as one tensor ``[batch, types + 2 * relations, L, L]``: the entity
planes first (masked as an entity head masks them), then the pair planes, masked to cells whose two
tokens are text tokens of the same text of the row, in either order (a subject may follow its object).
One output keeps every backend's call signature; ``entity_logits`` and ``pair_logits`` split it.
The loss is the entity head's on its planes plus the pair planes' mean loss times two: the sum of the
three heads' mean losses (the published GPLinker sums each head's loss over its types instead).  The
plain formula of the decoding: ``reference.decode_relations``.
"""
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import paddle
from paddle import nn

from ..spans import TokenSpan
from .decode import Threshold, best_in_groups, sigmoid
from .loss import count_masked_gold, sparse_span_loss
from .masks import span_mask, span_mask_bias


class PairCell(NamedTuple):
    """A pair plane's cell above the threshold: ``plane`` < R: (head start, tail start) of relation
    ``plane``; R <= plane < 2R: (head end, tail end) of relation ``plane - R``; positions as the row's."""
    plane: int
    row: int
    column: int
    score: float


class RelationSpan(NamedTuple):
    """A decoded relation over token spans: the relation type's index, its two entities' spans."""
    type: int
    head: TokenSpan
    tail: TokenSpan
    score: float


class RelationHead(nn.Layer):
    def __init__(self, entity_head: nn.Layer, starts_head: nn.Layer, ends_head: nn.Layer, num_relations: int):
        super().__init__()
        self.entity = entity_head
        self.starts = starts_head  # num_relations planes each, no tril mask
        self.ends = ends_head
        self.num_types = entity_head.num_types
        self.num_relations = num_relations
        self.tril_mask = entity_head.tril_mask  # of the entity planes: what smoothing and decoding read
        self.smooths_boundaries = entity_head.smooths_boundaries  # of the entity gold rows only
        # the entity planes' mean loss and the pair planes' mean loss are weighted so: the sum of the three
        # heads' means (bench/vs_paddlenlp_relations.py's summed-losses models set the published sums over types)
        self.loss_weights = (1.0, 2.0)

    def forward(self, hidden: paddle.Tensor, span_text: paddle.Tensor) -> paddle.Tensor:
        with paddle.amp.auto_cast(enable=False):
            hidden = hidden.astype("float32")
            entities = self.entity.score(hidden, span_mask_bias(span_text, self.entity.tril_mask))
            pair_bias = span_mask_bias(span_text, False)
            return paddle.concat([entities, self.starts.score(hidden, pair_bias), self.ends.score(hidden, pair_bias)],
                                 axis=1)

    def loss(self, logits: paddle.Tensor, gold: paddle.Tensor, span_text: paddle.Tensor,
             planes: Optional[paddle.Tensor] = None, soft: Optional[Tuple[paddle.Tensor, paddle.Tensor]] = None,
             pairs: Optional[paddle.Tensor] = None,
             pair_planes: Optional[paddle.Tensor] = None) -> Tuple[paddle.Tensor, int]:
        """The entity head's loss on the entity planes (``gold``, ``planes``, ``soft`` as for an entity
        head) plus twice the mean loss of the pair planes (``loss_weights``), whose gold cells are
        ``pairs`` ``[batch, P, 3]`` rows (plane, row, column) padded with -1 (none: no relation in the batch),
        over the planes each example's file annotates (``pair_planes`` ``[batch, 2R]``; none: all)."""
        entity_loss, dropped = self.entity.loss(logits[:, :self.num_types], gold, span_text, planes, soft)
        if pairs is None:
            pairs = paddle.full([logits.shape[0], 1, 3], -1, dtype="int64")
        mask = span_mask(span_text, False)
        pair_loss = sparse_span_loss(logits[:, self.num_types:], pairs, mask, planes=pair_planes)
        entity_weight, pair_weight = self.loss_weights
        return entity_weight * entity_loss + pair_weight * pair_loss, dropped + count_masked_gold(pairs, mask)

    def decode(self, logits, span_text, threshold: Threshold) -> List[List[TokenSpan]]:
        """The entity spans, as an entity head decodes them from the entity planes."""
        return self.entity.decode(logits[:, :self.num_types], span_text, threshold)


def _host(array) -> np.ndarray:
    return array.numpy() if hasattr(array, "numpy") else np.asarray(array)


def pair_cells(logits, span_text, num_types: int, threshold: float, limit: int = 0) -> Tuple[List[List[PairCell]], int]:
    """The pair planes' cells above ``threshold`` (one logit) inside the pair mask, per row, and how many
    ``limit`` left out: at most ``limit`` (0: no bound) per plane and text of a row, the highest, so an
    untrained model (half its cells above 0) costs what a trained one does.  ``logits`` the whole
    ``[batch, types + 2R, L, L]`` output (a tensor, or an array on the host); a row at a time, as a
    batch's every cell above the threshold took gigabytes."""
    planes = _host(logits[:, num_types:])
    text = _host(span_text).astype("int64")
    found: List[List[PairCell]] = []
    cut = 0
    for b in range(planes.shape[0]):
        flat = np.flatnonzero(planes[b] > threshold)  # as decode.decode_logit_array: far faster than argwhere
        plane, row, column = np.unravel_index(flat, planes.shape[1:])
        inside = (text[b, row] > 0) & (text[b, row] == text[b, column])
        plane, row, column = plane[inside], row[inside], column[inside]
        values = planes[b, plane, row, column]
        kept = best_in_groups(plane * (text.shape[1] + 1) + text[b, row], values, limit)
        cut += int(len(kept) - kept.sum())
        scores = sigmoid(values[kept].astype("float64"))
        found.append([PairCell(*cell) for cell in zip(plane[kept].tolist(), row[kept].tolist(), column[kept].tolist(),
                                                      scores.tolist())])
    return found, cut


def relation_pairs(spans: Sequence[TokenSpan], cells: Sequence[PairCell], num_relations: int) -> List[RelationSpan]:
    """GPLinker's decoding over one text's (or window's) entity spans and pair cells (the same
    positions): relation r from h to t wherever (r, h.start, t.start) and (R + r, h.end, t.end) are
    both cells, h and t distinct spans; its score the lower of the two cells'.  Per relation, the
    cheaper of two equal joins: each start cell against the spans starting at its two positions, or
    each start cell against each end cell (at most ``limit`` squared, whatever the spans)."""
    by_start: Dict[int, List[TokenSpan]] = {}
    by_cell: Dict[Tuple[int, int], List[TokenSpan]] = {}
    for span in spans:
        by_start.setdefault(span.start, []).append(span)
        by_cell.setdefault((span.start, span.end), []).append(span)
    starts: Dict[int, Dict[Tuple[int, int], float]] = {}
    ends: Dict[int, Dict[Tuple[int, int], float]] = {}
    for cell in cells:
        if cell.plane < num_relations:
            starts.setdefault(cell.plane, {})[cell.row, cell.column] = cell.score
        else:
            ends.setdefault(cell.plane - num_relations, {})[cell.row, cell.column] = cell.score
    found = []
    for r, start_cells in starts.items():
        end_cells = ends.get(r)
        if not end_cells:
            continue
        by_spans = sum(len(by_start.get(i, ())) * len(by_start.get(j, ())) for i, j in start_cells)
        for (i, j), start_score in start_cells.items():
            if by_spans <= len(start_cells) * len(end_cells):
                candidates = ((head, tail) for head in by_start.get(i, ()) for tail in by_start.get(j, ()))
            else:
                candidates = ((head, tail) for (k, l) in end_cells for head in by_cell.get((i, k), ())
                              for tail in by_cell.get((j, l), ()))
            for head, tail in candidates:
                end_score = end_cells.get((head.end, tail.end))
                if end_score is not None and head != tail:
                    found.append(RelationSpan(r, head, tail, min(start_score, end_score)))
    return found


def build_relation_head(entity_head: nn.Layer, pair_head_class, hidden_size: int, num_relations: int,
                        head_size: int, rope: bool = True) -> RelationHead:
    """``entity_head``: built as an entity model's; ``pair_head_class``: the pair heads' (heads.py's
    EfficientGlobalPointer); ``rope``: RoPE on their queries and keys (``model.rope``)."""
    starts, ends = (pair_head_class(hidden_size, num_relations, head_size=head_size, rope=rope, tril_mask=False)
                    for _ in range(2))
    return RelationHead(entity_head, starts, ends, num_relations)
