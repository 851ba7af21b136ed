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
from typing import Any, Dict, List, NamedTuple, Optional

import yaml

from .data.readers import JSON_PARSERS, TAGGED_JOINERS
from .errors import ConfigError
from .model.decode import sigmoid

FORMATS = ("auto", *JSON_PARSERS, *TAGGED_JOINERS)
log = logging.getLogger(__name__)
# an earlier name -> the key's name now: files that use the earlier one still load, with a warning
RENAMED = {"train.eval_batch_size": "inference.batch_size"}
MAX_BATCH_WAIT_MS = 1000  # waiting longer for other requests to share a forward pass only adds latency


def _opt(default, help, choices=None):
    """A key with its default, help text and allowed values (a tuple, or a function returning one
    when the values come from a registry that is not imported before it is needed)."""
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": help, "choices": choices})
    return field(default=default, metadata={"help": help, "choices": choices})


def _head_names():
    from .model.heads import HEADS  # imports paddle: only when a head name is checked or printed

    return tuple(HEADS)


def backend_names():
    from .model.backends import BACKENDS  # imports paddle: only when a backend name is checked or printed

    return ("auto", *BACKENDS)


@dataclass
class DataConfig:
    train: str = _opt("", "training file (any supported format)")
    dev: str = _opt("", "dev file for evaluation during training; empty: no evaluation, the last model is kept")
    test: str = _opt("", "test file evaluated once at the end with the best model; empty: none")
    format: str = _opt("auto", "file format; auto detects it per file", FORMATS)
    labels: List[str] = _opt([], "entity types in a fixed order; empty: every type seen in the training file, sorted")
    limit: int = _opt(0, "read only the first N records of each file (0: all); for quick runs")
    max_length: int = _opt(128, "tokens per window including [CLS] and [SEP]; longer texts become sliding windows")
    window_overlap: int = _opt(32, "tokens shared by consecutive windows of a long text")
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
    head_size: int = _opt(64, "size of the per-type query and key vectors (span heads)")
    rope: bool = _opt(True, "rotary position embedding on queries and keys")
    tril_mask: bool = _opt(True, "never score spans whose end is before their start")
    loss: str = _opt("sparse", "span heads: sparse takes the gold indices; dense a types x L x L label tensor",
                     ("sparse", "dense"))
    decode: str = _opt("auto", "nested: every span scored above model.min_score; flat: greedy non-overlapping by "
                       "score; auto: flat for a model none of whose training texts had overlapping entities "
                       "(recorded in the checkpoint), else nested", ("auto", "nested", "flat"))
    min_score: float = _opt(0.5, "span heads: a span is predicted when its score (the probability shown with every "
                            "entity, the sigmoid of its logit) is above this; between 0 and 1")
    calibrated_thresholds: bool = _opt(True, "span heads: use the per-type minimum scores of the model directory's "
                                       "thresholds.json (globalpointer calibrate) when it has one; "
                                       "false: model.min_score for every type")
    dropout: float = _opt(0.1, "dropout on the encoder output before the head")


@dataclass
class TrainConfig:
    epochs: int = _opt(3, "passes over the training data")
    batch_size: int = _opt(16, "windows per optimizer step on each device, before accumulation")
    lr: float = _opt(5e-5, "peak learning rate of the encoder")
    head_lr: float = _opt(1e-3, "peak learning rate of the head (new weights learn faster than pretrained ones)")
    warmup_ratio: float = _opt(0.1, "fraction of the steps with a linear warmup; then linear decay to 0")
    weight_decay: float = _opt(0.01, "AdamW weight decay (not on biases and norms)")
    max_grad_norm: float = _opt(1.0, "clip the global gradient norm to this (0: no clipping)")
    grad_accum_steps: int = _opt(1, "batches whose gradients are summed before one optimizer step")
    amp: str = _opt("none", "mixed precision for the encoder on GPU (the head and loss stay float32); "
                    "ignored with a warning on CPU", ("none", "float16", "bfloat16"))
    seed: int = _opt(42, "seed for initialisation, dropout and data order")
    eval_every: int = _opt(0, "evaluate on dev every N optimizer steps (0: at the end of every epoch)")
    patience: int = _opt(0, "stop after this many evaluations without a better dev F1 (0: never)")
    log_every: int = _opt(10, "update the progress bar's loss every N optimizer steps")
    adversarial: str = _opt("none", "fgm: adversarial training on the word embeddings (one more forward and "
                            "backward per batch)", ("none", "fgm"))
    adversarial_epsilon: float = _opt(1.0, "fgm: length of the step on the word embeddings along their gradient")
    ema_decay: float = _opt(0.0, "exponential moving average of the weights, evaluated and saved as the best "
                            "model (e.g. 0.999); 0: off")
    layer_lr_decay: float = _opt(1.0, "encoder layer k below the top learns at lr * layer_lr_decay^k, the "
                                 "embeddings lowest; 1: every layer at lr")
    rdrop_alpha: float = _opt(0.0, "R-Drop (span heads): each batch runs twice with different dropout and this "
                              "weighs the symmetric KL between the two passes' span probabilities; 0: off")


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
                               "window, or several short ones, inference.pack_texts)")
    compile_from: int = _opt(500, "predict.py and evaluate.py on a checkpoint with inference.backend auto: from this "
                                  "many input lines, a Paddle Inference program is compiled from the checkpoint (a few "
                                  "seconds, once: it is cached by the checkpoint's content, $GLOBALPOINTER_CACHE) and "
                                  "runs instead of the dynamic graph (2,000 CLUENER texts: 19.4 s instead of 31.2 s); a "
                                  "cached one is used whatever the input; 0: never compile")
    pack_texts: bool = _opt(True, "evaluation and prediction put short windows side by side in rows no longer than "
                                  "the longest window of the call, each still read alone: fewer forward passes, less "
                                  "padding (false: a row per window)")


@dataclass
class ServeConfig:
    host: str = _opt("127.0.0.1", "address the HTTP service listens on (0.0.0.0: every interface)")
    port: int = _opt(8000, "port of the HTTP service")
    max_texts: int = _opt(256, "texts per request; more is answered with 413")
    max_text_chars: int = _opt(100000, "characters per text; longer is answered with 413")
    max_body_bytes: int = _opt(10_000_000, "bytes per request body; more is answered with 413")
    max_header_bytes: int = _opt(65536, "bytes of a request's line and headers; more is answered with 431 (no "
                                        "client of these services sends more than a few hundred)")
    max_request_tokens: int = _opt(65536, "tokens per request (the texts' tokens, as the model reads them): what "
                                          "one request may cost; more is answered with 413")
    batch_wait_ms: float = _opt(5.0, "how long a request waits for others to share its forward passes")
    batch_texts: int = _opt(128, "texts gathered from concurrent requests into one prediction call")
    rows_per_pass: int = _opt(8, "rows of one forward pass in the service: requests take turns pass by pass, so a "
                                  "small request waits for at most one pass of a large one")
    shutdown_timeout_s: float = _opt(30.0, "on SIGTERM, how long requests in flight may take to finish")
    workers: int = _opt(0, "service processes, each with its own copy of the model (about 0.7 GB) and "
                           "micro-batcher, the CPU's cores shared between them (cpu_threads: 0); 0: one per core "
                           "on the CPU (most texts/s from concurrent clients), 1 on a GPU; 1: a lone request "
                           "gets every core (lowest latency when requests come one at a time)")


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
                               "processes and between service workers)")
    output_dir: str = _opt("runs/default", "run directory: checkpoints, resolved config, metrics")


# ---------------------------------------------------------------------------------------------

def _choices(f: dataclasses.Field):
    choices = f.metadata.get("choices")
    return choices() if callable(choices) else choices


def _fields(cls) -> Dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def _where(path: List[str]) -> str:
    return ".".join(path)


def _coerce(value: Any, annotation, path: List[str]):
    """Check and convert one value to the field's type; YAML says `3e-5` is a string, we accept it."""
    name = _where(path)
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{name}: expected true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{name}: expected a whole number, got {value!r}")
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
            raise ConfigError(f"{name}: expected a number, got {value!r}")
        if not math.isfinite(number):  # a NaN learning rate or threshold trains or predicts nothing, silently
            raise ConfigError(f"{name}: expected a finite number, got {value!r}")
        return number
    if annotation is str:
        if isinstance(value, str):
            return value
        if value is None:
            return ""
        raise ConfigError(f"{name}: expected a string, got {value!r}")
    if annotation == List[str]:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
        raise ConfigError(f"{name}: expected a list of strings, got {value!r}")
    raise AssertionError(f"unsupported config type {annotation} for {name}")


def _build(cls, values: Dict[str, Any], path: List[str]):
    if not isinstance(values, dict):
        raise ConfigError(f"{_where(path) or 'config'}: expected a mapping of keys, got {values!r}")
    known = _fields(cls)
    kwargs = {}
    for key, value in values.items():
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f"; did you mean {_where(path + [close[0]])!r}?" if close else \
                f"; valid keys here: {', '.join(known)}"
            raise ConfigError(f"unknown config key {_where(path + [str(key)])!r}{hint}")
        f = known[key]
        if dataclasses.is_dataclass(f.type):
            kwargs[key] = _build(f.type, value, path + [key])
        else:
            kwargs[key] = _coerce(value, f.type, path + [key])
            choices = _choices(f)
            if choices and kwargs[key] not in choices:
                raise ConfigError(f"{_where(path + [key])}: {kwargs[key]!r} is not one of {', '.join(choices)}")
    return cls(**kwargs)


def to_dict(config) -> Dict[str, Any]:
    return dataclasses.asdict(config)


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


def _parse_override(item: str):
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set train.lr=3e-5")
    key, raw = item.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
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


def read_yaml(path: str) -> Dict[str, Any]:
    if not os.path.isfile(path):
        raise ConfigError(f"config file not found: {path}")
    with open(path, encoding="utf-8") as handle:
        try:
            tree = yaml.safe_load(handle)
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


def load_config(path: Optional[str] = None, overrides: Optional[List[str]] = None,
                base: Optional[Dict[str, Any]] = None) -> RunConfig:
    """Defaults <- ``base`` (e.g. a checkpoint's config) <- YAML file <- ``--set`` overrides."""
    tree: Dict[str, Any] = {}
    for layer in (base or {}, read_yaml(path) if path else {}):
        for section, values in layer.items():
            if isinstance(values, dict) and isinstance(tree.get(section), dict):
                tree[section] = {**tree[section], **values}
            else:
                tree[section] = values
    for item in overrides or []:
        keys, value = _parse_override(item)
        if keys == ["model", "threshold"]:
            raise ConfigError(f"--set {item}: {min_score_hint(value)}")
        _set_nested(tree, keys, value)
    where = f" (in {path})" if path else ""
    _move_renamed(tree, where)
    _convert_logit_threshold(tree, where)
    try:
        config = _build(RunConfig, tree, [])
    except ConfigError as error:
        raise ConfigError(f"{error}{where}") from None
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
    positive = {"data.max_length": config.data.max_length, "model.head_size": config.model.head_size,
                "train.epochs": config.train.epochs, "train.batch_size": config.train.batch_size,
                "inference.batch_size": config.inference.batch_size,
                "train.grad_accum_steps": config.train.grad_accum_steps, "train.log_every": config.train.log_every,
                "serve.max_texts": config.serve.max_texts, "serve.max_text_chars": config.serve.max_text_chars,
                "serve.max_body_bytes": config.serve.max_body_bytes,
                "serve.max_header_bytes": config.serve.max_header_bytes, "serve.batch_texts": config.serve.batch_texts,
                "serve.max_request_tokens": config.serve.max_request_tokens,
                "serve.rows_per_pass": config.serve.rows_per_pass}
    for key, value in positive.items():
        if value <= 0:
            raise ConfigError(f"{key} must be greater than 0, got {value}")
    non_negative = {"data.limit": config.data.limit, "data.window_overlap": config.data.window_overlap,
                    "train.lr": config.train.lr, "train.head_lr": config.train.head_lr,
                    "train.weight_decay": config.train.weight_decay, "train.max_grad_norm": config.train.max_grad_norm,
                    "train.eval_every": config.train.eval_every, "train.patience": config.train.patience,
                    "cpu_threads": config.cpu_threads, "serve.port": config.serve.port,
                    "serve.batch_wait_ms": config.serve.batch_wait_ms,
                    "serve.shutdown_timeout_s": config.serve.shutdown_timeout_s, "serve.workers": config.serve.workers,
                    "inference.compile_from": config.inference.compile_from}
    for key, value in non_negative.items():
        if value < 0:
            raise ConfigError(f"{key} must not be negative, got {value}")
    if not 0 < config.model.min_score < 1:
        raise ConfigError(f"model.min_score is a probability between 0 and 1 (not either end), got "
                          f"{config.model.min_score}; 0.5 is the model's own boundary")
    if config.data.max_length < 3:
        raise ConfigError(f"data.max_length must leave room for text besides [CLS] and [SEP], got {config.data.max_length}")
    if config.data.window_overlap >= config.data.max_length - 2:
        raise ConfigError(f"data.window_overlap ({config.data.window_overlap}) must be smaller than "
                          f"data.max_length - 2 ({config.data.max_length - 2}) so that windows advance")
    if config.model.head_size % 2:
        raise ConfigError(f"model.head_size must be even for RoPE, got {config.model.head_size}")
    if not 0 <= config.train.warmup_ratio < 1:
        raise ConfigError(f"train.warmup_ratio must be in [0, 1), got {config.train.warmup_ratio}")
    if not 0 <= config.train.ema_decay < 1:
        raise ConfigError(f"train.ema_decay must be in [0, 1) (0: off), got {config.train.ema_decay}")
    if not 0 < config.train.layer_lr_decay <= 1:
        raise ConfigError(f"train.layer_lr_decay must be in (0, 1] (1: off), got {config.train.layer_lr_decay}")
    if config.train.rdrop_alpha < 0:
        raise ConfigError(f"train.rdrop_alpha must not be negative (0: off), got {config.train.rdrop_alpha}")
    if config.train.rdrop_alpha:
        from .model.heads import check_span_head

        check_span_head(config.model.head, "train.rdrop_alpha")
    if config.train.adversarial_epsilon <= 0:
        raise ConfigError(f"train.adversarial_epsilon must be greater than 0, got {config.train.adversarial_epsilon}")
    if not 0 <= config.model.dropout < 1:
        raise ConfigError(f"model.dropout must be in [0, 1), got {config.model.dropout}")
    if len(set(config.data.labels)) != len(config.data.labels):
        raise ConfigError(f"data.labels has duplicates: {config.data.labels}")
    if any(not label.strip() for label in config.data.labels):
        raise ConfigError(f"data.labels: every type needs a name, got {config.data.labels}")
    if config.train.lr == 0 and config.train.head_lr == 0:
        raise ConfigError("train.lr and train.head_lr are both 0: nothing would learn; set at least one above 0 "
                          "(lr 0 alone freezes the encoder while the head trains)")
    if not config.serve.port <= 65535:
        raise ConfigError(f"serve.port must be a TCP port, 0 to 65535, got {config.serve.port}")
    if config.serve.batch_wait_ms > MAX_BATCH_WAIT_MS:
        raise ConfigError(f"serve.batch_wait_ms must be at most {MAX_BATCH_WAIT_MS} (a request waits this long for "
                          f"company before it is predicted), got {config.serve.batch_wait_ms:g}")


def require_files(config: RunConfig, keys: List[str]) -> None:
    """Fail before any work when a data file named in the config is missing."""
    for key in keys:
        path = getattr(config.data, key)
        if not path:
            raise ConfigError(f"data.{key} is empty: name a file in the config or with --set data.{key}=PATH")
        if not os.path.isfile(path):
            raise ConfigError(f"data.{key}: file not found: {path}")
    for key in ("dev", "test"):
        path = getattr(config.data, key)
        if path and key not in keys and not os.path.isfile(path):
            raise ConfigError(f"data.{key}: file not found: {path}")


def yaml_scalar(value) -> str:
    """One value as YAML on one line, as a config file or ``--set`` writes it."""
    return yaml.safe_dump(value, default_flow_style=True, allow_unicode=True).strip().removesuffix("\n...")


class KeyHelp(NamedTuple):
    key: str  # dotted, as --set takes it
    default: Any
    choices: Optional[tuple]
    help: str


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
                found.append(KeyHelp(prefix + f.name, value, _choices(f), f.metadata.get("help", "")))

    walk(RunConfig(), "")
    return found


def dump_config(config: RunConfig) -> str:
    """YAML of every key, each with its help as a comment (what --print-config shows)."""
    lines: List[str] = []

    def emit(obj, indent: str):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            help_text = f.metadata.get("help", "")
            choices = _choices(f)
            if choices:
                help_text += f" [{'|'.join(choices)}]"
            if dataclasses.is_dataclass(value):
                lines.append(f"{indent}{f.name}:  # {help_text}")
                emit(value, indent + "  ")
            else:
                lines.append(f"{indent}{f.name}: {yaml_scalar(value)}  # {help_text}")

    emit(config, "")
    return "\n".join(lines) + "\n"
