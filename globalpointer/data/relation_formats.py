"""JSON formats of relation data, one parser each (json_formats.JSON_FORMATS lists them ahead of the
entity formats, whose keys some of them share):

- ``duie``: DuIE's JSON lines, {"text", "spo_list": [{"subject", "subject_type", "predicate", "object":
  {"@value", SLOT...}, "object_type": {"@value", SLOT...}}]}.  No offsets: each mention is searched in
  its text and the first occurrence taken (``MentionSearch`` counts the mentions found more than once).
  A complex object's extra slots (DuIE 2.0's ``inWork``, ``onDate``, ...) become relations of their own,
  ``PREDICATE@SLOT``, from the subject to the slot's mention, which evaluation joins back into one
  triple as DuIE's official script counts it (``evaluation.relations``).
- ``tokens``: token offsets, end exclusive: SpERT's {"tokens", "entities": [{"type", "start", "end"}],
  "relations": [{"type", "head", "tail"}]} (indices into the entities), and the shape with
  ``entities: [[start, end, type]]`` and ``relations: [[head_start, head_end, tail_start, tail_end,
  type]]``.  The text is the tokens joined by spaces.
- ``triples``: {"text", "triple_list": [[subject, relation, object]]}, no offsets, no entity types
  (searched as DuIE's mentions; every entity gets the type ``ENTITY``).
"""
import logging
from typing import Dict, List, Sequence, Tuple

from ..errors import DataError
from ..spans import EVENT_LINK, Entity, Record, Relation
from .reading import check_characters

log = logging.getLogger(__name__)

SLOT_MARK = "@"  # PREDICATE@SLOT: a complex object's extra slot, as a relation of its own
VALUE_SLOT = "@value"  # DuIE's main slot of an object (and of its type)
UNTYPED = "ENTITY"  # the type of an entity whose format gives none (``triples``)


def slot_relation(predicate: str, slot: str) -> str:
    return predicate if slot == VALUE_SLOT else f"{predicate}{SLOT_MARK}{slot}"


def split_slot(relation_type: str) -> Tuple[str, str]:
    """``slot_relation`` undone: (predicate, slot)."""
    predicate, mark, slot = relation_type.partition(SLOT_MARK)
    return (predicate, slot) if mark and slot else (relation_type, VALUE_SLOT)


def check_relations(record: Record, where: str) -> None:
    """What a relation is, in every format: a non-empty type, with ``@`` only as PREDICATE@SLOT (a complex
    object's slot, which the DuIE score joins to its triple), between two different entities (the decoder
    links two spans, never a span to itself); EVENT_LINK is an event file's alone."""
    for relation in record.relations:
        kind = relation.type
        if not isinstance(kind, str) or not kind.strip():
            head, tail = relation.head, relation.tail
            raise DataError(f"{where}: the relation from {record.text[head.start:head.end]!r:.40} [{head.start}, "
                            f"{head.end}) to {record.text[tail.start:tail.end]!r:.40} [{tail.start}, {tail.end}) has "
                            f"no type (its label); label it, or remove it")
        if kind == EVENT_LINK and not record.events:
            raise DataError(f"{where}: relation type {EVENT_LINK!r} links the arguments of an event model's events; "
                            f"give events as events (docs/events.md), or rename the relation type")
        predicate, mark, slot = kind.partition(SLOT_MARK)
        if mark and (not predicate.strip() or not slot.strip() or SLOT_MARK in slot):
            raise DataError(f"{where}: relation type {_quote(kind)}: '@' marks a complex object's slot, as "
                            f"PREDICATE@SLOT with one '@' between two names; rename the type")
        if relation.head.key == relation.tail.key:
            head = relation.head
            raise DataError(f"{where}: relation {kind!r:.40} from {record.text[head.start:head.end]!r:.40} "
                            f"[{head.start}, {head.end}) to itself: a relation links two different entities "
                            f"(the model never predicts one to itself); remove it")


def _mention(text: str, mention, kind: str, where: str) -> Entity:
    """The first occurrence of ``mention`` in ``text``, as an entity of type ``kind``."""
    if not isinstance(mention, str) or not mention.strip():
        raise DataError(f"{where}: a mention must be a non-empty string, got {_quote(mention)}")
    if not isinstance(kind, str) or not kind.strip():
        raise DataError(f"{where}: the entity {mention!r} needs a non-empty type, got {_quote(kind)}")
    start = text.find(mention)
    if start < 0:
        raise DataError(f"{where}: {mention!r} does not occur in the text; fix the mention or the text")
    return Entity(start, start + len(mention), kind)


def _quote(value, limit: int = 80) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else shown[:limit] + f"... ({len(shown):,} characters)"


def _text(obj, where: str, key: str = "text") -> str:
    if not isinstance(obj, dict):
        raise DataError(f"{where}: a record must be a JSON object, got {type(obj).__name__}")
    text = obj.get(key)
    if not isinstance(text, str) or not text.strip():
        raise DataError(f"{where}: a record needs a non-empty string \"{key}\", got {_quote(text)}")
    check_characters(text, where)
    return text


def listed(obj: dict, key: str, where: str, shape: str = "") -> list:
    """``obj[key]``, a list (absent or null: empty), else an error naming the key and, with ``shape``,
    what its items are."""
    value = obj.get(key) or []
    if not isinstance(value, list):
        raise DataError(f"{where}: \"{key}\" must be a list{' of ' + shape if shape else ''}, got {_quote(value)}")
    return value


def _record(text: str, relations: Sequence[Relation], where: str, entities: Sequence[Entity] = ()) -> Record:
    every = set(entities) | {e for relation in relations for e in (relation.head, relation.tail)}
    return Record(text, sorted(every), where, relations=tuple(sorted(set(relations))))


def parse_duie(obj, where: str) -> Record:
    text = _text(obj, where)
    relations = []
    for number, spo in enumerate(listed(obj, "spo_list", where, "triples"), 1):
        at = f"{where}: triple {number}"
        if not isinstance(spo, dict) or not all(key in spo for key in ("subject", "predicate", "object")):
            raise DataError(f"{at} needs \"subject\", \"predicate\" and \"object\", got {_quote(spo)}")
        predicate = spo["predicate"]
        if not isinstance(predicate, str) or not predicate.strip() or SLOT_MARK in predicate:
            raise DataError(f"{at}: the predicate must be a non-empty string without {SLOT_MARK!r}, got "
                            f"{_quote(predicate)}")
        subject = _mention(text, spo["subject"], spo.get("subject_type"), at)
        objects, types = spo["object"], spo.get("object_type")
        if not isinstance(objects, dict):  # DuIE 1.0: plain strings
            objects, types = {VALUE_SLOT: objects}, {VALUE_SLOT: types}
        if VALUE_SLOT not in objects or not isinstance(types, dict):
            raise DataError(f"{at}: \"object\" needs \"@value\" and \"object_type\" the same slots, got "
                            f"{_quote(objects)} and {_quote(types)}")
        for slot, mention in objects.items():
            if slot not in types:
                raise DataError(f"{at}: the object's slot {slot!r} has no type in \"object_type\" "
                                f"({', '.join(map(repr, types))})")
            relations.append(Relation(subject, slot_relation(predicate, slot), _mention(text, mention, types[slot], at)))
    return _record(text, relations, where)


def _token_offsets(tokens, where: str) -> Tuple[str, List[Tuple[int, int]]]:
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) and t.strip() for t in tokens):
        raise DataError(f"{where}: \"tokens\" must be a non-empty list of non-empty strings, got {_quote(tokens)}")
    offsets, position = [], 0
    for token in tokens:
        offsets.append((position, position + len(token)))
        position += len(token) + 1
    return " ".join(tokens), offsets


def _token_entity(item, offsets: List[Tuple[int, int]], where: str) -> Entity:
    if isinstance(item, dict) and all(key in item for key in ("type", "start", "end")):
        start, end, kind = item["start"], item["end"], item["type"]
    elif isinstance(item, list) and len(item) == 3:
        start, end, kind = item
    else:
        raise DataError(f"{where}: an entity is {{\"type\", \"start\", \"end\"}} or [start, end, \"TYPE\"], got "
                        f"{_quote(item)}")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)) or not 0 <= start < end <= len(offsets):
        raise DataError(f"{where}: entity tokens [{start!r}, {end!r}) are not within the {len(offsets)} tokens "
                        f"(end exclusive)")
    if not isinstance(kind, str) or not kind.strip():
        raise DataError(f"{where}: an entity needs a non-empty type, got {_quote(kind)}")
    return Entity(offsets[start][0], offsets[end - 1][1], kind)


def _relation_type(kind, where: str) -> str:
    if not isinstance(kind, str) or not kind.strip():
        raise DataError(f"{where}: a relation needs a non-empty type, got {_quote(kind)}")
    return kind


def parse_tokens(obj, where: str) -> Record:
    if not isinstance(obj, dict):
        raise DataError(f"{where}: a record must be a JSON object with \"tokens\"")
    text, offsets = _token_offsets(obj.get("tokens"), where)
    entities = [_token_entity(item, offsets, f"{where}: entity {i}")
                for i, item in enumerate(listed(obj, "entities", where))]
    by_tokens: Dict[Tuple[int, int], List[Entity]] = {}
    for entity in entities:
        by_tokens.setdefault((entity.start, entity.end), []).append(entity)
    relations = []
    for number, item in enumerate(listed(obj, "relations", where)):
        at = f"{where}: relation {number}"
        if isinstance(item, dict) and all(key in item for key in ("type", "head", "tail")):
            relations.append(_indexed_relation(item, entities, at, "the"))
        elif isinstance(item, list) and len(item) == 5:
            ends = []
            for start, end in (item[0:2], item[2:4]):
                entity = _token_entity([start, end, "?"], offsets, at)
                same = by_tokens.get((entity.start, entity.end), [])
                if len(same) != 1:
                    raise DataError(f"{at}: tokens [{start}, {end}) are " + (
                        "none of the record's entities" if not same else
                        f"{len(same)} entities ({', '.join(e.type for e in same)}): write the relation as "
                        f"{{\"type\", \"head\", \"tail\"}} with the entities' indices"))
                ends.append(same[0])
            relations.append(Relation(ends[0], _relation_type(item[4], at), ends[1]))
        else:
            raise DataError(f"{at} is {{\"type\", \"head\", \"tail\"}} or [head_start, head_end, tail_start, "
                            f"tail_end, \"TYPE\"], got {_quote(item)}")
    return _record(text, relations, where, entities)


def parse_triples(obj, where: str) -> Record:
    text = _text(obj, where)
    relations = []
    for number, item in enumerate(listed(obj, "triple_list", where, "[subject, relation, object]"), 1):
        at = f"{where}: triple {number}"
        if not isinstance(item, list) or len(item) != 3:
            raise DataError(f"{at} must be [subject, relation, object], got {_quote(item)}")
        relations.append(Relation(_mention(text, item[0], UNTYPED, at), _relation_type(item[1], at),
                                  _mention(text, item[2], UNTYPED, at)))
    return _record(text, relations, where)


def relations_from_indices(entities: List[Entity], listed, where: str) -> Tuple[Relation, ...]:
    """The project's JSON lines: ``relations`` [{"type", "head", "tail"}] indexing its ``entities`` as
    listed in the line (``spans.Record.relation_dicts`` writes them so)."""
    if not isinstance(listed, list):
        raise DataError(f"{where}: \"relations\" must be a list of {{\"type\", \"head\", \"tail\"}}, got {_quote(listed)}")
    relations = []
    for number, item in enumerate(listed):
        at = f"{where}: relation {number}"
        if not isinstance(item, dict) or not all(key in item for key in ("type", "head", "tail")):
            raise DataError(f"{at} needs \"type\", \"head\" and \"tail\" (indices into \"entities\"), got {_quote(item)}")
        relations.append(_indexed_relation(item, entities, at, "the line's"))
    return tuple(sorted(set(relations)))


def _indexed_relation(item: dict, entities: Sequence[Entity], at: str, whose: str) -> Relation:
    """{"type", "head", "tail"} with head and tail indices into ``entities`` (``whose``: how the error
    names them), each checked."""
    ends = []
    for role in ("head", "tail"):
        index = item[role]
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(entities):
            raise DataError(f"{at}: {role} {_quote(index)} is no index into {whose} {len(entities)} entities")
        ends.append(entities[index])
    return Relation(ends[0], _relation_type(item["type"], at), ends[1])


def report_mentions(path: str, records: Sequence[Record]) -> None:
    """For a format without offsets: how many of its mentions occur more than once in their text (the
    first occurrence was taken), and how many complex objects' slots were read as relations."""
    mentions = [(record.text, e) for record in records for e in record.entities]
    repeated = [(text, e) for text, e in mentions if text.count(text[e.start:e.end]) > 1]
    if repeated:
        text, e = repeated[0]
        log.warning("%s: %d of %d mentions occur more than once in their text (e.g. %r); the first occurrence was "
                    "taken, as the format gives no offsets", path, len(repeated), len(mentions), text[e.start:e.end])
    slots = sum(SLOT_MARK in r.type for record in records for r in record.relations)
    if slots:
        log.info("%s: %d extra slots of complex objects read as relations PREDICATE@SLOT (evaluation joins them "
                 "back into their triples)", path, slots)


def relation_counts(records: Sequence[Record]) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for record in records:
        for relation in record.relations:
            counts[relation.type] = counts.get(relation.type, 0) + 1
    return dict(sorted(counts.items()))
