"""Streaming prediction over files: one JSON line out for every line in, in order, whatever the line.

Input lines are plain text or JSON objects with a ``text`` field.  Each output line is
``{"text", "entities": [{"start", "end", "type", "text", "score"}]}`` (for JSON input, the input's
other fields are kept); a line that cannot be read gets ``"error"`` instead of failing the run.
"""
import codecs
import json
import os
import sys
from typing import BinaryIO, Iterator, List, NamedTuple, Optional, TextIO, Tuple

from tqdm import tqdm

from .inference import Extractor
from .spans import Record


class ParsedLine(NamedTuple):
    payload: dict  # what the output line starts from
    text: Optional[str]  # None when the line could not be read


def parse_line(raw: bytes, input_format: str) -> ParsedLine:
    line = raw[:-1] if raw.endswith(b"\n") else raw
    line = line[:-1] if line.endswith(b"\r") else line
    try:
        decoded = line.decode("utf-8")
    except UnicodeDecodeError as error:
        text = line.decode("utf-8", errors="replace")
        return ParsedLine({"text": text, "entities": [], "error": f"not UTF-8 at byte {error.start} of the line"}, None)
    if input_format == "text":
        return ParsedLine({"text": decoded}, decoded)
    if not decoded.strip():
        return ParsedLine({"text": "", "entities": []}, "")
    try:
        obj = json.loads(decoded)
    except json.JSONDecodeError as error:
        return ParsedLine({"text": decoded, "entities": [], "error": f"malformed JSON: {error.msg}"}, None)
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        return ParsedLine({"text": decoded, "entities": [], "error": 'a JSON line needs a string "text" field'}, None)
    return ParsedLine(dict(obj), obj["text"])


def sniff_format(first_line: bytes) -> str:
    """``jsonl`` when the first line is a JSON object with a text field, else ``text``."""
    try:
        obj = json.loads(first_line.decode("utf-8"))
        return "jsonl" if isinstance(obj, dict) and "text" in obj else "text"
    except (UnicodeDecodeError, json.JSONDecodeError):
        return "text"


def read_chunks(stream: BinaryIO, lines_per_chunk: int) -> Iterator[List[bytes]]:
    chunk: List[bytes] = []
    for raw in stream:
        chunk.append(raw)
        if len(chunk) >= lines_per_chunk:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def predict_stream(extractor: Extractor, source: BinaryIO, sink: TextIO, input_format: str = "auto",
                   lines_per_chunk: int = 512, total_bytes: Optional[int] = None) -> Tuple[int, int]:
    """Predict every line of ``source`` into ``sink``; returns (lines, lines with an error)."""
    lines = failed = 0
    bar = tqdm(total=total_bytes, unit="B", unit_scale=True, desc="predict", file=sys.stderr, dynamic_ncols=True)
    for chunk in read_chunks(source, lines_per_chunk):
        if lines == 0 and chunk[0].startswith(codecs.BOM_UTF8):  # a BOM is no part of the first text
            chunk[0] = chunk[0][len(codecs.BOM_UTF8):]
        if input_format == "auto":
            first = next((raw for raw in chunk if raw.strip()), None)
            if first is not None:
                input_format = sniff_format(first)
        parsed = [parse_line(raw, "text" if input_format == "auto" else input_format) for raw in chunk]
        readable = [i for i, p in enumerate(parsed) if p.text]
        found = extractor.extract([parsed[i].text for i in readable])
        entities_of = dict(zip(readable, found))
        for i, item in enumerate(parsed):
            payload = item.payload
            if item.text is not None:
                record = Record(item.text, entities_of.get(i, []))
                payload = {**payload, "entities": record.entity_dicts(with_score=True)}
            failed += "error" in payload
            sink.write(json.dumps(payload, ensure_ascii=False) + "\n")
        lines += len(chunk)
        bar.update(sum(len(raw) for raw in chunk))
        bar.set_postfix(lines=lines, errors=failed)
    bar.close()
    return lines, failed


def predict_file(extractor: Extractor, input_path: str, output_path: str, input_format: str = "auto",
                 lines_per_chunk: int = 512) -> Tuple[int, int]:
    """``-`` means standard input / output.  A file output is written to ``.partial`` and renamed
    at the end, so a finished file is always complete."""
    total = os.path.getsize(input_path) if input_path != "-" else None
    source = sys.stdin.buffer if input_path == "-" else open(input_path, "rb")
    try:
        if output_path == "-":
            return predict_stream(extractor, source, sys.stdout, input_format, lines_per_chunk, total)
        directory = os.path.dirname(os.path.abspath(output_path))
        os.makedirs(directory, exist_ok=True)
        partial = output_path + ".partial"
        try:
            with open(partial, "w", encoding="utf-8") as sink:
                counts = predict_stream(extractor, source, sink, input_format, lines_per_chunk, total)
        except KeyboardInterrupt:
            with open(partial, "rb") as done:
                written = sum(1 for _ in done)
            raise KeyboardInterrupt(f"interrupted: {output_path} was not written; the output lines of the first "
                                    f"{written} input lines are in {partial}") from None
        os.replace(partial, output_path)
        return counts
    finally:
        if source is not sys.stdin.buffer:
            source.close()
