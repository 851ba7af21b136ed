"""Windows -> padded numpy batches, grouped by length so little of a batch is padding."""
from typing import Dict, List, Sequence

import numpy as np

from ..spans import CLS_POSITIONS
from .features import Window


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
