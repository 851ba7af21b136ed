"""A run configuration written: as plain data (a file's tree), as dotted keys (``--set``'s form), and
as YAML with every key's help (``--print-config``, a run's config.yaml)."""
import dataclasses
from typing import Any, Dict, List, Sequence

import yaml

from ..data.sources import DataSource
from .schema import RunConfig, field_choices


def to_dict(config: RunConfig) -> Dict[str, Any]:
    """The config as plain data, as a file would hold it: ``load_config(base=to_dict(config))`` is
    ``config`` again."""
    tree = dataclasses.asdict(config)
    for key in ("train", "dev", "test"):
        value = getattr(config.data, key)
        if isinstance(value, list):
            tree["data"][key] = [source.as_entry() for source in value]
    return tree


def flatten_config(config) -> Dict[str, Any]:
    """``{"train.lr": 5e-05, ...}``: every key by its dotted name, as ``--set`` writes it."""
    flat: Dict[str, Any] = {}

    def walk(node, prefix):
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            else:
                flat[prefix + key] = value

    walk(to_dict(config), "")
    return flat


def yaml_scalar(value) -> str:
    """One value as YAML on one line, as a config file or ``--set`` writes it (data entries as mappings)."""
    if isinstance(value, list):
        value = [item.as_entry() if isinstance(item, DataSource) else item for item in value]
    return yaml.safe_dump(value, default_flow_style=True, allow_unicode=True).strip().removesuffix("\n...")


def dump_config(config: RunConfig, leave_out: Sequence[str] = ()) -> str:
    """YAML of every key (but the sections ``leave_out``), each with its help as a comment (what
    --print-config shows)."""
    lines: List[str] = []

    def emit(obj, indent: str):
        for f in dataclasses.fields(obj):
            if f.name in leave_out and obj is config:
                continue
            value = getattr(obj, f.name)
            help_text = f.metadata.get("help", "")
            choices, bounds = field_choices(f), f.metadata.get("bounds")
            if choices:
                help_text += f" [{'|'.join(choices)}]"
            if bounds:
                help_text += f" [{bounds}]"
            if dataclasses.is_dataclass(value):
                lines.append(f"{indent}{f.name}:  # {help_text}")
                emit(value, indent + "  ")
            else:
                lines.append(f"{indent}{f.name}: {yaml_scalar(value)}  # {help_text}")

    emit(config, "")
    return "\n".join(lines) + "\n"
