"""The tagged readers against an independent one: generated files with the shapes public releases ship
(digits and Latin letters in chars-position, two-digit positions, whitespace-only separator lines,
CRLF, a BOM, trailing spaces, -DOCSTART-, tabs or spaces, four columns), read by this project and by
NLTK's ConllCorpusReader (sentences and tags) with seqeval's get_entities (spans): both must find the
same texts and the same entities, and the texts the generator wrote."""
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from globalpointer.data.readers import read_records

nltk_conll = pytest.importorskip("nltk.corpus.reader.conll")
seqeval_sequence = pytest.importorskip("seqeval.metrics.sequence_labeling")

TYPES = ["PER", "LOC", "ORG.NAM"]
HAN = st.sampled_from("张三李四北京上海的在是了年月日中国人大学")
CHARACTER = st.one_of(HAN, st.sampled_from("0123456789"), st.sampled_from("abcKTVxyz"))
WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzEU", min_size=1, max_size=6)


@st.composite
def tags_for(draw, length):
    """A valid BIO sequence of ``length`` tags."""
    tags, position = [], 0
    while position < length:
        if draw(st.booleans()):
            tags.append("O")
            position += 1
            continue
        kind = draw(st.sampled_from(TYPES))
        size = draw(st.integers(1, length - position))
        tags += [f"B-{kind}"] + [f"I-{kind}"] * (size - 1)
        position += size
    return tags


@st.composite
def tagged_file(draw, fmt):
    """(file bytes, sentences as (tokens as the text has them, tags))."""
    sentences = []
    for _ in range(draw(st.integers(1, 4))):
        length = draw(st.integers(1, 14))
        tokens = draw(st.lists(WORD if fmt == "conll" else CHARACTER, min_size=length, max_size=length))
        sentences.append((tokens, draw(tags_for(length))))
    if fmt == "chars-position":  # each character with its position in a word, words of up to 12 characters
        written = []
        for tokens, _ in sentences:
            cuts, position = [], 0
            for _ in tokens:
                position = 0 if position >= 11 or draw(st.booleans()) and position else position
                cuts.append(position)
                position += 1
            written.append([f"{token}{place}" for token, place in zip(tokens, cuts)])
    else:
        written = [tokens for tokens, _ in sentences]
    column = draw(st.sampled_from(["\t", " ", "  "]))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    trailing = draw(st.sampled_from(["", " ", "  "])) if column != "\t" else ""
    four_columns = fmt == "conll" and draw(st.booleans())
    lines = ["-DOCSTART- -X- -X- O", ""] if fmt == "conll" and draw(st.booleans()) else []
    for index, (tokens, (_, tags)) in enumerate(zip(written, sentences)):
        if index:
            lines.append(draw(st.sampled_from(["", "\t", " ", " \t "])))  # a blank or whitespace-only line
        for token, tag in zip(tokens, tags):
            middle = column.join(["NNP", "B-NP"]) + column if four_columns else ""
            lines.append(f"{token}{column}{middle}{tag}{trailing}")
    text = newline.join(lines) + newline * draw(st.integers(1, 2))
    return ("\ufeff" if draw(st.booleans()) else "") + text, sentences


def oracle(path, fmt, columns):
    """NLTK's reading of the file's sentences and tags, seqeval's of the entities: (text, [(start, end,
    type)]) per sentence, in characters."""
    folder, name = os.path.split(path)
    reader = nltk_conll.ConllCorpusReader(folder, [name], ("words", *["ignore"] * (columns - 2), "pos"),
                                          encoding="utf8")
    found = []
    for sentence in filter(None, reader.tagged_sents()):  # a -DOCSTART- block is NLTK's empty sentence
        tokens = [strip_position(token) if fmt == "chars-position" else token for token, _ in sentence]
        joiner = " " if fmt == "conll" else ""
        starts = [sum(len(t) + len(joiner) for t in tokens[:i]) for i in range(len(tokens))]
        spans = [(starts[first], starts[last] + len(tokens[last]), kind)
                 for kind, first, last in seqeval_sequence.get_entities([tag for _, tag in sentence])]
        found.append((joiner.join(tokens), sorted(spans)))
    return found


def strip_position(token):
    """The character of a chars-position token: what precedes its one- or two-digit position."""
    return token[:-2] if len(token) > 2 and token[-2:].isdigit() else token[:-1]


@pytest.mark.parametrize("fmt", ["chars", "chars-position", "conll"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_tagged_files_read_as_the_independent_reader_reads_them(fmt, data):
    text, sentences = data.draw(tagged_file(fmt))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "data.txt")
        with open(path, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        # detected (chars-position by positions that count up, which a file of one-character words lacks)
        counts_up = fmt == "chars-position" and any(not line.split()[0].endswith("0") for line in text.splitlines()
                                                    if line.strip())
        records = read_records(path, format="auto" if fmt == "chars" or counts_up else fmt)
        columns = 4 if " NNP" in text or "\tNNP" in text else 2
        plain = os.path.join(folder, "oracle.txt")  # NLTK's stream reader fails on some files with a BOM: the
        with open(plain, "w", encoding="utf-8", newline="") as out:  # same text without it, a marker of no content
            out.write(text.removeprefix("\ufeff"))
        expected = oracle(plain, fmt, columns)
    ours = [(r.text, sorted((e.start, e.end, e.type) for e in r.entities)) for r in records]
    assert ours == expected
    joiner = " " if fmt == "conll" else ""
    assert [r.text for r in records] == [joiner.join(tokens) for tokens, _ in sentences]  # what was written
