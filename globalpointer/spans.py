"""The two records every stage shares.

Character offsets are end-exclusive everywhere in the project (``text[start:end]`` is the entity),
whatever the input format says; readers convert inclusive ends once, on the way in.
"""
from typing import List, NamedTuple


class Entity(NamedTuple):
    start: int
    end: int
    type: str
    score: float = 1.0

    @property
    def key(self):
        """What exact-match evaluation compares."""
        return (self.start, self.end, self.type)


class Record(NamedTuple):
    text: str
    entities: List[Entity]
    source: str = ""  # "file:line" for error messages

    def entity_dicts(self, with_score: bool = False) -> List[dict]:
        out = []
        for e in self.entities:
            item = {"start": e.start, "end": e.end, "type": e.type, "text": self.text[e.start:e.end]}
            if with_score:
                item["score"] = round(float(e.score), 6)
            out.append(item)
        return out
