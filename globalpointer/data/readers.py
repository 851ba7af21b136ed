"""Files -> ``Record``s (text + end-exclusive character spans), one reader per format.

JSON formats (a JSON array or one object per line): ``cluener`` ({"text", "label": {type: {entity:
[[start, end]]}}}, inclusive ends), ``cmeee`` ({"text", "entities": [{start_idx, end_idx, type}]},
inclusive), ``jsonl``, the project's own ({"text", "entities": [{start, end, type}]}, end
exclusive), and the annotation tools' exports: ``doccano`` ({"text", "label": [[start, end, type]]}
or {"text", "entities": [{start_offset, end_offset, label}]}, end exclusive; Label Studio's JSON-MIN
export, {"text", "label": [{start, end, labels}]}, reads the same way) and ``label-studio`` (tasks
{"data": {"text"}, "annotations": [{"result": [{"value": {start, end, labels}}]}]}).  Tagged formats:
``chars`` (one character and its tag per line, MSRA) and ``conll`` (one word per line, tag in the
last column, words joined by spaces).  ``auto`` tells them apart.  A zip (doccano's export) is read
through the one data file inside it.
"""
import difflib
import io
import json
import logging
import os
import re
import zipfile
from collections import Counter
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

from ..errors import DataError, json_failure
from ..files import atomic_write_text, parse_json
from ..spans import Entity, Record, characters
from .tags import tags_to_spans

log = logging.getLogger(__name__)



class ErrorPolicy:
    """``raise``: the first bad record stops the run.  ``skip``: it is left out and counted, by what was
    wrong in it (``DataError.kind``).  ``repair``: what can be read one way only is read so and counted
    (a continuation tag that opens no entity, as conlleval reads it; a token of several characters
    before its position, as its characters); any other bad record stops the run.  What every mode reads
    leniently (whitespace-only lines as sentence ends) is counted too."""

    def __init__(self, mode: str = "raise"):
        self.mode = mode
        self.skipped: Dict[str, List[str]] = {}  # kind -> messages
        self.repaired: Dict[str, List[str]] = {}  # what was repaired -> messages
        self.noticed: Counter = Counter()  # what was read leniently -> how often
        self.left_out: Dict[str, List[str]] = {}  # reason -> where: tasks that are no training example

    def __call__(self, error: DataError) -> None:
        if self.mode != "skip":
            raise error
        self.skipped.setdefault(f"for their {error.kind}", []).append(str(error))

    def repairs(self, what: str) -> Optional[Callable[[str], None]]:
        """Under ``repair``, the callback that counts a repair of ``what`` (None otherwise: an error)."""
        if self.mode != "repair":
            return None
        return lambda message: self.repaired.setdefault(what, []).append(message)

    @property
    def repair(self) -> Optional[Callable[[str], None]]:
        return self.repairs("continuation tag(s) that opened no entity")

    def notice(self, what: str) -> None:
        self.noticed[what] += 1

    def leave_out(self, reason: str, where: str) -> None:
        self.left_out.setdefault(reason, []).append(where)

    def left_out_summary(self) -> str:
        return "; ".join(f"{len(wheres)} {reason} (first: {wheres[0]})" for reason, wheres in self.left_out.items())

    def report(self, path: str) -> None:
        if self.left_out:
            log.warning("%s: left out %s", path, self.left_out_summary())
        if self.skipped:
            log.warning("%s: skipped %d malformed record(s) (data.on_error=skip): %s", path,
                        sum(map(len, self.skipped.values())), _by_kind(self.skipped))
        if self.repaired:
            log.warning("%s: repaired (data.on_error=repair) %s", path, _by_kind(self.repaired))
        for what, count in self.noticed.items():
            log.info("%s: %s %s", path, f"{count:,}", what)


def _by_kind(messages: Dict[str, List[str]]) -> str:
    return "; ".join(f"{len(found)} {kind} (first: {found[0]})" for kind, found in messages.items())


ZIP_MAGIC = b"PK\x03\x04"
# What the data file inside an export zip may unpack to, counted as it unpacks (a member's declared size can
# lie): doccano and Label Studio exports of NER projects are megabytes; a zip bomb is refused, not unpacked
MAX_UNZIPPED_BYTES = 512 * 2 ** 20
MAX_UNZIPPED_LINES = 5_000_000


def unzip_export(path: str, raw: bytes) -> bytes:
    """The one data file inside an annotation tool's export zip (doccano exports ``all.jsonl``, or
    one ``USER.jsonl`` per annotator)."""
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            members = [m for m in archive.infolist() if not m.is_dir() and not m.filename.startswith("__MACOSX/")]
            chosen = [m for m in members if os.path.basename(m.filename) == "all.jsonl"] or members
            if len(chosen) != 1:
                names = ", ".join(m.filename for m in members) or "nothing"
                raise DataError(f"{path}: a zip holding {names}; unzip it and name the file to read")
            too_big = DataError(f"{path}: {chosen[0].filename} unpacks to more than {MAX_UNZIPPED_BYTES} bytes; "
                                f"unzip it yourself and name the file")
            if chosen[0].file_size > MAX_UNZIPPED_BYTES:
                raise too_big
            log.info("%s: reading %s from the zip", path, chosen[0].filename)
            with archive.open(chosen[0]) as member:
                content = member.read(MAX_UNZIPPED_BYTES + 1)
            if len(content) > MAX_UNZIPPED_BYTES:
                raise too_big
            if content.count(b"\n") > MAX_UNZIPPED_LINES:  # splitting them would build an object a line
                raise DataError(f"{path}: {chosen[0].filename} unpacks to more than {MAX_UNZIPPED_LINES:,} lines, "
                                f"which no annotation tool's export of one project has; unzip it yourself and name "
                                f"the file")
            return content
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError) as error:
        raise DataError(f"{path}: a zip file that cannot be read ({error}); unzip it and name the file") from None


def read_text(path: str) -> str:
    if not os.path.isfile(path):
        raise DataError(f"file not found: {path}")
    raw = open(path, "rb").read()
    if raw.startswith(ZIP_MAGIC):
        raw = unzip_export(path, raw)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise DataError(f"{path}:{line}: bytes that are not UTF-8 at byte offset {error.start} "
                        f"({raw[error.start:error.start + 4]!r}); convert the file to UTF-8") from None
    if not text.strip():
        raise DataError(f"{path}: the file is empty")
    return text


# ---- JSON formats ------------------------------------------------------------------------------

LINE_END = re.compile(r"\r\n|\r|\n")


def lines(text: str) -> List[str]:
    """The file's lines, ended by \\n, \\r\\n or a lone \\r (old Mac files): str.splitlines would also
    split on U+2028, U+2029, U+0085 and other characters that JSON writes raw inside strings (a raw
    \\r it never does)."""
    return LINE_END.split(text)


def iter_json_objects(path: str, text: str, on_error: ErrorPolicy) -> Iterator[Tuple[int, dict]]:
    """(line number, object) for a JSON array file or a JSON-lines file.  An array must be the whole
    file: a missing ``]`` or anything after it would silently lose records, so both are errors."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        yield from _iter_json_array(path, text, len(text) - len(stripped))
        return
    for number, line_text in enumerate(lines(text), 1):
        if not line_text.strip():
            continue
        try:
            yield number, parse_json(line_text)
        except json.JSONDecodeError as error:
            on_error(DataError(f"{path}:{number}: malformed JSON ({error.msg} at column {error.colno})"))
        except ValueError as error:  # past the parser's limits
            on_error(DataError(f"{path}:{number}: unreadable JSON ({json_failure(error)})"))


def _iter_json_array(path: str, text: str, opening: int) -> Iterator[Tuple[int, dict]]:
    decoder = json.JSONDecoder()

    def line_at(position: int) -> int:
        return text.count("\n", 0, position) + 1

    def skip_space(position: int) -> int:
        while position < len(text) and text[position] in " \t\r\n":
            position += 1
        return position

    position, expect_record = skip_space(opening + 1), True
    if position < len(text) and text[position] == "]":
        expect_record = False
    while True:
        if position >= len(text):
            raise DataError(f"{path}:{line_at(opening)}: the JSON array opened here is never closed (no ']' before "
                            f"the end of the file); the file may be truncated")
        if not expect_record:
            if text[position] == "]":
                end = skip_space(position + 1)
                if end < len(text):
                    raise DataError(f"{path}:{line_at(end)}: text after the JSON array that ends on line "
                                    f"{line_at(position)}; a file holds one array, or one JSON object per line")
                return
            if text[position] != ",":
                raise DataError(f"{path}:{line_at(position)}: expected ',' or ']' after a record of the JSON array, "
                                f"got {text[position:position + 20]!r}")
            position = skip_space(position + 1)
            if position >= len(text):
                continue
        try:
            obj, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            raise DataError(f"{path}:{line_at(error.pos)}: malformed JSON: {error.msg}") from None
        except (ValueError, RecursionError) as error:  # past the parser's limits
            raise DataError(f"{path}:{line_at(position)}: unreadable JSON ({json_failure(error)})") from None
        yield line_at(position), obj
        position, expect_record = skip_space(end), False


def _text_of(obj, where: str) -> str:
    if not isinstance(obj, dict) or "text" not in obj:
        raise DataError(f"{where}: a record needs a \"text\" field")
    text = obj["text"]
    if not isinstance(text, str):
        raise DataError(f"{where}: \"text\" must be a string, got {type(text).__name__}")
    if not text.strip():
        raise DataError(f"{where}: the text is empty" if not text else f"{where}: the text is only whitespace")
    check_characters(text, where)
    return text


def lone_surrogate_at(text: str) -> Optional[int]:
    """Where ``text`` holds a lone surrogate, or None.  A JSON escape such as \\ud800 gives one, and it
    is no character: it cannot be tokenized, shown or written back as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


def check_characters(text: str, where: str) -> None:
    at = lone_surrogate_at(text)
    if at is not None:
        raise DataError(f"{where}: the text holds a lone surrogate {text[at]!r} at character {at}, which is no "
                        f"character (a broken \\uXXXX escape); fix the record")


def utf16_to_code_points(text: str, start: int, end: int) -> Tuple[int, int]:
    """Offsets counted in UTF-16 code units (JavaScript's string indices, which count a character
    outside the Basic Multilingual Plane, such as an emoji, twice) -> Python's code-point offsets."""
    points, units = [], 0
    for index, char in enumerate(text):
        points.append((units, index))
        units += 2 if ord(char) > 0xFFFF else 1
    points.append((units, len(text)))
    lookup = dict(points)
    return lookup.get(start, start), lookup.get(end, end)


def tool_offsets(text: str, start, end, expected_text: Optional[str]) -> Tuple[object, object]:
    """An annotation tool's end-exclusive offsets in code points.  Current doccano and Label Studio
    count code points; older releases counted UTF-16 units, so when the span's own text says the
    code-point reading is wrong and the UTF-16 reading right, the latter is taken."""
    if (expected_text is None or not isinstance(start, int) or not isinstance(end, int)
            or text[start:end] == expected_text):
        return start, end
    converted = utf16_to_code_points(text, start, end)
    return converted if text[converted[0]:converted[1]] == expected_text else (start, end)


def check_entity(text: str, start, end, entity_type, where: str, expected_text: Optional[str] = None,
                 end_included: bool = False) -> Entity:
    """Validate a span against its text; the one place where an inclusive end (``end_included``: the
    file's convention, as in CLUENER and CMeEE) becomes the exclusive end of ``Entity``.  Errors quote
    the offsets as the file wrote them."""
    if not all(isinstance(offset, int) and not isinstance(offset, bool) for offset in (start, end)):
        raise DataError(f"{where}: offsets must be whole numbers, got start={start!r} end={end!r}")
    if not isinstance(entity_type, str) or not entity_type:
        raise DataError(f"{where}: an entity needs a non-empty type, got {entity_type!r}")
    as_written = f"[{start}, {end}{']' if end_included else ')'}"
    if end_included:
        end += 1
    if end <= start:
        raise DataError(f"{where}: entity {entity_type} {as_written} ends before it starts")
    if start < 0 or end > len(text):
        raise DataError(f"{where}: entity {entity_type} {as_written} lies outside the text of length {len(text)}")
    if expected_text is not None and text[start:end] != expected_text:
        raise DataError(f"{where}: entity {entity_type} says {expected_text!r} but the text at "
                        f"{as_written} is {text[start:end]!r}")
    return Entity(start, end, entity_type)


def _entity_list(obj: dict, where: str) -> list:
    entities = obj.get("entities") or []
    if not isinstance(entities, list):
        raise DataError(f"{where}: \"entities\" must be a list of objects, got {entities!r}")
    return entities


class LeftOut(Exception):
    """A record that is no training example, and no error: an annotation tool's task that nobody
    annotated, or whose annotations were all cancelled.  Counted and left out; a text "without
    entities" is only what an annotator said has none."""


def check_entity_keys(obj, fmt: str, where: str) -> None:
    """A record key that holds another JSON format's entities (``JsonFormat.entity_keys``), or is a
    near miss of one ("entitys"), is an error: read as no entities, it would silently teach the model
    that the text has none.  Only keys whose values could hold entities (lists, objects) are judged:
    tools add metadata such as "annotator" or "total_annotations" beside them."""
    if not isinstance(obj, dict):
        return
    own = JSON_FORMATS[fmt].entity_keys
    for key, value in obj.items():
        if key in own or not isinstance(value, (list, dict)):
            continue
        every = sorted({name for known in JSON_FORMATS.values() for name in known.entity_keys})  # rarely reached
        if key in every:
            raise DataError(f"{where}: {key!r} holds entities in another format than {fmt}, which reads "
                            f"{' or '.join(own)}; set data.format to the file's format, or fix the record")
        close = difflib.get_close_matches(key, every, n=1, cutoff=0.7)
        if close:
            raise DataError(f"{where}: unknown key {key!r}; did you mean {close[0]!r}? ({fmt} reads entities "
                            f"from {' or '.join(own)})")


def parse_cluener(obj, where: str) -> Record:
    text = _text_of(obj, where)
    entities = []
    labels = obj.get("label") or {}
    if not isinstance(labels, dict):
        raise DataError(f"{where}: \"label\" must map types to {{entity: [[start, end]]}}")
    for entity_type, mentions in labels.items():
        if not isinstance(mentions, dict):
            raise DataError(f"{where}: label {entity_type!r} must map each entity text to its positions, "
                            f"{{\"text\": [[start, end]]}}, got {mentions!r}")
        for mention, positions in mentions.items():
            if not isinstance(positions, list):
                raise DataError(f"{where}: {entity_type} {mention!r}: expected a list of [start, end], got {positions!r}")
            for pair in positions:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise DataError(f"{where}: {entity_type} {mention!r}: expected [start, end], got {pair!r}")
                entities.append(check_entity(text, pair[0], pair[1], entity_type, where, mention, end_included=True))
    return Record(text, sorted(set(entities)), where)


# What other tools call an entity's keys: an entity object that lacks one of ours but has one of these
# gets a "did you mean"
KEY_SYNONYMS = {"type": ("label", "tag", "category", "entity_type", "ner_type", "class"),
                "start": ("begin", "start_offset", "start_idx", "offset"), "end": ("stop", "end_offset", "end_idx")}


def missing_key_hint(item: dict, key: str) -> str:
    """"; rename 'label' to 'type' (...)" when ``item`` lacks ``key`` but has a near miss or another
    tool's name for it: what the file says, turned into what the format reads."""
    others = [name for name in item if isinstance(name, str)]
    synonyms = [name for name in KEY_SYNONYMS.get(key.split("_")[0], ()) if name in others]
    close = synonyms or difflib.get_close_matches(key, others, n=1, cutoff=0.6)
    return f"; rename {close[0]!r} to {key!r} (this format's name for it), or set data.format" if close else ""


def _entity_objects(obj, where: str, start: str, end: str, kind: str, mention: str, end_included: bool) -> Record:
    """{"text", "entities": [{START, END, KIND, MENTION}]}, under the key names of the format."""
    text = _text_of(obj, where)
    entities = []
    for item in _entity_list(obj, where):
        if not isinstance(item, dict):
            raise DataError(f"{where}: each entity must be an object with {start}, {end} and {kind}, got {item!r}")
        for key in (start, end, kind):
            if key not in item:
                raise DataError(f"{where}: an entity has no {key!r} (it has {', '.join(map(repr, item))})"
                                f"{missing_key_hint(item, key)}")
        entities.append(check_entity(text, item.get(start), item.get(end), item.get(kind), where, item.get(mention),
                                     end_included))
    return Record(text, sorted(set(entities)), where)


def parse_cmeee(obj, where: str) -> Record:
    return _entity_objects(obj, where, "start_idx", "end_idx", "type", "entity", end_included=True)


def parse_jsonl(obj, where: str) -> Record:
    return _entity_objects(obj, where, "start", "end", "type", "text", end_included=False)


def _doccano_span(text: str, item, where: str) -> List[Entity]:
    if isinstance(item, list) and len(item) == 3:  # [start, end, type]
        return [check_entity(text, item[0], item[1], item[2], where)]
    if isinstance(item, dict) and "labels" in item:  # Label Studio JSON-MIN: {start, end, text, labels}
        return _labelled_region(text, item, where)
    if isinstance(item, dict):  # doccano with relations: {id, label, start_offset, end_offset}
        return [check_entity(text, item.get("start_offset"), item.get("end_offset"), item.get("label"), where)]
    raise DataError(f"{where}: a doccano label is [start, end, \"TYPE\"] or {{\"start_offset\", \"end_offset\", "
                    f"\"label\"}}, got {item!r}")


def _labelled_region(text: str, value: dict, where: str) -> List[Entity]:
    """Label Studio's region value {start, end, text, labels: [TYPE, ...]}: one entity per label."""
    labels = value.get("labels")
    if not isinstance(labels, list) or not labels:
        raise DataError(f"{where}: a labelled region needs \"labels\": [\"TYPE\"], got {value!r}")
    start, end = tool_offsets(text, value.get("start"), value.get("end"), value.get("text"))
    return [check_entity(text, start, end, label, where, value.get("text")) for label in labels]


DOCCANO_KEYS = ("label", "labels", "entities")  # sequence labelling, relations, older exports


def parse_doccano(obj, where: str) -> Record:
    text = _text_of(obj, where)
    key = next((k for k in DOCCANO_KEYS if k in obj), None)
    if key is None:  # Label Studio's JSON-MIN lists tasks nobody annotated without "label"
        raise LeftOut("tasks without annotation")
    items = obj.get(key) or []
    if not isinstance(items, list):
        raise DataError(f"{where}: \"{key}\" must be a list of labels, got {items!r}")
    entities = [entity for item in items for entity in _doccano_span(text, item, where)]
    return Record(text, sorted(set(entities)), where)


def _task_text(data, where: str) -> str:
    if not isinstance(data, dict):
        raise DataError(f"{where}: a Label Studio task needs a \"data\" object holding its text")
    if "text" in data:
        return _text_of(data, where)
    strings = [key for key, value in data.items() if isinstance(value, str)]
    if len(strings) != 1:
        raise DataError(f"{where}: the task's data has no \"text\" field and {len(strings)} string fields "
                        f"({', '.join(strings) or 'none'}); name the text field \"text\"")
    return _text_of({"text": data[strings[0]]}, where)


def parse_label_studio(obj, where: str) -> Record:
    """A task's ground-truth annotation, else its first one not cancelled; its ``labels`` regions are
    the entities (other result types, such as relations or choices, are not entities and are passed
    over).  A task without annotation, or whose annotations were all cancelled (skipped), is left out."""
    if not isinstance(obj, dict):
        raise DataError(f"{where}: a Label Studio task must be an object with \"data\" and \"annotations\"")
    text = _task_text(obj.get("data"), where)
    given = [a for a in obj.get("annotations") or [] if isinstance(a, dict)]
    annotations = [a for a in given if not a.get("was_cancelled")]
    if not annotations:
        raise LeftOut("cancelled tasks" if given else "tasks without annotation")
    chosen = next((a for a in annotations if a.get("ground_truth")), annotations[0])
    entities = []
    for result in chosen.get("result") or []:
        if isinstance(result, dict) and result.get("type", "labels") == "labels" and "value" in result:
            entities.extend(_labelled_region(text, result["value"], where))
    return Record(text, sorted(set(entities)), where)


def _first_entity(obj: dict) -> Optional[dict]:
    entities = obj.get("entities")
    return next((e for e in entities if isinstance(e, dict)), None) if isinstance(entities, list) else None


class JsonFormat(NamedTuple):
    parse: Callable[[object, str], Record]  # one object -> its record (LeftOut: a task that is no example)
    entity_keys: Tuple[str, ...]  # the keys that hold its entities (check_entity_keys)
    shows: Callable[[dict], bool]  # whether an object's own keys are this format's (detection)
    annotation_export: bool = False  # a tool's export of tasks: one listed twice is read once


# The formats, by name (config.py's data.format choices come from these two tables).  A JSON format
# says how it is read and recognised; detection takes the first whose ``shows`` holds, so the order
# matters.  A tagged format is the string its tokens are joined with into the text.
JSON_FORMATS: Dict[str, JsonFormat] = {
    "label-studio": JsonFormat(parse_label_studio, ("annotations",),
                               lambda o: isinstance(o.get("data"), dict) and ("annotations" in o or "predictions" in o),
                               annotation_export=True),
    "cluener": JsonFormat(parse_cluener, ("label",), lambda o: isinstance(o.get("label"), dict)),
    "doccano": JsonFormat(parse_doccano, DOCCANO_KEYS,
                          lambda o: isinstance(o.get("label"), list) or isinstance(o.get("labels"), list) or
                          "start_offset" in (_first_entity(o) or {}) and "start_idx" not in _first_entity(o),
                          annotation_export=True),
    "cmeee": JsonFormat(parse_cmeee, ("entities",), lambda o: "start_idx" in (_first_entity(o) or {})),
    "jsonl": JsonFormat(parse_jsonl, ("entities",), lambda o: _first_entity(o) is not None),
}
TAGGED_JOINERS: Dict[str, str] = {"chars": "", "chars-position": "", "conll": " "}
# Names users reach for, read as the format they mean (data.format: bio is a file of characters with BIO tags)
FORMAT_ALIASES = {"bio": "chars", "bioes": "chars", "bmes": "chars", "iob": "chars", "iob2": "chars",
                  "char": "chars", "conll2003": "conll", "conllu": "conll", "json": "jsonl",
                  "labelstudio": "label-studio"}
# chars-position: one character per line with its position in its word appended, as Weibo NER's release
# writes it: 口0 腔1.  The trailing digits are the position, what precedes them the character, a digit or a
# Latin letter as any other ("2016" is 20 01 12 63); positions reach two digits (310: "3" at position 10)
CHARACTER_AND_POSITION = re.compile(r"^(.)(\d{1,2})$", re.DOTALL)
# several characters before the position: a character an earlier conversion broke (two U+FFFD)
TOKEN_AND_POSITION = re.compile(r"^(.+?)(\d{1,2})$", re.DOTALL)
SEVERAL_CHARACTERS = "token(s) of several characters before their position, kept as their characters"
# every value data.format takes
FORMATS = ("auto", *JSON_FORMATS, *TAGGED_JOINERS)


def token_of(fmt: str, token: str, where: str, policy: ErrorPolicy) -> str:
    """The text a tagged file's token stands for in format ``fmt``."""
    if fmt != "chars-position":
        return token
    match = CHARACTER_AND_POSITION.match(token) or TOKEN_AND_POSITION.match(token)
    if not match:
        raise DataError(f"{where}: data.format chars-position expects a character and its position in the word "
                        f"(口0), got {token!r}; data.format: conll reads the tokens as words", kind="tokens")
    if len(match.group(1)) > 1:
        message = (f"{where}: {token!r} is {len(match.group(1))} characters before its position "
                   f"{match.group(2)}, where chars-position has one (a character broken by an earlier conversion?)")
        repair = policy.repairs(SEVERAL_CHARACTERS)
        if repair is None:
            raise DataError(f"{message}; set data.on_error=repair to keep them as the token's characters, with its "
                            f"tag", kind="tokens")
        repair(message)
    return match.group(1)


def parse_record(obj, fmt: str, where: str) -> Record:
    """One JSON object of a file in format ``fmt``, its keys checked first."""
    check_entity_keys(obj, fmt, where)
    return JSON_FORMATS[fmt].parse(obj, where)


def record_format(obj) -> Optional[str]:
    """The JSON format a record's own keys show, or None when they show none (a text without
    entities, or an unannotated task, fits several)."""
    if not isinstance(obj, dict):
        return None
    return next((name for name, known in JSON_FORMATS.items() if known.shows(obj)), None)


def json_format(path: str, objects: List[Tuple[int, object]]) -> str:
    """The one format every record of the file agrees with: records that show none fit any; records
    that show two are an error naming the first line of each."""
    first_line: Dict[str, int] = {}
    for line, obj in objects:
        fmt = record_format(obj)
        if fmt and fmt not in first_line:
            first_line[fmt] = line
    if len(first_line) > 1:
        (a, line_a), (b, line_b) = sorted(first_line.items(), key=lambda item: item[1])[:2]
        raise DataError(f"{path}: records in two formats, {a} (first on line {line_a}) and {b} (first on line "
                        f"{line_b}); a file holds one format: convert or split it")
    return next(iter(first_line), "jsonl")


# ---- tagged formats ----------------------------------------------------------------------------

COLUMN_SPACE = " \t"  # what separates a tagged line's columns: a full-width space (U+3000) is a token, as in the text
WHITESPACE_TOKEN_HINT = (" (a line of whitespace other than spaces and tabs: write the character, then a tab or space, "
                         "then its tag)")


def tagged_columns(line: str) -> List[str]:
    """A tagged line's columns: split on tabs when it has one, else on runs of spaces."""
    if "\t" in line:
        return line.split("\t")
    return [column for column in line.split(" ") if column]


WHITESPACE_LINES = "whitespace-only lines read as sentence ends"


class TaggedSentence(NamedTuple):
    tokens: List[str]
    tags: List[str]
    where: List[str]  # file:line of each token
    problem: Optional[DataError] = None  # a line of it that cannot be read: raised when the record is built


def iter_tagged_sentences(path: str, text: str, policy: Optional[ErrorPolicy] = None) -> Iterator[TaggedSentence]:
    """The blank-line-separated sentences of a tagged file.  A line of spaces and tabs alone ends a
    sentence too, as spaCy's, Hugging Face's and flair's CoNLL readers read it (counted in
    ``policy``).  A line that cannot be read spoils its sentence alone."""
    tokens, tags, where, problem = [], [], [], None
    for number, line in enumerate(lines(text), 1):
        stripped = line.strip(COLUMN_SPACE)
        if not stripped and line and policy is not None:
            policy.notice(WHITESPACE_LINES)
        if not stripped or stripped.startswith("-DOCSTART-"):
            if tokens or problem:
                yield TaggedSentence(tokens, tags, where, problem)
            tokens, tags, where, problem = [], [], [], None
            continue
        columns = tagged_columns(line)
        if len(columns) < 2:
            problem = problem or DataError(
                f"{path}:{number}: expected a token and a tag separated by a tab or space, got {line!r}"
                f"{WHITESPACE_TOKEN_HINT if not line.strip() else ''}", kind="lines")
            continue
        tokens.append(columns[0] if columns[0] else " ")
        tags.append(columns[-1].strip())
        where.append(f"{path}:{number}")
    if tokens or problem:
        yield TaggedSentence(tokens, tags, where, problem)


# A tagged file read as one text of more tokens than this has lost its sentence ends (said, not refused)
ONE_TEXT_WARNING = 1000


def tagged_sentence_record(sentence: TaggedSentence, fmt: str, policy: ErrorPolicy) -> Record:
    if sentence.problem is not None:
        raise sentence.problem
    tokens = [token_of(fmt, token, where, policy) for token, where in zip(sentence.tokens, sentence.where)]
    return tagged_record(tokens, sentence.tags, sentence.where, TAGGED_JOINERS[fmt], policy.repair)


def tagged_record(tokens: List[str], tags: List[str], where: List[str], joiner: str,
                  repair: Optional[Callable[[str], None]] = None) -> Record:
    offsets, position = [], 0
    for token in tokens:
        offsets.append((position, position + len(token)))
        position += len(token) + len(joiner)
    text = joiner.join(tokens)
    entities = [Entity(*characters(span, offsets), span.type) for span in tags_to_spans(tags, where, repair)]
    if not text.strip():
        raise DataError(f"{where[0]}: the sentence is only whitespace")
    return Record(text, entities, where[0])


def is_json_file(text: str) -> bool:
    return text.lstrip()[:1] in ("[", "{")


def detect_format(path: str, text: str) -> str:
    """The file's format, from every record of a JSON file, from the first 200 lines of a tagged one."""
    if is_json_file(text):
        return json_format(path, list(iter_json_objects(path, text, ErrorPolicy("skip"))))
    head = [line for line in lines(text)[:200] if line.strip(COLUMN_SPACE)]
    if any(line.startswith("-DOCSTART-") for line in head):
        return "conll"
    columns = [tagged_columns(line) for line in head]
    positions = [TOKEN_AND_POSITION.match(row[0]) if len(row) == 2 else None for row in columns]
    if columns and all(positions) and sum(len(match.group(1)) == 1 for match in positions) >= 0.9 * len(positions) \
            and any(match.group(2) != "0" for match in positions):  # positions that count up: not "a0" words
        return "chars-position"
    if any(len(row) >= 3 for row in columns) or any(len(row[0]) > 1 for row in columns if row):
        return "conll"
    return "chars"


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
        sentences, first_tokens = 0, 0
        for sentence in iter_tagged_sentences(path, text, policy):
            sentences += 1
            first_tokens = first_tokens or len(sentence.tokens)
            add(sentence.where[0] if sentence.where else path, lambda: tagged_sentence_record(sentence, fmt, policy))
            if limit and len(records) >= limit:
                break
        if final and sentences == 1 and first_tokens > ONE_TEXT_WARNING:
            log.warning("%s: no blank line in the file: its %s tokens are read as one text; a tagged file's "
                        "sentences end at a blank line (or a line of spaces and tabs): put one after each sentence",
                        path, f"{first_tokens:,}")
    else:
        raise DataError(f"{path}: unknown format {fmt!r}; use one of auto, {', '.join([*JSON_FORMATS, *TAGGED_JOINERS])}")
    if not final:
        return records
    policy.report(path)
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
    atomic_write_text(path, "".join(json.dumps({"text": r.text, "entities": r.entity_dicts()}, ensure_ascii=False) + "\n"
                                    for r in records))
