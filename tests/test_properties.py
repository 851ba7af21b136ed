"""Property-based tests (Hypothesis): any text and any entity set survive every reader and the
tokenization / window / offset code unchanged.  Independent writers build each format from the
entities, as the format's own tool would; the readers must give the entities back."""
import json
import os
import tempfile

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from globalpointer.data.features import Featurizer, window_entities
from globalpointer.data.readers import read_records, write_jsonl_records
from globalpointer.model.encoders import bert_tokenizer, tiny_vocabulary, write_vocab
from globalpointer.spans import Entity, Record

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TYPES = st.sampled_from(["PER", "LOC", "ORG", "地名", "X-1"])
# Any character a UTF-8 file can hold (no lone surrogates), the line and paragraph separators that
# JSON writes raw and str.splitlines splits on among them.
CHARACTERS = st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from("\u2028\u2029\x85\x0b\x0c\x1c\r"))
TEXTS = st.text(CHARACTERS, min_size=1, max_size=40).filter(lambda text: text.strip())


@st.composite
def records(draw, nested=True):
    """A text with entities anywhere in it (overlapping and nested unless ``nested`` is False)."""
    text = draw(TEXTS)
    entities = set()
    for _ in range(draw(st.integers(0, 5))):
        start = draw(st.integers(0, len(text) - 1))
        end = draw(st.integers(start + 1, len(text)))
        candidate = Entity(start, end, draw(TYPES))
        if nested or all(candidate.end <= e.start or e.end <= candidate.start for e in entities):
            entities.add(candidate)
    return Record(text, sorted(entities))


def keys(found):
    return [(r.text, sorted(e.key for e in r.entities)) for r in found]


def write(content: str, suffix=".json") -> str:
    handle, path = tempfile.mkstemp(suffix=suffix)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(content)
    return path


def lines(objects) -> str:
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects)


# Each format written as its tool writes it, from the entities alone.
WRITERS = {
    "jsonl": lambda r: {"text": r.text, "entities": [{"start": e.start, "end": e.end, "type": e.type} for e in r.entities]},
    "cluener": lambda r: {"text": r.text, "label": cluener_labels(r)},
    "cmeee": lambda r: {"text": r.text, "entities": [{"start_idx": e.start, "end_idx": e.end - 1, "type": e.type,
                                                      "entity": r.text[e.start:e.end]} for e in r.entities]},
    "doccano": lambda r: {"id": 1, "text": r.text, "label": [[e.start, e.end, e.type] for e in r.entities]},
    "label-studio": lambda r: {"id": 1, "data": {"text": r.text}, "annotations": [{"id": 1, "result": [
        {"value": {"start": e.start, "end": e.end, "text": r.text[e.start:e.end], "labels": [e.type]},
         "from_name": "label", "to_name": "text", "type": "labels"} for e in r.entities]}]},
}


def cluener_labels(record):
    labels = {}
    for e in record.entities:
        labels.setdefault(e.type, {}).setdefault(record.text[e.start:e.end], []).append([e.start, e.end - 1])
    return labels


@SETTINGS
@given(st.lists(records(), min_size=1, max_size=4), st.sampled_from(sorted(WRITERS)), st.booleans())
def test_every_json_reader_gives_the_entities_back(given_records, fmt, as_array):
    objects = [WRITERS[fmt](r) for r in given_records]
    for i, obj in enumerate(objects):
        if "id" in obj:  # task ids are unique in an export
            obj["id"] = i
    path = write(json.dumps(objects, ensure_ascii=False, indent=1) if as_array else lines(objects))
    try:
        assert keys(read_records(path, fmt)) == keys(given_records)
        if any(r.entities for r in given_records) or fmt == "jsonl":
            assert keys(read_records(path)) == keys(given_records)  # detected, not told
    finally:
        os.remove(path)


@SETTINGS
@given(st.lists(records(), min_size=1, max_size=4))
def test_convert_then_read_is_the_identity(given_records):
    path = write("")
    try:
        write_jsonl_records(given_records, path)
        assert keys(read_records(path)) == keys(given_records)
    finally:
        os.remove(path)


TAG_TEXT = st.text(st.characters(exclude_categories=["Cs", "Zs", "Zl", "Zp", "Cc"]), min_size=1, max_size=30)


@SETTINGS
@given(st.data(), st.sampled_from(["BIO", "BIOES", "BMES"]))
def test_the_char_per_line_reader_gives_flat_entities_back(data, scheme):
    text = data.draw(TAG_TEXT)
    assume(all(not c.isspace() and c.isprintable() for c in text))
    entities = set()
    for _ in range(data.draw(st.integers(0, 4))):
        start = data.draw(st.integers(0, len(text) - 1))
        end = data.draw(st.integers(start + 1, len(text)))
        candidate = Entity(start, end, data.draw(st.sampled_from(["PER", "LOC"])))
        if all(candidate.end <= e.start or e.end <= candidate.start for e in entities):
            entities.add(candidate)
    tags = ["O"] * len(text)
    for e in entities:
        if scheme == "BIO":
            tags[e.start:e.end] = [f"B-{e.type}"] + [f"I-{e.type}"] * (e.end - e.start - 1)
        elif e.end - e.start == 1:
            tags[e.start] = f"S-{e.type}"
        else:
            inside = "I" if scheme == "BIOES" else "M"
            tags[e.start:e.end] = [f"B-{e.type}"] + [f"{inside}-{e.type}"] * (e.end - e.start - 2) + [f"E-{e.type}"]
    path = write("".join(f"{char}\t{tag}\n" for char, tag in zip(text, tags)) + "\n", ".txt")
    try:
        [found] = read_records(path, "chars")
        assert found.text == text and sorted(e.key for e in found.entities) == sorted(e.key for e in entities)
    finally:
        os.remove(path)


# ---- tokenization, windows and offsets -------------------------------------------------------------

_VOCAB = os.path.join(tempfile.mkdtemp(), "vocab.txt")
write_vocab(tiny_vocabulary(), _VOCAB)
TOKENIZER = bert_tokenizer(_VOCAB)


@SETTINGS
@given(TEXTS, st.sampled_from(["char", "subword"]), st.data())
def test_token_spans_come_back_as_the_same_characters_once(text, mode, data):
    encoder = Featurizer(TOKENIZER, mode, max_length=12, window_overlap=4)
    tokens = encoder.tokenize(text)
    assume(tokens.ids)
    for (start, end), (next_start, _) in zip(tokens.offsets, tokens.offsets[1:] + [(len(text), None)]):
        assert 0 <= start < end <= next_start <= len(text)  # increasing, disjoint, inside the text
        assert not text[start].isspace() and not text[end - 1].isspace()
    # entities on token boundaries, as long as half the overlap: each lies whole in the window owning its start
    entities = set()
    for _ in range(data.draw(st.integers(1, 4))):
        first = data.draw(st.integers(0, len(tokens.ids) - 1))
        last = data.draw(st.integers(first, min(first + 1, len(tokens.ids) - 1)))
        entities.add(Entity(tokens.offsets[first][0], tokens.offsets[last][1], "X"))
    record = Record(text, sorted(entities))
    windows, report = encoder.training_windows([record], {"X": 0})
    assert report.lost == 0
    found = [e.key for w in windows for e in window_entities(w, w.gold, ["X"])]
    assert sorted(found) == sorted(e.key for e in entities)  # every one, exactly once, same characters
    covered = sorted({w.token_start + k for w in windows for k in range(len(w.offsets))})
    assert covered == list(range(len(tokens.ids)))  # no token left out of every window


@given(st.lists(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 8), st.sampled_from("AB")), max_size=6),
                max_size=5))
def test_overlapping_share_is_the_share_of_entities_sharing_a_character_with_another(texts):
    """spans.overlapping_share against a character-by-character count: an entity (span and type,
    once) overlaps when one of its characters lies in another entity of its text."""
    from globalpointer.spans import overlapping_share

    records = [Record("x" * 40, [Entity(start, start + length, label) for start, length, label in text])
               for text in texts]
    entities = [set(e.key for e in record.entities) for record in records]
    sharing = sum(1 for keys in entities for key in keys
                  if any(other != key and set(range(key[0], key[1])) & set(range(other[0], other[1]))
                         for other in keys))
    total = sum(len(keys) for keys in entities)
    assert overlapping_share(records) == (sharing / total if total else 0.0)
