"""A model directory as a service serves it: one model for the service's whole life.

The service copies the directory it was started with into a private copy (``ServedCopy``) and every
worker process loads that copy, so a worker restarted later serves what the others serve, even when
the directory was replaced or removed meanwhile.  ``content_digest`` names the content (said in
``/health``); ``DirectoryWatch`` tells whether the directory the service was started from still holds it.
"""
import contextlib
import fcntl
import hashlib
import os
import shutil
import tempfile
from typing import Optional, Tuple

from ..files import PARTIAL, cache_directory, mark_temporary, remove_abandoned_partials
from .digests import hash_file
from .layout import model_file_names

UNCHANGED, REPLACED, REMOVED = "unchanged", "replaced", "removed"  # DirectoryWatch.state()


def _files(directory: str):
    """The model's files (``layout.model_file_names``: its record, what the record lists, thresholds.json),
    as (name, path), sorted: never a link, a pipe or anything else the directory holds beside them."""
    for name in model_file_names(directory):
        yield name, os.path.join(directory, name)


def content_digest(directory: str) -> str:
    """SHA-256 of the model's files' names and contents (``_files``): the same for a copy."""
    digest = hashlib.sha256()
    for relative, path in _files(directory):
        digest.update(relative.encode("utf-8", "surrogateescape") + b"\0" + hash_file(path))
    return digest.hexdigest()


def directory_status(directory: str) -> Optional[tuple]:
    """What any replacement or write under ``directory`` changes (each file's inode, size and change
    time), without reading a file; None when it is gone."""
    try:
        return tuple((relative, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)
                     for relative, status in ((relative, os.lstat(path)) for relative, path in _files(directory)))
    except OSError:
        return None


class DirectoryWatch:
    """Whether ``directory`` still holds the content of ``digest``: its files' status is compared at
    each call, and only a changed status reads them again.  ``status``: the ``directory_status`` taken
    before ``digest`` was computed from the directory (None: unknown, the first call reads them)."""

    def __init__(self, directory: str, digest: str, status: Optional[tuple] = None):
        self.directory, self.digest = directory, digest
        # (status, state) of the last reading
        self._seen: Optional[Tuple[Optional[tuple], str]] = (status, UNCHANGED) if status else None

    def state(self) -> str:
        status = directory_status(self.directory) if os.path.isdir(self.directory) else None
        if self._seen is None or status != self._seen[0]:
            if status is None or not status:
                state = REMOVED
            else:
                try:
                    state = UNCHANGED if content_digest(self.directory) == self.digest else REPLACED
                except OSError:  # removed while it was read
                    state = REMOVED
            self._seen = (status, state)
        return self._seen[1]


class ServedCopy(contextlib.AbstractContextManager):
    """A private copy of the model directory ``source`` (its resolved path) for one service, in
    ``$GLOBALPOINTER_CACHE/served``, and its ``digest``.  The service holds a lock on it while it runs
    and removes it when it stops; a copy that a killed service left is removed by the next service to
    start (``files.remove_abandoned_partials``).  An error of the copy (a full disk) is the file system's,
    which the commands' error boundary says in one line."""

    def __init__(self, source: str):
        root = cache_directory("served")
        os.makedirs(root, exist_ok=True)
        with contextlib.suppress(OSError):
            remove_abandoned_partials(root)
        self.folder = tempfile.mkdtemp(dir=root, prefix="model" + PARTIAL)
        mark_temporary(self.folder)
        self._held = os.open(self.folder, os.O_RDONLY)
        fcntl.flock(self._held, fcntl.LOCK_SH)  # a live service's copy is never taken for an abandoned one
        self.path = os.path.join(self.folder, os.path.basename(os.path.normpath(source)) or "model")
        try:
            os.makedirs(self.path)
            for relative, path in _files(source):
                shutil.copyfile(path, os.path.join(self.path, relative), follow_symlinks=False)
            self.digest = content_digest(self.path)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._held is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            os.close(self._held)
            self._held = None

    def __exit__(self, *exc) -> None:
        self.close()
