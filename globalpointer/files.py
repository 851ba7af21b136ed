"""The output policy of every command that writes.

- An output never is, nor holds, an input of the same command (real paths, links resolved; hard
  links by inode), and no two outputs of one command are the same file.
- Everything is written under a temporary name unique to this process and renamed into place, so a
  reader, or a crash, never sees half a file, and no file or folder of the user's that happens to be
  called ``OUT.partial`` or ``OUT.previous`` is ever written or removed.  Only a regular file, or a
  path that does not exist yet, is replaced by rename: a device, a FIFO or a socket (``/dev/stdout``,
  ``/dev/null``, a named pipe) is written in place, never replaced.
- SIGTERM stops a command that writes as Ctrl-C does (``stop_on_sigterm``): the same cleanup runs.
- A directory is replaced only when it is wholly the project's: its manifest lists every file in it.
- One run directory has one writer at a time (``RunLock``).
"""
import contextlib
import errno
import fcntl
import glob
import json
import os
import signal
import shutil
import stat
import tempfile
import threading
import time
from typing import Dict, Iterator, List, Optional, Sequence, TextIO

from .errors import UserError

PARTIAL = ".partial-"  # infix of a directory or file being written
PREVIOUS = ".previous-"  # infix of a directory being replaced (removed once its successor is in place)


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


def contains(outer: str, inner: str) -> bool:
    """Whether ``inner`` is ``outer`` or lies inside it, links resolved."""
    outer, inner = _real(outer), _real(inner)
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def _same_file(a: str, b: str) -> bool:
    return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)


def input_relation(path: str, source: Optional[str]) -> Optional[str]:
    """How writing ``path`` would touch the input ``source``: "is", "holds", "lies inside", or None."""
    if not source or source == "-":
        return None
    if _same_file(path, source) or _real(path) == _real(source):
        return "is"
    if contains(path, source):
        return "holds"
    if os.path.isdir(source) and contains(source, path):
        return "lies inside"
    return None


def check_not_input(path: str, flag: str, inputs: Sequence[Optional[str]]) -> None:
    """``path`` (a file or directory the command writes) is none of ``inputs``, holds none of them,
    and lies in no input directory (a model directory, say)."""
    for source in inputs:
        relation = input_relation(path, source)
        if relation:
            raise UserError(f"{flag} {path} {relation} the input {source}; writing it would destroy the input: "
                            f"name another output")


def check_output_file(path: str, flag: str, inputs: Sequence[Optional[str]] = ()) -> None:
    """``path`` can be written as a file and is none of ``inputs`` (by real path, link or inode)."""
    if os.path.isdir(path):
        raise UserError(f"{flag} {path} is a directory; name a file, e.g. {os.path.join(path, 'out.jsonl')}")
    check_not_input(path, flag, inputs)
    check_writable_location(path, flag)


def check_writable_location(path: str, flag: str) -> None:
    """The nearest existing folder of ``path`` can be written into, checked before any work."""
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: cannot write into {parent}; choose another location")


def check_output_files(outputs: Dict[str, Optional[str]], inputs: Sequence[Optional[str]]) -> None:
    """Every file output of a command (flag -> path; None or "-" for none or standard output) can be
    written, touches none of ``inputs``, and no two are the same file."""
    seen: Dict[str, str] = {}
    for flag, path in outputs.items():
        if not path or path == "-":
            continue
        real = _real(path)
        if real in seen:
            raise UserError(f"{flag} and {seen[real]} name the same file {path}; one would replace the other: "
                            f"give them different names")
        seen[real] = flag
        check_output_file(path, flag, inputs)


def chmod_as_created(path: str, mode: int) -> None:
    """The permissions open() or os.makedirs would have given ``path``: ``mode`` less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, mode & ~umask)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program runs, so that it stops as on Ctrl-C: partial outputs are
    cleaned up or named, never left unsaid."""


TERMINATION = threading.Event()  # set by SIGTERM: code that wraps the exception (Paddle's) cannot hide it


_deferring = 0  # depth of termination_deferred blocks (main thread only: signal handlers run there)
_deferred = False  # a SIGTERM arrived inside one


def _terminated(signum, frame):
    global _deferred
    TERMINATION.set()
    if _deferring:
        _deferred = True
        return
    raise Terminated("terminated (SIGTERM)")


@contextlib.contextmanager
def termination_deferred() -> Iterator[None]:
    """A SIGTERM that arrives inside the block is raised (``Terminated``) when the block ends, not where
    it lands: for Paddle's program building (``to_static``, ``jit.save``), which calls back into Python
    from C++ and crashes the process (SIGSEGV, SIGABRT) when an exception unwinds through it, so that
    the cleanup of partial outputs never runs."""
    global _deferring, _deferred
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
    if not _deferring and _deferred:
        _deferred = False
        raise Terminated("terminated (SIGTERM)")


def stop_on_sigterm() -> None:
    """SIGTERM raises ``Terminated`` from here on, unless a handler of the program's own is in place
    (training's stop request, a service's graceful shutdown).  Called where outputs start to be
    written, and by the commands' error boundary: importing Paddle installs a handler of its own,
    at C level, that aborts the process, and Python's ``getsignal`` does not see it."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None, _terminated):
        signal.signal(signal.SIGTERM, _terminated)


# a path through these names one of the process's open files (/dev/stdout -> /proc/self/fd/1): renaming
# over it would replace the link, or the device itself, instead of writing to what it is open on
PROCESS_FILES = ("/proc/", "/dev/fd/")


def _names_an_open_file(path: str) -> bool:
    for _ in range(40):  # the kernel's own bound on links followed
        if os.path.abspath(path).startswith(PROCESS_FILES):
            return True
        if not os.path.islink(path):
            return False
        path = os.path.join(os.path.dirname(path), os.readlink(path))
    return False


def replaced_by_rename(path: str) -> bool:
    """Whether ``path`` is written by rename: a regular file (links followed) or a path not there yet;
    a device, FIFO or socket, or a file reached through /proc or /dev/fd, is written in place."""
    if _names_an_open_file(path):
        return False
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True


@contextlib.contextmanager
def atomic_output(path: str, binary: bool = False) -> Iterator[TextIO]:
    """A file (text, or bytes with ``binary``) written under a unique temporary name beside ``path`` and
    renamed to ``path`` when the block ends without an error; on an error the temporary file is
    removed, unless it is Ctrl-C: then it stays, and its name is in ``handle.partial_name`` for the
    message (someone is there to read it; after a scheduler's SIGTERM no one is, and it is removed).  A device or FIFO (``/dev/stdout``) is written in place
    (``partial_name`` None)."""
    stop_on_sigterm()
    if not replaced_by_rename(path):
        with open(path, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as out:
            out.partial_name = None
            yield out
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=os.path.basename(path) + PARTIAL)
    chmod_as_created(temporary, 0o666)  # mkstemp's 0600 would hide reports from others
    out = os.fdopen(handle, "wb") if binary else os.fdopen(handle, "w", encoding="utf-8")
    out.partial_name = temporary
    try:
        with out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except KeyboardInterrupt as stop:
        if isinstance(stop, Terminated) or TERMINATION.is_set():
            with contextlib.suppress(FileNotFoundError):
                os.remove(temporary)
        raise
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


def atomic_write_text(path: str, text: str) -> None:
    with atomic_output(path) as out:
        out.write(text)


def parse_json(text):
    """``json.loads``, with a document nested past what Python's parser follows a ValueError ("nested
    too deeply") like any other unreadable one, so that one ``except ValueError`` catches them all."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def read_json(path: str):
    """The JSON document in the file ``path`` (``parse_json``: every unreadable one a ValueError)."""
    with open(path, encoding="utf-8") as handle:
        return parse_json(handle.read())


def atomic_write_json(path: str, obj) -> None:
    atomic_write_text(path, json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


# What makes a directory one of this product's temporaries (a partial copy being written, or the previous
# version of a directory being replaced): this file inside, naming the directory.  A folder of the user's
# named like one (best.previous-20240131) has none, and is never removed or loaded as one.
TEMPORARY_MARKER = ".globalpointer-temporary"


def mark_temporary(directory: str) -> None:
    with open(os.path.join(directory, TEMPORARY_MARKER), "w", encoding="utf-8") as out:
        out.write(os.path.basename(directory))


def unmark(directory: str) -> None:
    """Before a partial directory is published: it is no temporary from then on."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(directory, TEMPORARY_MARKER))


def is_temporary(directory: str) -> bool:
    """Whether ``directory`` is a temporary this product made (``TEMPORARY_MARKER``), not a link."""
    if os.path.islink(directory) or not os.path.isdir(directory):
        return False
    try:
        with open(os.path.join(directory, TEMPORARY_MARKER), encoding="utf-8") as handle:
            return handle.read(300) == os.path.basename(directory)
    except (OSError, UnicodeDecodeError):
        return False


def partial_directory(directory: str) -> str:
    """A new empty directory beside ``directory``, unique to this call and marked as a temporary, to
    write its successor into."""
    stop_on_sigterm()
    parent = os.path.dirname(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)
    partial = tempfile.mkdtemp(dir=parent, prefix=os.path.basename(os.path.abspath(directory)) + PARTIAL)
    chmod_as_created(partial, 0o777)
    mark_temporary(partial)
    return partial


def temporaries(directory: str, infix: str) -> List[str]:
    """The directories ``partial_directory`` (``PARTIAL``) or ``swap_in_directory`` (``PREVIOUS``) made
    beside ``directory``: its name and the infix, and the marker they write (``is_temporary``), so that a
    folder of the user's called ``last.partial-mine`` or ``best.previous-20240131`` is not one."""
    prefix = glob.escape(os.path.abspath(directory)) + infix
    return [path for path in glob.glob(prefix + "*") if is_temporary(path)]


@contextlib.contextmanager
def directory_being_written(directory: str) -> Iterator[str]:
    """A ``partial_directory`` for the block to write ``directory``'s successor into and move into place
    (``swap_in_directory``, or a rename of its own).  Its writer holds a lock on it while the block runs,
    which tells it from one a killed writer left (``remove_abandoned_partials``); it is removed however
    the block ends, unless the block moved it."""
    partial = partial_directory(directory)
    writing = os.open(partial, os.O_RDONLY)
    try:
        fcntl.flock(writing, fcntl.LOCK_EX)
        yield partial
    finally:
        with contextlib.suppress(OSError):  # moved into place: the name is gone, or another's by now
            if os.path.samestat(os.stat(partial), os.fstat(writing)):
                shutil.rmtree(partial, ignore_errors=True)
        os.close(writing)


# A checkpoint, an export or a converted encoder is written in minutes at most: a partial directory
# untouched for an hour that no writer holds was left by a killed one (the hour also spares a live
# writer between creating its directory and locking it).
ABANDONED_AFTER_SECONDS = 3600


def remove_abandoned_partials(root: str) -> List[str]:
    """Remove the partial directories in ``root`` whose writers were killed mid-write (SIGKILL, out of
    memory), which nobody would ever publish or remove; the removed directories' paths."""
    removed = []
    for name in os.listdir(root):
        path = os.path.join(root, name)
        try:
            abandoned = PARTIAL in name and time.time() - os.lstat(path).st_mtime > ABANDONED_AFTER_SECONDS
        except OSError:  # moved into place or removed meanwhile
            continue
        abandoned = abandoned and is_temporary(path)
        if abandoned and remove_unless_held(path):
            removed.append(path)
    return removed


def remove_unless_held(directory: str) -> bool:
    """Remove ``directory`` unless a process holds a lock on it (a reader's shared one or a writer's),
    or it is no directory (a file, a link): whether it was removed."""
    if not os.path.isdir(directory) or os.path.islink(directory):
        return False
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:  # removed by another process meanwhile
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    else:
        shutil.rmtree(directory, ignore_errors=True)
        return True
    finally:
        os.close(handle)


def swap_in_directory(partial: str, directory: str) -> None:
    """Put the finished ``partial`` directory in place of ``directory``: the old one is renamed to a
    unique ``directory.previous-XXXX`` first and removed last, so a kill leaves one of the two whole
    (``previous_versions`` finds it)."""
    directory = os.path.abspath(directory)
    previous = None
    if os.path.isdir(directory):
        previous = tempfile.mkdtemp(dir=os.path.dirname(directory), prefix=os.path.basename(directory) + PREVIOUS)
        os.replace(directory, previous)  # onto the empty directory just made: rename replaces it
        mark_temporary(previous)
    unmark(partial)
    os.replace(partial, directory)
    if previous:
        shutil.rmtree(previous, ignore_errors=True)


def previous_versions(directory: str) -> list:
    """The copies of ``directory`` a kill between ``swap_in_directory``'s renames left (marked as its
    temporaries: a user's ``best.previous-20240131`` is not one), newest first."""
    return sorted(temporaries(directory, PREVIOUS), key=os.path.getmtime, reverse=True)


# ---- the cache: encoders converted once, programs compiled from checkpoints ---------------------

CACHE_ENV = "GLOBALPOINTER_CACHE"  # the cache's folder (default ~/.cache/globalpointer), read at each call


def cache_directory(*parts: str) -> str:
    """``$GLOBALPOINTER_CACHE/PARTS`` (default ``~/.cache/globalpointer/PARTS``); a cache variable that
    names something other than a folder is a UserError saying so."""
    root = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "globalpointer")
    if os.path.lexists(root) and not os.path.isdir(root):
        raise UserError(f"${CACHE_ENV} is {root}, which is not a folder: point it at a folder (or unset it for "
                        f"~/.cache/globalpointer)")
    return os.path.join(root, *parts)


MANIFEST_KEY = "files"


def replaceable(directory: str, manifest: str, also: Sequence[str] = ()) -> bool:
    """Whether every entry of ``directory`` is listed in its JSON ``manifest`` (or in ``also``:
    files the project adds later, such as calibrated thresholds), so that replacing it loses
    nothing of anyone else's.  An empty directory is replaceable."""
    entries = set(os.listdir(directory))
    if not entries:
        return True
    try:
        listed = read_json(os.path.join(directory, manifest))[MANIFEST_KEY]
        assert isinstance(listed, list) and all(isinstance(name, str) for name in listed)
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        return False
    return entries <= set(listed) | {manifest} | set(also)


# ---- one writer per run directory --------------------------------------------------------------

LOCK_FILE = ".lock"


class RunLock:
    """An exclusive lock on a run directory, held while a process writes it: the kernel drops it when
    the process ends, however it ends, so a killed run never leaves a stale lock.  The file says who
    holds it."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, LOCK_FILE)
        self.handle = None

    def __enter__(self):
        self.handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(self.handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            self.handle.seek(0)
            holder = self.handle.read().strip() or "another process"
            self.handle.close()
            raise UserError(f"output_dir {os.path.dirname(self.path)} is being written by {holder}; wait for it "
                            f"to finish, or train into another output_dir (--set output_dir=...)") from None
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(f"a training run (pid {os.getpid()})\n")
        self.handle.flush()
        return self

    def __exit__(self, *exc):
        self.handle.close()  # closing releases the lock
