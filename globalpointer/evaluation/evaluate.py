"""A model scored on labelled texts: the one evaluation behind ``globalpointer evaluate``,
``export --verify``, calibration's reading of the file and training's dev and test reports."""
import json
import logging
import time
from typing import List, NamedTuple, Sequence

from ..corpus import check_types, load_records
from ..files import atomic_write_json, atomic_write_text
from ..spans import Entity, Record
from .metrics import error_summary, span_report

log = logging.getLogger("globalpointer")


class Evaluation(NamedTuple):
    records: List[Record]  # the labelled texts
    predicted: List[List[Entity]]  # per record
    report: dict  # span_report, with error_summary as "errors"
    seconds: float  # of prediction alone


def labelled_records(path: str, reading: dict, labels: Sequence[str], trained: bool = True) -> List[Record]:
    """The records of ``path``, read as a model's config reads files (``DataConfig.reading``); a type
    the model does not know is an error naming it (``trained``: of a trained model, else of a run's
    training data)."""
    records = load_records(path, **reading)
    check_types(records, labels, trained)
    return records


def evaluate_records(extractor, records: Sequence[Record], labels: Sequence[str]) -> Evaluation:
    """Span precision / recall / F1 of ``extractor`` (anything with ``extract(texts)``) on ``records``."""
    started = time.perf_counter()
    predicted = extractor.extract([record.text for record in records])
    seconds = time.perf_counter() - started
    gold = [record.entities for record in records]
    report = span_report(gold, predicted, labels)
    report["errors"] = error_summary(gold, predicted, labels)
    return Evaluation(list(records), predicted, report, seconds)


def evaluate_file(ner, path: str) -> Evaluation:
    """The model of ``ner`` (a ``globalpointer.load`` pipeline) on the labelled file ``path``."""
    return evaluate_records(ner.extractor, labelled_records(path, ner.config.data.reading, ner.labels), ner.labels)


def predictions_path(report_path: str) -> str:
    """Where ``evaluate --output REPORT`` writes its predictions: beside the report."""
    stem = report_path[:-5] if report_path.endswith(".json") else report_path
    return stem + ".predictions.jsonl"


def write_evaluation(path: str, report: dict, records: Sequence[Record], predicted: Sequence[List[Entity]]) -> None:
    """The report as JSON at ``path``, and beside it each text with its predicted and gold entities."""
    atomic_write_json(path, report)
    lines = [json.dumps({"text": r.text, "entities": Record(r.text, p).entity_dicts(with_score=True),
                         "gold": r.entity_dicts()}, ensure_ascii=False) for r, p in zip(records, predicted)]
    atomic_write_text(predictions_path(path), "\n".join(lines) + "\n")
    log.info("wrote %s and %s", path, predictions_path(path))
