"""A model scored on labelled texts: the one evaluation behind ``globalpointer evaluate``,
``export --verify``, calibration's reading of the file and training's dev and test reports."""
import dataclasses
import json
import logging
import time
from typing import List, Optional, Sequence

from ..corpus import check_types, load_sources
from ..data.sources import Sources, sources_name
from ..files import atomic_write_json, atomic_write_text
from ..spans import EVENT_LINK, Entity, Record
from .metrics import error_summary, span_report
from .events import event_report
from .relations import headline, relation_report
from .reliability import entity_reliability, triple_reliability

log = logging.getLogger("globalpointer")


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """What ``evaluate_records`` gives; unpacks as (records, predicted, report, seconds), and ``found``
    holds a relation model's predictions (a record per text, its relations too; None for an entity model)."""
    records: List[Record]  # the labelled texts
    predicted: List[List[Entity]]  # per record
    report: dict  # span_report, with error_summary as "errors" (and a relation model's relation_report as "relations")
    seconds: float  # of prediction alone
    found: Optional[List[Record]] = None

    def __iter__(self):
        return iter((self.records, self.predicted, self.report, self.seconds))

    @property
    def headline(self) -> dict:
        """The micro scores the model is chosen by: a relation model's strict triples (``report["relations"]
        ["micro"]``; ``report["micro"]`` is its entities'), an entity model's spans (``report["micro"]``)."""
        return headline(self.report)


def labelled_records(path: Sources, reading: dict, labels: Sequence[str], trained: bool = True,
                     declared: bool = False, relations: Sequence[str] = ()) -> List[Record]:
    """The records of ``path`` (a file, or data entries), read as a model's config reads files
    (``DataConfig.reading``); a type the model does not know is an error naming it (``trained``: of a
    trained model, else of a run: ``declared`` in data.labels, or its training data's), and so is a
    relation type a relation model does not know (``relations``: its relation types)."""
    records = load_sources(path, reading)
    check_types(records, labels, trained, declared, relations)
    return records


LACKING = {"no entity": "entities", "no event": "events", "no relation": "relations"}  # unmeasured's, and what would fix it


def unmeasured(records: Sequence[Record], relations: Sequence[str] = ()) -> str:
    """What labelled ``records`` lack to measure a model (``relations``: a relation model's types), as
    "no entity", "no event" or "no relation"; "" when they can measure it."""
    if list(relations) == [EVENT_LINK] and not any(record.events for record in records):
        return "no event"
    if not any(record.entities for record in records):
        return "no entity"
    if relations and not any(record.relations for record in records):
        return "no relation"
    return ""


def scored_predictions(records: Sequence[Record], predicted: Sequence[List[Entity]]) -> List[List[Entity]]:
    """What is scored of each record's predictions: of a record whose file annotates some types only
    (``Record.types``), the entities of those types; what the model finds of the others can be neither
    right nor wrong there."""
    return [[e for e in found if e.type in record.types] if record.types else list(found)
            for record, found in zip(records, predicted)]


def evaluate_records(extractor, records: Sequence[Record], labels: Sequence[str]) -> Evaluation:
    """Span precision / recall / F1 of ``extractor`` (anything with ``records(texts)`` and ``relations``) on ``records``.
    A record whose file annotates some types only is scored on those (``scored_predictions``).  Records of data entries get a
    report per entry too (``sources``), each over its entry's types."""
    started = time.perf_counter()
    relational = bool(extractor.relations)
    found = extractor.records([record.text for record in records])
    predicted = [record.entities for record in found]
    seconds = time.perf_counter() - started
    predicted = scored_predictions(records, predicted)
    gold = [record.entities for record in records]
    # the types some record is scored on: a type no entry declares has neither a row nor a part in macro F1
    scored = labels if any(not record.types for record in records) else \
        [label for label in labels if any(label in record.types for record in records)]
    report = span_report(gold, predicted, scored)
    report["errors"] = error_summary(gold, predicted, labels)
    report["calibration"] = entity_reliability(gold, predicted, scored)
    if relational:
        report["relations"] = relation_report(records, found, extractor.relations)
        report["relations"]["calibration"] = triple_reliability(records, found)
        if extractor.events:
            report["events"] = event_report(records, found)
    origins = sorted({record.origin for record in records if record.origin})
    if origins:
        report["sources"] = {}
        for origin in origins:
            chosen = [i for i, record in enumerate(records) if record.origin == origin]
            types = records[chosen[0]].types or labels
            report["sources"][origin] = span_report([gold[i] for i in chosen], [predicted[i] for i in chosen],
                                                    [label for label in labels if label in types])
    return Evaluation(list(records), predicted, report, seconds, found)


def evaluate_file(ner, path: Sources) -> Evaluation:
    """The model of ``ner`` (a ``globalpointer.load`` pipeline) on the labelled file (or entries) ``path``;
    a file that cannot measure it (``unmeasured``) is said in one line."""
    relations = ner.extractor.relations
    records = labelled_records(path, ner.config.data.reading, ner.labels, relations=relations)
    lacking = unmeasured(records, relations)
    if lacking == "no event":
        log.warning("%s: %d texts and no event: the event model's events cannot be measured on it (0 of 0)",
                    sources_name(path, "--data"), len(records))
    elif lacking == "no relation":
        log.warning("%s: %d texts and no relation: the relation model's triples cannot be measured on it (0 of 0); "
                    "its entity scores can", sources_name(path, "--data"), len(records))
    elif lacking:
        log.warning("%s: %d texts and no entity: every score is 0 of 0; evaluate on a labelled file",
                    sources_name(path, "--data"), len(records))
    return evaluate_records(ner.extractor, records, ner.labels)


def predictions_path(report_path: str) -> str:
    """Where ``evaluate --output REPORT`` writes its predictions: beside the report."""
    stem = report_path[:-5] if report_path.endswith(".json") else report_path
    return stem + ".predictions.jsonl"


def write_evaluation(path: str, report: dict, records: Sequence[Record], predicted: Sequence[List[Entity]],
                     found: Optional[Sequence[Record]] = None) -> None:
    """The report as JSON at ``path``, and beside it each text with its predicted and gold entities (and
    a relation model's relations: ``found``)."""
    atomic_write_json(path, report)
    found = found or [Record(r.text, p) for r, p in zip(records, predicted)]
    lines = [json.dumps({"text": r.text, **f.dicts(with_score=True, relations=bool(r.relations or f.relations),
                                                   events=bool(r.events or f.events)),
                         "gold": r.dicts()}, ensure_ascii=False) for r, f in zip(records, found)]
    atomic_write_text(predictions_path(path), "\n".join(lines) + "\n")
    log.info("wrote %s and %s", path, predictions_path(path))
