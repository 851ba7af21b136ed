"""Tag sequences (BIO/IOB2, BIOES, BMES) -> spans.  Strictly, an I-/M-/E- tag must continue an
entity of the same type that a B- tag opened; with a ``repair`` callback such a tag opens a new
entity of its own type instead (conlleval's reading), and the callback hears of each one."""
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

from ..errors import DataError, quoted

END = {"E"}
SINGLE = {"S"}


class TaggedSpan(NamedTuple):
    """An entity of a tag sequence: its type's name, its first and its last token."""
    type: str
    start: int
    end: int  # included


def split_tag(tag: str) -> Tuple[str, str]:
    if tag == "O":
        return "O", ""
    prefix, sep, entity_type = tag.partition("-")
    if not sep or prefix not in {"B", "I", "M", "E", "S"} or not entity_type:
        raise ValueError(f"tag {quoted(tag)} is not O or B-/I-/M-/E-/S- followed by a type")
    return prefix, entity_type


def tags_to_spans(tags: Sequence[str], where: Sequence[str],
                  repair: Optional[Callable[[str], None]] = None) -> List[TaggedSpan]:
    """Spans over the tagged tokens, with their type names.  ``where[i]`` names token i's file:line.
    ``repair``: called with a message for every continuation tag that opened an entity, instead of
    the error."""
    spans: List[TaggedSpan] = []
    open_start, open_type = None, None

    def close(after: int):  # ``after``: the first token no longer in the entity
        nonlocal open_start, open_type
        if open_start is not None:
            spans.append(TaggedSpan(open_type, open_start, after - 1))
        open_start, open_type = None, None

    for index, tag in enumerate(tags):
        try:
            prefix, entity_type = split_tag(tag)
        except ValueError as error:
            raise DataError(f"{where[index]}: {error}", kind="tags") from None
        if prefix == "O":
            close(index)
        elif prefix == "B":
            close(index)
            open_start, open_type = index, entity_type
        elif prefix in SINGLE:
            close(index)
            spans.append(TaggedSpan(entity_type, index, index))
        else:  # I, M, E continue an open entity of the same type
            if open_start is None or open_type != entity_type:
                opened = f"an open {open_type} entity" if open_start is not None else "no open entity"
                message = f"{where[index]}: tag {tag} continues an entity but there is {opened}"
                if repair is None:
                    raise DataError(f"{message}; an entity must start with B-{entity_type} (or S-{entity_type} for "
                                    f"one token), or set data.on_error=repair to read it as the start of one",
                                    kind="tags")
                repair(message)
                close(index)
                open_start, open_type = index, entity_type
            if prefix in END:
                close(index + 1)
    close(len(tags))
    return spans
