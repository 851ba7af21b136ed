"""JSON formats (a JSON array or one object per line), one parser each: ``cluener`` ({"text", "label":
{type: {entity: [[start, end]]}}}, inclusive ends), ``cmeee`` ({"text", "entities": [{start_idx,
end_idx, type}]}, inclusive), ``jsonl``, the project's own ({"text", "entities": [{start, end,
type}]}, end exclusive), and the annotation tools' exports: ``doccano`` ({"text", "label": [[start,
end, type]]} or {"text", "entities": [{start_offset, end_offset, label}]}, end exclusive; Label
Studio's JSON-MIN export, {"text", "label": [{start, end, labels}]}, reads the same way) and
``label-studio`` (tasks {"data": {"text"}, "annotations": [{"result": [{"value": {start, end,
labels}}]}]}).  ``JSON_FORMATS`` is their table; ``json_format`` tells them apart."""
import difflib
import json
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

from ..errors import DataError, json_failure
from ..files import parse_json
from ..spans import Entity, Record, Relation
from .event_formats import linked_events, parse_duee, parse_events, parse_phee
from .reading import ErrorPolicy, check_characters, lines
from .relation_formats import check_relations, parse_duie, parse_tokens, parse_triples, relations_from_indices, report_mentions


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


NOT_NEAR_MISSES = ("relations", "tokens")


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
        # "relations" and "tokens" are common words of tools' metadata ("predictions" is one letter pair off)
        close = difflib.get_close_matches(key, [k for k in every if k not in NOT_NEAR_MISSES], n=1, cutoff=0.7)
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


def _entity_objects(obj, where: str, start: str, end: str, kind: str, mention: str, end_included: bool,
                    relations: bool = False) -> Record:
    """{"text", "entities": [{START, END, KIND, MENTION}]}, under the key names of the format; with
    ``relations``, also {"relations": [{"type", "head", "tail"}]} indexing the entities as listed."""
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
    linked = relations_from_indices(entities, obj["relations"], where) if relations and "relations" in obj else ()
    return Record(text, sorted(set(entities)), where, relations=linked)


def parse_cmeee(obj, where: str) -> Record:
    return _entity_objects(obj, where, "start_idx", "end_idx", "type", "entity", end_included=True)


def parse_jsonl(obj, where: str) -> Record:
    return _entity_objects(obj, where, "start", "end", "type", "text", end_included=False, relations=True)


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
DOCCANO_RELATIONS = "relations"  # beside "entities": {"from_id", "to_id", "type"} naming the entities' ids


def parse_doccano(obj, where: str) -> Record:
    text = _text_of(obj, where)
    key = next((k for k in DOCCANO_KEYS if k in obj), None)
    if key is None:  # Label Studio's JSON-MIN lists tasks nobody annotated without "label"
        raise LeftOut("tasks without annotation")
    items = obj.get(key) or []
    if not isinstance(items, list):
        raise DataError(f"{where}: \"{key}\" must be a list of labels, got {items!r}")
    spans = [_doccano_span(text, item, where) for item in items]
    entities = [entity for found in spans for entity in found]
    relations = obj.get("relations") or []
    if not isinstance(relations, list):
        raise DataError(f"{where}: \"relations\" must be a list, got {relations!r:.80}")
    by_id: Dict[object, List[Entity]] = {}
    for item, found in zip(items, spans):
        if isinstance(item, dict) and "id" in item:
            _add_region(by_id, item["id"], found, text, where, "entities")
    linked = [Relation(head, relation.get("type"), tail) for relation in relations
              for head, tail in _linked(relation, by_id, where)]
    return linked_events(Record(text, sorted(set(entities)), where, relations=tuple(sorted(set(linked)))), where)


def _add_region(by_id: dict, region_id, found: List[Entity], text: str, where: str, what: str) -> None:
    """``found`` (a region's entities) under its id; a second region of another span under the same id is
    an error naming both (a relation naming the id would go to whichever came last)."""
    if region_id in by_id:
        first = by_id[region_id][0]
        if (first.start, first.end) != (found[0].start, found[0].end):
            raise DataError(f"{where}: two {what} have the id {region_id!r:.40}: {text[first.start:first.end]!r:.40} "
                            f"[{first.start}, {first.end}) and {text[found[0].start:found[0].end]!r:.40} "
                            f"[{found[0].start}, {found[0].end}); give each its own id")
        by_id[region_id] = by_id[region_id] + found
    else:
        by_id[region_id] = found


LABEL_STUDIO_DIRECTIONS = {"right": (False,), "left": (True,), "bi": (False, True)}  # reversed? per relation


def _linked(relation, by_id: dict, where: str, reverse: bool = False):
    """The (head, tail) entity pairs of an annotation tool's relation {"from_id", "to_id"}: its two
    regions (by their ids in ``by_id``), each region's entities (one per label) paired (a relation
    without its type is refused by ``check_relations``, or given its role by ``linked_events``)."""
    if not isinstance(relation, dict) or any(key not in relation for key in ("from_id", "to_id")):
        raise DataError(f"{where}: a relation needs \"from_id\" and \"to_id\", got {relation!r:.80}")
    ends = []
    for role in ("from_id", "to_id"):
        if relation[role] not in by_id:
            raise DataError(f"{where}: the relation's {role} {relation[role]!r:.40} names no labelled region of the task")
        ends.append(by_id[relation[role]])
    heads, tails = ends[::-1] if reverse else ends
    return [(head, tail) for head in heads for tail in tails]


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
    entities, by_id, relations = [], {}, []
    for result in chosen.get("result") or []:
        if isinstance(result, dict) and result.get("type", "labels") == "labels" and "value" in result:
            found = _labelled_region(text, result["value"], where)
            entities.extend(found)
            if "id" in result:
                _add_region(by_id, result["id"], found, text, where, "regions")
    for result in chosen.get("result") or []:
        if isinstance(result, dict) and result.get("type") == "relation":
            labels = result.get("labels") or [""]
            direction = result.get("direction", "right")
            if direction not in LABEL_STUDIO_DIRECTIONS:
                raise DataError(f"{where}: the relation from {result.get('from_id')!r:.40} to {result.get('to_id')!r:.40} "
                                f"has direction {direction!r:.40}; Label Studio's are {', '.join(LABEL_STUDIO_DIRECTIONS)}")
            for label in labels:  # one relation per label, in its direction ("bi": both)
                for reverse in LABEL_STUDIO_DIRECTIONS[direction]:
                    relations += [Relation(head, label, tail) for head, tail in
                                  _linked(result, by_id, where, reverse)]
    return linked_events(Record(text, sorted(set(entities)), where, relations=tuple(sorted(set(relations)))), where)


def _first_entity(obj: dict) -> Optional[dict]:
    entities = obj.get("entities")
    return next((e for e in entities if isinstance(e, dict)), None) if isinstance(entities, list) else None


class JsonFormat(NamedTuple):
    parse: Callable[[object, str], Record]  # one object -> its record (LeftOut: a task that is no example)
    entity_keys: Tuple[str, ...]  # the keys that hold its entities (check_entity_keys)
    shows: Callable[[dict], bool]  # whether an object's own keys are this format's (detection)
    annotation_export: bool = False  # a tool's export of tasks: one listed twice is read once
    report: Optional[Callable[[str, List[Record]], None]] = None  # what a file's records need said (path, records)


# The formats, by name (config/schema.py's data.format choices come from these two tables).  A JSON format
# says how it is read and recognised; detection takes the first whose ``shows`` holds, so the order
# matters.  A tagged format is the string its tokens are joined with into the text.
JSON_FORMATS: Dict[str, JsonFormat] = {
    "duee": JsonFormat(parse_duee, ("event_list",), lambda o: "event_list" in o),
    "phee": JsonFormat(parse_phee, ("annotations",), lambda o: "context" in o and isinstance(o.get("annotations"), list)),
    "events": JsonFormat(parse_events, ("events", "entities"), lambda o: isinstance(o.get("events"), list)),
    "duie": JsonFormat(parse_duie, ("spo_list",), lambda o: "spo_list" in o, report=report_mentions),
    "tokens": JsonFormat(parse_tokens, ("tokens", "entities", "relations"), lambda o: isinstance(o.get("tokens"), list)),
    "triples": JsonFormat(parse_triples, ("triple_list",), lambda o: "triple_list" in o, report=report_mentions),
    "label-studio": JsonFormat(parse_label_studio, ("annotations",),
                               lambda o: isinstance(o.get("data"), dict) and ("annotations" in o or "predictions" in o),
                               annotation_export=True),
    "cluener": JsonFormat(parse_cluener, ("label",), lambda o: isinstance(o.get("label"), dict)),
    "doccano": JsonFormat(parse_doccano, DOCCANO_KEYS + (DOCCANO_RELATIONS,),
                          lambda o: isinstance(o.get("label"), list) or isinstance(o.get("labels"), list) or
                          "start_offset" in (_first_entity(o) or {}) and "start_idx" not in _first_entity(o),
                          annotation_export=True),
    "cmeee": JsonFormat(parse_cmeee, ("entities",), lambda o: "start_idx" in (_first_entity(o) or {})),
    "jsonl": JsonFormat(parse_jsonl, ("entities", "relations"), lambda o: _first_entity(o) is not None),
}


def parse_record(obj, fmt: str, where: str) -> Record:
    """One JSON object of a file in format ``fmt``, its keys checked first, its relations after
    (``check_relations``: what a relation is, one definition for every format)."""
    check_entity_keys(obj, fmt, where)
    record = JSON_FORMATS[fmt].parse(obj, where)
    check_relations(record, where)
    return record


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


def is_json_file(text: str) -> bool:
    return text.lstrip()[:1] in ("[", "{")
