"""What every reader of a data file shares: the file's text (unzipped from an annotation tool's
export, decoded, split into lines), the check that a text is characters, and ``ErrorPolicy``
(``data.on_error``: what a bad record does)."""
import io
import logging
import os
import re
import zipfile
from collections import Counter
from typing import Callable, Dict, List, Optional

from ..errors import DataError

log = logging.getLogger(__name__)


class ErrorPolicy:
    """``raise``: the first bad record stops the run.  ``skip``: it is left out and counted, by what was
    wrong in it (``DataError.kind``).  ``repair``: what can be read one way only is read so and counted
    (a continuation tag that opens no entity, as conlleval reads it; a token of several characters
    before its position, as its characters); any other bad record stops the run.  What every mode reads
    leniently (whitespace-only lines as sentence ends) is counted too."""

    def __init__(self, mode: str = "raise"):
        self.mode = mode
        self.skipped: Dict[str, List[str]] = {}  # kind -> messages
        self.repaired: Dict[str, List[str]] = {}  # what was repaired -> messages
        self.noticed: Counter = Counter()  # what was read leniently -> how often
        self.left_out: Dict[str, List[str]] = {}  # reason -> where: tasks that are no training example

    def __call__(self, error: DataError) -> None:
        if self.mode != "skip":
            raise error
        self.skipped.setdefault(f"for their {error.kind}", []).append(str(error))

    def repairs(self, what: str) -> Optional[Callable[[str], None]]:
        """Under ``repair``, the callback that counts a repair of ``what`` (None otherwise: an error)."""
        if self.mode != "repair":
            return None
        return lambda message: self.repaired.setdefault(what, []).append(message)

    @property
    def repair(self) -> Optional[Callable[[str], None]]:
        return self.repairs("continuation tag(s) that opened no entity")

    def notice(self, what: str) -> None:
        self.noticed[what] += 1

    def leave_out(self, reason: str, where: str) -> None:
        self.left_out.setdefault(reason, []).append(where)

    def left_out_summary(self) -> str:
        return "; ".join(f"{len(wheres)} {reason} (first: {wheres[0]})" for reason, wheres in self.left_out.items())

    def report(self, path: str) -> None:
        if self.left_out:
            log.warning("%s: left out %s", path, self.left_out_summary())
        if self.skipped:
            log.warning("%s: skipped %d malformed record(s) (data.on_error=skip): %s", path,
                        sum(map(len, self.skipped.values())), _by_kind(self.skipped))
        if self.repaired:
            log.warning("%s: repaired (data.on_error=repair) %s", path, _by_kind(self.repaired))
        for what, count in self.noticed.items():
            log.info("%s: %s %s", path, f"{count:,}", what)


def _by_kind(messages: Dict[str, List[str]]) -> str:
    return "; ".join(f"{len(found)} {kind} (first: {found[0]})" for kind, found in messages.items())


ZIP_MAGIC = b"PK\x03\x04"

# What the data file inside an export zip may unpack to, counted as it unpacks (a member's declared size can
# lie): doccano and Label Studio exports of NER projects are megabytes; a zip bomb is refused, not unpacked
MAX_UNZIPPED_BYTES = 512 * 2 ** 20
MAX_UNZIPPED_LINES = 5_000_000


def unzip_export(path: str, raw: bytes) -> bytes:
    """The one data file inside an annotation tool's export zip (doccano exports ``all.jsonl``, or
    one ``USER.jsonl`` per annotator)."""
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            members = [m for m in archive.infolist() if not m.is_dir() and not m.filename.startswith("__MACOSX/")]
            chosen = [m for m in members if os.path.basename(m.filename) == "all.jsonl"] or members
            if len(chosen) != 1:
                names = ", ".join(m.filename for m in members) or "nothing"
                raise DataError(f"{path}: a zip holding {names}; unzip it and name the file to read")
            too_big = DataError(f"{path}: {chosen[0].filename} unpacks to more than {MAX_UNZIPPED_BYTES} bytes; "
                                f"unzip it yourself and name the file")
            if chosen[0].file_size > MAX_UNZIPPED_BYTES:
                raise too_big
            log.info("%s: reading %s from the zip", path, chosen[0].filename)
            with archive.open(chosen[0]) as member:
                content = member.read(MAX_UNZIPPED_BYTES + 1)
            if len(content) > MAX_UNZIPPED_BYTES:
                raise too_big
            if content.count(b"\n") > MAX_UNZIPPED_LINES:  # splitting them would build an object a line
                raise DataError(f"{path}: {chosen[0].filename} unpacks to more than {MAX_UNZIPPED_LINES:,} lines, "
                                f"which no annotation tool's export of one project has; unzip it yourself and name "
                                f"the file")
            return content
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError) as error:
        raise DataError(f"{path}: a zip file that cannot be read ({error}); unzip it and name the file") from None


def read_text(path: str) -> str:
    if not os.path.isfile(path):
        raise DataError(f"file not found: {path}")
    raw = open(path, "rb").read()
    if raw.startswith(ZIP_MAGIC):
        raw = unzip_export(path, raw)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise DataError(f"{path}:{line}: bytes that are not UTF-8 at byte offset {error.start} "
                        f"({raw[error.start:error.start + 4]!r}); convert the file to UTF-8") from None
    if not text.strip():
        raise DataError(f"{path}: the file is empty")
    return text


LINE_END = re.compile(r"\r\n|\r|\n")


def lines(text: str) -> List[str]:
    """The file's lines, ended by \\n, \\r\\n or a lone \\r (old Mac files): str.splitlines would also
    split on U+2028, U+2029, U+0085 and other characters that JSON writes raw inside strings (a raw
    \\r it never does)."""
    return LINE_END.split(text)


def lone_surrogate_at(text: str) -> Optional[int]:
    """Where ``text`` holds a lone surrogate, or None.  A JSON escape such as \\ud800 gives one, and it
    is no character: it cannot be tokenized, shown or written back as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


def check_characters(text: str, where: str) -> None:
    at = lone_surrogate_at(text)
    if at is not None:
        raise DataError(f"{where}: the text holds a lone surrogate {text[at]!r} at character {at}, which is no "
                        f"character (a broken \\uXXXX escape); fix the record")
