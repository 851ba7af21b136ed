"""Shared by the bench scripts: timing medians, batches of real text, a model over one encoder."""
import os
import statistics
import sys
import time
from typing import Callable, Dict, List

import numpy as np

import globalpointer  # noqa: F401  first: it quiets the warnings Paddle prints on import
import paddle

from globalpointer.config import load_config
from globalpointer.data.batching import collate
from globalpointer.data.features import Featurizer
from globalpointer.data.public_sets import DATA_ENV, incomplete
from globalpointer.data.readers import read_records
from globalpointer.model.encoders import load_encoder
from globalpointer.model.network import model_inputs
from globalpointer.model.network import build_network
from globalpointer.runtime import setup_runtime

# the folder holding the public sets (DIR/<set>/): $GLOBALPOINTER_DATA, else ../shared/data
SHARED = os.environ.get(DATA_ENV) or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..",
                                                  "shared", "data")


def chosen_models(parser, value: str, models) -> List[str]:
    """The comma-separated names of ``--models``, each one of ``models``; else the parser's error naming it."""
    names = [name.strip() for name in value.split(",")]
    unknown = [name for name in names if name not in models]
    if unknown:
        parser.error(f"unknown model {unknown[0]!r}; choose from: {', '.join(models)}")
    return names


def median_seconds(fn: Callable[[], None], repeats: int, warmup: int = 2) -> float:
    return interleaved_medians({"fn": fn}, repeats, warmup)["fn"]


def interleaved_medians(fns: Dict[str, Callable[[], None]], repeats: int, warmup: int = 2) -> Dict[str, float]:
    """Median seconds of each function, timed in turns (a, b, a, b, ...): a change in the machine's
    load then touches every function alike, and their ratio stays fair."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: Dict[str, List[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def setup(device: str = "auto", threads: int = 0):
    runtime = setup_runtime(device, threads)
    paddle.seed(0)
    return runtime


def synthetic_batch(encoder, batch_size: int, length: int, num_types: int, gold_per_text: int = 4, seed: int = 0):
    """Random token ids of a fixed length with random gold spans: shapes are what is measured."""
    rng = np.random.default_rng(seed)
    vocab_size = encoder.model.config.vocab_size
    ids = rng.integers(1000, vocab_size - 1, size=(batch_size, length)).astype("int64")
    ids[:, 0], ids[:, -1] = 101, 102
    span_text = np.ones((batch_size, length), bool)
    span_text[:, 0] = span_text[:, -1] = False
    gold = np.full((batch_size, gold_per_text, 3), -1, "int64")
    for b in range(batch_size):
        for g in range(gold_per_text):
            start = int(rng.integers(1, length - 6))
            gold[b, g] = (int(rng.integers(0, num_types)), start, start + int(rng.integers(0, 4)))
    return {"input_ids": paddle.to_tensor(ids), "token_text": paddle.to_tensor(np.ones_like(ids)),
            "span_text": paddle.to_tensor(span_text)}, paddle.to_tensor(gold)


def public_set_file(folder: str, name: str, file: str) -> str:
    """``folder/name/file``, checked complete first (a partial copy is named, not half measured)."""
    problems = incomplete(folder, name, [file])
    if problems:
        raise SystemExit(f"{'; '.join(problems)}: name the folder of the public sets with --data or ${DATA_ENV} "
                         f"(globalpointer data fetch {name} --to DIR)")
    return os.path.join(folder, name, file)


def cluener_texts(count: int, split: str = "dev", folder: str = SHARED) -> List[str]:
    records = read_records(public_set_file(folder, "cluener", f"{split}.json"), limit=count)
    texts = [r.text for r in records]
    while len(texts) < count:  # repeat the file when more lines are asked for
        texts += texts[: count - len(texts)]
    return texts


def span_model(encoder_name: str, head: str, num_types: int, loss: str = "sparse"):
    encoder = load_encoder(encoder_name)
    config = load_config(overrides=[f"model.encoder={encoder_name}", f"model.head={head}", f"model.loss={loss}"])
    return encoder, build_network(config.model, encoder, num_types)


def real_batches(encoder, texts: List[str], batch_size: int, max_length: int = 128):
    featurizer = Featurizer(encoder.tokenizer, "char", max_length, 32)
    windows = featurizer.text_windows(texts)
    return [model_inputs(collate(windows[i:i + batch_size], featurizer.pad_id))
            for i in range(0, len(windows), batch_size)], featurizer


def table(rows: List[dict]) -> str:
    """The rows under one header: every key any row has, in the order they first appear ("" where a row
    has none)."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    cells = [[str(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(str(c)), *(len(line[i]) for line in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(str(c).rjust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(cell.rjust(w) for cell, w in zip(line, widths)) for line in cells]
    return "\n".join(lines)


class Rows:
    """Rows measured one by one: each a progress line on standard error as it is measured (long runs
    show progress), then the whole table, under one header, on standard output."""

    def __init__(self):
        self.rows: List[dict] = []

    def add(self, row: dict) -> dict:
        self.rows.append(row)
        print("measured: " + ", ".join(f"{key} {value}" for key, value in row.items()), file=sys.stderr, flush=True)
        return row

    def finish(self) -> None:
        print(table(self.rows))
