"""What a run checks of its data before it trains, each said before the first step rather than found
after the last: the types each file annotates, the relation types, a dev file that can measure, texts
that look like several read as one."""
import logging
from collections import Counter
from typing import List, Optional, Sequence

import numpy as np

from ..data.relation_formats import relation_counts
from ..data.sources import annotated_planes
from ..evaluation.evaluate import LACKING, unmeasured
from ..errors import ConfigError
from ..model.heads import HEADS
from ..model_directory.opening import LoadedModel
from ..spans import EVENT_LINK, Record

log = logging.getLogger(__name__)


def training_planes(train_records: List[Record], labels: List[str], start: Optional[LoadedModel],
                    head: str) -> Optional[np.ndarray]:
    """The types each training record annotates (``sources.annotated_planes``; None: all), and the trained
    types no file annotates said (``warn_untaught``)."""
    planes = annotated_planes(train_records, labels)
    if start is not None and planes is not None:
        warn_untaught(start.trained_for.labels, planes, head)
    return planes


def relation_types(train_records: List[Record], source: str, start: Optional[LoadedModel]) -> List[str]:
    """The relation types of the training records (none: an entity model), said with their counts; a
    run from a trained model (``start``) must have its relation types, in its order."""
    counts = relation_counts(train_records)
    events = Counter(event.type for record in train_records for event in record.events)
    if events:  # an event model: its one relation type links the arguments of an event (data/event_formats.py)
        if set(counts) - {EVENT_LINK}:
            raise ConfigError(f"{source}: events and relations ({', '.join(sorted(set(counts) - {EVENT_LINK}))}) in "
                              f"one training: a model is trained on events or on relations; train one of each")
        log.info("%s: event types %s", source, ", ".join(f"{kind} {count}" for kind, count in events.items()))
        counts = {EVENT_LINK: counts.get(EVENT_LINK, 0)}
    elif counts:
        log.info("%s: relation types %s", source, ", ".join(f"{kind} {count}" for kind, count in counts.items()))
    if start is not None and list(start.trained_for.relations) != list(counts):
        raise ConfigError(f"train.init_from: {start.directory} was trained for the relation types "
                          f"{', '.join(start.trained_for.relations) or 'none'}, the training data has "
                          f"{', '.join(counts) or 'none'}; a run from a trained model keeps its relation types")
    return list(counts)


def relation_rows(train_records: List[Record], relations: Sequence[str]) -> Optional[np.ndarray]:
    """A relation model's training records, 1 each whose data entry has relations and 0 each whose entry
    has none (an entity-only file beside relation files): its texts teach their entities, not that they
    hold no relation, as an entry teaches only the entity types it declares.  None: every record's file
    has relations (the pair loss as always)."""
    if not relations:
        return None
    annotates: dict = {}
    for record in train_records:
        annotates[record.origin] = annotates.get(record.origin, False) or bool(record.relations or record.events)
    silent = [origin for origin, has in annotates.items() if not has]
    if not silent:
        return None
    log.info("%s: no relation in the file: its texts teach their entities, not that they hold no relation (the "
             "pair planes leave them out of their loss)", "; ".join(silent))
    return np.array([1.0 if annotates[record.origin] else 0.0 for record in train_records], dtype="float32")


def measuring_dev(dev_records: List[Record], train_records: List[Record], source: str,
                  relations: Sequence[str] = ()) -> List[Record]:
    """The dev records, or none where they cannot measure what the model learned, said before training:
    a file without entities, or a relation model's (``relations``) without relations (its F1 is 0 at
    every evaluation), or one whose texts are all training texts (its F1 measures memory).  Without them
    every planned epoch runs and the last model is kept, as without data.dev."""
    if not dev_records:
        return dev_records
    lacking = unmeasured(dev_records, relations)
    if lacking:
        scored = {"no relation": "strict triple F1", "no event": "argument F1"}.get(lacking, "F1")
        log.warning("%s: %d texts and %s: its %s would be 0 at every evaluation; it chooses nothing, every planned "
                    "epoch runs and the last model is kept (name a dev file with %s)", source, len(dev_records),
                    lacking, scored, LACKING[lacking])
        return []
    trained = {record.text for record in train_records}
    if all(record.text in trained for record in dev_records):
        log.warning("%s: every one of its %d texts is a training text (the training file again?): its F1 would "
                    "measure what the model memorised; it chooses nothing (hold texts out of training for it)",
                    source, len(dev_records))
        return []
    return dev_records


# A training text cut into more windows than this is likely several texts read as one (a tagged file's
# sentences without blank lines between them): said, not refused (MSRA's longest sentence is 20 windows
# at data.max_length 128)
LONG_TEXT_WINDOWS = 50


def warn_unmeasured_test(test_records: List[Record], relations: Sequence[str], source: str) -> None:
    """A test file that cannot measure the model, said before training rather than after it."""
    lacking = unmeasured(test_records, relations)
    if lacking:
        log.warning("%s: %d texts and %s: the test report's %s will be 0 of 0", source, len(test_records), lacking,
                    {"no relation": "triples", "no event": "events"}.get(lacking, "scores"))


def warn_long_texts(windows, records, max_length: int, source: str) -> None:
    counts = Counter(window.record_index for window in windows)
    longest, count = max(counts.items(), key=lambda item: item[1], default=(0, 0))
    if count > LONG_TEXT_WINDOWS:
        many = sum(1 for n in counts.values() if n > LONG_TEXT_WINDOWS)
        log.warning("%s: %d training text(s) longer than %d windows of data.max_length=%d tokens (the longest, text "
                    "%d, %s characters starting %r, is %d windows): several texts read as one? In a tagged file each "
                    "sentence ends at a blank line; in JSON lines each text is one line", source, many,
                    LONG_TEXT_WINDOWS, max_length, longest + 1, f"{len(records[longest].text):,}",
                    records[longest].text[:30], count)


def warn_untaught(trained: List[str], planes: np.ndarray, head: str) -> None:
    """The trained types no training file annotates forget (measured in docs/merging.md): said before
    the run, not found after it."""
    untaught = [label for index, label in enumerate(trained) if not planes[:, index].any()]
    if untaught:
        shared = (f" and the span scores all types share (model.head={head}) learn the new types: theirs can vanish"
                  if HEADS[head].shared_scores else " learns the new types")
        log.warning("train.init_from: no training file annotates %s; they have no example here, and their scores "
                    "drift as the encoder%s. Add their training files, declared for them (docs/merging.md)",
                    ", ".join(untaught), shared)
