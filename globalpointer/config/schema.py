"""The run configuration's schema: its sections and keys, each with its default, help text and allowed
values (a registry's names, or a number's bounds), and the rules that join several keys."""
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, NamedTuple, Optional, Union

from ..data.readers import FORMAT_ALIASES, FORMATS
from ..data.sources import Sources
from ..errors import ConfigError

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
AUTO = "auto"
NumberOrAuto = Union[float, str]  # a number, or "auto": the value training chooses (``small_set_values``)
# what auto is: the first on a relation model's small training file (train.small_training_set), else the second;
# docs/results.md#relations-on-small-and-new-sets
AUTO_LR = (1e-3, 3e-4)
AUTO_DROPOUT = (0.3, 0.1)
SEED_LIMIT = 2 ** 32 - 1  # numpy's seeds are 32-bit
INT64 = 2 ** 63 - 1  # what every whole number reaches Paddle and numpy as


def auto_value(value: NumberOrAuto, choices, small: bool = False) -> float:
    """A number key's value, or what ``auto`` is (``choices``: (on a small file, otherwise))."""
    return choices[0 if small else 1] if value == AUTO else value


def _opt(default, help, choices=None, bounds: Optional[Bounds] = None, aliases: Optional[Dict[str, str]] = None):
    """A key with its default, help text and allowed values (a tuple, or a function returning one
    when the values come from a registry that is not imported before it is needed, and ``aliases``:
    other names read as one of them), or for a number its ``bounds``."""
    metadata = {"help": help, "choices": choices, "bounds": bounds, "aliases": aliases or {}}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def _head_names():
    from ..model.heads import (
        HEADS,  # imports paddle: only when a head name is checked or printed
    )

    return tuple(HEADS)


def backend_names():
    from ..model.backends import (
        BACKENDS,  # imports paddle: only when a backend name is checked or printed
    )

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
    encoder: str = _opt("auto", "a bundled encoder (m3e-small, all-MiniLM-L6-v2), a local directory "
                        "(PaddleNLP or Hugging Face format), a PaddleNLP model name, 'tiny' (random, tests only), "
                        "or auto: m3e-small for Chinese training texts, all-MiniLM-L6-v2 for Latin-script ones "
                        "(a model trained from train.init_from keeps its encoder)")
    head: str = _opt("global_pointer", "span head: a GlobalPointer, or the Efficient GlobalPointer (one "
                     "span score shared by the types, plus a start and an end term per type)", _head_names)
    head_size: int = _opt(64, "size of the per-type query and key vectors (span heads)", bounds=POSITIVE)
    rope: bool = _opt(True, "rotary position embedding on queries and keys: the span head's and, in a relation "
                      "model, the two pair heads' (which the published GPLinker has none in: CoNLL04 +4.46 test "
                      "strict triple F1 with it, 3 seeds; docs/results.md#against-paddlenlps-gplinker-layer)")
    tril_mask: bool = _opt(True, "never score spans whose end is before their start")
    loss: str = _opt("sparse", "span heads: sparse takes the gold indices; dense a types x L x L label tensor",
                     ("sparse", "dense"))
    decode: str = _opt("auto", "nested: every span scored above model.min_score; flat: greedy non-overlapping by "
                       "score; auto: flat for a model of whose training entities fewer than 1% overlap another "
                       "(a stray nested annotation in a flat file; recorded in the checkpoint), else nested",
                       ("auto", "nested", "flat"))
    min_score: float = _opt(0.5, "span heads: a span is predicted when its score (the probability shown with every "
                            "entity: the sigmoid of its logit, or its calibrated score where thresholds.json "
                            "holds a map, model.use_calibration) is above this; between 0 and 1",
                            bounds=Bounds(0, 1, low_included=False, high_included=False))
    use_calibration: bool = _opt(True, "span heads: use the minimum scores and the map of calibrated scores of "
                                 "the model directory's thresholds.json (fitted by training, train.calibrate, or "
                                 "by globalpointer calibrate) when it has one; "
                                 "false: the raw scores, model.min_score for every type")
    dropout: NumberOrAuto = _opt(AUTO, "dropout on the encoder output before the head; auto: 0.3 for a relation "
                                       "model on a small training file (train.small_training_set), else 0.1",
                                 bounds=FRACTION)

    @property
    def dropout_rate(self) -> float:
        """``dropout``, with ``auto`` as on a file that is not small (training sets it: ``small_set_values``)."""
        return auto_value(self.dropout, AUTO_DROPOUT)


@dataclass
class TrainConfig:
    init_from: str = _opt("", "a trained model (RUN/best) to start from: its encoder, head weights and types, in "
                              "their order; types of data.labels (or of the data) it lacks are added after them "
                              "with fresh head rows; empty: start from model.encoder")
    epochs: int = _opt(12, "passes over the training data at most: with a dev file, training stops after "
                            "train.patience evaluations without a better dev F1 and keeps the best",
                       bounds=POSITIVE)
    max_steps: int = _opt(3000, "a ceiling on training's length in optimizer steps, rounded up to a whole epoch: "
                                "the shorter of it and train.epochs is trained, the learning rate decaying over "
                                "it: a large file needs fewer epochs than a small one. 0: train.epochs alone",
                          bounds=NON_NEGATIVE)
    min_steps: int = _opt(300, "a floor on training's length in optimizer steps: a small training file's epochs "
                               "are repeated (each of the train.epochs evaluations then follows as many) until "
                               "this many steps, and train.patience stops no run before it; tens of texts gave a "
                               "relation model no triple in train.epochs alone "
                               "(docs/results.md#relations-on-small-and-new-sets). 0: no floor", bounds=NON_NEGATIVE)
    batch_size: int = _opt(16, "windows per optimizer step on each device, before accumulation", bounds=POSITIVE)
    lr: NumberOrAuto = _opt(AUTO, "peak learning rate of the encoder's top layer (train.layer_lr_decay below it); "
                                  "auto: 1e-3 for a relation model on a small training file "
                                  "(train.small_training_set), else 3e-4, ELECTRA-Small's rate for small encoders "
                                  "(a base-size encoder: start at 1e-4)", bounds=NON_NEGATIVE)
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
    adversarial: str = _opt("auto", "fgm: adversarial training on the word embeddings (one more forward and "
                            "backward per batch); auto: fgm on a large training file (train.large_training_set), "
                            "none on a smaller one", ("auto", "none", "fgm"))
    large_training_set: int = _opt(5000, "a training file of more than this many texts is large: train.adversarial "
                                         "auto trains it with FGM, and boundary smoothing is off on it; 0: no file "
                                         "is large",
                                   bounds=NON_NEGATIVE)
    small_training_set: int = _opt(100, "a relation model's training file of at most this many texts is small: "
                                        "train.lr auto and model.dropout auto are higher on it, which gained dev "
                                        "triple F1 in 7 of 8 runs on sets of 24 to 100 texts (6 of 8 with the "
                                        "fitted minimum scores), and was mixed at 300 "
                                        "(docs/results.md#relations-on-small-and-new-sets); 0: no file is small",
                                   bounds=NON_NEGATIVE)
    adversarial_epsilon: float = _opt(1.0, "fgm: length of the step on the word embeddings along their gradient",
                                      bounds=POSITIVE)
    layer_lr_decay: float = _opt(0.8, "encoder layer k below the top learns at lr * layer_lr_decay^k, the "
                                 "embeddings lowest; 1: every layer at lr", bounds=Bounds(0, 1, low_included=False))
    boundary_smoothing: float = _opt(0.2, "boundary smoothing (after Zhu and Li, 2022): the spans a "
                                          "token or so off an entity's boundaries (train.boundary_smoothing_size) "
                                          "share this target, softening the loss where annotators disagree; off on "
                                          "a large training file (train.large_training_set); 0: off",
                                     bounds=FRACTION)
    boundary_smoothing_size: int = _opt(1, "boundary smoothing: the spans that share it are at most this many "
                                           "boundary moves away (start and end together)", bounds=POSITIVE)
    calibrate: str = _opt("shared", "after training, minimum scores fitted on the dev file for the best checkpoint "
                                    "(span heads): shared, one for every type (the best micro F1), or per_type "
                                    "(each type's best F1), with the map of calibrated scores fitted on what they "
                                    "keep, written as best/thresholds.json, which predict, "
                                    "evaluate, serve and exports read (model.use_calibration); none: "
                                    "model.min_score and the raw scores", ("none", "per_type", "shared"))

    @property
    def encoder_lr(self) -> float:
        """``lr``, with ``auto`` as on a file that is not small (training sets it: ``small_set_values``)."""
        return auto_value(self.lr, AUTO_LR)


@dataclass
class InferenceConfig:
    backend: str = _opt("auto", "what runs prediction and evaluation: dynamic (a checkpoint), paddle-inference, "
                        "onnxruntime or openvino (an export); auto: onnxruntime for an export with model.onnx, else "
                        "paddle-inference for an export, dynamic for a checkpoint", backend_names)
    precision: str = _opt("float32", "float16: exports on a GPU with paddle-inference; int8: an export made with "
                          "--quantize int8, its model.int8.xml on openvino where both are there (auto), else its "
                          "model.int8.onnx on onnxruntime", ("float32", "float16", "int8"))
    int8_unverified_cpu: str = _opt("float32", "what inference.precision=int8 runs on a CPU whose integer kernels "
                                    "the export's INT8 model was not verified on (export --verify; an INT8 model "
                                    "of earlier versions: not on CPUs without VNNI): float32 (model.onnx), said in "
                                    "one line, or int8 anyway", ("float32", "int8"))
    tensorrt: bool = _opt(False, "exports on a GPU with paddle-inference: run subgraphs with TensorRT")
    batch_size: int = _opt(64, "rows per forward pass in dev evaluation, evaluation and prediction (a row: one "
                               "window, or several short ones side by side)", bounds=POSITIVE)
    max_entities_per_type: int = _opt(64, "the entities of one type a window gives at most, the best scored (0: no "
                                          "bound): an under-trained model scores half of a window's spans above 0.5, "
                                          "and a relation model pairs them all; the public sets' texts hold at most 20 "
                                          "of a type (CoNLL04)", bounds=NON_NEGATIVE)
    max_pairs_per_relation: int = _opt(64, "a relation model: the head-start and the head-end cells of one relation "
                                           "type a window gives at most, each, the best scored (0: no bound); the "
                                           "public sets' texts hold at most 15 triples of a type (DuIE); an event "
                                           "model's one link plane this many per argument label (a PHEE text links "
                                           "up to 120 pairs)",
                                       bounds=NON_NEGATIVE)
    max_events_per_type: int = _opt(64, "an event model: the events of one type a text gives at most (the complete "
                                        "subgraphs of linked arguments found first; 0: no bound): an under-trained "
                                        "model's half-linked arguments make exponentially many; PHEE's texts hold "
                                        "at most 6 events", bounds=NON_NEGATIVE)
    compile_from_lines: int = _opt(500, "predict.py and evaluate.py on a checkpoint with inference.backend auto: from "
                                        "this many input lines, a Paddle Inference program is compiled from the "
                                        "checkpoint (a few seconds, once: it is cached by the checkpoint's content, "
                                        "$GLOBALPOINTER_CACHE) and runs instead of the dynamic graph, faster; a "
                                        "cached one is used whatever the input; 0: never compile",
                                   bounds=NON_NEGATIVE)
    compiled_cache_mb: int = _opt(2048, "the compiled programs the cache keeps, in MB at most: after a compile, the "
                                        "least recently run others are removed until they fit (a program is about "
                                        "the size of its checkpoint's weights), so a machine that predicts with many checkpoints does not fill its disk; 0: no "
                                        "bound", bounds=NON_NEGATIVE)


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
    client_timeout_s: float = _opt(60.0, "seconds a client may take to send a request's headers, and again its body "
                                         "(nginx's client_header_timeout and client_body_timeout): a client slower "
                                         "than that is answered 408 and its connection closed, so slow clients "
                                         "cannot hold the service's connections", bounds=POSITIVE)
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


def field_choices(f: dataclasses.Field):
    choices = f.metadata.get("choices")
    return choices() if callable(choices) else choices


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
                found.append(KeyHelp(prefix + f.name, value, field_choices(f), f.metadata.get("help", ""),
                                     f.metadata.get("bounds")))

    walk(RunConfig(), "")
    return found


# How a model is run, not what it is (the sections and top-level keys of the run-time settings): a
# checkpoint's config.yaml leaves them out, and a model loaded takes them from their defaults and --set,
# wherever and however it was trained
RUN_TIME_KEYS = ("inference", "serve", "device", "cpu_threads")


def small_set_values(config: RunConfig, small: bool) -> RunConfig:
    """``config`` with ``train.lr`` and ``model.dropout`` ``auto`` made numbers: a training's values, which
    its checkpoints record (``small``: a relation model on a small training file)."""
    return dataclasses.replace(
        config, train=dataclasses.replace(config.train, lr=auto_value(config.train.lr, AUTO_LR, small)),
        model=dataclasses.replace(config.model, dropout=auto_value(config.model.dropout, AUTO_DROPOUT, small)))


def validate(config: RunConfig) -> None:
    """The rules that join several keys (each key's own range is declared with it: ``bounds``)."""
    if config.data.window_overlap >= config.data.max_length - 2:
        raise ConfigError(f"data.window_overlap ({config.data.window_overlap}) must be smaller than "
                          f"data.max_length - 2 ({config.data.max_length - 2}) so that windows advance")
    if config.model.head_size % 2:
        raise ConfigError(f"model.head_size must be even for RoPE, got {config.model.head_size}")
    if len(set(config.data.labels)) != len(config.data.labels):
        raise ConfigError(f"data.labels has duplicates: {config.data.labels}")
    if any(not label.strip() for label in config.data.labels):
        raise ConfigError(f"data.labels: every type needs a name, got {config.data.labels}")
    if config.train.max_steps and config.train.min_steps > config.train.max_steps:
        raise ConfigError(f"train.min_steps ({config.train.min_steps}) is above train.max_steps "
                          f"({config.train.max_steps}); lower the floor or raise the ceiling")
    if config.train.lr == 0 and config.train.head_lr == 0:
        raise ConfigError("train.lr and train.head_lr are both 0: nothing would learn; set at least one above 0 "
                          "(lr 0 alone freezes the encoder while the head trains)")
