"""Digests of a model directory's files: SHA-256 of a file's bytes, remembered while the file is
unchanged (in this process and, through the cache, across processes), so that each open can check every
file against its record without reading it again."""
import contextlib
import hashlib
import os
from typing import Dict, Optional

from ..errors import UserError
from ..files import CACHE_ENV, atomic_write_text, cache_directory, contains


# A file is hashed once while it is unchanged, in this process and across processes (a predict that
# compiles the checkpoint and then loads it asks twice; every predict asks once): the key holds what
# any write changes (size, modification and change times), and the digest is kept in the cache
_FILE_DIGESTS: Dict[tuple, bytes] = {}


def _key(path: str) -> tuple:
    status = os.stat(path)
    return (os.path.realpath(path), status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns,
            status.st_ctime_ns)


def file_digest(path: str) -> bytes:
    key = _key(path)
    if key not in _FILE_DIGESTS:
        _FILE_DIGESTS[key] = _remembered_digest(key) or _remember_digest(key, hash_file(path))
    return _FILE_DIGESTS[key]


def remember_written(directory: str, digests: Dict[str, str]) -> None:
    """The digests (hex, by file name) computed while the files of ``directory`` were written, kept for
    this process's opens of it: a model saved or exported and then opened is not read twice."""
    for name, digest in digests.items():
        with contextlib.suppress(OSError):
            _FILE_DIGESTS[_key(os.path.join(directory, name))] = bytes.fromhex(digest)


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


def hash_file(path: str) -> bytes:
    """SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.digest()
