"""Records -> token windows: tokenization with character offsets, gold alignment, sliding windows.

A text of any length becomes one or more windows of at most ``max_length`` tokens (with [CLS] and
[SEP]); consecutive windows share ``window_overlap`` tokens.  Each window *owns* a slice of the text's
tokens (its own tokens up to the middle of each overlap), and reports only spans starting in it, so a
span predicted by two windows is reported once.
"""
import logging
import unicodedata
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple

from ..errors import DataError
from ..spans import Entity, Record, TokenIndex, TokenSpan, from_input, to_entity, to_input

log = logging.getLogger(__name__)


class TokenizedText(NamedTuple):
    ids: List[int]
    offsets: List[Tuple[int, int]]  # end-exclusive character range of each token


class Window(NamedTuple):
    record_index: int
    token_start: int  # index of the window's first token among the text's tokens
    input_ids: List[int]  # [CLS] tokens [SEP]
    offsets: List[Tuple[int, int]]  # character range of each text token (no special tokens)
    owned: Tuple[int, int]  # text tokens of this window, [from, to), whose spans it reports
    gold: List[TokenSpan]  # over input positions
    next_id: Optional[int] = None  # the text's token after the window's last (None: the text ends there)
    relations: Tuple = ()  # gold (relation type index, head TokenSpan, tail TokenSpan), over input positions


class AlignmentReport:
    """Gold spans that the windows cannot carry; never dropped silently."""

    def __init__(self):
        self.total = 0
        self.unaligned: List[str] = []  # a boundary inside a token
        self.unwindowed: List[str] = []  # longer than what a window can hold with its overlap
        self.relations = 0
        self.split_relations: List[str] = []  # whose two entities share no window

    @property
    def lost(self) -> int:
        return len(self.unaligned) + len(self.unwindowed)

    def log(self, name: str, mode: str) -> None:
        if self.unaligned:
            # In char mode only whitespace is no token: the entity's own offsets are off.
            remedy = ("they start or end on whitespace (such as the full-width space U+3000), which is never a token; "
                      "fix those entities' offsets (or, where mentions are searched, their text)" if mode == "char" else
                      "data.tokenization=char avoids this for Chinese")
            log.warning("%s: %d of %d gold spans have a boundary inside a token and cannot be learned or found "
                        "(e.g. %s); %s", name, len(self.unaligned), self.total, "; ".join(self.unaligned[:3]), remedy)
        if self.unwindowed:
            log.warning("%s: %d gold spans fit in no window (e.g. %s); raise data.max_length or data.window_overlap",
                        name, len(self.unwindowed), "; ".join(self.unwindowed[:3]))
        if self.split_relations:
            log.warning("%s: %d of %d gold relations have their two entities in no one window (e.g. %s) and cannot "
                        "be learned or found; raise data.max_length or data.window_overlap", name,
                        len(self.split_relations), self.relations, "; ".join(self.split_relations[:3]))


class Featurizer:
    """Texts -> token features: tokens with character offsets (the tokenizer), cut into windows of
    at most ``max_length`` tokens with [CLS] and [SEP] (``window_overlap`` tokens shared)."""

    def __init__(self, tokenizer, mode: str, max_length: int, window_overlap: int):
        if mode not in ("char", "subword"):
            raise ValueError(f"tokenization mode must be char or subword, got {mode!r}")
        self.tokenizer = tokenizer
        self.mode = mode
        self.window_size = max_length - 2
        self.step = self.window_size - window_overlap
        vocab = tokenizer.vocab
        self.vocab: Dict[str, int] = dict(vocab.token_to_idx) if hasattr(vocab, "token_to_idx") else dict(vocab)
        self.unk_id = self.vocab[tokenizer.unk_token]
        self.cls_id = self.vocab[tokenizer.cls_token]
        self.sep_id = self.vocab[tokenizer.sep_token]
        self.pad_id = self.vocab[tokenizer.pad_token]
        self.lower = bool(getattr(tokenizer, "do_lower_case", True))
        self.char_ids: Dict[str, int] = {}
        # WordPiece's pieces that continue a word ("##ing"): no whole-word span starts at one or before one
        self.continuations = frozenset(index for token, index in self.vocab.items() if token.startswith("##"))

    def char_id(self, char: str) -> int:
        # memoised: the lookup with its fallbacks took a third of tokenizing (docs/lab/PERFORMANCE.md)
        found = self.char_ids.get(char)
        if found is None:
            found = self.char_ids[char] = self.vocab_id(char)
        return found

    def vocab_id(self, char: str) -> int:
        for candidate in (char, char.lower() if self.lower else char,
                          unicodedata.normalize("NFKC", char).lower() if self.lower else unicodedata.normalize("NFKC", char)):
            if candidate in self.vocab:
                return self.vocab[candidate]
        return self.unk_id

    def tokenize(self, text: str) -> TokenizedText:
        if self.mode == "char":
            ids, offsets = [], []
            for index, char in enumerate(text):
                if not char.isspace():  # whitespace is never inside an entity boundary
                    ids.append(self.char_id(char))
                    offsets.append((index, index + 1))
            return TokenizedText(ids, offsets)
        encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = [], []
        for token_id, (start, end) in zip(encoded["input_ids"], encoded["offset_mapping"]):
            # PaddleNLP can give an [UNK] after an [UNK] the first one's start too ("가¡": (0, 1), (0, 2))
            start = max(start, offsets[-1][1] if offsets else 0)
            while start < end and text[start].isspace():  # [UNK] offsets can include spaces
                start += 1
            while end > start and text[end - 1].isspace():
                end -= 1
            if end > start:
                ids.append(token_id)
                offsets.append((start, end))
        # A tokenizer that strips accents gives no token to a combining mark ("Cafe\u0301"): it belongs
        # to the token before it, so that no span ends between a letter and its accent.
        for i, (start, end) in enumerate(offsets):
            limit = offsets[i + 1][0] if i + 1 < len(offsets) else len(text)
            while end < limit and unicodedata.combining(text[end]):
                end += 1
            offsets[i] = (start, end)
        return TokenizedText(ids, offsets)

    def count_tokens(self, texts: Sequence[str]) -> int:
        """The tokens of ``texts`` (no special tokens): what a request costs the model, windows aside."""
        if self.mode == "char":
            return sum(1 for text in texts for char in text if not char.isspace())
        return sum(len(self.tokenize(text).ids) for text in texts)

    def window_starts(self, num_tokens: int) -> List[int]:
        if num_tokens <= self.window_size:
            return [0]
        starts = list(range(0, num_tokens - self.window_size + 1, self.step))
        if starts[-1] + self.window_size < num_tokens:
            starts.append(num_tokens - self.window_size)
        return starts

    def windows(self, record_index: int, tokens: TokenizedText, token_spans: Sequence[TokenSpan] = (),
                relations: Sequence[tuple] = ()) -> List[Window]:
        """``token_spans`` and ``relations`` ((type index, head span, tail span)): over the whole text's
        tokens; a window carries the relations whose two entities it holds."""
        starts = self.window_starts(len(tokens.ids))
        out = []
        for k, start in enumerate(starts):
            end = min(start + self.window_size, len(tokens.ids))
            own_from = 0 if k == 0 else (start + starts[k - 1] + self.window_size) // 2
            own_to = len(tokens.ids) if k == len(starts) - 1 else (starts[k + 1] + start + self.window_size) // 2
            def inside(span: TokenSpan) -> bool:
                return start <= span.start and span.end < end

            gold = [to_input(span, start) for span in token_spans if inside(span)]
            linked = tuple((kind, to_input(head, start), to_input(tail, start)) for kind, head, tail in relations
                           if inside(head) and inside(tail))
            out.append(Window(record_index, start, [self.cls_id] + tokens.ids[start:end] + [self.sep_id],
                              tokens.offsets[start:end], (own_from - start, own_to - start), gold,
                              tokens.ids[end] if end < len(tokens.ids) else None, linked))
        return out

    def text_windows(self, texts: Sequence[str]) -> List[Window]:
        """Every window of every text, without gold; ``record_index`` is the text's position."""
        return [window for index, text in enumerate(texts) for window in self.windows(index, self.tokenize(text))]

    def align(self, record: Record, tokens: TokenizedText, label_index: Dict[str, int],
              report: AlignmentReport, index: Optional[TokenIndex] = None) -> List[TokenSpan]:
        """Gold character spans -> spans over the text's tokens (``index``: its ``TokenIndex``, made once)."""
        index = index or TokenIndex(tokens.offsets)
        spans = []
        for entity in record.entities:
            report.total += 1
            if entity.type not in label_index:
                raise DataError(f"{record.source}: entity type {entity.type!r} is not among the model's types "
                                f"({', '.join(label_index)}); add it to data.labels or fix the record")
            span = index.token_span(entity, label_index[entity.type])
            if span is None:
                report.unaligned.append(f"{record.source} {entity.type} {record.text[entity.start:entity.end]!r}")
                continue
            spans.append(span)
        return spans

    @staticmethod
    def align_relations(record: Record, index: TokenIndex, label_index: Dict[str, int],
                        relation_index: Dict[str, int], report: AlignmentReport) -> List[tuple]:
        """Gold relations -> (type index, head span, tail span) over the text's tokens (``index``); one
        whose entity has a boundary inside a token is left out (the entity is counted by ``align``).  The
        relation types are the training records' own (``training.checks.relation_types``)."""
        found = []
        for relation in record.relations:
            report.relations += 1
            head = index.token_span(relation.head, label_index[relation.head.type])
            tail = index.token_span(relation.tail, label_index[relation.tail.type])
            if head is not None and tail is not None:
                found.append((relation_index[relation.type], head, tail))
        return found

    def training_windows(self, records: Sequence[Record], label_index: Dict[str, int], name: str = "data",
                         relation_index: Optional[Dict[str, int]] = None) -> Tuple[List[Window], AlignmentReport]:
        report = AlignmentReport()
        windows: List[Window] = []
        for index, record in enumerate(records):
            tokens = self.tokenize(record.text)
            index_of_tokens = TokenIndex(tokens.offsets)
            spans = self.align(record, tokens, label_index, report, index_of_tokens)
            relations = self.align_relations(record, index_of_tokens, label_index, relation_index, report) \
                if relation_index else []
            record_windows = self.windows(index, tokens, spans, relations)
            held = {(kind, from_input(head, w.token_start), from_input(tail, w.token_start))
                    for w in record_windows for kind, head, tail in w.relations}
            for kind, head, tail in relations:
                if (kind, head, tail) not in held:
                    report.split_relations.append(f"{record.source} {record.text[tokens.offsets[head.start][0]:tokens.offsets[head.end][1]]!r} "
                                                  f"-> {record.text[tokens.offsets[tail.start][0]:tokens.offsets[tail.end][1]]!r}")
            carried = {from_input(span, w.token_start) for w in record_windows for span in w.gold}
            for span in spans:
                if span not in carried:
                    text = record.text[tokens.offsets[span.start][0]:tokens.offsets[span.end][1]]
                    report.unwindowed.append(f"{record.source} {text!r}")
            windows.extend(record_windows)
        report.log(name, self.mode)
        return windows, report


def whole_word_spans(window: Window, spans: Sequence[TokenSpan], continuations: FrozenSet[int]) -> List[TokenSpan]:
    """``spans`` of one window (input positions) but those that start at a token of ``continuations``
    (token ids that continue a word), or end just before one: whole words only."""
    ids = window.input_ids

    def whole_words(span: TokenSpan) -> bool:  # input positions: the token after the span is at end + 1
        after = ids[span.end + 1] if span.end + 2 < len(ids) else window.next_id  # [SEP] ends the window
        return ids[span.start] not in continuations and after not in continuations

    return [span for span in spans if whole_words(span)] if continuations else list(spans)


def window_entities(window: Window, spans: Sequence[TokenSpan], labels: Sequence[str],
                    continuations: FrozenSet[int] = frozenset()) -> List[Entity]:
    """Decoded spans of one window -> character entities of the original text, owned spans only
    (``whole_word_spans`` of them with ``continuations``)."""
    own_from, own_to = window.owned
    local = [from_input(span, 0) for span in whole_word_spans(window, spans, continuations)]
    return [to_entity(span, window.offsets, labels) for span in local if own_from <= span.start < own_to]
