"""The compiled-program cache: a checkpoint compiled once into a Paddle Inference program, kept under
the digest of what its network computes, verified before it runs, pruned to its bound.  A ``model``
or ``opened`` here is an ``opening.ModelDirectory`` (which imports this module for its digest)."""
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import shutil
from typing import List, NamedTuple, Optional

from ..config import RunConfig
from ..errors import UserError
from ..files import PARTIAL, PREVIOUS, read_json, remove_abandoned_partials
from .digests import file_digest, model_cache
from .layout import COMPILED_FROM, EXPORT_INFO, FORMAT_VERSION, WEIGHTS, recorded_packing

log = logging.getLogger("globalpointer")

# keys of model: that decide how outputs are decoded, not what the network computes
DECODING_KEYS = ("decode", "min_score", "use_calibration")


def network_settings(config: RunConfig) -> dict:
    """The keys of ``config.model`` that decide what the network computes."""
    return {key: value for key, value in dataclasses.asdict(config.model).items() if key not in DECODING_KEYS}


def model_digest(model) -> str:
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


class CompiledProgram(NamedTuple):
    """Where the Paddle Inference program compiled from a checkpoint is kept, and the checkpoint's digest
    that the program's export.json must record before it runs."""
    directory: str
    digest: str


def compiled_program(model) -> Optional[CompiledProgram]:
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


def runs_compiled(opened, config: RunConfig) -> bool:
    """Whether a run of ``config`` on the model ``opened`` may run the program compiled from it: a
    checkpoint, ``inference.backend: auto``, and the network the program was compiled from (the
    record's settings, not overridden)."""
    return (config.inference.backend == "auto" and not opened.export
            and network_settings(config) == network_settings(opened.record))


def compiled_network(opened, config: RunConfig, settings) -> Optional[tuple]:
    """(backend, network) of the program compiled from the checkpoint ``opened`` when the cache holds
    one that was compiled from it and loads; None otherwise (an entry that fails to load is dropped
    with a warning, and the checkpoint runs itself)."""
    from ..model.backends import BACKENDS

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
