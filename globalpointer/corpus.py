"""The files of a run -> records and labels, and the text encoder its encoder's tokenizer needs."""
import logging
from typing import List, Sequence

from .data.features import Featurizer
from .data.readers import read_records
from .errors import DataError
from .model.encoders import is_chinese_vocabulary
from .spans import Record

log = logging.getLogger(__name__)


def load_records(path: str, format: str = "auto", on_error: str = "raise", limit: int = 0) -> List[Record]:
    """``read_records``, and a line saying how many texts and entities the file gave."""
    records = read_records(path, format, on_error, limit)
    log.info("%s: %d texts, %d entities", path, len(records), sum(len(r.entities) for r in records))
    return records


def infer_labels(train_records: Sequence[Record], labels: Sequence[str] = (), source: str = "") -> List[str]:
    """``labels`` as given, else every type of the training records, sorted."""
    found = sorted({e.type for r in train_records for e in r.entities})
    if not found:  # even with labels given: a model trained on texts without entities learns to find none
        raise DataError(f"{source}: no entities in {len(train_records)} training texts; nothing to learn (is the "
                        f"file in the format it was read as? set data.format)")
    return list(labels) or found


def check_types(records: Sequence[Record], labels: Sequence[str]) -> None:
    """An entity type the model does not know would silently count as a miss forever."""
    known = set(labels)
    for record in records:
        for entity in record.entities:
            if entity.type not in known:
                raise DataError(f"{record.source}: entity type {entity.type!r} does not occur in the training data "
                                f"(known: {', '.join(labels)}); list it in data.labels or fix the record")


def resolve_tokenization(mode: str, tokenizer) -> str:
    """``data.tokenization``, with ``auto`` resolved: char for a Chinese vocabulary, else subword."""
    if mode != "auto":
        return mode
    return "char" if is_chinese_vocabulary(tokenizer) else "subword"


def featurizer_for(tokenizer, tokenization: str, max_length: int, window_overlap: int) -> Featurizer:
    """``tokenization``: char or subword (what a trained model's record says, or ``resolve_tokenization``)."""
    return Featurizer(tokenizer, tokenization, max_length, window_overlap)
