"""Lexicon features for Chinese text (``model.lexicon``): what dictionary words each token begins,
continues or ends, after SoftLexicon (Ma et al., 2020), as one code per token.

A code packs three of a character's roles in the words of a word list (2 to ``MAX_WORD``
characters) that match the text around it: the longest word it begins (none, 2, 3, 4 or more
characters), the longest it ends (the same), and whether it is inside one.  SoftLexicon pools
pretrained word vectors per role; no such vectors are here, so the network learns one vector per
code instead (``LEXICON_CODES`` of them), added to the encoder's output (model/network.py).

A model directory keeps the words it was trained with (``LEXICON_FILE``), so prediction reads
the same words wherever it runs.
"""
import importlib.util
import os
from typing import FrozenSet, Iterable, List, Sequence, Tuple

from ..errors import CheckpointError, ConfigError

LEXICON_FILE = "lexicon.txt"
MAX_WORD = 8  # longer words are 0.2% of jieba's dictionary
LENGTHS = 4  # a word's length as a role's value: none, 2, 3, 4 or more
LEXICON_CODES = LENGTHS * LENGTHS * 2


def length_value(length: int) -> int:
    return min(length, LENGTHS) - 1 if length else 0


def role_code(begins: int, ends: int, inside: bool) -> int:
    """The code of a token that begins a word of ``begins`` characters at most (0: none), ends one of
    ``ends`` and is ``inside`` one."""
    return (length_value(begins) * LENGTHS + length_value(ends)) * 2 + int(inside)


class Lexicon:
    """Words of 2 to ``MAX_WORD`` characters without whitespace."""

    def __init__(self, words: Iterable[str]):
        self.words: FrozenSet[str] = frozenset(
            word for word in words if 2 <= len(word) <= MAX_WORD and not any(c.isspace() for c in word))

    def char_roles(self, text: str) -> Tuple[List[int], List[int], List[bool]]:
        """For each character of ``text``: the length of the longest word starting at it (0: none),
        of the longest ending at it, and whether a word holds it strictly inside."""
        begins, ends, inside = [0] * len(text), [0] * len(text), [False] * len(text)
        words = self.words
        for start in range(len(text)):
            for length in range(2, min(MAX_WORD, len(text) - start) + 1):
                if text[start:start + length] in words:
                    end = start + length - 1
                    begins[start] = max(begins[start], length)
                    ends[end] = max(ends[end], length)
                    for position in range(start + 1, end):
                        inside[position] = True
        return begins, ends, inside

    def token_codes(self, text: str, offsets: Sequence[Tuple[int, int]]) -> List[int]:
        """The code of each token (its character range in ``offsets``): the words its first character
        begins, its last character ends, and whether any of its characters is inside a word."""
        begins, ends, inside = self.char_roles(text)
        return [role_code(begins[start], ends[end - 1], any(inside[start:end])) for start, end in offsets]

    def save(self, directory: str) -> None:
        with open(os.path.join(directory, LEXICON_FILE), "w", encoding="utf-8") as out:
            out.writelines(word + "\n" for word in sorted(self.words))


def jieba_dictionary() -> str:
    """jieba's dictionary file (349,046 words; MIT; installed with PaddleNLP)."""
    spec = importlib.util.find_spec("jieba")
    path = os.path.join(os.path.dirname(spec.origin), "dict.txt") if spec and spec.origin else ""
    if not os.path.isfile(path):
        raise ConfigError("model.lexicon=jieba reads jieba's dictionary, and jieba is not installed: pip install jieba, "
                          "or set model.lexicon to a word list (a word a line)")
    return path


def read_word_list(path: str, what: str) -> Lexicon:
    """A word list: a word a line, anything after a space ignored (jieba's ``word frequency tag``)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return Lexicon(line.split(maxsplit=1)[0] for line in handle if line.strip())
    except UnicodeDecodeError as error:
        raise ConfigError(f"{what} {path}: not UTF-8 text ({error.reason} at byte {error.start})") from None


def training_lexicon(source: str) -> Lexicon:
    """The words of ``model.lexicon`` (jieba, or a word list's path) for a training run."""
    path = jieba_dictionary() if source == "jieba" else source
    if not os.path.isfile(path):
        raise ConfigError(f"model.lexicon={source}: no such file; name a word list (a word a line), jieba, or none")
    lexicon = read_word_list(path, "model.lexicon")
    if not lexicon.words:
        raise ConfigError(f"model.lexicon={source}: no words of 2 to {MAX_WORD} characters in it")
    return lexicon


def saved_lexicon(directory: str) -> Lexicon:
    """The words a model directory was trained with."""
    path = os.path.join(directory, LEXICON_FILE)
    if not os.path.isfile(path):
        raise CheckpointError(f"{directory}: its config.yaml names model.lexicon but {LEXICON_FILE} is missing; "
                              f"restore it from the run")
    try:
        return read_word_list(path, "the model's word list")
    except ConfigError as error:
        raise CheckpointError(str(error)) from None
