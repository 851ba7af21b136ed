"""Boundary smoothing of span targets (after Zhu and Li, ACL 2022): the open cells at Manhattan
distance d = 1..size from a gold span, (start +- a, end +- b) with a + b = d, share a target of
epsilon / size for each d.  An annotator's boundary is a judgement, often one token either way; a
model taught that the neighbours are a little right scores them a little, rather than as confidently
wrong as any other cell, which is what the loss's soft form (``loss``) then learns.

The gold span itself keeps a target of 1.  In the paper every span's types and "no entity" are one
softmax, so the neighbours' share must come out of the gold span's and decoding takes the argmax;
here every cell is scored on its own against a fixed score, and a gold target of 1 - epsilon holds
the gold span's score near that line (Su's soft loss settles where sigmoid(2s) = t): measured on
1,000 CLUENER texts, that form lost 8.8 F1 over 3 seeds, most of it recall (docs/results.md).

Computed on the host from a batch's gold rows and ``span_text`` (which cells are open: the span mask's
rule, ``masks.span_mask_at``), before the loss: a handful of cells per entity, not a ``[types, L, L]``
plane.  The plain formula, cell by cell over the whole plane: ``reference.boundary_smoothed_targets``.
"""
from typing import Dict, Tuple

import numpy as np

from .masks import span_mask_at


def _offsets(distance: int):
    """Every (start shift, end shift) with |a| + |b| = ``distance``, in a fixed order."""
    for a in range(-distance, distance + 1):
        rest = distance - abs(a)
        for b in sorted({-rest, rest}):
            yield a, b


def smoothed_targets(gold: np.ndarray, span_text: np.ndarray, tril_mask: bool, epsilon: float,
                     size: int) -> Tuple[np.ndarray, np.ndarray]:
    """``gold`` ``[batch, G, 3]`` (type, start, end; -1 rows pad) -> (rows ``[batch, K, 3]`` int64
    padded with -1, targets ``[batch, K]`` float32 in (0, 1], 0 on padding): the distinct cells with a
    target above 0.  Where two entities' targets meet in one cell they add up, to at most 1 (a gold
    span stays 1).  A gold row in a closed cell is left
    out (as the loss leaves it out: ``loss.count_masked_gold`` counts it), a repeated one read once."""
    batch, length = gold.shape[0], span_text.shape[1]
    found = []
    for b in range(batch):
        cells: Dict[Tuple[int, int, int], float] = {}
        for kind, start, end in sorted({tuple(int(v) for v in row) for row in gold[b]}):  # a set, as in the loss
            if kind < 0 or not _open(span_text, b, start, end, tril_mask, length):
                continue
            cells[kind, start, end] = 1.0
            for distance in range(1, size + 1 if epsilon else 1):
                near = [(start + a, end + c) for a, c in _offsets(distance)
                        if _open(span_text, b, start + a, end + c, tril_mask, length)]
                for cell in near:
                    cells[(kind, *cell)] = cells.get((kind, *cell), 0.0) + epsilon / size / len(near)
        found.append({cell: target for cell, target in cells.items() if np.float32(target) > 0})
    width = max(1, max(len(cells) for cells in found))
    rows = np.full((batch, width, 3), -1, dtype="int64")
    targets = np.zeros((batch, width), dtype="float32")
    for b, cells in enumerate(found):
        for k, (cell, target) in enumerate(sorted(cells.items())):
            rows[b, k] = cell
            targets[b, k] = min(target, 1.0)
    return rows, targets


def _open(span_text: np.ndarray, row: int, start: int, end: int, tril_mask: bool, length: int) -> bool:
    if not (0 <= start < length and 0 <= end < length):
        return False
    return bool(span_mask_at(span_text, np.array([[row, 0, start, end]]), tril_mask)[0])
