"""Tagged formats, a token and its tag per line, sentences separated by blank lines: ``chars`` (one
character per line, MSRA), ``chars-position`` (a character and its position in its word, Weibo NER)
and ``conll`` (one word per line, the tag in the last column, words joined by spaces).
``TAGGED_JOINERS`` is their table; ``tagged_format`` tells them apart."""
import re
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional

from ..errors import DataError, quoted
from ..spans import Entity, Record, characters
from .reading import ErrorPolicy, lines
from .tags import tags_to_spans


TAGGED_JOINERS: Dict[str, str] = {"chars": "", "chars-position": "", "conll": " "}

# chars-position: one character per line with its position in its word appended, as Weibo NER's release
# writes it: 口0 腔1.  The trailing digits are the position, what precedes them the character, a digit or a
# Latin letter as any other ("2016" is 20 01 12 63); positions reach two digits (310: "3" at position 10)
CHARACTER_AND_POSITION = re.compile(r"^(.)(\d{1,2})$", re.DOTALL)

# several characters before the position: a character an earlier conversion broke (two U+FFFD)
TOKEN_AND_POSITION = re.compile(r"^(.+?)(\d{1,2})$", re.DOTALL)
SEVERAL_CHARACTERS = "token(s) of several characters before their position, kept as their characters"


def token_of(fmt: str, token: str, where: str, policy: ErrorPolicy) -> str:
    """The text a tagged file's token stands for in format ``fmt``."""
    if fmt != "chars-position":
        return token
    match = CHARACTER_AND_POSITION.match(token) or TOKEN_AND_POSITION.match(token)
    if not match:
        raise DataError(f"{where}: data.format chars-position expects a character and its position in the word "
                        f"(口0), got {quoted(token)}; data.format: conll reads the tokens as words", kind="tokens")
    if len(match.group(1)) > 1:
        message = (f"{where}: {quoted(token)} is {len(match.group(1))} characters before its position "
                   f"{match.group(2)}, where chars-position has one (a character broken by an earlier conversion?)")
        repair = policy.repairs(SEVERAL_CHARACTERS)
        if repair is None:
            raise DataError(f"{message}; set data.on_error=repair to keep them as the token's characters, with its "
                            f"tag", kind="tokens")
        repair(message)
    return match.group(1)


COLUMN_SPACE = " \t"  # what separates a tagged line's columns: a full-width space (U+3000) is a token, as in the text
WHITESPACE_TOKEN_HINT = (" (a line of whitespace other than spaces and tabs: write the character, then a tab or space, "
                         "then its tag)")


BOM = "\ufeff"  # at a line's start mid-file: files joined with cat, each with its own


def tagged_columns(line: str) -> List[str]:
    """A tagged line's columns: split on tabs when it has one, else on runs of spaces; a byte-order
    mark at its start is no part of its token."""
    line = line.lstrip(BOM)
    if "\t" in line:
        return line.split("\t")
    return [column for column in line.split(" ") if column]


WHITESPACE_LINES = "whitespace-only lines read as sentence ends"


class TaggedSentence(NamedTuple):
    tokens: List[str]
    tags: List[str]
    where: List[str]  # file:line of each token
    problem: Optional[DataError] = None  # a line of it that cannot be read: raised when the record is built


def iter_tagged_sentences(path: str, text: str, policy: Optional[ErrorPolicy] = None) -> Iterator[TaggedSentence]:
    """The blank-line-separated sentences of a tagged file.  A line of spaces and tabs alone ends a
    sentence too, as spaCy's, Hugging Face's and flair's CoNLL readers read it (counted in
    ``policy``).  A line that cannot be read spoils its sentence alone."""
    tokens, tags, where, problem = [], [], [], None
    for number, line in enumerate(lines(text), 1):
        stripped = line.strip(COLUMN_SPACE)
        if not stripped and line and policy is not None:
            policy.notice(WHITESPACE_LINES)
        if not stripped or stripped.startswith("-DOCSTART-"):
            if tokens or problem:
                yield TaggedSentence(tokens, tags, where, problem)
            tokens, tags, where, problem = [], [], [], None
            continue
        columns = tagged_columns(line)
        if len(columns) < 2:
            problem = problem or DataError(
                f"{path}:{number}: expected a token and a tag separated by a tab or space, got {quoted(line)}"
                f"{WHITESPACE_TOKEN_HINT if not line.strip() else ''}", kind="lines")
            continue
        tokens.append(columns[0] if columns[0] else " ")
        tags.append(columns[-1].strip())
        where.append(f"{path}:{number}")
    if tokens or problem:
        yield TaggedSentence(tokens, tags, where, problem)


# A tagged file read as one text of more tokens than this has lost its sentence ends (said, not refused):
# far longer than nearly every sentence of its kind (words: CoNLL-2003's longest is 113 tokens; characters:
# 64 of MSRA's 45,000 training sentences are longer)
ONE_TEXT_TOKENS = {" ": 128, "": 256}  # by the joiner of its tokens (TAGGED_JOINERS): words, characters
# ... or of this many sentence ends before its last token, whatever its length (35 sentences of 300
# characters said nothing)
ONE_TEXT_SENTENCE_ENDS = 3
SENTENCE_ENDS = frozenset({"。", "！", "？", ".", "!", "?"})


def tagged_sentence_record(sentence: TaggedSentence, fmt: str, policy: ErrorPolicy) -> Record:
    if sentence.problem is not None:
        raise sentence.problem
    if fmt == "chars" and sum(len(token) > 1 for token in sentence.tokens) * 2 > len(sentence.tokens):
        raise DataError(f"{sentence.where[0]}: most tokens of this sentence are words, in a file read as one "
                        f"character a line (data.format {fmt}, decided from the file's first lines): its words would "
                        f"run together; set data.format: conll to read every token as a word", kind="lines")
    tokens = [token_of(fmt, token, where, policy) for token, where in zip(sentence.tokens, sentence.where)]
    return tagged_record(tokens, sentence.tags, sentence.where, TAGGED_JOINERS[fmt], policy.repair)


def tagged_record(tokens: List[str], tags: List[str], where: List[str], joiner: str,
                  repair: Optional[Callable[[str], None]] = None) -> Record:
    offsets, position = [], 0
    for token in tokens:
        offsets.append((position, position + len(token)))
        position += len(token) + len(joiner)
    text = joiner.join(tokens)
    entities = [Entity(*characters(span, offsets), span.type) for span in tags_to_spans(tags, where, repair)]
    if not text.strip():
        raise DataError(f"{where[0]}: the sentence is only whitespace")
    return Record(text, entities, where[0])


def tagged_format(text: str) -> str:
    """A tagged file's format, from its first 200 lines."""
    head = [line for line in lines(text)[:200] if line.strip(COLUMN_SPACE)]
    if any(line.startswith("-DOCSTART-") for line in head):
        return "conll"
    columns = [tagged_columns(line) for line in head]
    positions = [TOKEN_AND_POSITION.match(row[0]) if len(row) == 2 else None for row in columns]
    if columns and all(positions) and sum(len(match.group(1)) == 1 for match in positions) >= 0.9 * len(positions) \
            and any(match.group(2) != "0" for match in positions):  # positions that count up: not "a0" words
        return "chars-position"
    if any(len(row) >= 3 for row in columns) or any(len(row[0]) > 1 for row in columns if row):
        return "conll"
    return "chars"
