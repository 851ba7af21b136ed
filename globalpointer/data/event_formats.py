"""JSON formats of event data, one parser each (json_formats.JSON_FORMATS lists them ahead of the entity
formats), and the encoding every one of them ends in (``event_record``):

- ``duee``: DuEE 1.0's JSON lines, {"text", "event_list": [{"event_type", "trigger", "trigger_start_index",
  "arguments": [{"argument_start_index", "role", "argument", "alias"}]}]}, character offsets; each
  mention is checked against its text.  ``alias`` (other names of an argument) is kept for DuEE's measure.
- ``phee``: PHEE's JSON lines, {"context", "annotations": [{"events": [{"event_type", "Trigger": {"text":
  [[piece, ...]], "start": [[offset, ...]]}, ARGUMENT: {"text", "start", SUB_ARGUMENT: {...}}}]}]}: each
  argument and sub-argument a role (``Treatment``, ``Treatment.Drug``), each piece of a mention an
  argument of its role (GPLinker's spans are contiguous), an attribute with a cue span (``Speculated``,
  ``Negated``, ``Severity``) a role on that cue (its value is not read), a nested ``Combination`` event's
  drugs arguments ``Treatment.Drug`` of the event that holds it, a trigger of several pieces the span from
  its first to its last.  The first annotation is read.
- ``events``: the project's own, {"text", "events": [{"type", "trigger": {"start", "end"} or null,
  "arguments": [{"role", "start", "end", "aliases"?}]}]}, end exclusive: what predict and convert write
  (its "text", "score" and "entities" are read back as what they are: checked, ignored, derived).

An event file's record keeps its events and holds their encoding for the span head (GPLinker): each
argument an entity of type EVENT_TYPE:ROLE (the trigger role ``trigger``), each two members of one event
linked by a relation EVENT_LINK (from the first in (start, end, type) order to the other).

The annotation tools (doccano, Label Studio) have no event labelling of their own; events are labelled
there as PaddleNLP's UIE guides label them, spans and relations: a region per trigger, labelled
EVENT_TYPE:trigger (what this project writes) or EVENT_TYPE触发词 (UIE's), a region per argument (any
label; this project writes EVENT_TYPE:ROLE), and a relation from the trigger to each of its arguments,
labelled with the role (unlabelled, the role its region's EVENT_TYPE:ROLE names).  ``linked_events``
reads that form, ``as_linked_spans`` writes it.
"""
from collections import defaultdict
from itertools import combinations
from typing import Dict, List, Optional, Sequence

from ..errors import DataError
from ..spans import (EVENT_LINK, ROLE_MARK, TRIGGER, Argument, Entity, Event, Record, Relation,
                     argument_label, event_roles, split_argument_label)
from .relation_formats import _quote, _text, listed

PHEE_NESTED = {"Combination": "Drug"}  # a nested event's role read as its holder's sub-argument


def event_record(text: str, events: Sequence[Event], where: str) -> Record:
    """The record of a text with ``events``: its arguments as entities EVENT_TYPE:ROLE and every two
    members of one event linked (EVENT_LINK)."""
    entities, links = set(), set()
    for event in events:
        members = sorted({Entity(a.start, a.end, argument_label(event.type, a.role)) for a in event.members()})
        entities.update(members)
        links.update(Relation(a, EVENT_LINK, b) for a, b in combinations(members, 2))
    return Record(text, sorted(entities), where, relations=tuple(sorted(links)), events=tuple(events))


def _name(value, what: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: {what} must be a non-empty string, got {_quote(value)}")
    return value


def _event_type(value, where: str) -> str:
    name = _name(value, "the event type", where)
    if ROLE_MARK in name:
        raise DataError(f"{where}: event type {_quote(name)} holds {ROLE_MARK!r}, which names an argument's "
                        f"type (EVENT_TYPE{ROLE_MARK}ROLE); rename the type")
    return name


def _role(value, where: str) -> str:
    name = _name(value, "a role", where)
    if name == TRIGGER:
        raise DataError(f"{where}: role {TRIGGER!r} is the trigger's; give the trigger as the event's trigger, or "
                        f"rename the role")
    return name


def _span(text: str, start, end, where: str, mention: Optional[str] = None) -> tuple:
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)) or not 0 <= start < end <= len(text):
        raise DataError(f"{where}: characters [{start!r}, {end!r}) are not within the text's {len(text)} "
                        f"(end exclusive)")
    if mention is not None and text[start:end] != mention:
        raise DataError(f"{where}: the text at [{start}, {end}) is {text[start:end]!r:.60}, not {mention!r:.60}; "
                        f"fix the offset or the mention")
    return start, end


def _aliases(value, where: str) -> tuple:
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise DataError(f"{where}: the aliases must be a list of strings, got {_quote(value)}")
    return tuple(value)


def _event(event_type: str, trigger: Optional[Argument], arguments: List[Argument], where: str) -> Event:
    if trigger is None and not arguments:
        raise DataError(f"{where}: an event of type {event_type!r:.40} with neither a trigger nor an argument")
    return Event(event_type, trigger, tuple(sorted(set(arguments))))


def parse_events(obj, where: str) -> Record:
    text = _text(obj, where)
    events = []
    for number, item in enumerate(listed(obj, "events", where, '{"type", "trigger", "arguments"}')):
        at = f"{where}: event {number}"
        if not isinstance(item, dict) or "type" not in item:
            raise DataError(f"{at} needs \"type\", \"trigger\" ({{\"start\", \"end\"}} or null) and \"arguments\", "
                            f"got {_quote(item)}")
        trigger = item.get("trigger")
        if trigger is not None:
            if not isinstance(trigger, dict) or "start" not in trigger or "end" not in trigger:
                raise DataError(f"{at}: \"trigger\" is {{\"start\", \"end\"}} or null, got {_quote(trigger)}")
            trigger = Argument(*_span(text, trigger["start"], trigger["end"], f"{at}: trigger", trigger.get("text")),
                               TRIGGER)
        read = []
        for index, argument in enumerate(listed(item, "arguments", at, '{"role", "start", "end"}')):
            where_argument = f"{at}: argument {index}"
            if not isinstance(argument, dict) or not all(key in argument for key in ("role", "start", "end")):
                raise DataError(f"{where_argument} needs \"role\", \"start\" and \"end\", got {_quote(argument)}")
            read.append(Argument(*_span(text, argument["start"], argument["end"], where_argument, argument.get("text")),
                                 _role(argument["role"], where_argument),
                                 aliases=_aliases(argument.get("aliases") or [], where_argument)))
        events.append(_event(_event_type(item["type"], at), trigger, read, at))
    return event_record(text, events, where)


def parse_duee(obj, where: str) -> Record:
    text = _text(obj, where)
    events = []
    for number, item in enumerate(listed(obj, "event_list", where, "events"), 1):
        at = f"{where}: event {number}"
        if not isinstance(item, dict) or "event_type" not in item:
            raise DataError(f"{at} needs \"event_type\", \"trigger\", \"trigger_start_index\" and \"arguments\", "
                            f"got {_quote(item)}")
        trigger = None
        if item.get("trigger") is not None:
            mention, start = _name(item["trigger"], "the trigger", at), item.get("trigger_start_index")
            trigger = Argument(*_span(text, start, (start + len(mention)) if isinstance(start, int) else None,
                                      f"{at}: trigger", mention), TRIGGER)
        read = []
        for index, argument in enumerate(listed(item, "arguments", at), 1):
            where_argument = f"{at}: argument {index}"
            if not isinstance(argument, dict) or not all(k in argument for k in ("argument", "argument_start_index", "role")):
                raise DataError(f"{where_argument} needs \"argument\", \"argument_start_index\" and \"role\", got "
                                f"{_quote(argument)}")
            mention, start = _name(argument["argument"], "the argument", where_argument), argument["argument_start_index"]
            span = _span(text, start, (start + len(mention)) if isinstance(start, int) else None, where_argument, mention)
            read.append(Argument(*span, _role(argument["role"], where_argument),
                                 aliases=_aliases(argument.get("alias") or [], where_argument)))
        events.append(_event(_event_type(item["event_type"], at), trigger, read, at))
    return event_record(text, events, where)


def _phee_mentions(text: str, value, role: str, where: str) -> List[Argument]:
    """A PHEE argument's mentions ({"text": [[piece, ...]], "start": [[offset, ...]]}), a piece each."""
    pieces, starts = value.get("text"), value.get("start")
    if not isinstance(pieces, list) or not isinstance(starts, list) or len(pieces) != len(starts):
        raise DataError(f"{where}: {role}: \"text\" and \"start\" must be lists of the same length, got "
                        f"{_quote(pieces)} and {_quote(starts)}")
    found = []
    for mention, offsets in zip(pieces, starts):
        if not isinstance(mention, list) or not isinstance(offsets, list) or len(mention) != len(offsets):
            raise DataError(f"{where}: {role}: a mention is a list of pieces and one of their offsets, got "
                            f"{_quote(mention)} at {_quote(offsets)}")
        for piece, start in zip(mention, offsets):
            piece = _name(piece, f"a piece of {role}", where)
            end = start + len(piece) if isinstance(start, int) and not isinstance(start, bool) else None
            found.append(Argument(*_span(text, start, end, f"{where}: {role}", piece), role))
    return found


def _phee_arguments(text: str, value: dict, role: str, where: str) -> List[Argument]:
    """An argument's mentions and, under the keys that hold objects, its sub-arguments (role ``ROLE.SUB``);
    a nested event (a list of events, ``PHEE_NESTED``) gives its drugs as the holder's sub-argument."""
    found = _phee_mentions(text, value, role, where) if "text" in value else []
    for key, sub in value.items():
        if isinstance(sub, dict):
            found += _phee_arguments(text, sub, f"{role}.{key}", where)
        elif isinstance(sub, list) and key in PHEE_NESTED:
            for nested in sub:
                inner = nested.get(PHEE_NESTED[key]) if isinstance(nested, dict) else None
                if isinstance(inner, dict):
                    found += _phee_mentions(text, inner, f"{role}.{PHEE_NESTED[key]}", where)
    return found


def parse_phee(obj, where: str) -> Record:
    text = _text(obj, where, "context")
    annotations = obj.get("annotations")
    if not isinstance(annotations, list) or (annotations and not isinstance(annotations[0], dict)):
        raise DataError(f"{where}: \"annotations\" must be a list of {{\"events\": [...]}}, got {_quote(annotations)}")
    events = []
    for number, item in enumerate(listed(annotations[0], "events", where) if annotations else [], 1):
        at = f"{where}: event {item.get('event_id', number) if isinstance(item, dict) else number}"
        if not isinstance(item, dict) or "event_type" not in item:
            raise DataError(f"{at} needs \"event_type\", got {_quote(item)}")
        triggers, arguments = [], []
        for key, value in item.items():
            if not isinstance(value, dict):
                continue
            if key == "Trigger":
                triggers += [t._replace(role=TRIGGER) for t in _phee_mentions(text, value, key, at)]
            else:
                arguments += _phee_arguments(text, value, _role(key, at), at)
        if len(triggers) > 1:  # a trigger of several pieces: the span from its first to its last
            triggers = [Argument(min(t.start for t in triggers), max(t.end for t in triggers), TRIGGER)]
        events.append(_event(_event_type(item["event_type"], at), triggers[0] if triggers else None, arguments, at))
    return event_record(text, events, where)


TRIGGER_SUFFIXES = (ROLE_MARK + TRIGGER, "触发词")  # a tool's trigger region: this project's label, PaddleNLP UIE's


def trigger_type(label: str) -> Optional[str]:
    """The event type whose trigger a tool's region label names (``TRIGGER_SUFFIXES``), else None."""
    suffix = next((s for s in TRIGGER_SUFFIXES if label.endswith(s) and len(label) > len(s)), None)
    return label[:-len(suffix)] if suffix else None


def linked_events(record: Record, where: str) -> Record:
    """An annotation tool's record read as events when a region is labelled as a trigger: each trigger
    an event of its type, each relation from it an argument (the relation's tail, its role the relation's
    label); a relation from another region, and a region no trigger links to, are errors naming it.  A
    record without a trigger is returned as it is (entities and relations)."""
    triggers = {e.key: kind for e in record.entities if (kind := trigger_type(e.type))}
    if not triggers:
        return record

    def named(entity: Entity) -> str:
        return f"{record.text[entity.start:entity.end]!r:.40} [{entity.start}, {entity.end}) labelled {entity.type!r:.40}"

    arguments: Dict[tuple, List[Argument]] = defaultdict(list)
    for relation in record.relations:
        if relation.head.key not in triggers:
            raise DataError(f"{where}: the relation {relation.type!r:.40} from {named(relation.head)} starts at no "
                            f"trigger: in a text with events, relations link a trigger (labelled EVENT_TYPE{ROLE_MARK}"
                            f"{TRIGGER} or EVENT_TYPE触发词) to its arguments (docs/events.md)")
        at = f"{where}: the relation from {named(relation.head)} to {named(relation.tail)}"
        role = relation.type or _region_role(relation.tail, triggers[relation.head.key])
        if not role:
            raise DataError(f"{at} has no label, and its argument's label names no role of a "
                            f"{triggers[relation.head.key]!r:.40} event (EVENT_TYPE{ROLE_MARK}ROLE): label the "
                            f"relation with the argument's role")
        role = _role(role, at)
        arguments[relation.head.key].append(Argument(relation.tail.start, relation.tail.end, role))
    linked = {(a.start, a.end) for found in arguments.values() for a in found}
    stray = next((e for e in record.entities if e.key not in triggers and (e.start, e.end) not in linked), None)
    if stray is not None:
        raise DataError(f"{where}: {named(stray)} belongs to no event: link its event's trigger to it with a relation "
                        f"labelled with its role, or remove it (docs/events.md)")
    events = [_event(_event_type(kind, where), Argument(key[0], key[1], TRIGGER), arguments[key], where)
              for key, kind in sorted(triggers.items())]
    return event_record(record.text, events, where)


def _region_role(region: Entity, event_type: str) -> str:
    """The role of an unlabelled relation's argument: its region's label EVENT_TYPE:ROLE, when of that
    event type, else empty."""
    kind, role = split_argument_label(region.type)
    return role if kind == event_type and role else ""


def as_linked_spans(payload: dict) -> dict:
    """An output line with ``events`` in the tools' form (``linked_events`` reads it back): ``entities``
    a region per trigger and argument, labelled EVENT_TYPE:ROLE (the model's labels), ``relations`` from
    each trigger to its event's arguments, labelled with their roles.  A predicted event without a
    trigger has its arguments written unlinked, for the annotator to give them their trigger
    (``check_triggers`` refuses a labelled record's, which would be lost)."""
    regions: Dict[tuple, int] = {}
    entities, relations = [], []

    def region(item: dict, label: str) -> int:
        key = (item["start"], item["end"], label)
        if key not in regions:
            regions[key] = len(entities)
            entities.append({"start": item["start"], "end": item["end"], "type": label, "text": item["text"],
                             **({"score": item["score"]} if "score" in item else {})})
        return regions[key]

    for event in payload["events"]:
        head = region(event["trigger"], argument_label(event["type"], TRIGGER)) if event["trigger"] else None
        for argument in event["arguments"]:
            tail = region(argument, argument_label(event["type"], argument["role"]))
            if head is not None:
                relations.append({"head": head, "tail": tail, "type": argument["role"],
                                  **({"score": argument["score"]} if "score" in argument else {})})
    rest = {key: value for key, value in payload.items() if key not in ("entities", "relations", "events")}
    return {**rest, "entities": entities, "relations": relations}


def check_triggers(records: Sequence[Record]) -> None:
    """Labelled records the tools' form can hold: an event without a trigger is an error naming its record."""
    for record in records:
        event = next((e for e in record.events if e.trigger is None), None)
        if event is not None:
            raise DataError(f"{record.source}: an event of type {event.type!r:.40} without a trigger: the annotation "
                            f"tools link an event's arguments to its trigger, so it would be lost; keep the file as "
                            f"jsonl, or give the event its trigger")


def tool_relation_types(labels: Sequence[str], relation_types: Sequence[str]) -> List[str]:
    """The relation labels of a labeling interface for a model's (or file's) types: an event model's are
    its roles (``as_linked_spans``), others' their relation types."""
    if list(relation_types) != [EVENT_LINK]:
        return list(relation_types)
    return sorted({role for roles in event_roles(labels).values() for role in roles})
