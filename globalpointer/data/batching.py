"""Windows -> padded numpy batches, grouped by length so little of a batch is padding."""
from typing import Dict, List, Sequence

import numpy as np

from ..spans import CLS_POSITIONS
from .features import Window

# What one forward pass costs beyond its tokens, in padded tokens: measured on 2 cores (Intel Xeon,
# CLUENER texts, m3e-small) as about 17 for ONNX Runtime and 12 for the dynamic graph, from texts/s
# with 1 and 16 windows per forward pass (docs/PERFORMANCE.md, "Prediction batches").
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


def collate(windows: Sequence[Window], pad_id: int) -> Dict[str, np.ndarray]:
    """``input_ids``/``attention_mask`` [B, L]; ``token_mask`` [B, L] True on text tokens only;
    ``gold`` [B, G, 3] (type, start, end) padded with -1: heads build their own targets from it."""
    length = max(len(w.input_ids) for w in windows)
    batch = len(windows)
    input_ids = np.full((batch, length), pad_id, dtype="int64")
    attention_mask = np.zeros((batch, length), dtype="int64")
    token_mask = np.zeros((batch, length), dtype=bool)
    max_gold = max(len(w.gold) for w in windows)
    gold = np.full((batch, max_gold, 3), -1, dtype="int64")
    for i, window in enumerate(windows):
        n = len(window.input_ids)
        input_ids[i, :n] = window.input_ids
        attention_mask[i, :n] = 1
        token_mask[i, CLS_POSITIONS:n - 1] = True  # not [CLS], not [SEP]
        if window.gold:
            gold[i, :len(window.gold)] = [(span.type, span.start, span.end) for span in window.gold]
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_mask": token_mask, "gold": gold}
