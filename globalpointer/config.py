"""The run configuration: typed sections with help text, YAML in and out, ``--set`` overrides.

Every key has a visible default (``--print-config`` shows them all with their help), an unknown
key is an error that names the closest valid one, and values are type-checked before any work.
"""
import dataclasses
import difflib
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import yaml

from .data.readers import FORMAT_ALIASES, FORMATS
from .data.sources import DataSource, Sources, parse_sources, source_paths
from .errors import ConfigError
from .model.decode import sigmoid

log = logging.getLogger(__name__)
# an earlier name -> the key's name now: files that use the earlier one still load, with a warning
RENAMED = {"train.eval_batch_size": "inference.batch_size", "model.calibrated_thresholds": "model.use_calibration",
           "inference.compile_from": "inference.compile_from_lines"}
MAX_BATCH_WAIT_MS = 1000  # waiting longer for other requests to share a forward pass only adds latency


class Bounds(NamedTuple):
    """The range of a number key: ``low`` and ``high`` (None: unbounded), each included or not."""
    low: Optional[float] = None
    high: Optional[float] = None
    low_included: bool = True
    high_included: bool = True

    def holds(self, value) -> bool:
        return ((self.low is None or value > self.low or (self.low_included and value == self.low)) and
                (self.high is None or value < self.high or (self.high_included and value == self.high)))

    def __str__(self) -> str:
        def number(x) -> str:
            return str(int(x)) if float(x).is_integer() else f"{x:g}"

        low = "" if self.low is None else f"{'>=' if self.low_included else '>'} {number(self.low)}"
        high = "" if self.high is None else f"{'<=' if self.high_included else '<'} {number(self.high)}"
        return " and ".join(part for part in (low, high) if part)


POSITIVE = Bounds(0, None, low_included=False)
NON_NEGATIVE = Bounds(0)
FRACTION = Bounds(0, 1, high_included=False)  # [0, 1)
SEED_LIMIT = 2 ** 32 - 1  # numpy's seeds are 32-bit
INT64 = 2 ** 63 - 1  # what every whole number reaches Paddle and numpy as


def _opt(default, help, choices=None, bounds: Optional[Bounds] = None, aliases: Optional[Dict[str, str]] = None):
    """A key with its default, help text and allowed values (a tuple, or a function returning one
    when the values come from a registry that is not imported before it is needed, and ``aliases``:
    other names read as one of them), or for a number its ``bounds``."""
    metadata = {"help": help, "choices": choices, "bounds": bounds, "aliases": aliases or {}}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def _head_names():
    from .model.heads import HEADS  # imports paddle: only when a head name is checked or printed

    return tuple(HEADS)


def backend_names():
    from .model.backends import BACKENDS  # imports paddle: only when a backend name is checked or printed

    return ("auto", *BACKENDS)


@dataclass
class DataConfig:
    train: Sources = _opt("", "training file (any supported format), or a list of entries {path, format, types, "
                              "rename}: a file that annotates only its types teaches nothing about the others "
                              "(docs/data-formats.md#files-labelled-for-some-types)")
    dev: Sources = _opt("", "dev file (or entries, as data.train) for evaluation during training; empty: no "
                            "evaluation, the last model is kept")
    test: Sources = _opt("", "test file (or entries) evaluated once at the end with the best model; empty: none")
    format: str = _opt("auto", "file format; auto detects it per file (bio, bioes, bmes, iob, iob2 and char are "
                               "chars; conll2003 is conll; json is jsonl)", FORMATS, aliases=FORMAT_ALIASES)
    labels: List[str] = _opt([], "entity types in a fixed order; empty: every type seen in the training file, sorted")
    limit: int = _opt(0, "read only the first N records of each file (0: all); for quick runs", bounds=NON_NEGATIVE)
    max_length: int = _opt(128, "tokens per window including [CLS] and [SEP]; longer texts become sliding windows "
                                    "(at least 3: room for text besides [CLS] and [SEP])", bounds=Bounds(3))
    window_overlap: int = _opt(32, "tokens shared by consecutive windows of a long text", bounds=NON_NEGATIVE)
    tokenization: str = _opt("auto", "char: one token per character (Chinese), subword: the tokenizer's own pieces, "
                             "auto: char for a Chinese vocabulary, else subword", ("auto", "char", "subword"))
    on_error: str = _opt("raise", "a malformed record stops the run (raise) or is skipped and counted (skip); "
                         "repair: a B/I/M/E tag that continues no entity opens one (conlleval), counted, every "
                         "sentence kept", ("raise", "skip", "repair"))

    @property
    def reading(self) -> Dict[str, Any]:
        """How every file of the run is read: ``read_records``'s keyword arguments."""
        return {"format": self.format, "on_error": self.on_error, "limit": self.limit}


@dataclass
class ModelConfig:
    encoder: str = _opt("m3e-small", "a bundled encoder (m3e-small, all-MiniLM-L6-v2), a local directory "
                        "(PaddleNLP or Hugging Face format), a PaddleNLP model name, or 'tiny' (random, tests only)")
    head: str = _opt("global_pointer", "span head, or a BIO token-classification baseline (softmax or CRF)",
                     _head_names)
    head_size: int = _opt(64, "size of the per-type query and key vectors (span heads)", bounds=POSITIVE)
    context: str = _opt("none", "layers between the encoder and the head, trained from scratch at train.head_lr: "
                        "transformer (attending within each text) or bilstm (one text per row)",
                        choices=("none", "transformer", "bilstm"))
    context_layers: int = _opt(1, "number of model.context layers", bounds=POSITIVE)
    lexicon: str = _opt("none", "Chinese lexicon features: each token learns what dictionary words it begins, "
                        "continues or ends (after SoftLexicon); jieba (its dictionary), a word list's path (a word "
                        "a line), or none (the default: jieba's added +0.16 F1 on 1,000 CLUENER texts, within 3 seeds' "
                        "spread, docs/results.md).  The model directory keeps the words")
    rope: bool = _opt(True, "rotary position embedding on queries and keys")
    tril_mask: bool = _opt(True, "never score spans whose end is before their start")
    loss: str = _opt("sparse", "span heads: sparse takes the gold indices; dense a types x L x L label tensor",
                     ("sparse", "dense"))
    decode: str = _opt("auto", "nested: every span scored above model.min_score; flat: greedy non-overlapping by "
                       "score; auto: flat for a model none of whose training texts had overlapping entities "
                       "(recorded in the checkpoint), else nested", ("auto", "nested", "flat"))
    min_score: float = _opt(0.5, "span heads: a span is predicted when its score (the probability shown with every "
                            "entity, the sigmoid of its logit) is above this; between 0 and 1",
                            bounds=Bounds(0, 1, low_included=False, high_included=False))
    use_calibration: bool = _opt(True, "span heads: use the per-type minimum scores of the model directory's "
                                 "thresholds.json (globalpointer calibrate) when it has one; "
                                 "false: model.min_score for every type")
    dropout: float = _opt(0.1, "dropout on the encoder output before the head", bounds=FRACTION)


@dataclass
class TrainConfig:
    init_from: str = _opt("", "a trained model (RUN/best) to start from: its encoder, head weights and types, in "
                              "their order; types of data.labels (or of the data) it lacks are added after them "
                              "with fresh head rows; empty: start from model.encoder")
    epochs: int = _opt(12, "passes over the training data at most: with a dev file, training stops after "
                            "train.patience evaluations without a better dev F1 and keeps the best (the best "
                            "epoch was 6 to 11 on 1,000-text slices, docs/results.md)", bounds=POSITIVE)
    batch_size: int = _opt(16, "windows per optimizer step on each device, before accumulation", bounds=POSITIVE)
    lr: float = _opt(3e-4, "peak learning rate of the encoder's top layer (train.layer_lr_decay below it): "
                           "ELECTRA-Small's rate for small encoders; with the decay and training length by dev "
                           "F1 the strongest recipe on 1,000-text slices (docs/results.md)", bounds=NON_NEGATIVE)
    head_lr: float = _opt(1e-3, "peak learning rate of the head (new weights learn faster than pretrained ones)",
                          bounds=NON_NEGATIVE)
    warmup_ratio: float = _opt(0.1, "fraction of the steps with a linear warmup; then linear decay to 0",
                               bounds=FRACTION)
    weight_decay: float = _opt(0.01, "AdamW weight decay (not on biases and norms)", bounds=NON_NEGATIVE)
    max_grad_norm: float = _opt(1.0, "clip the global gradient norm to this (0: no clipping)", bounds=NON_NEGATIVE)
    grad_accum_steps: int = _opt(1, "batches whose gradients are summed before one optimizer step", bounds=POSITIVE)
    amp: str = _opt("none", "mixed precision for the encoder on GPU (the head and loss stay float32); "
                    "ignored with a warning on CPU", ("none", "float16", "bfloat16"))
    seed: int = _opt(42, "seed for initialisation, dropout and data order", bounds=Bounds(0, SEED_LIMIT))
    eval_every: int = _opt(0, "evaluate on dev every N optimizer steps (0: at the end of every epoch)",
                           bounds=NON_NEGATIVE)
    patience: int = _opt(2, "stop after this many evaluations without a better dev F1 (0: never): the length "
                              "of training chosen by the dev set", bounds=NON_NEGATIVE)
    log_every: int = _opt(10, "update the progress bar's loss every N optimizer steps", bounds=POSITIVE)
    adversarial: str = _opt("none", "fgm: adversarial training on the word embeddings (one more forward and "
                            "backward per batch)", ("none", "fgm"))
    adversarial_epsilon: float = _opt(1.0, "fgm: length of the step on the word embeddings along their gradient",
                                      bounds=POSITIVE)
    ema_decay: float = _opt(0.0, "exponential moving average of the weights, evaluated and saved as the best "
                            "model (e.g. 0.999); 0: off", bounds=FRACTION)
    layer_lr_decay: float = _opt(0.8, "encoder layer k below the top learns at lr * layer_lr_decay^k, the "
                                 "embeddings lowest; 1: every layer at lr", bounds=Bounds(0, 1, low_included=False))
    rdrop_alpha: float = _opt(0.0, "R-Drop (span heads): each batch runs twice with different dropout and this "
                              "weighs the symmetric KL between the two passes' span probabilities; 0: off",
                              bounds=NON_NEGATIVE)
    boundary_smoothing: float = _opt(0.2, "boundary smoothing (span heads; a token tagger has no span targets and "
                                          "trains without it; after Zhu and Li, 2022): the spans a "
                                          "token or so off an entity's boundaries (train.boundary_smoothing_size) "
                                          "share this target, softening the loss where annotators disagree: +1.05 "
                                          "and +1.43 F1 on 1,000-text slices of CLUENER and CoNLL-2003, 3 seeds "
                                          "(docs/results.md); 0: off", bounds=FRACTION)
    boundary_smoothing_size: int = _opt(1, "boundary smoothing: the spans that share it are at most this many "
                                           "boundary moves away (start and end together)", bounds=POSITIVE)


@dataclass
class InferenceConfig:
    backend: str = _opt("auto", "what runs prediction and evaluation: dynamic (a checkpoint), paddle-inference, "
                        "onnxruntime or openvino (an export); auto: onnxruntime for an export with model.onnx, else "
                        "paddle-inference for an export, dynamic for a checkpoint", backend_names)
    precision: str = _opt("float32", "float16: exports on a GPU with paddle-inference; int8: an export made with "
                          "--quantize int8, its model.int8.xml on openvino where both are there (auto), else its "
                          "model.int8.onnx on onnxruntime", ("float32", "float16", "int8"))
    tensorrt: bool = _opt(False, "exports on a GPU with paddle-inference: run subgraphs with TensorRT")
    batch_size: int = _opt(64, "rows per forward pass in dev evaluation, evaluation and prediction (a row: one "
                               "window, or several short ones, inference.pack_texts)", bounds=POSITIVE)
    compile_from_lines: int = _opt(500, "predict.py and evaluate.py on a checkpoint with inference.backend auto: from "
                                        "this many input lines, a Paddle Inference program is compiled from the "
                                        "checkpoint (a few seconds, once: it is cached by the checkpoint's content, "
                                        "$GLOBALPOINTER_CACHE) and runs instead of the dynamic graph (2,000 CLUENER "
                                        "texts: 19.4 s instead of 31.2 s); a cached one is used whatever the input; 0: "
                                        "never compile", bounds=NON_NEGATIVE)
    pack_texts: bool = _opt(True, "evaluation and prediction put short windows side by side in rows no longer than "
                                  "the longest window of the call, each still read alone: fewer forward passes, less "
                                  "padding (false: a row per window)")


@dataclass
class ServeConfig:
    host: str = _opt("127.0.0.1", "address the HTTP service listens on (0.0.0.0: every interface)")
    port: int = _opt(8000, "port of the HTTP service", bounds=Bounds(0, 65535))
    max_texts: int = _opt(256, "texts per request; more is answered with 413", bounds=POSITIVE)
    max_text_chars: int = _opt(100000, "characters per text; longer is answered with 413", bounds=POSITIVE)
    max_body_bytes: int = _opt(10_000_000, "bytes per request body; more is answered with 413", bounds=POSITIVE)
    max_header_bytes: int = _opt(65536, "bytes of a request's line, headers and trailers together; more is "
                                        "answered with 431 (no client of these services sends more than a few "
                                        "hundred)", bounds=POSITIVE)
    max_request_tokens: int = _opt(65536, "tokens per request (the texts' tokens, as the model reads them): what "
                                          "one request may cost; more is answered with 413", bounds=POSITIVE)
    batch_wait_ms: float = _opt(5.0, "how long a request waits for others to share its forward passes",
                                bounds=Bounds(0, MAX_BATCH_WAIT_MS))
    batch_texts: int = _opt(128, "texts gathered from concurrent requests into one prediction call", bounds=POSITIVE)
    rows_per_pass: int = _opt(8, "rows of one forward pass in the service: requests take turns pass by pass, so a "
                                  "small request waits for at most one pass of a large one", bounds=POSITIVE)
    shutdown_timeout_s: float = _opt(30.0, "on SIGTERM, how long requests in flight may take to finish",
                                     bounds=NON_NEGATIVE)
    workers: int = _opt(0, "service processes, each with its own copy of the model (about 0.7 GB) and "
                           "micro-batcher, the CPU's cores shared between them (cpu_threads: 0); 0: one per core "
                           "on the CPU (most texts/s from concurrent clients), 1 on a GPU; 1: a lone request "
                           "gets every core (lowest latency when requests come one at a time)", bounds=NON_NEGATIVE)


@dataclass
class RunConfig:
    data: DataConfig = field(default_factory=DataConfig, metadata={"help": "input files and windowing"})
    model: ModelConfig = field(default_factory=ModelConfig, metadata={"help": "encoder, head and decoding"})
    train: TrainConfig = field(default_factory=TrainConfig, metadata={"help": "optimisation"})
    inference: InferenceConfig = field(default_factory=InferenceConfig, metadata={"help": "prediction backends"})
    serve: ServeConfig = field(default_factory=ServeConfig, metadata={"help": "HTTP service (globalpointer serve)"})
    device: str = _opt("auto", "auto: the GPU when Paddle has CUDA and one is visible, else the CPU",
                       ("auto", "cpu", "gpu"))
    cpu_threads: int = _opt(0, "math threads on CPU per process (0: all cores, shared between data-parallel "
                               "processes and between service workers)", bounds=NON_NEGATIVE)
    output_dir: str = _opt("runs/default", "run directory: checkpoints, resolved config, metrics")


# ---------------------------------------------------------------------------------------------

def _choices(f: dataclasses.Field):
    choices = f.metadata.get("choices")
    return choices() if callable(choices) else choices


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
            choices, bounds = _choices(f), f.metadata.get("bounds")
            if choices and kwargs[key] not in choices:
                raise _key_error(path + [key], f"{_where(path + [key])}: {kwargs[key]!r} is not one of "
                                               f"{', '.join(choices)}")
            if bounds and not bounds.holds(kwargs[key]):
                raise _key_error(path + [key], f"{_where(path + [key])} must be {bounds}, got {kwargs[key]!r} "
                                               f"({f.metadata['help']})")
    return cls(**kwargs)


def to_dict(config: RunConfig) -> Dict[str, Any]:
    """The config as plain data, as a file would hold it: ``load_config(base=to_dict(config))`` is
    ``config`` again."""
    tree = dataclasses.asdict(config)
    for key in ("train", "dev", "test"):
        value = getattr(config.data, key)
        if isinstance(value, list):
            tree["data"][key] = [source.as_entry() for source in value]
    return tree


def with_overrides(config: RunConfig, overrides: Optional[Sequence["Override"]],
                   overrides_from: Optional[str] = "--set") -> RunConfig:
    """``config`` with ``overrides`` applied and checked, as ``load_config`` applies them to a file."""
    return load_config(base=to_dict(config), overrides=overrides, overrides_from=overrides_from) if overrides \
        else config


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


def read_yaml(path: str) -> Dict[str, Any]:
    if not os.path.isfile(path):
        raise ConfigError(f"config file not found: {path}")
    with open(path, encoding="utf-8") as handle:
        try:
            tree = yaml.load(handle, Loader=UniqueKeyLoader)
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
    for dotted in PATH_KEYS + ("model.lexicon",):
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
    """Key ``dotted``'s value with its relative paths read from ``folder``: a PATH_KEYS key's, and
    ``model.lexicon``'s when it names a word list (``none`` and ``jieba`` name no file)."""
    if dotted in PATH_KEYS or (dotted == "model.lexicon" and isinstance(value, str) and value.strip()
                               and value not in ("none", "jieba")):
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


# Keys added after runs were first saved whose default changes what a run does: a saved config without
# one was trained as this value says (read back, a run of an earlier version resumes as it began).
BEFORE_THE_KEY = {("train", "boundary_smoothing"): 0.0}


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


def validate(config: RunConfig) -> None:
    """The rules that join several keys (each key's own range is declared with it: ``bounds``)."""
    if config.data.window_overlap >= config.data.max_length - 2:
        raise ConfigError(f"data.window_overlap ({config.data.window_overlap}) must be smaller than "
                          f"data.max_length - 2 ({config.data.max_length - 2}) so that windows advance")
    if config.model.head_size % 2:
        raise ConfigError(f"model.head_size must be even for RoPE, got {config.model.head_size}")
    if config.train.rdrop_alpha:
        from .model.heads import check_span_head

        check_span_head(config.model.head, "train.rdrop_alpha")
    if len(set(config.data.labels)) != len(config.data.labels):
        raise ConfigError(f"data.labels has duplicates: {config.data.labels}")
    if any(not label.strip() for label in config.data.labels):
        raise ConfigError(f"data.labels: every type needs a name, got {config.data.labels}")
    if config.train.lr == 0 and config.train.head_lr == 0:
        raise ConfigError("train.lr and train.head_lr are both 0: nothing would learn; set at least one above 0 "
                          "(lr 0 alone freezes the encoder while the head trains)")


def require_files(config: RunConfig, keys: List[str]) -> None:
    """Fail before any work when a data file named in the config is missing."""
    for key in keys:
        if not getattr(config.data, key):
            raise ConfigError(f"data.{key} is empty: name a file in the config or with --set data.{key}=PATH")
    for key in ("train", "dev", "test"):
        for path in source_paths(getattr(config.data, key)):
            if not os.path.isfile(path):
                from .data.public_sets import fetch_hint

                hint = fetch_hint(path) or f" ({PATH_RULE})"
                raise ConfigError(f"data.{key}: file not found: {os.path.abspath(path)}{hint}")


def yaml_scalar(value) -> str:
    """One value as YAML on one line, as a config file or ``--set`` writes it (data entries as mappings)."""
    if isinstance(value, list):
        value = [item.as_entry() if isinstance(item, DataSource) else item for item in value]
    return yaml.safe_dump(value, default_flow_style=True, allow_unicode=True).strip().removesuffix("\n...")


class KeyHelp(NamedTuple):
    key: str  # dotted, as --set takes it
    default: Any
    choices: Optional[tuple]
    help: str
    bounds: Optional[Bounds] = None


def key_help() -> List[KeyHelp]:
    """Every key of the schema with its default, allowed values and help, in the order of the file
    (what docs/configuration.md lists)."""
    found: List[KeyHelp] = []

    def walk(obj, prefix: str):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                walk(value, f"{prefix}{f.name}.")
            else:
                found.append(KeyHelp(prefix + f.name, value, _choices(f), f.metadata.get("help", ""),
                                     f.metadata.get("bounds")))

    walk(RunConfig(), "")
    return found


# How a model is run, not what it is (the sections and top-level keys of the run-time settings): a
# checkpoint's config.yaml leaves them out, and a model loaded takes them from their defaults and --set,
# wherever and however it was trained
RUN_TIME_KEYS = ("inference", "serve", "device", "cpu_threads")


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
            choices, bounds = _choices(f), f.metadata.get("bounds")
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
