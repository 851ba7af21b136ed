"""Windows -> padded numpy batches, grouped by length (and short windows packed into shared rows)
so that little of a batch is padding."""
import bisect
import itertools
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..spans import CLS_POSITIONS
from .features import Window

# What one forward pass costs beyond its tokens, in padded tokens: measured on 2 cores (Intel Xeon,
# CLUENER texts, m3e-small) as about 17 for ONNX Runtime and 12 for the dynamic graph, from texts/s
# with 1 and 16 windows per forward pass (docs/lab/PERFORMANCE.md, "Prediction batches").
FORWARD_COST_TOKENS = 16.0


def length_grouped_batches(lengths: Sequence[int], batch_size: int, shuffle: bool, seed: int = 0,
                           rank: int = 0, world_size: int = 1, pool_batches: int = 50) -> List[List[int]]:
    """Index batches of similar length.  With ``shuffle``, examples are shuffled, sorted by length
    within pools of ``pool_batches`` batches, and the batch order shuffled again; otherwise sorted
    by length.  With several processes, each takes every ``world_size``-th batch, and the list is
    padded by repeating batches so that every process runs the same number of steps."""
    order = np.argsort(np.asarray(lengths), kind="stable") if not shuffle else None
    rng = np.random.default_rng(seed)
    if shuffle:
        permutation = rng.permutation(len(lengths))
        pool = batch_size * pool_batches
        order = np.concatenate([sorted(permutation[i:i + pool], key=lambda j: lengths[j])
                                for i in range(0, len(permutation), pool)]) if len(lengths) else permutation
    batches = [order[i:i + batch_size].tolist() for i in range(0, len(order), batch_size)]
    if shuffle:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    if world_size > 1 and batches:
        while len(batches) % world_size:
            batches.append(batches[len(batches) % world_size])
        batches = batches[rank::world_size]
    return batches


def padding_aware_batches(lengths: Sequence[int], max_batch: int,
                          forward_cost_tokens: float = FORWARD_COST_TOKENS) -> List[List[int]]:
    """Index batches for prediction: the windows sorted by length and cut where the padded tokens
    saved pay for another forward pass.  Minimises, over contiguous groups of at most ``max_batch``
    windows, the sum of ``forward_cost_tokens + windows x longest window`` (dynamic programming over
    the sorted lengths): 16 texts of mixed length become a few short and a few long batches instead
    of one batch padded to the longest, while equal lengths stay in full batches."""
    lengths = np.asarray(lengths, dtype="float64")
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    count = len(order)
    best = np.zeros(count + 1)  # best[j]: cost of the first j sorted windows
    start = np.zeros(count + 1, dtype="int64")  # where the last batch of best[j] starts
    for end in range(1, count + 1):
        first = max(0, end - max_batch)
        costs = best[first:end] + forward_cost_tokens + (end - np.arange(first, end)) * sorted_lengths[end - 1]
        start[end] = first + int(np.argmin(costs))  # ties: the first, i.e. the larger batch
        best[end] = costs[start[end] - first]
    batches, end = [], count
    while end > 0:
        batches.append(order[start[end]:end].tolist())
        end = start[end]
    return batches[::-1]


def pack_rows(lengths: Sequence[int], row_tokens: int) -> List[List[int]]:
    """Windows (by index) into rows of at most ``row_tokens`` tokens, first fit, longest first; a
    window longer than that has a row to itself.  Every window is in exactly one row."""
    rows: List[List[int]] = []
    room = np.empty(len(lengths), dtype="int64")  # tokens still free in each row (the first len(rows))
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        fits = np.flatnonzero(room[:len(rows)] >= lengths[index])  # (a scan in Python: 1% of INT8 prediction)
        if fits.size == 0:
            room[len(rows)] = row_tokens - lengths[index]
            rows.append([index])
        else:
            row = fits[0]
            rows[row].append(index)
            room[row] -= lengths[index]
    return rows


# A shared row holds at most this many tokens (fewer when the call's longest window is shorter): a row of
# k texts computes k times the quadratic cells of attention and the span planes, then masks them.  Rows
# as long as a call's longest window (125 tokens on CoNLL04's dev texts) made the forward pass 0.80x as
# fast as a row per window; rows of at most 64 tokens: 1.03x there, 0.97x on CLUENER, level within the
# noise of that run (docs/performance.md).
PACKED_ROW_TOKENS = 64


def prediction_batches(lengths: Sequence[int], max_rows: int, pack_texts: bool) -> List[List[List[int]]]:
    """The forward passes of one prediction call: each a list of rows, each row the indices of the
    windows side by side in it.  With ``pack_texts`` short windows share rows no longer than the
    longest window nor ``PACKED_ROW_TOKENS`` (``pack_rows``), else a row per window; rows are batched by
    ``padding_aware_batches``."""
    rows = pack_rows(lengths, min(max(lengths, default=0), PACKED_ROW_TOKENS)) if pack_texts \
        else [[i] for i in range(len(lengths))]
    row_lengths = [sum(lengths[i] for i in row) for row in rows]
    return [[rows[r] for r in batch] for batch in padding_aware_batches(row_lengths, max_rows)]


def collate_rows(rows: Sequence[Sequence[Window]], pad_id: int) -> Dict[str, np.ndarray]:
    """Rows of one or more windows, side by side, padded to the longest row: ``input_ids`` [B, L];
    ``token_text`` [B, L] the number of each token's window in its row (1, 2, ...; 0 on
    padding); ``span_text`` [B, L] the same on text tokens only (0 on [CLS], [SEP] and padding).
    The model reads every window of a row as if it were alone (masks.text_attention)."""
    length = max(sum(len(w.input_ids) for w in row) for row in rows)
    input_ids = np.full((len(rows), length), pad_id, dtype="int64")
    token_text = np.zeros((len(rows), length), dtype="int64")
    span_text = np.zeros((len(rows), length), dtype="int64")
    for i, row in enumerate(rows):
        start = 0
        for number, window in enumerate(row, 1):
            stop = start + len(window.input_ids)
            input_ids[i, start:stop] = window.input_ids
            token_text[i, start:stop] = number
            span_text[i, start + CLS_POSITIONS:stop - 1] = number  # not [CLS], not [SEP]
            start = stop
    return {"input_ids": input_ids, "token_text": token_text, "span_text": span_text}


def collate(windows: Sequence[Window], pad_id: int, planes: Optional[np.ndarray] = None,
            num_relations: int = 0, relation_rows: Optional[np.ndarray] = None) -> Dict[str, np.ndarray]:
    """One window per row (``collate_rows``), and ``gold`` [B, G, 3] (type, start, end) padded with
    -1: heads build their own targets from it.  ``planes`` (``sources.annotated_planes``, a row per
    record): ``annotated`` [B, types], the types each row's record annotates.  With ``num_relations``
    (a relation model, R types): ``pairs`` [B, P, 3] the gold cells of the pair planes (plane, row,
    column), relation r from h to t at (r, h.start, t.start) and (R + r, h.end, t.end); and with
    ``relation_rows`` (1 per record whose file annotates relations, 0 per one whose file has none),
    ``pair_annotated`` [B, 2R], as ``annotated`` is for the entity planes."""
    batch = collate_rows([[window] for window in windows], pad_id)
    if planes is not None:
        batch["annotated"] = planes[[window.record_index for window in windows]]
    gold = np.full((len(windows), max(len(w.gold) for w in windows), 3), -1, dtype="int64")
    for i, window in enumerate(windows):
        if window.gold:
            gold[i, :len(window.gold)] = [(span.type, span.start, span.end) for span in window.gold]
    if num_relations:
        cells = [sorted({cell for kind, head, tail in window.relations
                         for cell in ((kind, head.start, tail.start), (num_relations + kind, head.end, tail.end))})
                 for window in windows]
        pairs = np.full((len(windows), max(1, max(len(c) for c in cells)), 3), -1, dtype="int64")
        for i, found in enumerate(cells):
            if found:
                pairs[i, :len(found)] = found
        batch["pairs"] = pairs
        if relation_rows is not None:
            rows = relation_rows[[window.record_index for window in windows]]
            batch["pair_annotated"] = np.repeat(rows[:, None], 2 * num_relations, axis=1).astype("float32")
    return {**batch, "gold": gold}


def split_row(spans: Sequence, window_lengths: Sequence[int], fields: tuple = ("start", "end")) -> List[list]:
    """A row's decoded spans -> the spans of each of its windows, over that window's input positions
    (a span never crosses windows: the span mask keeps it inside its text).  ``fields``: the two
    positions of each item (a relation head's pair cells: ``("row", "column")``, which the pair mask
    keeps in one text too)."""
    first, second = fields
    starts = list(itertools.accumulate(window_lengths, initial=0))  # (numpy per span: 1% of INT8 prediction)
    found: List[list] = [[] for _ in window_lengths]
    for span in spans:
        window = bisect.bisect_right(starts, getattr(span, first)) - 1
        shift = starts[window]
        found[window].append(span._replace(**{first: getattr(span, first) - shift,
                                              second: getattr(span, second) - shift}))
    return found
