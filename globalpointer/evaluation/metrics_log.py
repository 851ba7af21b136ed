"""A run's metrics.csv: one row per dev evaluation, written by training, read back by ``--resume``
(which drops the rows after its checkpoint) and by ``globalpointer plot``, through the one reader
here, so both say the same line about a row they cannot use."""
import csv
import math
from typing import Dict, List

from ..errors import CheckpointError

# (runs of earlier versions have an f1_without_average column too, of the removed train.ema_decay: read past)
METRICS_COLUMNS = ["step", "epochs_done", "train_loss", "precision", "recall", "f1", "seconds", "windows_per_second"]


def read_metrics(path: str) -> List[Dict[str, str]]:
    """The rows of ``path``, each checked: a whole-number step and finite numbers where numbers go; a
    CheckpointError naming the file, line and value otherwise."""
    fix = "the file was edited or is corrupted: fix or delete that row"
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            rows = []
            for row in reader:
                where = f"{path}:{reader.line_num}"
                if None in row:
                    raise CheckpointError(f"{where}: more values than the header has columns; {fix}")
                if not (row.get("step") or "").isdigit():
                    raise CheckpointError(f"{where}: step {row.get('step')!r} is not a whole number; {fix}")
                for column in METRICS_COLUMNS[1:]:
                    value = row.get(column)
                    if not _finite(value):
                        raise CheckpointError(f"{where}: {column} {value!r} is not a number; {fix}")
                rows.append(row)
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: not UTF-8 text; the file is corrupted: delete it (training writes it "
                              f"anew)") from None
    except csv.Error as error:
        raise CheckpointError(f"{path}: not readable as CSV ({error}); {fix}") from None
    return rows


def _finite(value) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
