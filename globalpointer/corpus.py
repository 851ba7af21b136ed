"""The files of a run -> records and labels, and the text encoder its encoder's tokenizer needs."""
import difflib
import itertools
import logging
import os
from collections import Counter
from typing import List, Sequence

from .data.features import Featurizer
from .data.public_sets import fetch_hint
from .data.readers import read_records
from .data.sources import Sources, declared_types
from .errors import DataError
from .model.encoders import is_chinese_vocabulary
from .spans import EVENT_LINK, Record, split_argument_label

log = logging.getLogger(__name__)


def load_records(path: str, format: str = "auto", on_error: str = "raise", limit: int = 0) -> List[Record]:
    """``read_records``, and a line saying how many texts and entities the file gave; a missing file
    where a public set's layout puts one names the command that fetches it."""
    if not os.path.isfile(path):
        raise DataError(f"file not found: {path}{fetch_hint(path)}")
    records = read_records(path, format, on_error, limit)
    log.info("%s: %d texts, %d entities", path, len(records), sum(len(r.entities) for r in records))
    return records


def load_sources(value: Sources, reading: dict) -> List[Record]:
    """The records of a config's ``data.train`` (``dev``, ``test``): a file read as ``reading`` says
    (``DataConfig.reading``), or each data entry's file, in its own format, renamed and marked with the
    types it annotates (``DataSource.declare``)."""
    if isinstance(value, str):
        return load_records(value, **reading)
    records: List[Record] = []
    for source in value:
        records += source.declare(load_records(source.path, **{**reading, "format": source.format or
                                                                reading["format"]}))
    return records


def infer_labels(train_records: Sequence[Record], labels: Sequence[str] = (), source: str = "") -> List[str]:
    """``labels`` as given, else every type of the training records (and every type their data
    entries declare), sorted.  The types are logged with their counts, and a rare type that looks like
    a typo of a frequent one is warned about."""
    counts = Counter(e.type for r in train_records for e in r.entities)
    if not counts:  # even with labels given: a model trained on texts without entities learns to find none
        raise DataError(f"{source}: no entities in {len(train_records)} training texts; nothing to learn (is the "
                        f"file in the format it was read as? set data.format)")
    log.info("%s: entity types %s", source, ", ".join(f"{kind} {count}" for kind, count in sorted(counts.items())))
    if not labels:
        for rare, frequent in near_miss_types(counts):
            log.warning("%s: type %r (%d entities) is close to %r (%d): a typo? fix those records, or list both in "
                        "data.labels to keep them apart", source, rare, counts[rare], frequent, counts[frequent])
    return list(labels) or sorted(set(counts) | set(declared_types(train_records) or ()))


def near_miss_types(counts: Counter) -> List[tuple]:
    """(rarer, more frequent) pairs of types that look like one typed for the other, whatever their
    counts: PRE beside PER, per beside PER, persn beside person (``near_miss``)."""
    pairs = []
    for a, b in itertools.combinations(sorted(counts), 2):
        if near_miss(a, b):
            pairs.append((a, b) if (counts[a], b) < (counts[b], a) else (b, a))
    return sorted(pairs)


def near_miss(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ only in case, by a swap of neighbours, by one letter added or left
    out, or (in names of five letters or more) by one letter changed: name and game are two types, not
    a typo."""
    a, b = a.lower(), b.lower()
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        swapped = len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
        return swapped or (len(diff) == 1 and len(a) >= 5)
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return len(short) >= 2 and any(long[:i] + long[i + 1:] == short for i in range(len(long)))


def _near_miss(name: str, known: Sequence[str]) -> str:
    """", a near miss of 'X': ..." when ``name`` is close to one of ``known`` (a typo), else ""."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f", a near miss of {close[0]!r}: a typo there, or in the record?" if close else ""


def check_types(records: Sequence[Record], labels: Sequence[str], trained: bool = False,
                declared: bool = False, relations: Sequence[str] = ()) -> None:
    """An entity type the model does not know would silently count as a miss forever, and so would a
    relation type of a relation model's (``relations``, its relation types; none: an entity model, whose
    files' relations are not scored).  ``trained``: the labels are a trained model's, which no setting
    changes (evaluate, calibrate); ``declared``: they are data.labels as the config lists them, else the
    training data's."""
    if relations:
        known_relations = set(relations)
        for record in records:
            for relation in record.relations:
                if relation.type not in known_relations:
                    near = _near_miss(relation.type, relations)
                    whose = "the model's" if trained else "the training data's"
                    raise DataError(f"{record.source}: relation type {relation.type!r} is not among {whose} relation "
                                    f"types ({', '.join(relations)}{near}); the model cannot predict it: rename or "
                                    f"remove those relations" + ("" if trained else ", or add training texts with it"))
    known = set(labels)
    events = list(relations) == [EVENT_LINK]
    for record in records:
        for entity in record.entities:
            if entity.type not in known:
                if events:  # its entities are the arguments of its events, typed EVENT_TYPE:ROLE
                    event_type, role = split_argument_label(entity.type)
                    whose = "the model's" if trained else "the training data's"
                    raise DataError(f"{record.source}: an argument of role {role!r} in an event of type {event_type!r}: "
                                    f"{whose} events have no such (event type, role) pair{_near_miss(entity.type, labels)}; "
                                    f"the model cannot predict it: rename or remove those arguments"
                                    + ("" if trained else ", or add training texts with it"))
                near = _near_miss(entity.type, labels)
                if trained:
                    where, fix = "the model's types", (f"the model cannot predict it: rename or remove those "
                                                       f"entities, or evaluate a model trained with {entity.type!r}")
                elif declared:
                    where, fix = "data.labels", ("add it to data.labels (or leave data.labels out: the types of "
                                                 "the training data), or fix the record")
                else:
                    where, fix = "the training data's types", "fix the record, or add training texts of that type"
                raise DataError(f"{record.source}: entity type {entity.type!r} is not in {where} "
                                f"({', '.join(labels)}{near}); {fix}")


def resolve_tokenization(mode: str, tokenizer) -> str:
    """``data.tokenization``, with ``auto`` resolved: char for a Chinese vocabulary, else subword."""
    if mode != "auto":
        return mode
    return "char" if is_chinese_vocabulary(tokenizer) else "subword"


def featurizer_for(tokenizer, tokenization: str, max_length: int, window_overlap: int) -> Featurizer:
    """``tokenization``: char or subword (what a trained model's record says, or ``resolve_tokenization``)."""
    return Featurizer(tokenizer, tokenization, max_length, window_overlap)
