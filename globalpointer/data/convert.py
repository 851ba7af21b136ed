"""Convert any supported file to the canonical JSON lines, optionally a slice of its records
(``globalpointer convert INPUT OUTPUT [--format auto] [--skip N] [--take N]``), or as an annotation
tool imports it (``--output-format``, written by ``inference.file_prediction.write_records``), e.g. the
deterministic CMeEE split used in docs/lab/RESULTS.md:

    globalpointer convert ../shared/data/cmeee/CMeEE_dev.json runs/data/cmeee_train.jsonl --take 4000
    globalpointer convert ../shared/data/cmeee/CMeEE_dev.json runs/data/cmeee_test.jsonl --skip 4000
"""
from typing import Callable, List

from ..errors import DataError
from ..files import check_output_file
from ..spans import Record
from .readers import read_records, write_jsonl_records


def convert_file(source: str, output: str, format: str = "auto", skip: int = 0, take: int = 0,
                 write: Callable[[List[Record], str], None] = write_jsonl_records) -> List[Record]:
    """The records of ``source`` after the first ``skip``, at most ``take`` of them (0: all), written to
    ``output`` by ``write`` (canonical JSON lines); returns them."""
    check_output_file(output, "OUTPUT", [source])
    records = read_records(source, format)
    if skip >= len(records):
        raise DataError(f"{source}: --skip {skip} leaves none of its {len(records)} records")
    records = records[skip:skip + take] if take else records[skip:]
    write(records, output)
    return records
