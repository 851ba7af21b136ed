"""The span forms every stage shares, and the only conversions between them.

- ``Entity``: characters, end exclusive (``text[start:end]`` is the entity), whatever the input
  format says; readers convert inclusive ends once, on the way in.
- ``Relation``: a typed link from one ``Entity`` (its head, the subject) to another (its tail, the
  object), both entities of the same record.
- ``TokenSpan``: tokens, end inclusive, as the cell ``(start, end)`` of a head's score matrix.  Its
  positions are either a text's tokens (0 = the first token of the text) or a window's input
  positions (0 = [CLS]); ``to_input`` and ``from_input`` convert, ``characters`` and ``to_entity``
  go back to characters.  Nothing else adds or subtracts 1.
"""
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple


class Entity(NamedTuple):
    start: int
    end: int
    type: str
    score: float = 1.0

    @property
    def key(self):
        """What exact-match evaluation compares."""
        return (self.start, self.end, self.type)


class Relation(NamedTuple):
    head: Entity
    type: str
    tail: Entity
    score: float = 1.0

    @property
    def key(self):
        """What strict triple evaluation compares: both entities' spans and types, and the relation."""
        return (self.head.key, self.type, self.tail.key)


# An event model is a relation model over these names (GPLinker for events): each entity type is an
# (event type, role) pair, the trigger one of its roles, and one relation type links two arguments of the
# same event; ``model.event_decode`` assembles the events back from them.
TRIGGER = "trigger"  # the trigger's role
ROLE_MARK = ":"  # EVENT_TYPE:ROLE, an argument's entity type (an event type holds no ':')
EVENT_LINK = "(same event)"  # the relation type of an event model, and only of one


def argument_label(event_type: str, role: str) -> str:
    return f"{event_type}{ROLE_MARK}{role}"


def split_argument_label(label: str) -> Tuple[str, str]:
    """``argument_label`` undone: (event type, role)."""
    event_type, _, role = label.partition(ROLE_MARK)
    return event_type, role


def event_roles(labels: Sequence[str]) -> Dict[str, List[str]]:
    """An event model's schema from its argument labels: each event type's roles, the trigger's left out."""
    roles: Dict[str, List[str]] = {}
    for label in labels:
        event_type, role = split_argument_label(label)
        roles.setdefault(event_type, [])
        if role != TRIGGER and role not in roles[event_type]:
            roles[event_type].append(role)
    return {event_type: sorted(found) for event_type, found in sorted(roles.items())}


class Argument(NamedTuple):
    """An event's argument (or its trigger, role ``TRIGGER``): characters, end exclusive."""
    start: int
    end: int
    role: str
    score: float = 1.0
    aliases: Tuple[str, ...] = ()  # other strings that name it (DuEE's ``alias``): what its evaluation accepts

    @property
    def key(self):
        return (self.start, self.end, self.role)


class Event(NamedTuple):
    type: str
    trigger: Optional[Argument]  # None: an event whose trigger is not annotated (or not found)
    arguments: Tuple[Argument, ...]  # sorted, without the trigger
    score: float = 1.0

    @property
    def key(self):
        """What exact event matching compares: its type, trigger span and every argument's span and role."""
        return (self.type, self.trigger.key if self.trigger else (), tuple(sorted(a.key for a in self.arguments)))

    def members(self) -> Tuple[Argument, ...]:
        """The trigger (when there is one) and the arguments."""
        return ((self.trigger,) if self.trigger else ()) + tuple(self.arguments)


class TokenSpan(NamedTuple):
    type: int  # an index into the labels
    start: int
    end: int  # included
    score: float = 1.0


def overlapping_spans(keys) -> list:
    """The keys (start, end, type) of one text that share a character with another of its keys
    (nested or crossing): the entities flat decoding cannot give together, and doccano drops unless a
    project allows overlapping spans."""
    ordered = sorted(keys)
    found = set()
    for i, (start, end, _) in enumerate(ordered):
        for other in ordered[i + 1:]:
            if other[0] >= end:
                break
            found.update({ordered[i], other})
    return sorted(found)


def overlapping_share(records: Sequence["Record"]) -> float:
    """The share of the records' entities (distinct spans and types) that share a character with
    another entity of their text; 0 without entities."""
    keys = [{entity.key for entity in record.entities} for record in records]
    total = sum(len(text_keys) for text_keys in keys)
    return sum(len(overlapping_spans(text_keys)) for text_keys in keys) / total if total else 0.0


CLS_POSITIONS = 1  # input positions before a window's first text token: [CLS]


def on_word_boundaries(records: Sequence["Record"]) -> bool:
    """Whether the records read as words: some text has a space, and every entity begins and ends at a
    space or at its text's edge (a tagged file of words, joined by spaces).  Raw texts are not: their
    entities end before punctuation ("Paris.")."""
    def bounded(text: str, entity: Entity) -> bool:
        return ((entity.start == 0 or text[entity.start - 1].isspace())
                and (entity.end == len(text) or text[entity.end].isspace()))

    return (any(" " in record.text for record in records) and any(record.entities for record in records)
            and all(bounded(record.text, entity) for record in records for entity in record.entities))


def to_input(span: TokenSpan, first_token: int) -> TokenSpan:
    """Text tokens -> input positions of the window whose first text token is ``first_token``."""
    shift = CLS_POSITIONS - first_token
    return span._replace(start=span.start + shift, end=span.end + shift)


def from_input(span: TokenSpan, first_token: int) -> TokenSpan:
    """Input positions of a window -> text tokens (``first_token`` 0: the window's own tokens)."""
    shift = first_token - CLS_POSITIONS
    return span._replace(start=span.start + shift, end=span.end + shift)


def characters(span, offsets: Sequence[Tuple[int, int]]) -> Tuple[int, int]:
    """The end-exclusive characters of a span over tokens (its ``start`` and ``end`` token, included:
    a TokenSpan, or a tagged file's data.tags.TaggedSpan) with these (start, end) character offsets."""
    return offsets[span.start][0], offsets[span.end][1]


def to_entity(span: TokenSpan, offsets: Sequence[Tuple[int, int]], labels: Sequence[str]) -> Entity:
    return Entity(*characters(span, offsets), labels[span.type], span.score)


class TokenIndex:
    """Characters -> tokens: which token starts and which ends at each character offset."""

    def __init__(self, offsets: Sequence[Tuple[int, int]]):
        self.by_start: Dict[int, int] = {start: i for i, (start, _) in enumerate(offsets)}
        self.by_end: Dict[int, int] = {end: i for i, (_, end) in enumerate(offsets)}

    def token_span(self, entity: Entity, type_id: int) -> Optional[TokenSpan]:
        """None when a boundary of the entity falls inside a token."""
        first, last = self.by_start.get(entity.start), self.by_end.get(entity.end)
        return None if first is None or last is None else TokenSpan(type_id, first, last)


class Record(NamedTuple):
    text: str
    entities: List[Entity]
    source: str = ""  # "file:line" for error messages
    types: Optional[Tuple[str, ...]] = None  # the types its file annotates (data/sources.py); None: every type
    origin: str = ""  # the data entry it was read from, when its file is one of a list
    relations: Tuple[Relation, ...] = ()  # their entities are among ``entities``
    margins: Optional[Tuple[float, ...]] = None  # a prediction's cells near their thresholds (inference/doubt.py)
    events: Tuple[Event, ...] = ()  # an event file's: ``entities`` and ``relations`` are their encoding (EVENT_LINK)

    def entity_dicts(self, with_score: bool = False) -> List[dict]:
        out = []
        for e in self.entities:
            item = {"start": e.start, "end": e.end, "type": e.type, "text": self.text[e.start:e.end]}
            if with_score:
                item["score"] = round(float(e.score), 6)
            out.append(item)
        return out

    def relation_dicts(self, with_score: bool = False) -> List[dict]:
        """Each relation as {"type", "head", "tail"}: the indices of its two entities in ``entity_dicts``."""
        index = {entity.key: i for i, entity in enumerate(self.entities)}
        out = []
        for relation in self.relations:
            item = {"type": relation.type, "head": index[relation.head.key], "tail": index[relation.tail.key]}
            if with_score:
                item["score"] = round(float(relation.score), 6)
            out.append(item)
        return out

    def event_dicts(self, with_score: bool = False) -> List[dict]:
        """Each event as {"type", "trigger": {"start", "end", "text"} or null, "arguments": [{"role",
        "start", "end", "text"}]}, character offsets, end exclusive (and each one's "score")."""
        def argument(item: Argument, role: bool = True) -> dict:
            out = {"role": item.role} if role else {}
            out.update(start=item.start, end=item.end, text=self.text[item.start:item.end])
            if item.aliases:  # other names of it (DuEE's alias), kept through a conversion
                out["aliases"] = list(item.aliases)
            if with_score:
                out["score"] = round(float(item.score), 6)
            return out

        out = []
        for event in self.events:
            item = {"type": event.type, "trigger": argument(event.trigger, False) if event.trigger else None,
                    "arguments": [argument(a) for a in event.arguments]}
            if with_score:
                item["score"] = round(float(event.score), 6)
            out.append(item)
        return out

    def dicts(self, with_score: bool = False, relations: Optional[bool] = None, events: Optional[bool] = None) -> dict:
        """{"entities"} and, for a record with relations (or with ``relations``: a relation model's
        prediction, even of none), {"relations"}; for a record with events (or with ``events``: an event
        model's prediction), {"events"} instead of the relations that encode them: what a line of the
        project's JSON lines (and of prediction) holds besides its text."""
        out = {"entities": self.entity_dicts(with_score)}
        if events or (events is None and self.events):
            out["events"] = self.event_dicts(with_score)
        elif relations or (relations is None and self.relations):
            out["relations"] = self.relation_dicts(with_score)
        return out


def kept_relations(entities: Sequence[Entity], relations: Sequence[Relation]) -> tuple:
    """The relations whose two entities are among a text's ``entities`` (flat decoding may have left one
    out), each once (its best score), sorted; the entities are the text's own (their scores)."""
    by_key = {entity.key: entity for entity in entities}
    best = {}
    for relation in relations:
        head, tail = by_key.get(relation.head.key), by_key.get(relation.tail.key)
        if head is not None and tail is not None and (relation.key not in best or relation.score > best[relation.key].score):
            best[relation.key] = Relation(head, relation.type, tail, relation.score)
    return tuple(best[key] for key in sorted(best))
