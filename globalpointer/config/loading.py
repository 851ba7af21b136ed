"""A run configuration read: defaults <- a saved run's config <- a YAML file <- ``--set`` overrides, every
value checked against the schema, relative paths read by one rule, and the keys of earlier versions
read as what they meant."""
import dataclasses
import difflib
import logging
import math
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import yaml

from ..data.sources import DataSource, Sources, parse_sources, source_paths
from ..errors import ConfigError, quoted
from ..model.decode import sigmoid
from .schema import AUTO, INT64, RUN_TIME_KEYS, NumberOrAuto, RunConfig, field_choices, validate
from .writing import to_dict

log = logging.getLogger(__name__)
# an earlier name -> the key's name now: files that use the earlier one still load, with a warning
RENAMED = {"train.eval_batch_size": "inference.batch_size", "model.calibrated_thresholds": "model.use_calibration",
           "inference.compile_from": "inference.compile_from_lines"}
# A removed key -> (the value that is what runs now, why it went): a file that sets the first (a model's
# config.yaml of an earlier version lists every key) loads without it; any other value is refused
REMOVED = {
    "model.lexicon": ("none", "jieba's lexicon features were level with the encoder alone (+0.16 F1 on 1,000 "
                              "CLUENER texts, within 3 seeds' spread) and cost 2% of prediction"),
    "model.context": ("none", "the context layers lost or were level (-0.06 and -1.15 F1) and cost 17-23% of "
                              "prediction"),
    "model.context_layers": (1, "it counted model.context's layers, which were removed"),
    "train.ema_decay": (0.0, "the average of the weights lost F1 on nearly every seed of the entity sets and "
                             "was level on relations (CoNLL04 test, 3 seeds)"),
    "train.rdrop_alpha": (0.0, "R-Drop lost F1 on nearly every seed"),
    "model.pair_rope": (True, "RoPE in the pair heads was ahead on every seed of CoNLL04 (+4.46 test strict "
                               "triple F1, 3 seeds) and of the DuIE subset (2 seeds); the pair heads have it with "
                               "model.rope"),
    "inference.pack_texts": (True, "a row per window was level with short windows side by side (0.97-1.04x), "
                                   "which the model does wherever it can"),
}
# Where "a model trained with it: train it again" is not the whole answer
REMOVED_FIXES = {"model.pair_rope": "from an entity model's config.yaml too, which has no pair heads; a relation "
                                    "model trained with it: train it again"}
# A removed value of a key -> why it went: a file that sets it is refused in one line
REMOVED_CHOICES = {
    ("model.head", name): "the BIO token-classification baselines were 5-15 F1 behind GlobalPointer on CLUENER "
                          "and MSRA and cannot give nested entities; model.head=global_pointer (the default)"
    for name in ("softmax_tagger", "crf_tagger")
}


def _fields(cls) -> Dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def _where(path: List[str]) -> str:
    return ".".join(path)


def _key_error(path: List[str], message: str) -> ConfigError:
    """A ConfigError about the key at ``path``, which it carries (``key``) for the caller to say where
    the value came from: the file, or --set."""
    error = ConfigError(message)
    error.key = _where(path)
    return error


def _coerce(value: Any, annotation, path: List[str]):
    """Check and convert one value to the field's type; YAML says `3e-5` is a string, we accept it."""
    name = _where(path)
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise _key_error(path, f"{name}: expected true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            if abs(value) > INT64:
                raise _key_error(path, f"{name}: {value} is beyond what a 64-bit whole number holds")
            return value
        raise _key_error(path, f"{name}: expected a whole number, got {value!r}")
    if annotation == NumberOrAuto:
        if value == AUTO:
            return AUTO
        try:
            return _coerce(value, float, path)
        except ConfigError as error:
            raise _key_error(path, str(error).replace("expected a number", "expected a number or auto")) from None
    if annotation is float:
        number = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                pass
        if number is None:
            raise _key_error(path, f"{name}: expected a number, got {value!r}")
        if not math.isfinite(number):  # a NaN learning rate or threshold trains or predicts nothing, silently
            raise _key_error(path, f"{name}: expected a finite number, got {value!r}")
        return number
    if annotation is str:
        if isinstance(value, str):
            return value
        if value is None:
            return ""
        raise _key_error(path, f"{name}: expected a string, got {value!r}")
    if annotation == Sources:
        try:
            return parse_sources(value, name)
        except ConfigError as error:
            raise _key_error(path, str(error)) from None
    if annotation == List[str]:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
        raise _key_error(path, f"{name}: expected a list of strings, got {value!r}")
    raise AssertionError(f"unsupported config type {annotation} for {name}")


def _build(cls, values: Dict[str, Any], path: List[str]):
    if not isinstance(values, dict):
        raise _key_error(path, f"{_where(path) or 'config'}: expected a mapping of keys, got {values!r}")
    known = _fields(cls)
    kwargs = {}
    for key, value in values.items():
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f"; did you mean {_where(path + [close[0]])!r}?" if close else \
                f"; valid keys here: {', '.join(known)}"
            raise _key_error(path + [str(key)], f"unknown config key {_where(path + [str(key)])!r}{hint}")
        f = known[key]
        if dataclasses.is_dataclass(f.type):
            kwargs[key] = _build(f.type, value, path + [key])
        else:
            kwargs[key] = _coerce(value, f.type, path + [key])
            if isinstance(kwargs[key], str):
                kwargs[key] = f.metadata["aliases"].get(kwargs[key], kwargs[key])
            choices, bounds = field_choices(f), f.metadata.get("bounds")
            if choices and kwargs[key] not in choices:
                raise _key_error(path + [key], f"{_where(path + [key])}: {kwargs[key]!r} is not one of "
                                               f"{', '.join(choices)}")
            if bounds and kwargs[key] != AUTO and not bounds.holds(kwargs[key]):
                raise _key_error(path + [key], f"{_where(path + [key])} must be {bounds}, got {kwargs[key]!r} "
                                               f"({f.metadata['help']})")
    return cls(**kwargs)


def with_overrides(config: RunConfig, overrides: Optional[Sequence["Override"]],
                   overrides_from: Optional[str] = "--set") -> RunConfig:
    """``config`` with ``overrides`` applied and checked, as ``load_config`` applies them to a file."""
    return load_config(base=to_dict(config), overrides=overrides, overrides_from=overrides_from) if overrides \
        else config


# An override: "KEY=VALUE" as --set writes it (the value read as YAML, as in a file), or (KEY, value) as a
# flag or a program gives it: a value, never YAML text to read again (a path "runs/base #2" stays whole)
Override = Union[str, Tuple[str, Any]]


def override_text(item: Override) -> str:
    """How messages name an override: as the user wrote it, or KEY=VALUE."""
    return item if isinstance(item, str) else f"{item[0]}={item[1]}"


def override_key(item: Override) -> str:
    """The dotted key an override sets."""
    return ".".join(_parse_override(item)[0])


def _parse_override(item: Override):
    if not isinstance(item, str):
        return item[0].strip().split("."), item[1]
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set train.lr=3e-5")
    key, raw = item.split("=", 1)
    try:
        value = yaml.load(raw, Loader=UniqueKeyLoader) if raw.strip() else ""
    except DuplicateKey as error:  # as in a file: YAML would keep the last silently
        raise ConfigError(f"--set {item}: {error.key!r} is written twice; write it once") from None
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def _set_nested(tree: Dict[str, Any], keys: List[str], value):
    node = tree
    for depth, key in enumerate(keys[:-1]):
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"--set {'.'.join(keys)}: {'.'.join(keys[:depth + 1])} is not a section")
        node = child
    node[keys[-1]] = value


class DuplicateKey(yaml.YAMLError):
    def __init__(self, key, first, second):
        super().__init__(f"{key!r} is written twice, on lines {first} and {second}: YAML would keep the second and "
                         f"drop the first silently; merge them into one")
        self.key, self.line = key, second


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key written twice in one mapping (at any depth), which YAML
    itself resolves by keeping the last silently; keys brought in by a merge (``<<``) may be
    overridden, as YAML means them to be."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: Dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                if isinstance(key, (str, int, float, bool)) and key in seen:
                    raise DuplicateKey(key, seen[key], line)
                seen.setdefault(key, line)
        return super().construct_mapping(node, deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, UniqueKeyLoader.construct_mapping)

# The values a config may hold once its aliases are expanded: a run config holds a few hundred; a few
# hundred bytes of nested aliases (a "billion laughs") expand to billions, each printed or checked in turn
MAX_YAML_VALUES = 100_000


def expanded_values(node, sizes: Dict[int, int]) -> int:
    """How many values ``node`` holds with every alias expanded, counted once per node (``sizes``)."""
    if id(node) not in sizes:
        children = node.value if isinstance(node, yaml.SequenceNode) else \
            [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else []
        sizes[id(node)] = 1 + sum(expanded_values(child, sizes) for child in children)
    return sizes[id(node)]


def _load_yaml(handle, path: str):
    loader = UniqueKeyLoader(handle)
    try:
        node = loader.get_single_node()
        if node is not None and expanded_values(node, {}) > MAX_YAML_VALUES:
            raise ConfigError(f"{path}: its aliases (*name) expand to more than {MAX_YAML_VALUES:,} values, which no "
                              f"config holds; write the values out, or fix the aliases")
        return loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()


def read_yaml(path: str) -> Dict[str, Any]:
    if not os.path.isfile(path):
        raise ConfigError(f"config file not found: {path}")
    with open(path, encoding="utf-8") as handle:
        try:
            tree = _load_yaml(handle, path)
        except DuplicateKey as error:
            raise ConfigError(f"{path}:{error.line}: {error}") from None
        except UnicodeDecodeError as error:
            raise ConfigError(f"{path}: not UTF-8 text ({error.reason}); "
                              f"save the config as UTF-8") from None
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
            problem = getattr(error, "problem", None) or str(error)
            raise ConfigError(f"{where}: YAML syntax error: {problem}") from None
    if tree is None:
        return {}
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top, got {type(tree).__name__}")
    return tree


# The keys that name files and folders: a relative one in a config file is read from the file's folder (a
# config works from wherever it is run); one given with --set, from the current folder, as any argument
PATH_KEYS = ("data.train", "data.dev", "data.test", "train.init_from", "output_dir")
PATH_RULE = "a relative path in a config file is read from that file's folder; with --set, from the current folder"


def resolve_paths(tree: Dict[str, Any], folder: str) -> None:
    """The relative paths of a config file's ``tree`` (``key_paths``, and ``model.encoder`` when it names a
    folder beside the file) made absolute against ``folder``, the file's."""
    for dotted in PATH_KEYS:
        *sections, key = dotted.split(".")
        node = tree.get(sections[0]) if sections else tree
        if isinstance(node, dict) and key in node:
            node[key] = key_paths(dotted, node[key], folder)
    model = tree.get("model")
    encoder = model.get("encoder") if isinstance(model, dict) else None
    if isinstance(encoder, str) and encoder and not os.path.isabs(encoder) and \
            os.path.isdir(os.path.join(folder, encoder)):
        model["encoder"] = os.path.normpath(os.path.join(folder, encoder))


def key_paths(dotted: str, value: Any, folder: str) -> Any:
    """Key ``dotted``'s value with its relative paths read from ``folder``: a PATH_KEYS key's."""
    if dotted in PATH_KEYS:
        return absolute_paths(value, folder)
    return value


def absolute_paths(value: Any, folder: str) -> Any:
    """The value of a PATH_KEYS key with its relative paths (a path, or data entries' paths) read from
    ``folder``; anything else as it is (building the config judges it)."""
    def absolute(path):
        return os.path.normpath(os.path.join(folder, os.path.expanduser(path))) if path.strip() else path

    if isinstance(value, str):
        return absolute(value)
    if isinstance(value, list):  # data entries
        return [absolute_paths(entry, folder) for entry in value]
    if isinstance(value, DataSource):
        return dataclasses.replace(value, path=absolute(value.path))
    if isinstance(value, dict) and isinstance(value.get("path"), str):  # an entry as a file writes it
        return {**value, "path": absolute(value["path"])}
    return value


# Keys added, or whose default changed, after runs were first saved: a saved config without one was
# trained as this value says (read back, a run of an earlier version resumes as it began).
BEFORE_THE_KEY = {("train", "boundary_smoothing"): 0.0, ("train", "max_steps"): 0,
                  ("train", "large_training_set"): 0, ("model", "encoder"): "m3e-small"}
# Two keys that each said where a training file is large (smoothing off above the first, FGM by auto above
# the second), now one: train.large_training_set.  0 meant "any size" for both, which is "no file is
# large" for smoothing but "every file" for FGM: train.adversarial fgm says the latter now
MERGED_INTO_LARGE_SET = ("boundary_smoothing_max_texts", "adversarial_min_texts")


def load_config(path: Optional[str] = None, overrides: Optional[Sequence[Override]] = None,
                base: Optional[Dict[str, Any]] = None, overrides_from: Optional[str] = "--set",
                saved: bool = False) -> RunConfig:
    """Defaults <- ``base`` (e.g. a checkpoint's config) <- YAML file <- ``--set`` overrides.  An error in
    an override's value names ``overrides_from`` and the item (None: the key alone, for callers that
    say where it came from themselves).  Relative paths in a user's file are read from its folder
    (``resolve_paths``); a file this project ``saved`` (a run's or a checkpoint's) keeps them as
    written, its run-time settings (``RUN_TIME_KEYS``, which older versions saved) are left to
    their defaults and ``overrides``, and a key it predates (``BEFORE_THE_KEY``) has its earlier value."""
    tree: Dict[str, Any] = {}
    file_tree = read_yaml(path) if path else {}
    _merge_large_set(file_tree, f" (in {path})" if path else "", warn=not saved)  # before BEFORE_THE_KEY sets it
    if path and not saved:
        resolve_paths(file_tree, os.path.dirname(os.path.abspath(path)))
    for key in RUN_TIME_KEYS if saved else ():
        file_tree.pop(key, None)
    for (section, key), value in BEFORE_THE_KEY.items() if saved else ():
        if isinstance(file_tree.get(section), dict):
            file_tree[section].setdefault(key, value)
    for layer in (base or {}, file_tree):
        for section, values in layer.items():
            if isinstance(values, dict) and isinstance(tree.get(section), dict):
                tree[section] = {**tree[section], **values}
            else:
                tree[section] = values
    set_by: Dict[str, str] = {}  # dotted key -> the --set item that gave its value
    for item in overrides or []:
        keys, value = _parse_override(item)
        if keys == ["model", "threshold"]:
            raise ConfigError(f"--set {override_text(item)}: {min_score_hint(value)}")
        value = key_paths(".".join(keys), value, os.getcwd())  # PATH_RULE: a saved config means the same
        _set_nested(tree, keys, value)
        set_by[".".join(keys)] = override_text(item)
    where = f" (in {path})" if path else ""
    _move_renamed(tree, where)
    _merge_large_set(tree, where)
    _drop_removed(tree, where)
    _convert_logit_threshold(tree, where)
    try:
        config = _build(RunConfig, tree, [])
    except ConfigError as error:
        key = getattr(error, "key", "")
        given = next((item for name, item in set_by.items() if key == name or key.startswith(name + ".")), None)
        if given is None:
            raise ConfigError(f"{error}{where}") from None
        raise ConfigError(f"{overrides_from} {given}: {error}" if overrides_from else str(error)) from None
    validate(config)
    return config


def _move_renamed(tree: Dict[str, Any], where: str) -> None:
    for old, new in RENAMED.items():
        (section, key), (new_section, new_key) = old.split("."), new.split(".")
        values = tree.get(section)
        if isinstance(values, dict) and key in values:
            value = values.pop(key)
            if not isinstance(tree.setdefault(new_section, {}), dict):
                continue  # the new section is not a mapping: building the config says so
            tree[new_section].setdefault(new_key, value)
            log.warning("%s is now %s%s: read as %s=%s; rename the key", old, new, where, new,
                        tree[new_section][new_key])


def _merge_large_set(tree: Dict[str, Any], where: str, warn: bool = True) -> None:
    """MERGED_INTO_LARGE_SET's keys read as train.large_training_set (said, with ``warn``: a user's file
    or --set, not a model's config of an earlier version); two different sizes are refused."""
    train = tree.get("train")
    if not isinstance(train, dict) or not any(key in train for key in MERGED_INTO_LARGE_SET):
        return
    given = {key: train.pop(key) for key in MERGED_INTO_LARGE_SET if key in train}
    if given.get("adversarial_min_texts") == 0:
        if train.get("adversarial", "auto") == "auto":
            raise ConfigError(f"train.adversarial_min_texts 0 (FGM at any size) is now train.adversarial: fgm{where}; "
                              f"set that, and remove the key")
        del given["adversarial_min_texts"]  # FGM set by hand: the size decided nothing
    values = set(map(str, given.values())) | ({str(train["large_training_set"])} if "large_training_set" in train
                                              else set())
    if len(values) > 1:
        raise ConfigError(f"{' and '.join(f'train.{key} ({value})' for key, value in given.items())} are now one key, "
                          f"train.large_training_set{where}: set it to one value, and remove them")
    for key, value in given.items():
        if warn:
            log.warning("train.%s is now train.large_training_set%s: read as train.large_training_set=%s; rename "
                        "the key", key, where, value)
        train.setdefault("large_training_set", value)


def _drop_removed(tree: Dict[str, Any], where: str) -> None:
    for dotted, (now, why) in REMOVED.items():
        section, key = dotted.split(".")
        values = tree.get(section)
        if isinstance(values, dict) and key in values:
            value = values.pop(key)
            if value != now and not (isinstance(value, str) and isinstance(now, str) and value.strip() == now):
                # an inference key never shaped the weights: a model's config.yaml just loses the key
                model = "from a model's config.yaml too" if section == "inference" else \
                    REMOVED_FIXES.get(dotted, "a model trained with it: train it again")
                raise ConfigError(f"{dotted} was removed{where}: {why} (docs/results.md); this one says "
                                  f"{quoted(value)}: remove the key ({model})")
    for (dotted, value), why in REMOVED_CHOICES.items():
        section, key = dotted.split(".")
        values = tree.get(section)
        if isinstance(values, dict) and values.get(key) == value:
            raise ConfigError(f"{dotted}={value} was removed{where}: {why} (docs/results.md); a model trained "
                              f"with it: train it again")


def _probability(logit) -> float:
    """The sigmoid of a model.threshold value; ValueError when it is no number."""
    try:
        return float(sigmoid(float(logit)))
    except TypeError:
        raise ValueError(logit) from None


def min_score_hint(logit) -> str:
    """What to write instead of model.threshold=``logit``."""
    try:
        same = f": model.threshold={logit} is model.min_score={_probability(logit):.6g}"
    except ValueError:
        same = ""
    return f"model.threshold (a logit) is now model.min_score, a probability between 0 and 1{same}"


def _convert_logit_threshold(tree: Dict[str, Any], where: str) -> None:
    """Files written before model.min_score (checkpoints, configs) say model.threshold, a logit:
    read as the same cut-off in probability, so they predict exactly what they did."""
    model = tree.get("model")
    if not isinstance(model, dict) or "threshold" not in model:
        return
    logit = model.pop("threshold")
    try:
        model.setdefault("min_score", _probability(logit))
    except ValueError:
        raise ConfigError(f"model.threshold{where}: expected a number, got {logit!r}; the key is now "
                          f"model.min_score, a probability between 0 and 1") from None
    log.warning("model.threshold (a logit) is now model.min_score, a probability%s: read threshold %s as "
                "min_score %.6g; rename the key", where, logit, model["min_score"])


def require_files(config: RunConfig, keys: List[str]) -> None:
    """Fail before any work when a data file named in the config is missing."""
    for key in keys:
        if not getattr(config.data, key):
            raise ConfigError(f"data.{key} is empty: name a file in the config or with --set data.{key}=PATH")
    for key in ("train", "dev", "test"):
        for path in source_paths(getattr(config.data, key)):
            if not os.path.isfile(path):
                from ..data.public_sets import fetch_hint

                hint = fetch_hint(path) or f" ({PATH_RULE})"
                raise ConfigError(f"data.{key}: file not found: {os.path.abspath(path)}{hint}")
