"""GPLinker's event decoding: an event model's decoded arguments (entities EVENT_TYPE:ROLE) and links
(relations EVENT_LINK) -> events.  Of overlapping arguments of one label the best is kept
(``flat_per_label``; arguments of different labels may overlap).  Per event type, the arguments are the nodes of a graph whose edges are
the links between them; each maximal complete subgraph (clique, Bron-Kerbosch with pivoting) is one
event, an argument linked to none an event of its own.  A clique holding several triggers gives an event
per trigger, each with the clique's other arguments.  An event's score is the lowest of its members' and
of its links'.  ``limit`` bounds the cliques one event type gives in a text, the search stopping there:
an under-trained model's half-linked graph has exponentially many."""
from typing import Dict, FrozenSet, List, Sequence, Set, Tuple

from ..spans import EVENT_LINK, TRIGGER, Argument, Entity, Event, Relation, split_argument_label
from .decode import select_flat


def flat_per_label(entities: Sequence[Entity]) -> List[Entity]:
    """The arguments with no two of one label (event type and role) overlapping, the best of each overlap
    kept (``select_flat`` per label); a Treatment and its Treatment.Drug on the same words stay.  32 of
    PHEE's 30,359 gold argument spans overlap another of their label; on its test file this gained 0.54
    strict argument F1, 2.07 by DuEE's measure and 1.63 exact events (docs/events.md#results), where two
    nested candidates of one role (``PLP``, ``PLP can``) had split one event in two."""
    by_label: Dict[str, List[Entity]] = {}
    for entity in entities:
        by_label.setdefault(entity.type, []).append(entity)
    return sorted((kept for group in by_label.values() for kept in select_flat(group)),
                  key=lambda e: (e.start, e.end, e.type))


def maximal_cliques(neighbours: Dict[int, Set[int]], limit: int = 0) -> Tuple[List[FrozenSet[int]], bool]:
    """The maximal cliques of the graph ``neighbours`` (node -> its neighbours, symmetric, no self-loops),
    at most ``limit`` of them (0: all), and whether the search stopped at the limit."""
    found: List[FrozenSet[int]] = []
    stack = [(frozenset(), set(neighbours), set())]
    while stack:
        clique, candidates, excluded = stack.pop()
        if not candidates and not excluded:
            found.append(clique)
            if limit and len(found) >= limit:
                return found, bool(stack)
            continue
        pivot = max(candidates | excluded, key=lambda node: len(neighbours[node] & candidates))
        for node in sorted(candidates - neighbours[pivot]):
            stack.append((clique | {node}, candidates & neighbours[node], excluded & neighbours[node]))
            candidates = candidates - {node}
            excluded = excluded | {node}
    return found, False


def assemble_events(entities: Sequence[Entity], relations: Sequence[Relation], limit: int = 0) -> Tuple[Tuple[Event, ...], int]:
    """One text's events from its decoded arguments and links (those between entities of one event type),
    sorted; and how many event types' searches stopped at ``limit`` cliques."""
    by_type: Dict[str, List[Entity]] = {}
    for entity in sorted(set(entities)):
        by_type.setdefault(split_argument_label(entity.type)[0], []).append(entity)
    link_scores = {(r.head.key, r.tail.key): r.score for r in relations if r.type == EVENT_LINK}
    events, cut = set(), 0
    for event_type, members in by_type.items():
        index = {entity.key: i for i, entity in enumerate(members)}
        neighbours: Dict[int, Set[int]] = {i: set() for i in range(len(members))}
        scores: Dict[Tuple[int, int], float] = {}
        for (head, tail), score in link_scores.items():
            a, b = index.get(head), index.get(tail)
            if a is not None and b is not None and a != b:
                neighbours[a].add(b)
                neighbours[b].add(a)
                pair = (min(a, b), max(a, b))
                scores[pair] = max(score, scores.get(pair, score))
        cliques, stopped = maximal_cliques(neighbours, limit)
        cut += stopped
        for clique in cliques:
            nodes = sorted(clique)
            score = min([members[i].score for i in nodes] + [scores[(a, b)] for a in nodes for b in nodes if a < b])
            arguments = [Argument(members[i].start, members[i].end, split_argument_label(members[i].type)[1],
                                  members[i].score) for i in nodes]
            triggers = [a for a in arguments if a.role == TRIGGER] or [None]
            others = tuple(sorted(a for a in arguments if a.role != TRIGGER))
            events.update(Event(event_type, trigger, others, score) for trigger in triggers)
    return tuple(sorted(events, key=lambda e: (e.key, -e.score))), cut
