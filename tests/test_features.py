
import logging

import pytest

from globalpointer.data.batching import collate, length_grouped_batches, padding_aware_batches
from globalpointer.data.features import AlignmentReport, Featurizer, window_entities
from globalpointer.model.encoders import bert_tokenizer, build_tiny
from globalpointer.spans import Entity, Record, TokenSpan


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny().tokenizer


def test_char_tokens_round_trip_offsets(tokenizer):
    text = "我在 New York 用ｉＰｈｏｎｅ😀，Ａ股 ok"
    tokens = Featurizer(tokenizer, "char", 64, 8).tokenize(text)
    assert [text[s:e] for s, e in tokens.offsets] == [c for c in text if not c.isspace()]
    vocab = tokenizer.vocab.token_to_idx
    ids = dict(zip([text[s:e] for s, e in tokens.offsets], tokens.ids))
    assert ids["我"] == vocab["我"] and ids["N"] == vocab["n"]  # lower-cased
    assert ids["Ａ"] != vocab["[UNK]"]  # full-width letters are found (as such or normalised)
    assert ids["😀"] == vocab["[UNK]"]


def test_subword_offsets_point_into_the_original_text(tokenizer):
    text = "Peter  Blackburn visited 中国 😀 today"
    tokens = Featurizer(tokenizer, "subword", 64, 8).tokenize(text)
    pieces = [text[s:e] for s, e in tokens.offsets]
    assert "中" in pieces and "国" in pieces and "😀" in pieces
    assert all(p and not p[0].isspace() and not p[-1].isspace() for p in pieces)
    assert all(a[1] <= b[0] for a, b in zip(tokens.offsets, tokens.offsets[1:]))


def test_gold_alignment_reports_spans_inside_a_token(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "visit", "blackburn", "and", "leeds"]))
    encoder = Featurizer(bert_tokenizer(str(vocab)), "subword", 64, 8)
    record = Record("visit Blackburn and Leeds", [Entity(6, 11, "X"), Entity(20, 25, "Y")], "f:1")
    tokens = encoder.tokenize(record.text)
    assert tokens.offsets == [(0, 5), (6, 15), (16, 19), (20, 25)]
    report = AlignmentReport()
    spans = encoder.align(record, tokens, {"X": 0, "Y": 1}, report)
    assert report.total == 2 and report.unaligned == ["f:1 X 'Black'"]  # ends inside "Blackburn"
    assert spans == [TokenSpan(1, 3, 3)]


def test_windows_cover_long_text_and_own_each_token_once(tokenizer):
    encoder = Featurizer(tokenizer, "char", max_length=12, window_overlap=4)  # 10 tokens, step 6
    text = "一二三四五六七八九十" * 5  # 50 characters
    tokens = encoder.tokenize(text)
    windows = encoder.windows(0, tokens)
    assert all(len(w.input_ids) <= 12 for w in windows)
    owners = []
    for w in windows:
        a, b = w.owned
        owners += [w.token_start + i for i in range(a, b)]
        assert 0 <= a <= b <= len(w.offsets)
    assert owners == list(range(50))  # every token owned by exactly one window, in order
    assert windows[-1].token_start + len(windows[-1].offsets) == 50


def test_window_spans_map_back_to_original_characters(tokenizer):
    encoder = Featurizer(tokenizer, "char", max_length=12, window_overlap=4)
    text = "甲 乙丙丁戊己庚辛壬癸子丑寅卯辰巳午未申酉戌亥"
    tokens = encoder.tokenize(text)
    entity = Entity(text.index("寅"), text.index("辰") + 1, "X")
    report = AlignmentReport()
    spans = encoder.align(Record(text, [entity]), tokens, {"X": 0}, report)
    windows = encoder.windows(0, tokens, spans)
    found = set()
    for w in windows:
        decoded = [span._replace(score=0.9) for span in w.gold]  # a perfect model
        found.update(e.key for e in window_entities(w, decoded, ["X"]))
    assert found == {entity.key} and text[entity.start:entity.end] == "寅卯辰"


def test_spans_that_fit_no_window_are_counted(tokenizer):
    encoder = Featurizer(tokenizer, "char", max_length=8, window_overlap=2)  # 6 tokens per window
    text = "一二三四五六七八九十"
    records = [Record(text, [Entity(0, 7, "X"), Entity(1, 3, "X")], "f:1")]
    windows, report = encoder.training_windows(records, {"X": 0})
    assert report.total == 2 and len(report.unwindowed) == 1 and "一二三四五六七" in report.unwindowed[0]
    assert {g for w in windows for g in w.gold}  # the short one is learned


def test_collate_pads_and_masks(tokenizer):
    encoder = Featurizer(tokenizer, "char", 16, 4)
    records = [Record("北京欢迎你", [Entity(0, 2, "LOC")]), Record("好", [])]
    windows, _ = encoder.training_windows(records, {"LOC": 0, "PER": 1})
    batch = collate(windows, encoder.pad_id)
    assert batch["input_ids"].shape == (2, 7)
    assert batch["span_text"].tolist() == [[False] + [True] * 5 + [False], [False, True, False] + [False] * 4]
    assert batch["token_text"][1].tolist() == [1, 1, 1, 0, 0, 0, 0]
    assert batch["gold"].tolist() == [[[0, 1, 2]], [[-1, -1, -1]]]


def test_length_grouped_batches():
    lengths = [5, 50, 6, 49, 7, 48, 8, 47]
    batches = length_grouped_batches(lengths, 2, shuffle=False)
    assert batches == [[0, 2], [4, 6], [7, 5], [3, 1]]
    shuffled = length_grouped_batches(lengths, 2, shuffle=True, seed=1)
    assert sorted(i for b in shuffled for i in b) == list(range(8))
    assert all(abs(lengths[b[0]] - lengths[b[-1]]) <= 3 for b in shuffled)  # similar lengths together
    assert shuffled == length_grouped_batches(lengths, 2, shuffle=True, seed=1)
    ranks = [length_grouped_batches(lengths[:6], 2, True, 3, rank=r, world_size=2) for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == 2  # 3 batches padded to 4, two per process


def _set_partitions(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for partition in _set_partitions(rest):
        yield [[first]] + partition
        for i in range(len(partition)):
            yield partition[:i] + [[first] + partition[i]] + partition[i + 1:]


def test_padding_aware_batches_find_the_cheapest_of_all_partitions():
    """Against brute force over every partition into sets (not only runs of the sorted order):
    the batches cover each window once, respect the cap, and cost no more than the best partition."""
    import random

    def cost(batches, lengths, overhead):
        return sum(overhead + len(b) * max(lengths[i] for i in b) for b in batches)

    rng = random.Random(7)
    for _ in range(60):
        lengths = [rng.randint(3, 60) for _ in range(rng.randint(1, 7))]
        max_batch, overhead = rng.randint(1, 4), rng.choice([0.0, 3.0, 16.0, 100.0])
        batches = padding_aware_batches(lengths, max_batch, overhead)
        assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
        assert all(1 <= len(b) <= max_batch for b in batches)
        best = min(cost(p, lengths, overhead) for p in _set_partitions(list(range(len(lengths))))
                   if all(len(b) <= max_batch for b in p))
        assert cost(batches, lengths, overhead) == pytest.approx(best)


def test_padding_aware_batches_split_mixed_lengths_and_keep_equal_ones_together():
    assert padding_aware_batches([], 8) == []
    assert sorted(map(len, padding_aware_batches([40] * 20, 8))) == [4, 8, 8]
    short_and_long = [5, 50] * 8  # one batch would pad eight 5-token windows to 50
    assert [sorted(short_and_long[i] for i in b) for b in padding_aware_batches(short_and_long, 16)] == [[5] * 8, [50] * 8]
    assert len(padding_aware_batches([30, 31, 32, 33], 16)) == 1  # a few padded tokens do not pay for a forward pass


def test_span_conversions_round_trip_through_windows_and_characters(tokenizer):
    """Characters -> text tokens -> a window's input positions (with [CLS]) -> back, for every
    window of a long text: each conversion is spans.py's, and a span survives the whole trip."""
    from globalpointer.spans import CLS_POSITIONS, TokenIndex, characters, from_input, to_input

    encoder = Featurizer(tokenizer, "char", max_length=12, window_overlap=4)
    text = "一二 三四五六七八九十" * 4
    tokens = encoder.tokenize(text)
    index = TokenIndex(tokens.offsets)
    entity = Entity(text.index("三"), text.index("五") + 1, "X")
    span = index.token_span(entity, 0)
    assert characters(span, tokens.offsets) == (entity.start, entity.end)
    for window in encoder.windows(0, tokens, [span]):
        moved = to_input(span, window.token_start)
        assert moved.start - CLS_POSITIONS == span.start - window.token_start  # [CLS] is position 0
        assert from_input(moved, window.token_start) == span
        if window.gold:
            assert window.gold == [moved] and window.input_ids[moved.start] == tokens.ids[span.start]
    assert index.token_span(Entity(text.index("二"), text.index(" ") + 1, "X"), 0) is None  # ends on no token


def test_alignment_warning_suggests_char_mode_only_outside_it(caplog):
    report = AlignmentReport()
    report.unaligned.append("f:1 PER '\u3000张三'")
    with caplog.at_level(logging.WARNING):
        report.log("train", "char")
        report.log("train", "subword")
    char_line, subword_line = caplog.text.splitlines()
    assert "full-width space" in char_line and "tokenization=char" not in char_line
    assert "data.tokenization=char avoids this" in subword_line


def test_a_combining_accent_stays_with_its_letter(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cafe", "au", "lait"]))
    encoder = Featurizer(bert_tokenizer(str(vocab)), "subword", 64, 8)
    text = "Cafe\u0301 au lait"
    assert encoder.tokenize(text).offsets == [(0, 5), (6, 8), (9, 13)]


def test_whole_words_leave_out_spans_that_cut_a_word(tokenizer):
    """A model trained on words (its training entities all on spaces) predicts whole words: a span
    that starts at a piece continuing a word, or ends just before one, is left out; in an English
    social-media test set 3 of 404 predicted spans started inside a word."""
    featurizer = Featurizer(tokenizer, "subword", 64, 8)
    text = "Washington met Bob"
    (window,) = featurizer.text_windows([text])
    pieces = tokenizer.convert_ids_to_tokens(window.input_ids[1:-1])
    assert pieces[:3] == ["w", "##a", "##s"] and pieces[-3:] == ["b", "##o", "##b"]
    last_of_washington = len("Washington")  # input positions: [CLS] is 0, "w" is 1
    spans = [TokenSpan(0, 1, last_of_washington), TokenSpan(0, 2, last_of_washington), TokenSpan(0, 1, 3),
             TokenSpan(0, len(pieces) - 2, len(pieces))]
    everything = [text[e.start:e.end] for e in window_entities(window, spans, ["X"])]
    whole = [text[e.start:e.end] for e in window_entities(window, spans, ["X"], featurizer.continuations)]
    assert everything == ["Washington", "ashington", "Was", "Bob"] and whole == ["Washington", "Bob"]


@pytest.mark.parametrize("texts, spans, words", [
    (["EU rejects German call", "Peter Blackburn"], [[(0, 2), (11, 17)], [(0, 15)]], True),  # a CoNLL file
    (["EU rejects German call.", "Peter Blackburn"], [[(0, 2), (11, 22)], [(0, 15)]], False),  # before a stop
    (["北京大学的张三"], [[(0, 4)]], False),  # no spaces: characters
    (["EU rejects"], [[]], False)])  # no entity says nothing
def test_records_read_as_words(texts, spans, words):
    from globalpointer.spans import on_word_boundaries

    records = [Record(text, [Entity(start, end, "X") for start, end in found]) for text, found in zip(texts, spans)]
    assert on_word_boundaries(records) is words
