"""Streaming prediction over files: one JSON line out for every line in, in order, whatever the line.

Input lines are plain text or JSON objects with a ``text`` field.  Each output line is
``{"text", "entities": [{"start", "end", "type", "text", "score"}]}`` (for JSON input, the input's
other fields are kept); a line that cannot be read gets ``"error"`` instead of failing the run.
With ``label-studio`` output each line is that payload as a Label Studio task instead, and the file
one JSON array (``[`` and ``]`` on lines of their own), which Label Studio imports; with ``doccano``
each line is a doccano import line, ``{"text", "label": [[start, end, type]], ...}``.
"""
import codecs
import hashlib
import itertools
import json
import os
import shutil
import sys
from typing import (TYPE_CHECKING, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, TextIO,
                    Tuple)

from tqdm import tqdm

from ..data.event_formats import as_linked_spans, check_triggers
from ..errors import DataError, UserError, json_failure
from ..files import atomic_output, parse_json, replaced_by_rename
from ..spans import Record
from .doubt import certainty
from .label_studio import annotated_task, label_studio_task

if TYPE_CHECKING:  # the model side imports paddle; reading and writing lines does not need it
    from .extractor import Extractor

def doccano_line(payload: dict, model_version: str) -> dict:
    """One predict.py output payload -> a line doccano's sequence-labelling import reads (end
    exclusive, as doccano's own export), or its relation-extraction import for a relation model's; the
    input's other fields, and the model that labelled it, are kept as its metadata."""
    line = {key: value for key, value in payload.items() if key not in ("entities", "relations")}
    entities = payload.get("entities") or []
    if "relations" in payload:  # a relation model: doccano's relation-extraction import, entities by id
        line["entities"] = [{"id": i, "label": e["type"], "start_offset": e["start"], "end_offset": e["end"]}
                            for i, e in enumerate(entities)]
        line["relations"] = [{"id": i, "from_id": r["head"], "to_id": r["tail"], "type": r["type"]}
                             for i, r in enumerate(payload["relations"])]
    else:
        line["label"] = [[e["start"], e["end"], e["type"]] for e in entities]
    if model_version:
        line.setdefault("model_version", model_version)  # a field of the input's own keeps its value
    return line


class OutputFormat(NamedTuple):
    convert: Optional[Callable[[dict, str], dict]]  # (payload, model version) -> what is written (None: itself)
    labelled: Optional[Callable[[dict, str], dict]]  # the same for a labelled record's payload (convert)
    array: bool = False  # the lines form one JSON array, not JSON lines
    needs_interface: bool = False  # imported into a project that needs the labeling interface of the types
    certainty: bool = False  # it reads each text's certainty (its prediction's score)


# predict's and convert's --output-format choices
OUTPUT_FORMATS: Dict[str, OutputFormat] = {
    "jsonl": OutputFormat(None, None),
    "label-studio": OutputFormat(label_studio_task, annotated_task, array=True,  # Label Studio imports arrays
                                 needs_interface=True, certainty=True),
    "doccano": OutputFormat(doccano_line, doccano_line)}  # an import line holds no scores: one shape for both


NOT_UTF8 = "not UTF-8"  # how an input line's error starts when its bytes are in another encoding


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
        return ParsedLine({"text": text, "entities": [], "error": f"{NOT_UTF8} at byte {error.start} of the line"}, None)
    if input_format == "text":
        return ParsedLine({"text": decoded}, decoded)
    if not decoded.strip():
        return ParsedLine({"text": "", "entities": []}, "")
    try:
        obj = parse_json(decoded)
        json.dumps(obj, ensure_ascii=False).encode("utf-8")  # what the output line will hold must be UTF-8
    except json.JSONDecodeError as error:
        return ParsedLine({"text": decoded, "entities": [], "error": f"malformed JSON: {error.msg}"}, None)
    except UnicodeEncodeError:
        return ParsedLine({"text": decoded, "entities": [], "error": "the JSON holds a lone surrogate (\\ud800 to "
                                                                     "\\udfff), which is no character"}, None)
    except ValueError as error:  # past the parser's limits
        return ParsedLine({"text": decoded, "entities": [], "error": f"unreadable JSON: {json_failure(error)}"}, None)
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        return ParsedLine({"text": decoded, "entities": [], "error": 'a JSON line needs a string "text" field'}, None)
    return ParsedLine(dict(obj), obj["text"])


def sniff_format(first_line: bytes) -> str:
    """``jsonl`` when the first line is a JSON object with a text field, else ``text``."""
    try:
        obj = parse_json(first_line.decode("utf-8"))
        return "jsonl" if isinstance(obj, dict) and "text" in obj else "text"
    except (UnicodeDecodeError, json.JSONDecodeError):
        return "text"
    except ValueError:  # JSON past Python's limits: parse_line names them line by line
        return "jsonl" if first_line.lstrip().startswith(b"{") else "text"


def parsed_chunks(source: Iterable[bytes], input_format: str, lines_per_chunk: int,
                  at_file_start: bool = True) -> Iterator[Tuple[List[bytes], List[ParsedLine]]]:
    """The lines of ``source`` ``lines_per_chunk`` at a time, each as read and as parsed (``auto``: the
    format of the first non-empty line; a BOM at the file's start is no part of its first text)."""
    first_chunk = at_file_start
    for chunk in read_chunks(source, lines_per_chunk):
        if first_chunk and chunk[0].startswith(codecs.BOM_UTF8):
            chunk[0] = chunk[0][len(codecs.BOM_UTF8):]
        first_chunk = False
        if input_format == "auto":
            first = next((raw for raw in chunk if raw.strip()), None)
            if first is not None:
                input_format = sniff_format(first)
        yield chunk, [parse_line(raw, "text" if input_format == "auto" else input_format) for raw in chunk]


def read_chunks(stream: Iterable[bytes], lines_per_chunk: int) -> Iterator[List[bytes]]:
    chunk: List[bytes] = []
    for raw in stream:
        chunk.append(raw)
        if len(chunk) >= lines_per_chunk:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class PredictionWriter:
    """Writes one JSON value per input line: the payload (``jsonl``) or what ``output_format`` makes
    of it; Label Studio's tasks as the lines of one JSON array unless ``array`` is False (a share
    that rank 0 joins).  ``labelled``: the payloads are labelled records (annotations, not predictions)."""

    def __init__(self, sink: TextIO, output_format: str = "jsonl", model_version: str = "",
                 array: Optional[bool] = None, on_payload: Optional[Callable[[dict], None]] = None,
                 certainty: bool = False, labelled: bool = False):
        self.sink = sink
        self.certainty = certainty or OUTPUT_FORMATS[output_format].certainty  # each payload has its text's
        self.on_payload = on_payload  # sees every payload before it is written (predict.py --html keeps some)
        self.model_version = model_version
        self.convert = OUTPUT_FORMATS[output_format].labelled if labelled else OUTPUT_FORMATS[output_format].convert
        self.array = OUTPUT_FORMATS[output_format].array if array is None else array
        self.count = 0

    def write(self, payload: dict) -> None:
        if self.on_payload is not None:
            self.on_payload(payload)
        if self.convert is not None and "events" in payload:  # an annotation tool's: events as its spans and relations
            payload = as_linked_spans(payload)
        value = payload if self.convert is None else self.convert(payload, self.model_version)
        self.write_json(json.dumps(value, ensure_ascii=False))

    def write_json(self, encoded: str) -> None:
        if self.array:
            self.sink.write(",\n" if self.count else "[\n")
        self.sink.write(encoded if self.array else encoded + "\n")
        self.count += 1

    def close(self) -> None:
        if self.array:
            self.sink.write(("\n" if self.count else "[\n") + "]\n")


def predict_stream(extractor: "Extractor", source: Iterable[bytes], writer: PredictionWriter, input_format: str = "auto",
                   lines_per_chunk: int = 512, total_bytes: Optional[int] = None,
                   at_file_start: bool = True, name: str = "--input", lines_before: int = 0) -> Tuple[int, int]:
    """Predict every line of ``source`` into ``writer``; returns (lines, lines with an error).  Each
    payload has its text's ``certainty`` (``doubt.certainty``) where the writer asks for it.  A file whose
    first line beyond ASCII is not UTF-8 is in another encoding (GBK, Latin-1...) and is refused naming
    ``name`` and the line (``lines_before`` it in the file), as every one of its texts would be an error;
    a later line that is not UTF-8 gets its error as any unreadable line does."""
    lines = failed = 0
    encoding_seen = False  # a line beyond ASCII was read: the file's encoding is UTF-8
    bar = tqdm(total=total_bytes, unit="B", unit_scale=True, desc="predict", file=sys.stderr, dynamic_ncols=True,
               disable=not sys.stderr.isatty())  # to a file, the closing line says what was done
    for chunk, parsed in parsed_chunks(source, input_format, lines_per_chunk, at_file_start):
        if not encoding_seen:
            first = next((i for i, raw in enumerate(chunk) if not raw.isascii()), None)
            encoding_seen = first is not None
            if encoding_seen and parsed[first].payload.get("error", "").startswith(NOT_UTF8):
                raise DataError(f"{name}:{lines_before + lines + first + 1}: {parsed[first].payload['error']}: the file "
                                f"must be UTF-8; convert it (iconv -f GBK -t UTF-8, or from the encoding it is in)")
        readable = [i for i, p in enumerate(parsed) if p.text]
        relational = bool(extractor.relations)
        found = extractor.records([parsed[i].text for i in readable], margins=writer.certainty)
        found_of = dict(zip(readable, found))
        for i, item in enumerate(parsed):
            payload = item.payload
            if item.text is not None:
                record = found_of.get(i) or Record(item.text, [], margins=() if writer.certainty else None)
                payload = {**payload, **record.dicts(with_score=True, relations=relational,
                                                     events=extractor.events)}
                if writer.certainty:
                    payload["certainty"] = certainty(record)
            failed += "error" in payload
            writer.write(payload)
        lines += len(chunk)
        bar.update(sum(len(raw) for raw in chunk))
        bar.set_postfix(lines=lines, errors=failed)
    bar.close()
    writer.close()
    return lines, failed


def predict_file(extractor: "Extractor", input_path: str, output_path: str, input_format: str = "auto",
                 lines_per_chunk: int = 512, output_format: str = "jsonl", model_version: str = "",
                 on_payload: Optional[Callable[[dict], None]] = None, certainty: bool = False) -> Tuple[int, int]:
    """``-`` means standard input / output (``certainty``: each line has its text's, ``doubt.certainty``).  A file output is written under a temporary name and
    renamed at the end, so a finished file is always complete."""
    total = os.path.getsize(input_path) if input_path != "-" else None
    source = sys.stdin.buffer if input_path == "-" else open(input_path, "rb")
    try:
        if output_path == "-":
            writer = PredictionWriter(sys.stdout, output_format, model_version, on_payload=on_payload, certainty=certainty)
            return predict_stream(extractor, source, writer, input_format, lines_per_chunk, total, name=input_path)
        sink = None
        try:
            with atomic_output(output_path) as sink:
                writer = PredictionWriter(sink, output_format, model_version, on_payload=on_payload, certainty=certainty)
                return predict_stream(extractor, source, writer, input_format, lines_per_chunk, total,
                                      name=input_path)
        except KeyboardInterrupt as stop:
            if sink is None or sink.partial_name is None:
                raise
            if not os.path.exists(sink.partial_name):  # SIGTERM: removed with the output (atomic_output)
                raise type(stop)(f"terminated (SIGTERM): {output_path} was not written, and its partial output "
                                 f"was removed") from None
            sink.close()
            with open(sink.partial_name, "rb") as done:
                written = sum(1 for _ in done)
            raise type(stop)(f"interrupted: {output_path} was not written; the output lines of the first "
                             f"{written} input lines are in {sink.partial_name}") from None
    finally:
        if source is not sys.stdin.buffer:
            source.close()


def write_records(records: Sequence[Record], path: str, output_format: str) -> None:
    """Labelled records as ``output_format`` writes them (``convert --output-format``), atomically; where
    one has relations every line has its list, as a relation project's import needs."""
    relational = any(record.relations for record in records)
    eventful = any(record.events for record in records)
    if eventful and output_format != "jsonl":
        check_triggers(records)
    with atomic_output(path) as sink:
        writer = PredictionWriter(sink, output_format, labelled=True)
        for record in records:
            writer.write({"text": record.text, **record.dicts(relations=relational, events=eventful)})
        writer.close()


def count_lines(path: str) -> int:
    count, last = 0, b"\n"
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")  # a last line without a newline counts too


def file_input_format(path: str, requested: str) -> str:
    """``auto`` resolved from the file's first non-empty line, as a single process would sniff it."""
    if requested != "auto":
        return requested
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle):
            raw = raw[len(codecs.BOM_UTF8):] if number == 0 and raw.startswith(codecs.BOM_UTF8) else raw
            if raw.strip():
                return sniff_format(raw)
    return "text"


def part_files(output_path: str, world_size: int) -> List[str]:
    """The names of the processes' shares of one launch: the launch's address list (the same in
    every process of it, new in the next) keeps them apart from any file of the user's or of another
    launch."""
    launch = hashlib.sha1(os.environ.get("PADDLE_TRAINER_ENDPOINTS", "").encode()).hexdigest()[:10]
    return [f"{output_path}.part-{rank}-of-{world_size}.{launch}" for rank in range(world_size)]


def predict_file_share(extractor: "Extractor", input_path: str, output_path: str, input_format: str,
                       lines_per_chunk: int, rank: int, world_size: int, barrier, output_format: str = "jsonl",
                       model_version: str = "", on_payload: Optional[Callable[[dict], None]] = None,
                       certainty: bool = False) -> Tuple[int, int]:
    """One of ``world_size`` processes: predict the ``rank``-th contiguous share of the input's lines
    into its part file (``part_files``), wait for every process (``barrier``), then rank 0 joins the
    parts in order into ``OUT``, the same file one process writes."""
    if "-" in (input_path, output_path) or not replaced_by_rename(output_path):
        raise UserError("several processes need --input and --output files, not standard input or output (nor a "
                        "device or pipe, which their part files cannot stand beside)")
    total = count_lines(input_path)
    first, stop = total * rank // world_size, total * (rank + 1) // world_size
    input_format = file_input_format(input_path, input_format)
    parts = part_files(output_path, world_size)
    with open(input_path, "rb") as source:
        share = itertools.islice(source, first, stop)
        with atomic_output(parts[rank]) as sink:
            writer = PredictionWriter(sink, output_format, model_version, array=False, on_payload=on_payload,
                                      certainty=certainty)
            counts = predict_stream(extractor, share, writer, input_format, lines_per_chunk, at_file_start=first == 0,
                                    name=input_path, lines_before=first)
    barrier()
    if rank == 0:
        with atomic_output(output_path) as joined:
            if OUTPUT_FORMATS[output_format].array:
                _join_as_array(parts, joined)
            else:
                for name in parts:
                    with open(name, encoding="utf-8") as piece:
                        shutil.copyfileobj(piece, joined)
        for name in parts:
            os.remove(name)
    return counts


def _join_as_array(parts: List[str], joined: TextIO) -> None:
    """JSON lines of the parts -> the one JSON array a single process writes."""
    writer = PredictionWriter(joined, array=True)
    for name in parts:
        with open(name, encoding="utf-8") as piece:
            for line in piece:
                writer.write_json(line.rstrip("\n"))
    writer.close()
