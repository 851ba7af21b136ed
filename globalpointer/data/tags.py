"""Tag sequences (BIO/IOB2, BIOES, BMES) -> spans, strictly: an I-/M-/E- tag must continue an
entity of the same type that a B- tag opened."""
from typing import List, Sequence, Tuple

from ..errors import DataError

CONTINUE = {"I", "M"}
END = {"E"}
SINGLE = {"S"}


def split_tag(tag: str) -> Tuple[str, str]:
    if tag == "O":
        return "O", ""
    prefix, sep, entity_type = tag.partition("-")
    if not sep or prefix not in {"B", "I", "M", "E", "S"} or not entity_type:
        raise ValueError(f"tag {tag!r} is not O or B-/I-/M-/E-/S- followed by a type")
    return prefix, entity_type


def tags_to_spans(tags: Sequence[str], where: Sequence[str]) -> List[Tuple[int, int, str]]:
    """Token-index spans ``(start, end_exclusive, type)``.  ``where[i]`` names token i's file:line."""
    spans: List[Tuple[int, int, str]] = []
    open_start, open_type = None, None

    def close(end):
        nonlocal open_start, open_type
        if open_start is not None:
            spans.append((open_start, end, open_type))
        open_start, open_type = None, None

    for index, tag in enumerate(tags):
        try:
            prefix, entity_type = split_tag(tag)
        except ValueError as error:
            raise DataError(f"{where[index]}: {error}") from None
        if prefix == "O":
            close(index)
        elif prefix == "B":
            close(index)
            open_start, open_type = index, entity_type
        elif prefix in SINGLE:
            close(index)
            spans.append((index, index + 1, entity_type))
        else:  # I, M, E continue an open entity of the same type
            if open_start is None or open_type != entity_type:
                opened = f"an open {open_type} entity" if open_start is not None else "no open entity"
                raise DataError(f"{where[index]}: tag {tag} continues an entity but there is {opened}; "
                                f"an entity must start with B-{entity_type} (or S-{entity_type} for one token)")
            if prefix in END:
                close(index + 1)
    close(len(tags))
    return spans
