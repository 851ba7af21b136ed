"""Files that say what they annotate: ``data.train`` (and ``dev``, ``test``) as a list of entries

    train:
      - path: cluener/train.json                   # annotates every type (a plain path says the same)
      - {path: msra/train.txt, format: chars, types: [name, address, organization],
         rename: {PER: name, LOC: address, ORG: organization}}

``types``: the model's types the file annotates (after ``rename``); its texts teach nothing about
the others.  ``rename``: the file's type -> the model's.  A record read from an entry with ``types``
carries them (``Record.types``): training leaves the other types' planes out of its loss, and
evaluation scores it on its types only, per entry as well as overall."""
import dataclasses
import difflib
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from ..errors import ConfigError, DataError
from ..spans import Record
from .readers import FORMAT_ALIASES, FORMATS

log = logging.getLogger("globalpointer")


@dataclass
class DataSource:
    path: str
    format: str = ""  # "": data.format
    types: List[str] = field(default_factory=list)  # []: every type
    rename: Dict[str, str] = field(default_factory=dict)  # the file's type -> the model's

    @property
    def name(self) -> str:
        return f"{self.path} [{', '.join(self.types)}]" if self.types else self.path

    def as_entry(self) -> Dict[str, Any]:
        """The entry as a config file writes it: the keys it sets."""
        return {key: value for key, value in dataclasses.asdict(self).items() if value}

    def declare(self, records: Sequence[Record]) -> List[Record]:
        """The records renamed onto the model's types and marked with the types they annotate; an
        entity of a type the entry does not declare is an error naming the record and the entry."""
        declared = set(self.types)
        out = []
        for record in records:
            entities = [e._replace(type=self.rename.get(e.type, e.type)) for e in record.entities]
            for entity in entities if declared else ():
                if entity.type not in declared:
                    raise DataError(f"{record.source}: entity type {entity.type!r}, which the data entry {self.path} "
                                    f"does not declare (types: {', '.join(self.types)}); add it to the entry's types, "
                                    f"rename it onto one of them (rename: {{{entity.type}: ...}}) or remove those "
                                    f"entities")
            out.append(record._replace(entities=entities, types=tuple(self.types) or None, origin=self.name))
        counts = Counter(e.type for r in out for e in r.entities)
        log.info("%s: %d texts; %s", self.name, len(out), ", ".join(f"{t} {counts[t]}" for t in sorted(counts)) or
                 "no entities")
        return out


Sources = Union[str, List[DataSource]]
ENTRY_KEYS = ("path", "format", "types", "rename")


def parse_sources(value: Any, name: str) -> Sources:
    """A config's ``data.train`` (``dev``, ``test``): a path, or a list of entries (paths or mappings
    of ENTRY_KEYS); errors name the key and the entry."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{name}: expected a path or a non-empty list of entries ({{path, format, types, rename}}), "
                          f"got {value!r}")
    entries = [_entry(item, f"{name}[{index}]") for index, item in enumerate(value)]
    first: Dict[str, int] = {}
    for index, entry in enumerate(entries):
        where = first.setdefault(os.path.normpath(entry.path), index)
        if where != index:  # its texts would be read, trained on and scored twice
            raise ConfigError(f"{name}[{index}]: {entry.path} is {name}[{where}] again; list each file once (one entry "
                              f"can declare several types)")
    return entries


def _entry(item: Any, name: str) -> DataSource:
    if isinstance(item, DataSource):
        return item
    if isinstance(item, str):
        item = {"path": item}
    if not isinstance(item, dict):
        raise ConfigError(f"{name}: expected a path or a mapping with path, format, types, rename; got {item!r}")
    for key in item:
        if key not in ENTRY_KEYS:
            close = difflib.get_close_matches(str(key), ENTRY_KEYS, n=1)
            raise ConfigError(f"{name}: unknown key {key!r}" + (f"; did you mean {close[0]!r}?" if close else
                                                                  f"; an entry has {', '.join(ENTRY_KEYS)}"))
    if item.get("types", None) == []:  # read as written, it would annotate no type at all
        raise ConfigError(f"{name}.types: [] names no type; leave types out for a file that annotates every type, "
                          f"or list the types it annotates")
    path, format_, types, rename = (item.get("path"), item.get("format") or "", item.get("types") or [],
                                    item.get("rename") or {})
    if not isinstance(path, str) or not path.strip():
        raise ConfigError(f"{name}: an entry needs a path (a file), got {path!r}")
    format_ = FORMAT_ALIASES.get(format_, format_) if isinstance(format_, str) else format_
    if format_ and format_ not in FORMATS:
        raise ConfigError(f"{name}.format: {format_!r} is not one of {', '.join(FORMATS)}")
    if not isinstance(types, list) or not all(isinstance(t, str) and t for t in types) or len(set(types)) < len(types):
        raise ConfigError(f"{name}.types: expected a list of distinct type names, got {types!r}")
    if not isinstance(rename, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                               for k, v in rename.items()):
        raise ConfigError(f"{name}.rename: expected a mapping of the file's types onto the model's, got {rename!r}")
    stray = sorted(set(rename.values()) - set(types)) if types else []
    if stray:
        raise ConfigError(f"{name}.rename: renames onto {', '.join(stray)}, which its types do not list "
                          f"({', '.join(types)}); add them to types")
    return DataSource(path, format_, list(types), dict(rename))


def source_entries(value: Sources) -> List[DataSource]:
    """A ``data.*`` value as entries: a plain path is an entry of every type."""
    if not value:
        return []
    return [DataSource(value)] if isinstance(value, str) else list(value)


def source_paths(value: Sources) -> List[str]:
    """The files a ``data.*`` value reads."""
    return [source.path for source in source_entries(value)]


def declared_types(records: Sequence[Record]) -> Optional[List[str]]:
    """The types the records' entries declare, when any of them declares some; else None."""
    declared = {t for r in records if r.types for t in r.types}
    return sorted(declared) if declared else None


def annotated_planes(records: Sequence[Record], labels: Sequence[str]) -> Optional[np.ndarray]:
    """``[records, types]``: 1 where a record's file annotates the type, 0 where it does not; None when
    every record annotates every type (the loss then runs as it always has)."""
    if declared_types(records) is None:
        return None
    index = {label: position for position, label in enumerate(labels)}
    planes = np.ones((len(records), len(labels)), dtype="float32")
    for row, record in enumerate(records):
        if record.types:
            planes[row] = 0
            planes[row, [index[t] for t in record.types]] = 1
    return planes


def sources_name(value: Sources, key: str) -> str:
    """How messages name a ``data.*`` value: its file, or the key of its entries."""
    return value if isinstance(value, str) else f"{key} ({len(value)} entries)"


def check_declared(value: Sources, labels: Sequence[str], name: str) -> None:
    """Every type an entry declares is one of the model's ``labels``."""
    for index, source in enumerate(value if isinstance(value, list) else []):
        unknown = [t for t in source.types if t not in labels]
        if unknown:
            raise ConfigError(f"{name}[{index}] ({source.path}): types {', '.join(unknown)} are not among the model's "
                              f"({', '.join(labels)}); list them in data.labels, or rename them onto its types")
