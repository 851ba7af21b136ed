"""The self-contained checkpoint directory: written atomically, read with every file checked.

A checkpoint holds ``model.safetensors`` (encoder and head), ``config.yaml`` (the run config as the
user wrote it, with every default, but not how the model is run: ``config.RUN_TIME_KEYS``), what
training resolved from it and the data (``labels.json``,
and ``checkpoint.json``: tokenization and vocabulary size), and the encoder's architecture and
tokenizer files, so that evaluation and prediction need nothing but the directory.
"""
import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import math
import os
import shutil
from typing import Dict, List, NamedTuple, Optional, Tuple, Union

from .config import (RUN_TIME_KEYS, RunConfig, dump_config, flatten_config, load_config, override_key,
                     override_text, with_overrides, yaml_scalar)
from .errors import CheckpointError, ConfigError, UserError
from .files import (CACHE_ENV, EXPORT_INFO, FORMAT_VERSION, PARTIAL, PREVIOUS, TEMPORARY_MARKER, atomic_write_text,
                    cache_directory, check_format_version, contains, directory_being_written, is_export,
                    locate_model, read_export_info, read_json, remove_abandoned_partials, swap_in_directory)
from .model.encoders import Encoder, bert_tokenizer, check_position_limit, save_encoder_files, saved_position_limit
from .model.decode import sigmoid
from .model.network import WEIGHTS, SpanNetwork, load_network
from .model.weights import save_state

CHECKPOINT_INFO = "checkpoint.json"  # resolved tokenization; vocabulary size, checked against vocab.txt
TOKENIZER_CONFIG = "tokenizer_config.json"  # PaddleNLP's: whether the tokenizer lower-cases
METADATA_FILES = ("config.yaml", "labels.json", CHECKPOINT_INFO, "config.json", "vocab.txt")
THRESHOLDS = "thresholds.json"  # per-type thresholds written by globalpointer calibrate
# checkpoint.json and export.json record the size of every other file of their directory (CHECKED_FILES),
# checked at each open without reading a file; thresholds.json is not among them: calibrate rewrites it in
# place, and its reader checks it whole
CHECKED_FILES = "checked_files"

log = logging.getLogger("globalpointer")


# model.decode auto decodes nested when at least this share of the training entities overlap another:
# flat decoding misses at most that share, and a stray nested annotation in a flat file (3 of CLUENER's
# 23,971 training entities; CMeEE's: 10.8%) must not buy the nested decoder's spurious overlaps
NESTED_MIN_SHARE = 0.01


class TrainedFor(NamedTuple):
    """What training resolved once, from the config and the data: the types in output order, the
    tokenization ``auto`` became, whether any training text had overlapping entities, whether every
    training entity began and ended at a space or a text's edge (``spans.on_word_boundaries``: a file
    read as words; such a model predicts whole words), and the share of training entities that
    overlap another (``spans.overlapping_share``).  None: not recorded, a checkpoint from before it
    was.  Saved beside the config, which stays as the user wrote it."""
    labels: List[str]
    tokenization: str
    overlapping: Optional[bool] = None
    words: Optional[bool] = None
    overlapping_share: Optional[float] = None

    def decoding(self, decode: str) -> str:
        """``model.decode`` resolved: ``auto`` predicts flat entities for a model trained on flat
        ones (all but under NESTED_MIN_SHARE of them), so its output has no overlaps its training
        data did not teach; a checkpoint from before the share decodes as it did then."""
        if decode != "auto":
            return decode
        if self.overlapping_share is not None:
            return "nested" if self.overlapping_share >= NESTED_MIN_SHARE else "flat"
        return "flat" if self.overlapping is False else "nested"


# The keys of what a model is (its types, how it reads text, its network): a checkpoint's config records
# them as trained, and no reader may change them (the weights hold them)
MODEL_RECORD_KEYS = ("data.labels", "data.tokenization", "model.encoder", "model.head", "model.head_size",
                     "model.rope", "model.tril_mask")


def trained_config(config: RunConfig, trained_for: TrainedFor) -> RunConfig:
    """``config`` with what training resolved in place of what was asked for: the types in the model's
    output order and the tokenization ``auto`` became.  What a checkpoint's config.yaml records, and
    what every reader of the checkpoint reads."""
    return dataclasses.replace(config, data=dataclasses.replace(
        config.data, labels=list(trained_for.labels), tokenization=trained_for.tokenization))


def record_differences(record: RunConfig, config: RunConfig, keys=MODEL_RECORD_KEYS) -> List[str]:
    """The ``keys`` of what a model is on which ``config`` asks for another value than the model's
    ``record`` (``data.tokenization: auto`` and ``model.encoder: auto`` ask for none)."""
    recorded, asked = flatten_config(record), flatten_config(config)
    return [key for key in keys if asked[key] != recorded[key] and
            not (key in ("data.tokenization", "model.encoder") and asked[key] == "auto")]


def write_checkpoint(directory: str, network: SpanNetwork, encoder: Encoder, config: RunConfig,
                     trained_for: TrainedFor, extra_state: dict = None, extra_json: dict = None) -> None:
    """Write into a new directory beside it and swap it in, so a kill leaves the old checkpoint whole."""
    with directory_being_written(directory) as partial:
        save_state(network.state_dict(), os.path.join(partial, WEIGHTS))
        with open(os.path.join(partial, "config.yaml"), "w", encoding="utf-8") as out:
            out.write(dump_config(config, leave_out=RUN_TIME_KEYS))
        with open(os.path.join(partial, "labels.json"), "w", encoding="utf-8") as out:
            json.dump(trained_for.labels, out, ensure_ascii=False, indent=1)
        save_encoder_files(encoder, partial)
        for name, state in (extra_state or {}).items():
            save_state(state, os.path.join(partial, name))
        for name, obj in (extra_json or {}).items():
            with open(os.path.join(partial, name), "w", encoding="utf-8") as out:
                json.dump(obj, out, indent=1)
        with open(os.path.join(partial, CHECKPOINT_INFO), "w", encoding="utf-8") as out:  # last: it lists the rest
            json.dump({"format_version": FORMAT_VERSION, "vocab_tokens": len(encoder.tokenizer.vocab),
                       "tokenization": trained_for.tokenization,
                       "overlapping_entities": trained_for.overlapping, "word_boundaries": trained_for.words,
                       "overlapping_entity_share": trained_for.overlapping_share,
                       CHECKED_FILES: file_record(partial)}, out)
        swap_in_directory(partial, directory)


def file_record(directory: str) -> Dict[str, int]:
    """The size of every file of ``directory`` but the records themselves and thresholds.json
    (``check_file_record`` compares them at each open)."""
    return {name: os.path.getsize(os.path.join(directory, name)) for name in sorted(os.listdir(directory))
            if name not in (CHECKPOINT_INFO, EXPORT_INFO, THRESHOLDS, TEMPORARY_MARKER)
        and os.path.isfile(os.path.join(directory, name))}


def check_file_record(directory: str, record: dict, where: str) -> None:
    """Each file ``record`` (``file_record``, or an export's ``sizes``) lists, at its size: a truncated,
    emptied or other file is refused in one line naming it, before any work."""
    for name, expected in sorted(record.items()):
        if name == THRESHOLDS:
            continue
        if isinstance(expected, bool) or not isinstance(expected, int):
            raise CheckpointError(f"{os.path.join(directory, where)} is corrupted: its record of {name} is no size; "
                                  f"restore it from the run")
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise CheckpointError(f"{path} is missing, and {where} lists it; restore it from the run")
        size = os.path.getsize(path)
        if size != expected:
            state = "emptied" if size == 0 else f"{size:,} bytes where {expected:,} were written"
            raise CheckpointError(f"{path} is {state} ({where} records it): the file is truncated, emptied or "
                                  f"replaced; restore it from the run, or export or train again")


def check_model_files(directory: str, info: dict, export_info: Optional[dict] = None) -> None:
    """The files of a checkpoint (``export_info`` None; ``info``: its checkpoint.json) or an export,
    against what its checkpoint.json or export.json recorded; a model of an earlier version, which
    records nothing, has its config.yaml checked not to be empty (it would load as the defaults)."""
    if export_info is None:
        record, where = info.get(CHECKED_FILES), CHECKPOINT_INFO
    else:
        record, where = export_info.get("sizes"), EXPORT_INFO
    if isinstance(record, dict):
        check_file_record(directory, record, where)
        return
    path = os.path.join(directory, "config.yaml")
    if not os.path.getsize(path):
        raise CheckpointError(f"{path} is emptied: restore it from the run")


class LoadedModel(NamedTuple):
    network: SpanNetwork
    encoder: Encoder
    config: RunConfig
    trained_for: TrainedFor
    directory: str


def _check_files(directory: str, names) -> None:
    missing = [name for name in names if not os.path.isfile(os.path.join(directory, name))]
    if missing:
        raise CheckpointError(f"{directory}: not a complete checkpoint, missing {', '.join(missing)}")


def _read_labels(directory: str) -> List[str]:
    try:
        labels = read_json(os.path.join(directory, "labels.json"))
        assert isinstance(labels, list) and labels and all(isinstance(x, str) and x.strip() for x in labels)
    except (ValueError, AssertionError):
        raise CheckpointError(f"{directory}/labels.json is corrupted: expected a JSON list of type names") from None
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:  # the model's outputs are in label order: a repeated name would rename the types after it
        raise CheckpointError(f"{directory}/labels.json names {', '.join(repeated)} more than once; restore the file "
                              f"from the run (every type once, in the order the model was trained with)")
    return labels


def read_min_scores(directory: str, labels: List[str]) -> Optional[List[float]]:
    """The calibrated minimum score (a probability, as ``model.min_score``) of every label, in label
    order, or None without the file.  Older files hold logits under ``thresholds``; they are read as
    the scores they mean."""
    path = os.path.join(directory, THRESHOLDS)
    if not os.path.isfile(path):
        return None
    fix = f"rerun globalpointer calibrate --model {directory} --data FILE, or delete the file"
    try:
        stored = read_json(path)
        key = "min_scores" if "min_scores" in stored or "thresholds" not in stored else "thresholds"
        scores = stored[key]
        values = [scores[label] for label in labels]
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{path} is corrupted or not for this model's labels ({error!r}): {fix}") from None
    wrong = [f"{label}: {value!r}" for label, value in zip(labels, values)
             if isinstance(value, bool) or not isinstance(value, (int, float))]
    if wrong:
        raise CheckpointError(f"{path}: {key} must be JSON numbers, got {', '.join(wrong)}: {fix}")
    if key == "thresholds":  # logits
        values = [float(sigmoid(value)) if math.isfinite(value) else math.nan for value in values]
    if not all(0 < value < 1 for value in values) or set(scores) != set(labels):
        raise CheckpointError(f"{path} needs one minimum score between 0 and 1 (exclusive) for each of "
                              f"{', '.join(labels)}: {fix}")
    return [float(value) for value in values]


def read_config(path: str) -> RunConfig:
    """A config file as every reader reads it: the config.yaml of a model directory is the model's
    record (``read_record``: its types and tokenization as trained, its paths as saved); any
    other file is a user's config (its relative paths read from its folder)."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.basename(path) == "config.yaml" and all(os.path.isfile(os.path.join(directory, name))
                                                       for name in METADATA_FILES):
        return read_record(directory)[0]
    return load_config(path)


def read_record(directory: str, overrides: List = None) -> Tuple[RunConfig, TrainedFor, dict]:
    """A checkpoint or export directory's config as the model's record (``open_model`` without the
    tokenizer), with ``overrides`` applied and checked (``ModelDirectory.run_config``); what it was
    trained for; its checkpoint.json."""
    _check_files(directory, METADATA_FILES)
    record, trained_for, info = _read_record(directory,
                                            read_export_info(directory) if is_export(directory) else None)
    config = _run_config(directory, record, overrides, saved_position_limit(_read_architecture(directory)))
    return config, trained_for, info


def _read_record(directory: str, export_info: Optional[dict] = None) -> Tuple[RunConfig, TrainedFor, dict]:
    """The model's record: config.yaml with the types and tokenization of labels.json and
    checkpoint.json, what the weights were trained as (a config.yaml of an earlier version may list
    the types in another order, or say auto); every file checked first (``check_model_files``;
    ``export_info``: an export's export.json, None for a checkpoint)."""
    info = _read_info(directory)
    check_model_files(directory, info, export_info)
    trained_for = TrainedFor(_read_labels(directory), info["tokenization"], info.get("overlapping_entities"),
                             info.get("word_boundaries"), info.get("overlapping_entity_share"))
    record = trained_config(load_config(os.path.join(directory, "config.yaml"), saved=True), trained_for)
    return record, trained_for, info


def _run_config(directory: str, record: RunConfig, overrides, position_limit: Optional[int]) -> RunConfig:
    """``record`` with ``overrides`` applied: how this run uses the model.  An override of what the
    model is (``MODEL_RECORD_KEYS``) to another value is an error, not ignored."""
    config = with_overrides(record, overrides, overrides_from="--set")
    changed = record_differences(record, config)
    if changed:
        given = next((override_text(item) for item in overrides if override_key(item) == changed[0]), changed[0])
        raise ConfigError(f"--set {given}: the model in {directory} was trained with {changed[0]}="
                          f"{yaml_scalar(flatten_config(record)[changed[0]])}; what a model is cannot change without "
                          f"training (leave {changed[0]} out, or train a new model)")
    config = trained_config(config, TrainedFor(record.data.labels, record.data.tokenization))  # auto is the record's
    check_position_limit(config, position_limit)
    return config


def _read_json_object(directory: str, name: str, expected: str, fits=lambda value: True) -> dict:
    """The JSON object in ``directory/name`` for which ``fits`` holds; a file that is not one (or
    cannot be parsed, or nests past the parser) is one CheckpointError saying what was ``expected``."""
    path = os.path.join(directory, name)
    try:
        value = read_json(path)
        assert isinstance(value, dict) and fits(value)
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        raise CheckpointError(f"{path} is corrupted: expected {expected}; restore it from the run") from None
    return value


def _read_architecture(directory: str) -> dict:
    return _read_json_object(directory, "config.json", "the encoder's architecture as a JSON object")


def _recorded_lower_case(directory: str) -> Optional[bool]:
    """Whether the tokenizer lower-cases, as the directory's tokenizer_config.json recorded it when the
    model was saved (None: not recorded, decided from the vocabulary)."""
    if not os.path.isfile(os.path.join(directory, TOKENIZER_CONFIG)):
        return None
    recorded = _read_json_object(directory, TOKENIZER_CONFIG, "the tokenizer's settings as a JSON object")
    lower_case = recorded.get("do_lower_case")
    return lower_case if isinstance(lower_case, bool) else None


def _read_info(directory: str) -> dict:
    def fits(info: dict) -> bool:
        share = info.get("overlapping_entity_share")
        return (isinstance(info["vocab_tokens"], int) and info["tokenization"] in ("char", "subword")
                and info.get("overlapping_entities") in (None, True, False)
                and info.get("word_boundaries") in (None, True, False)
                and (share is None or (type(share) in (int, float) and 0 <= share <= 1)))

    info = _read_json_object(directory, CHECKPOINT_INFO, '{"vocab_tokens": N, "tokenization": "char" or "subword"}',
                             fits)
    check_format_version(os.path.join(directory, CHECKPOINT_INFO), info)
    return info


# keys of model: that decide how outputs are decoded, not what the network computes
DECODING_KEYS = ("decode", "min_score", "use_calibration")
COMPILED_FROM = "compiled_from"  # export.json of a compiled program: the digest of the checkpoint it came from


def network_settings(config: RunConfig) -> dict:
    """The keys of ``config.model`` that decide what the network computes."""
    return {key: value for key, value in dataclasses.asdict(config.model).items() if key not in DECODING_KEYS}


def model_digest(model: "ModelDirectory") -> str:
    """What the network of a checkpoint computes, as a hash: its weights, what the model is as it was
    read (types, tokenization, vocabulary, the encoder's architecture, the network's settings),
    Paddle's version (from the module: the CPU and GPU builds install under different package names)
    and the directory format."""
    import paddle

    tokenizer = model.tokenizer
    what = [model.trained_for.labels, model.info, model.architecture, dict(tokenizer.vocab.token_to_idx),
            tokenizer.do_lower_case, network_settings(model.record), paddle.__version__, FORMAT_VERSION]
    digest = hashlib.sha256(file_digest(os.path.join(model.path, WEIGHTS)))
    digest.update(json.dumps(what, sort_keys=True, ensure_ascii=False).encode())
    return digest.hexdigest()


# A file is hashed once while it is unchanged, in this process and across processes (a predict that
# compiles the checkpoint and then loads it asks twice; every predict asks once): the key holds what
# any write changes (size, modification and change times), and the digest is kept in the cache
_FILE_DIGESTS: Dict[tuple, bytes] = {}


def file_digest(path: str) -> bytes:
    status = os.stat(path)
    key = (os.path.realpath(path), status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns,
           status.st_ctime_ns)
    if key not in _FILE_DIGESTS:
        _FILE_DIGESTS[key] = _remembered_digest(key) or _remember_digest(key, _hash_file(path))
    return _FILE_DIGESTS[key]


def _digest_memo(key: tuple) -> str:
    """Where the digest of the file ``key`` names is kept; a UserError when the cache lies inside the
    model directory the file is in (an output inside an input)."""
    return model_cache(os.path.dirname(key[0]), "digests", hashlib.sha256(repr(key).encode()).hexdigest()[:32])


def model_cache(model_path: str, *parts: str) -> str:
    """``cache_directory(*parts)``, which must not lie inside the model directory it is for: the cache
    would write into an input (``GLOBALPOINTER_CACHE`` inside a checkpoint wrote compiled/ into it)."""
    path = cache_directory(*parts)
    if contains(model_path, path):
        raise UserError(f"${CACHE_ENV} ({os.environ.get(CACHE_ENV)}) lies inside the model directory {model_path}, "
                        f"which a cache must not write into: point it elsewhere")
    return path


def _remembered_digest(key: tuple) -> Optional[bytes]:
    try:
        with open(_digest_memo(key), encoding="ascii") as handle:
            digest = bytes.fromhex(handle.read(65))
        return digest if len(digest) == hashlib.sha256().digest_size else None
    except (OSError, ValueError, UserError):
        return None


def _remember_digest(key: tuple, digest: bytes) -> bytes:
    with contextlib.suppress(OSError, UserError):  # a cache that cannot be written: hashed again next time
        memo = _digest_memo(key)
        os.makedirs(os.path.dirname(memo), exist_ok=True)
        atomic_write_text(memo, digest.hex())
    return digest


def _hash_file(path: str) -> bytes:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.digest()


class CompiledProgram(NamedTuple):
    """Where the Paddle Inference program compiled from a checkpoint is kept, and the checkpoint's digest
    that the program's export.json must record before it runs."""
    directory: str
    digest: str


def compiled_program(model: "ModelDirectory") -> Optional[CompiledProgram]:
    """The cache entry of the checkpoint ``model`` (named by its digest), or None with a warning
    when the cache cannot be used (compiling is an optimisation: the checkpoint runs without it)."""
    try:
        root = model_cache(model.path, "compiled")
    except UserError as error:
        log.warning("compiled programs are not cached: %s", error)
        return None
    return CompiledProgram(os.path.join(root, model.digest[:32]), model.digest)


def verified_program(entry: CompiledProgram) -> Optional[dict]:
    """The entry's export.json if the entry holds a program compiled from the checkpoint of
    ``entry.digest``, with every file it recorded at its recorded size; otherwise None, and an entry
    that is there but foreign or damaged is removed with a warning (it is rebuilt on the next compile)."""
    if not os.path.lexists(entry.directory):
        return None
    info_path = os.path.join(entry.directory, EXPORT_INFO)
    problem = None
    try:
        info = read_json(info_path)
        sizes = info["sizes"]
        if info.get(COMPILED_FROM) != entry.digest:
            problem = "it was compiled from another checkpoint"
        else:
            damaged = [name for name, size in sizes.items()
                       if os.path.getsize(os.path.join(entry.directory, name)) != size]
            problem = f"{', '.join(damaged)} changed since it was written" if damaged else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        problem = f"its {EXPORT_INFO} cannot be read ({error.__class__.__name__})"
    if problem is None:
        return info
    drop_compiled(entry.directory, problem)
    return None


def drop_compiled(directory: str, why: str) -> None:
    """A cache entry that cannot be trusted or run is removed (or left, when it cannot be), never run."""
    log.warning("%s: compiled program not used (%s); the checkpoint runs without it", directory, why)
    if os.path.islink(directory) or not os.path.isdir(directory):
        with contextlib.suppress(OSError):
            os.remove(directory)
    else:
        shutil.rmtree(directory, ignore_errors=True)


def prune_compiled(kept: str, budget_mb: int) -> List[str]:
    """The compiled programs beside the entry ``kept`` (just built) that do not fit in ``budget_mb``
    MB with it, the least recently run first, removed (0: no bound); the removed entries' folders.
    A process running one of them has already loaded it; one about to load it drops it with a warning
    and runs its checkpoint.  A folder another process is writing or swapping (``PARTIAL``,
    ``PREVIOUS``) is its to finish or remove; one a killed compile left is removed first, bound or not."""
    root = os.path.dirname(kept)
    for path in remove_abandoned_partials(root):
        log.info("compiled program cache: removed %s, left by a compile that did not finish", path)
    if not budget_mb:
        return []
    entries = []
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if path != kept and PARTIAL not in name and PREVIOUS not in name and os.path.isdir(path) \
                and not os.path.islink(path):
            with contextlib.suppress(OSError):  # another process removed it meanwhile
                entries.append((os.path.getmtime(path), _folder_bytes(path), path))
    room = budget_mb * 2 ** 20 - _folder_bytes(kept)
    removed = []
    for _, size, path in sorted(entries, reverse=True):  # the most recently run keep their places first
        room -= size
        if room < 0:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    if removed:
        log.info("compiled program cache: %d least recently run program(s) removed to stay within "
                 "inference.compiled_cache_mb (%d MB)", len(removed), budget_mb)
    return removed


def _folder_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(path, name)) for name in os.listdir(path))


def runs_compiled(opened: "ModelDirectory", config: RunConfig) -> bool:
    """Whether a run of ``config`` on the model ``opened`` may run the program compiled from it: a
    checkpoint, ``inference.backend: auto``, and the network the program was compiled from (the
    record's settings, not overridden)."""
    return (config.inference.backend == "auto" and not opened.export
            and network_settings(config) == network_settings(opened.record))


def recorded_packing(export_info: dict) -> Optional[bool]:
    """What an export.json (an export's, or a compiled program's) says of packing texts (None: it
    does not say, and the program's inputs decide)."""
    recorded = export_info.get("packs_texts")
    return recorded if isinstance(recorded, bool) else None


def compiled_network(opened: "ModelDirectory", config: RunConfig, settings) -> Optional[tuple]:
    """(backend, network) of the program compiled from the checkpoint ``opened`` when the cache holds
    one that was compiled from it and loads; None otherwise (an entry that fails to load is dropped
    with a warning, and the checkpoint runs itself)."""
    from .model.backends import BACKENDS

    if not runs_compiled(opened, config):
        return None
    entry = compiled_program(opened)
    program_info = entry and verified_program(entry)
    if not program_info:
        return None
    program_directory = entry.directory
    try:  # the program's export.json, not the checkpoint's, says whether it packs texts
        network = BACKENDS["paddle-inference"].build(program_directory,
                                                     settings._replace(packs_texts=recorded_packing(program_info)))
    except Exception as error:  # Paddle's loader raises its own kinds for a damaged program
        last_line = str(error).strip().splitlines()[-1] if str(error).strip() else repr(error)
        drop_compiled(program_directory, f"it does not load: {last_line}")
        return None
    with contextlib.suppress(OSError):  # when it last ran: the cache's bound removes the least recent first
        os.utime(program_directory)
    log.info("%s: running the program compiled from it, %s (inference.backend=dynamic: the checkpoint itself)",
             opened.path, program_directory)
    return "paddle-inference", network


@dataclasses.dataclass(frozen=True, eq=False)
class ModelDirectory:
    """A model directory opened once (``open_model``): its files read and checked, each once.  Every
    reader of a model (``globalpointer.load``, both services, export, compiling, ``choose_backend``)
    takes this value and opens none of them again.  ``record`` is what the model is, as trained;
    how one run uses it (device, backend, batch sizes, service bounds, decoding) is
    ``run_config(overrides)``."""
    path: str  # a checkpoint's (or the copy a kill between the two renames of a save left), or an export's
    kind: str  # "checkpoint" or "export"
    record: RunConfig
    trained_for: TrainedFor
    info: dict  # checkpoint.json
    architecture: dict  # config.json: the encoder's
    tokenizer: object
    export_info: dict  # an export's export.json as read (empty for a checkpoint)

    @property
    def export(self) -> bool:
        return self.kind == "export"

    def run_config(self, overrides: List = None) -> RunConfig:
        """The record with ``overrides`` applied and checked: what the model is cannot change, and what
        shaped the run that trained it (``TRAINING_RUN_KEYS``) shapes no reader of it unless set again."""
        config = _run_config(self.path, self.record, overrides, saved_position_limit(self.architecture))
        given = {override_key(item) for item in overrides or []}
        if "data.limit" not in given and config.data.limit:
            config = dataclasses.replace(config, data=dataclasses.replace(config.data, limit=0))
        return config

    @property
    def packs_texts(self) -> Optional[bool]:
        """What an export's export.json says of packing texts (``recorded_packing``; None for a checkpoint)."""
        return recorded_packing(self.export_info)

    @functools.cached_property
    def min_scores(self) -> Optional[List[float]]:
        """The calibrated minimum score of every type (``read_min_scores``: thresholds.json), read
        when first asked for: a run with ``model.use_calibration: false`` never opens the file."""
        return read_min_scores(self.path, self.trained_for.labels)

    @functools.cached_property
    def digest(self) -> str:
        """``model_digest``, computed when first asked for: when a compiled program is looked up or built."""
        return model_digest(self)


def open_model(model: Union[str, ModelDirectory]) -> ModelDirectory:
    """``model`` (a checkpoint or an export directory) resolved, its files checked and read: format
    version one this code reads, record, types, architecture, tokenizer.  A command opens it once
    and hands the value on; opened already, it is returned as it is."""
    if isinstance(model, ModelDirectory):
        return model
    path, kind = locate_model(model)
    export_info = read_export_info(path) if kind == "export" else {}
    _check_files(path, (WEIGHTS,) + METADATA_FILES if kind == "checkpoint" else METADATA_FILES)
    record, trained_for, info = _read_record(path, export_info if kind == "export" else None)
    architecture = _read_architecture(path)
    try:
        tokenizer = bert_tokenizer(os.path.join(path, "vocab.txt"), _recorded_lower_case(path))
    except Exception as error:  # PaddleNLP raises many kinds for an unreadable vocabulary
        raise CheckpointError(f"{path}/vocab.txt cannot be read ({error})") from None
    if len(tokenizer.vocab) != info["vocab_tokens"]:  # a truncated file still predicts
        raise CheckpointError(f"{path}/vocab.txt has {len(tokenizer.vocab)} tokens but the model was trained with "
                              f"{info['vocab_tokens']}; the file is truncated or replaced: restore it from the run")
    return ModelDirectory(path, kind, record, trained_for, info, architecture, tokenizer, export_info)


def load_checkpoint(model: Union[str, ModelDirectory], overrides: List = None) -> LoadedModel:
    """The network of a checkpoint (its path, or its ``ModelDirectory``) on the current device, with
    the run config of ``overrides``."""
    model = open_model(model)
    if model.export:
        raise CheckpointError(f"{model.path} is an export, not a checkpoint: use the checkpoint it was made from "
                              f"(RUN_DIR/best)")
    config = model.run_config(overrides)
    network, encoder = load_network(model.path, config.model, len(model.trained_for.labels), model.tokenizer,
                                    model.architecture)
    return LoadedModel(network, encoder, config, model.trained_for, model.path)
