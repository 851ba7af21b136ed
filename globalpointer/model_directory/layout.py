"""The model directory's layout: the name of every file a checkpoint or an export holds, what it holds,
and how each open checks it (docs/model-directory.md).  No file name of a model directory is spelled
outside this package (tests/test_architecture.py).

A checkpoint: ``WEIGHTS`` (encoder and head), ``CONFIG`` (the run config as trained, with every default,
but not how the model is run: ``config.RUN_TIME_KEYS``), ``LABELS`` and ``CHECKPOINT_INFO`` (what
training resolved: the types in output order, the tokenization, the vocabulary size, every other file's
size), ``ARCHITECTURE`` and the tokenizer's files (``VOCAB``, ``TOKENIZER_CONFIG``), optionally
``THRESHOLDS``, and ``RELATIONS`` for a relation model; ``last/`` adds ``OPTIMIZER_STATE`` and ``TRAINER_STATE`` for --resume.  An export: the
checkpoint's files but its weights, ``EXPORT_PROGRAM`` + ``PARAMS`` (Paddle Inference), ``EXPORT_INFO``
(its manifest with sizes), optionally ``ONNX``, ``ONNX_INT8``, ``OPENVINO_INT8`` + ``OPENVINO_INT8_WEIGHTS``.
"""
import os
import stat
from typing import Dict, List, Optional, Tuple

from ..errors import CheckpointError
from ..files import TEMPORARY_MARKER, previous_versions, read_json
from .digests import file_digest, hash_file

WEIGHTS = "model.safetensors"  # safetensors: read as data, never executed
CONFIG = "config.yaml"
LABELS = "labels.json"
RELATIONS = "relations.json"  # a relation model's relation types, in output order (no such file: an entity model)
ARCHITECTURE = "config.json"  # the encoder's, as PaddleNLP saves it
VOCAB = "vocab.txt"
OPTIMIZER_STATE = "optimizer.safetensors"  # last/ only, for --resume
TRAINER_STATE = "trainer_state.json"  # last/ only: where the run stands
PARAMS, ONNX, ONNX_INT8 = "inference.pdiparams", "model.onnx", "model.int8.onnx"
OPENVINO_INT8, OPENVINO_INT8_WEIGHTS = "model.int8.xml", "model.int8.bin"  # OpenVINO's IR: graph, weights

CHECKPOINT_INFO = "checkpoint.json"  # resolved tokenization; vocabulary size, checked against vocab.txt
TOKENIZER_CONFIG = "tokenizer_config.json"  # PaddleNLP's: whether the tokenizer lower-cases
METADATA_FILES = (CONFIG, LABELS, CHECKPOINT_INFO, ARCHITECTURE, VOCAB)
THRESHOLDS = "thresholds.json"  # per-type thresholds written by globalpointer calibrate
# checkpoint.json and export.json record the size (CHECKED_FILES; an export's "sizes") and the SHA-256
# (CHECKED_DIGESTS) of every other file of their directory, checked at each open (a digest is read again
# only after a write: digests.file_digest); thresholds.json is not among them: calibrate rewrites it in
# place, and its reader checks it whole
CHECKED_FILES = "checked_files"
CHECKED_DIGESTS = "sha256"
COMPILED_FROM = "compiled_from"  # export.json of a compiled program: the digest of the checkpoint it came from


def is_regular_file(path: str) -> bool:
    """A regular file itself: not a link (whatever it points to), a pipe, a socket, a device or a folder."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def check_regular_file(path: str) -> None:
    """``path`` is a file of the directory's own: a link (wherever it points), a pipe, a socket, a device
    or a folder is refused in one line naming it, before it is read."""
    if os.path.islink(path):
        raise CheckpointError(f"{path} is a link: a model directory holds its files themselves; put the file there "
                              f"(or restore it from the run)")
    if not is_regular_file(path):  # read, a pipe would wait for a writer forever
        raise CheckpointError(f"{path} is not a regular file (a pipe, socket, device or folder); restore it from "
                              f"the run")


def file_record(directory: str) -> Dict[str, int]:
    """The size of every file of ``directory`` but the records themselves and thresholds.json
    (``check_file_record`` compares them at each open)."""
    return {name: os.path.getsize(os.path.join(directory, name)) for name in sorted(os.listdir(directory))
            if name not in (CHECKPOINT_INFO, EXPORT_INFO, THRESHOLDS, TEMPORARY_MARKER)
            and is_regular_file(os.path.join(directory, name))}


def file_digests(directory: str, names) -> Dict[str, str]:
    """The SHA-256 (hex) of each of ``names`` in ``directory``, as written (``CHECKED_DIGESTS``)."""
    return {name: hash_file(os.path.join(directory, name)).hex() for name in names}


def check_file_record(directory: str, record: dict, where: str, digests: Optional[dict] = None) -> None:
    """Each file ``record`` (``file_record``, or an export's ``sizes``) lists, a regular file at its size
    and, where ``digests`` (``CHECKED_DIGESTS``) are recorded, with its content; no file a reader opens by
    name that the record does not list.  Anything else is refused in one line naming the file, before
    any work."""
    for name, expected in sorted(record.items()):
        if name == THRESHOLDS:
            continue
        if isinstance(expected, bool) or not isinstance(expected, int):
            raise CheckpointError(f"{os.path.join(directory, where)} is corrupted: its record of {name} is no size; "
                                  f"restore it from the run")
        path = os.path.join(directory, name)
        if not os.path.lexists(path):
            raise CheckpointError(f"{path} is missing, and {where} lists it; restore it from the run")
        check_regular_file(path)
        size = os.path.getsize(path)
        if size != expected:
            state = "emptied" if size == 0 else f"{size:,} bytes where {expected:,} were written"
            raise CheckpointError(f"{path} is {state} ({where} records it): the file is truncated, emptied or "
                                  f"replaced; restore it from the run, or export or train again")
        if digests is not None:
            if not isinstance(digests.get(name), str):
                raise CheckpointError(f"{os.path.join(directory, where)} is corrupted: it records no SHA-256 of "
                                      f"{name}; restore it from the run")
            if file_digest(path).hex() != digests[name]:
                raise CheckpointError(f"{path} is not the file {where} records: its content differs at the same "
                                      f"size (SHA-256); restore it from the run, or export or train again")
    added = [name for name in READ_BY_NAME if name not in record and os.path.lexists(os.path.join(directory, name))]
    if added:
        raise CheckpointError(f"{os.path.join(directory, added[0])} is not among the files {where} records: it was "
                              f"put there after the model was written, and would be read as part of the model; "
                              f"remove it (or restore the directory from the run)")


def check_model_files(directory: str, info: dict, export_info: Optional[dict] = None) -> None:
    """The files of a checkpoint (``export_info`` None; ``info``: its checkpoint.json) or an export,
    against what its checkpoint.json or export.json recorded; a model of an earlier version, which
    records nothing, has its config.yaml checked not to be empty (it would load as the defaults)."""
    recorded = info if export_info is None else export_info
    record, where = (info.get(CHECKED_FILES), CHECKPOINT_INFO) if export_info is None else \
        (export_info.get("sizes"), EXPORT_INFO)
    if isinstance(record, dict):
        digests = recorded.get(CHECKED_DIGESTS)
        if digests is not None and not isinstance(digests, dict):
            raise CheckpointError(f"{os.path.join(directory, where)} is corrupted: its {CHECKED_DIGESTS} is no "
                                  f"object of file digests; restore it from the run")
        check_file_record(directory, record, where, digests)
        return
    path = os.path.join(directory, CONFIG)
    if not os.path.getsize(path):
        raise CheckpointError(f"{path} is emptied: restore it from the run")


def model_file_names(directory: str) -> List[str]:
    """The files the model in ``directory`` is, as a service copies and hashes it: its record
    (checkpoint.json, or an export's export.json), the files the record lists that are regular files, and
    thresholds.json; a model of an earlier version, which lists nothing, is its regular files.  Never a
    link, a pipe or a device, whatever else the directory holds."""
    for where, key in ((CHECKPOINT_INFO, CHECKED_FILES), (EXPORT_INFO, "sizes")):
        path = os.path.join(directory, where)
        if is_regular_file(path):
            try:
                listed = read_json(path).get(key)
            except (OSError, ValueError, AttributeError):
                listed = None
            if isinstance(listed, dict):
                names = [where, *listed, THRESHOLDS]
                return sorted(name for name in set(names) if is_regular_file(os.path.join(directory, name)))
    return sorted(name for name in os.listdir(directory) if is_regular_file(os.path.join(directory, name)))


def recorded_packing(export_info: dict) -> Optional[bool]:
    """What an export.json (an export's, or a compiled program's) says of packing texts (None: it
    does not say, and the program's inputs decide)."""
    recorded = export_info.get("packs_texts")
    return recorded if isinstance(recorded, bool) else None


# ---- model directories: their format, and manifests (a directory the project may replace lists
# every file in it) ------------------------------------------------------------------------------

# The layout of the model directories this code writes (checkpoint.json and an export's export.json
# say which they follow); one a later version wrote is refused rather than half understood.
FORMAT_VERSION = 1


EXPORT_PROGRAM = "inference.json"  # an export's Paddle Inference program: what makes a directory an export
EXPORT_INFO = "export.json"  # the files an export wrote (its manifest), and whether it packs texts
# Files a reader of a model directory opens by their name: one the record does not list was put there
# after the model was written (a relations.json added to an entity model's folder) and is refused, never read
READ_BY_NAME = (WEIGHTS, CONFIG, LABELS, RELATIONS, ARCHITECTURE, VOCAB, TOKENIZER_CONFIG, OPTIMIZER_STATE,
                TRAINER_STATE, EXPORT_PROGRAM, PARAMS, ONNX, ONNX_INT8, OPENVINO_INT8, OPENVINO_INT8_WEIGHTS)


def locate_model(model: str) -> Tuple[str, str]:
    """(path, kind) of a model directory: an export ("export"), or a checkpoint ("checkpoint": the
    directory, or the copy a kill between the two renames of a save left)."""
    if is_export(model):
        return model, "export"
    return resolve_checkpoint(model), "checkpoint"


def is_export(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, EXPORT_PROGRAM))


def read_export_info(directory: str) -> dict:
    """An export's export.json (empty where it is missing or unreadable: the program then says what
    it reads, ``backends.program_input_dtype``); one written by a later version is refused."""
    path = os.path.join(directory, EXPORT_INFO)
    try:
        info = read_json(path)
    except (OSError, ValueError):
        return {}
    if not isinstance(info, dict):
        return {}
    check_format_version(path, info)
    return info


def resolve_checkpoint(directory: str) -> str:
    """The directory itself, or the copy left by a kill between the two renames of a save."""
    if os.path.isdir(directory):
        return directory
    for previous in previous_versions(directory):
        return previous
    raise CheckpointError(f"checkpoint directory not found: {directory} (expected RUN_DIR/best or RUN_DIR/last)")


def check_format_version(path: str, info: dict) -> None:
    """A model directory written by a later version of this project is refused, naming both versions."""
    version = info.get("format_version", 1)  # directories written before versions were recorded: 1
    if not isinstance(version, int) or isinstance(version, bool) or version > FORMAT_VERSION:
        raise CheckpointError(f"{path}: format_version {version!r}, but this globalpointer reads up to "
                              f"{FORMAT_VERSION}; install the version that wrote it (or a later one)")
