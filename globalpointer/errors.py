"""Errors and log lines meant for the person running a command: the commands print an error's
message, not a trace."""
import logging
import sys


def setup_logging() -> None:
    """The commands' logging: what they do, on standard error (the Python API logs warnings only)."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    logging.getLogger("globalpointer").setLevel(logging.INFO)


# What an error or a log line quotes of a value the user gave (a line, a key's value, a token): enough to
# find it, never the whole of it (a line of a file without newlines can be its whole size)
QUOTED_CHARS = 80


def quoted(value) -> str:
    """``value`` as an error quotes it: its repr, cut to QUOTED_CHARS characters with the length said."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= QUOTED_CHARS:
        return repr(text)
    return f"{text[:QUOTED_CHARS]!r}... ({len(text):,} characters)"


def json_failure(error: BaseException) -> str:
    """Why Python's JSON parser could not read a text, in a few words: past its limits (numbers over
    4,300 digits, nesting deeper than the stack) or not UTF-8; the parser's own message otherwise."""
    if isinstance(error, RecursionError):
        return "nested too deeply"
    if isinstance(error, UnicodeDecodeError):
        return "not UTF-8"
    return str(error).split(";")[0]


def memory_detail(error: MemoryError) -> str:
    """What ran out, in one line (Paddle's ResourceExhausted carries a C++ trace after it)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else "no memory left"


class UserError(Exception):
    """Something the user can fix; the message says what and where."""


class ConfigError(UserError):
    pass


class DataError(UserError):
    """A record that cannot be read; ``kind`` says what in it (records, tags, tokens, lines), for the
    count of what data.on_error=skip left out."""

    def __init__(self, message: str, kind: str = "records"):
        super().__init__(message)
        self.kind = kind


class EncoderError(UserError):
    pass


class CheckpointError(UserError):
    pass


class TrainingError(UserError):
    """Training cannot go on (it diverged); the message says what to change."""
