"""The files a run names -> records, labels and a text encoder configured for the encoder."""
import logging
from typing import List, Sequence

from ..config import RunConfig
from ..encoders import is_chinese_vocabulary
from ..errors import DataError
from ..spans import Record
from .features import TextEncoder
from .readers import read_records

log = logging.getLogger(__name__)


def load_split(config: RunConfig, key: str, path: str = None) -> List[Record]:
    path = path or getattr(config.data, key)
    records = read_records(path, config.data.format, config.data.on_error, config.data.limit)
    log.info("%s: %d texts, %d entities", path, len(records), sum(len(r.entities) for r in records))
    return records


def infer_labels(config: RunConfig, train_records: Sequence[Record]) -> List[str]:
    labels = sorted({e.type for r in train_records for e in r.entities})
    if not labels:  # even with data.labels: a model trained on texts without entities learns to find none
        raise DataError(f"{config.data.train}: no entities in {len(train_records)} training texts; nothing to "
                        f"learn (is the file in the format it was read as? set data.format)")
    return list(config.data.labels) or labels


def check_types(records: Sequence[Record], labels: Sequence[str]) -> None:
    """An entity type the model does not know would silently count as a miss forever."""
    known = set(labels)
    for record in records:
        for entity in record.entities:
            if entity.type not in known:
                raise DataError(f"{record.source}: entity type {entity.type!r} does not occur in the training data "
                                f"(known: {', '.join(labels)}); list it in data.labels or fix the record")


def resolve_tokenization(mode: str, tokenizer) -> str:
    if mode != "auto":
        return mode
    return "char" if is_chinese_vocabulary(tokenizer) else "subword"


def text_encoder_for(config: RunConfig, tokenizer, tokenization: str = "") -> TextEncoder:
    """``tokenization``: what a trained model's record says (default: resolve the config's)."""
    mode = tokenization or resolve_tokenization(config.data.tokenization, tokenizer)
    return TextEncoder(tokenizer, mode, config.data.max_length, config.data.window_overlap)
