"""Output files: written atomically (a reader, or a crash, never sees half a report), and checked
before any work so that a run never ends by destroying its input or failing to write its result."""
import json
import os
import shutil
import tempfile
from typing import Sequence

from .errors import UserError


def check_output_file(path: str, flag: str, inputs: Sequence[str] = ()) -> None:
    """``path`` can be written as a file and is none of ``inputs`` (by name, link or inode)."""
    if os.path.isdir(path):
        raise UserError(f"{flag} {path} is a directory; name a file, e.g. {os.path.join(path, 'out.jsonl')}")
    for source in inputs:
        if source and source != "-" and os.path.exists(path) and os.path.exists(source) and os.path.samefile(path, source):
            raise UserError(f"{flag} {path} is the input file {source}; writing it would destroy the input: "
                            f"name another output file")
    directory = os.path.dirname(os.path.abspath(path))
    parent = directory
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: cannot write into {parent}; choose another location")


def chmod_as_created(path: str, mode: int) -> None:
    """The permissions open() or os.makedirs would have given ``path``: ``mode`` less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, mode & ~umask)


def atomic_write_text(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=os.path.basename(path) + ".", suffix=".tmp")
    chmod_as_created(temporary, 0o666)  # mkstemp's 0600 would hide reports from others
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def atomic_write_json(path: str, obj) -> None:
    atomic_write_text(path, json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


def swap_in_directory(partial: str, directory: str) -> None:
    """Put the finished ``partial`` directory in place of ``directory``: the old one is renamed to
    ``directory.previous`` first and removed last, so a kill leaves one of the two whole."""
    previous = directory + ".previous"
    if os.path.isdir(directory):
        shutil.rmtree(previous, ignore_errors=True)
        os.replace(directory, previous)
    os.replace(partial, directory)
    shutil.rmtree(previous, ignore_errors=True)
