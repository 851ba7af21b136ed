"""Files -> ``Record``s (text + end-exclusive character spans): ``read_records`` reads a file in any
format of ``FORMATS``, the JSON formats (json_formats.py) and the tagged ones (tagged.py); ``auto``
tells them apart.  A zip (doccano's export) is read through the one data file inside it (reading.py).
"""
import json
import logging
import os
import re
from typing import Callable, Dict, List, Optional

from ..errors import DataError
from ..files import atomic_write_text
from ..spans import Record
from .json_formats import JSON_FORMATS, LeftOut, is_json_file, iter_json_objects, json_format, parse_record
from .reading import ZIP_MAGIC, ErrorPolicy, read_text
from .tagged import (ONE_TEXT_SENTENCE_ENDS, ONE_TEXT_TOKENS, SENTENCE_ENDS, TAGGED_JOINERS, iter_tagged_sentences,
                     tagged_format, tagged_sentence_record)

log = logging.getLogger(__name__)


# Names users reach for, read as the format they mean (data.format: bio is a file of characters with BIO tags)
FORMAT_ALIASES = {"bio": "chars", "bioes": "chars", "bmes": "chars", "iob": "chars", "iob2": "chars",
                  "char": "chars", "conll2003": "conll", "conllu": "conll", "json": "jsonl",
                  "labelstudio": "label-studio"}

# every value data.format takes
FORMATS = ("auto", *JSON_FORMATS, *TAGGED_JOINERS)


def detect_format(path: str, text: str) -> str:
    """The file's format, from every record of a JSON file, from the first 200 lines of a tagged one."""
    if is_json_file(text):
        return json_format(path, list(iter_json_objects(path, text, ErrorPolicy("skip"))))
    return tagged_format(text)


# A limited read starts with this much of the file, and reads four times as much until it has its records
FIRST_PART_BYTES = 1 << 20
BLANK_LINE = re.compile(rb"(?:\r?\n|\r)[ \t]*(?:\r?\n|\r)")  # where a tagged file's sentence ends


def first_part(path: str, size: int) -> Optional[str]:
    """The first ``size`` bytes of a JSON-lines or tagged file, cut where a record ends (a line end; a
    blank line in a tagged file); None for a file that cannot be cut so (a zip, a JSON array, a part
    without such an end)."""
    with open(path, "rb") as handle:
        raw = handle.read(size)
    first = raw.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if raw.startswith(ZIP_MAGIC) or first == b"[":
        return None
    if first == b"{":
        end = max(raw.rfind(b"\n"), raw.rfind(b"\r")) + 1
    else:
        ends = [match.end() for match in BLANK_LINE.finditer(raw)]
        end = ends[-1] if ends else 0
    if end <= 0:
        return None
    try:
        return raw[:end].decode("utf-8-sig")
    except UnicodeDecodeError:
        return None  # the whole file is read, and its error said with its line


def read_records(path: str, format: str = "auto", on_error: str = "raise", limit: int = 0) -> List[Record]:
    """Every record of a file, validated; with ``on_error='skip'`` bad ones are counted and left out.
    Annotation tools' tasks that are no example (unannotated, cancelled) are left out and counted.
    With ``limit``, the first ``limit`` records, reading no more of a big file than they take."""
    format = FORMAT_ALIASES.get(format, format)
    if limit and os.path.isfile(path):
        size, part = os.path.getsize(path), FIRST_PART_BYTES
        while part < size:
            text = first_part(path, part)
            if text is None:
                break
            records = records_of_text(path, text, format, on_error, limit, final=False)
            if len(records) >= limit:
                return records
            part *= 4
    return records_of_text(path, read_text(path), format, on_error, limit)


def records_of_text(path: str, text: str, format: str, on_error: str, limit: int,
                    final: bool = True) -> List[Record]:
    """``read_records`` of the file's ``text`` (its whole text when ``final``, else a first part of it,
    for which no record is no error and nothing is reported)."""
    policy = ErrorPolicy(on_error)
    json_file = format in JSON_FORMATS or (format == "auto" and is_json_file(text))
    objects = list(iter_json_objects(path, text, policy)) if json_file else None
    if format != "auto":
        fmt = format
    else:  # said once per file: a file read in the wrong format is noticed before training
        fmt = json_format(path, objects) if objects is not None else detect_format(path, text)
        log.info("%s: format %s (detected; set data.format to read it otherwise)", path, fmt)
    records: List[Record] = []

    def add(where: str, build: Callable[[], Record]) -> Optional[Record]:
        try:
            records.append(build())
            return records[-1]
        except LeftOut as reason:
            policy.leave_out(str(reason), where)
        except DataError as error:
            policy(error)
        return None

    if fmt in JSON_FORMATS:
        seen: Dict[object, Record] = {}
        for line, obj in objects:
            where = f"{path}:{line}"
            record = add(where, lambda: parse_record(obj, fmt, where))
            if record is not None and JSON_FORMATS[fmt].annotation_export:
                _drop_duplicate(records, seen, obj, where)
            if limit and len(records) >= limit:
                break
    elif fmt in TAGGED_JOINERS:
        sentences, first_tokens, first_ends = 0, 0, 0
        for sentence in iter_tagged_sentences(path, text, policy):
            sentences += 1
            if sentences == 1:  # sentence ends inside the one text: several sentences without blank lines
                first_tokens = len(sentence.tokens)
                first_ends = sum(token in SENTENCE_ENDS for token in sentence.tokens[:-1])
            add(sentence.where[0] if sentence.where else path, lambda: tagged_sentence_record(sentence, fmt, policy))
            if limit and len(records) >= limit:
                break
        if final and sentences == 1 and (first_tokens > ONE_TEXT_TOKENS[TAGGED_JOINERS[fmt]]
                                         or first_ends >= ONE_TEXT_SENTENCE_ENDS):
            log.warning("%s: no blank line in the file: its %s tokens are read as one text; a tagged file's "
                        "sentences end at a blank line (or a line of spaces and tabs): put one after each sentence",
                        path, f"{first_tokens:,}")
    else:
        raise DataError(f"{path}: unknown format {fmt!r}; use one of auto, {', '.join([*JSON_FORMATS, *TAGGED_JOINERS])}")
    if not final:
        return records
    policy.report(path)
    if fmt in JSON_FORMATS and JSON_FORMATS[fmt].report and records:
        JSON_FORMATS[fmt].report(path, records)
    if not records:
        left_out = f"; left out {policy.left_out_summary()}" if policy.left_out else ""
        raise DataError(f"{path}: no usable records (format {fmt}){left_out}")
    return records


def _drop_duplicate(records: List[Record], seen: Dict[object, Record], obj, where: str) -> None:
    """An annotation export that lists one task twice (Label Studio's JSON-MIN does, once per
    annotation): the same entities twice are kept once, different ones are an error naming both."""
    record = records[-1]
    key = ("id", json.dumps(obj.get("id"))) if isinstance(obj, dict) and "id" in obj else ("text", record.text)
    earlier = seen.get(key)
    if earlier is None:
        seen[key] = record
        return
    records.pop()
    if earlier.text != record.text or earlier.entities != record.entities:
        raise DataError(f"{where}: task {key[1]} was already read on {earlier.source.rsplit(':', 1)[-1]} with "
                        f"other entities ({earlier.source} and {where}): two annotations disagree; keep one (or "
                        f"mark one as ground truth and export as JSON)")


def write_jsonl_records(records: List[Record], path: str) -> None:
    """The canonical format, for converting any supported file (``text[start:end]`` == entity)."""
    atomic_write_text(path, "".join(json.dumps({"text": r.text, **r.dicts()}, ensure_ascii=False) + "\n"
                                    for r in records))
