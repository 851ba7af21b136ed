"""The next texts to label: the ``count`` least certain lines of an unlabelled file (``doubt.certainty``),
read as ``predict`` reads it (text or JSON lines, any size: only the chosen lines are held), no two
of them near-identical.

Near-identical: the estimated Jaccard similarity of their character 3-gram sets (MinHash, with
``datasketch``'s locality-sensitive index) is at least ``max_similarity``; of such twins only the
least certain is kept.  A file of templated texts (the same sentence with another name) would
otherwise fill a round with one text's doubt.
"""
import heapq
import logging
import unicodedata
from typing import Dict, Iterable, List, NamedTuple, Tuple

from datasketch import MinHash, MinHashLSH

from ..errors import DataError
from ..files import atomic_output
from .doubt import certainty
from .file_prediction import NOT_UTF8, parsed_chunks

log = logging.getLogger("globalpointer")

SHINGLE = 3  # characters per shingle: short enough for short texts, long enough that word order counts
PERMUTATIONS = 64  # MinHash size: Jaccard estimated within about +-0.06


class Chosen(NamedTuple):
    certainty: float
    order: int  # the line's place in the file (ties: the earlier line first)
    line: bytes  # as read, without its line end


def shingles(text: str) -> List[bytes]:
    """The text's character 3-grams after NFKC and case folding, whitespace removed."""
    plain = "".join(unicodedata.normalize("NFKC", text).casefold().split())
    if len(plain) <= SHINGLE:
        return [plain.encode("utf-8")]
    return [plain[i:i + SHINGLE].encode("utf-8") for i in range(len(plain) - SHINGLE + 1)]


class Selection:
    """The ``count`` least certain texts seen so far, no two near-identical."""

    def __init__(self, count: int, max_similarity: float):
        self.count = count
        self.max_similarity = max_similarity
        # the index offers candidates (two bands at least: at most 0.95 with 64 permutations), the estimate decides
        self.index = MinHashLSH(threshold=min(max_similarity, 0.95), num_perm=PERMUTATIONS)
        self.members: Dict[str, Chosen] = {}
        self.signatures: Dict[str, MinHash] = {}
        self.heap: List[Tuple[float, int, str]] = []  # (-certainty, -order, key): the most certain (latest) on top
        self.twins = 0  # texts left out for a less certain near-identical one

    def offer(self, text: str, chosen: Chosen) -> None:
        while self.heap and self.heap[0][2] not in self.members:  # removed as a twin
            heapq.heappop(self.heap)
        if len(self.members) >= self.count and -self.heap[0][0] <= chosen.certainty:
            return  # no more doubtful than the most certain member kept
        signature = MinHash(num_perm=PERMUTATIONS)
        signature.update_batch(shingles(text))
        key = str(chosen.order)
        twins = [other for other in self.index.query(signature)
                 if signature.jaccard(self.signatures[other]) >= self.max_similarity]
        if any(self.members[other].certainty <= chosen.certainty for other in twins):
            self.twins += 1
            return
        for other in twins:  # each less doubtful than this text
            self._remove(other)
            self.twins += 1
        self.members[key] = chosen
        self.signatures[key] = signature
        self.index.insert(key, signature)
        heapq.heappush(self.heap, (-chosen.certainty, -chosen.order, key))
        while len(self.members) > self.count:
            self._remove(heapq.heappop(self.heap)[2])

    def _remove(self, key: str) -> None:
        if key in self.members:  # a heap entry outlives its member (removed as a twin): skipped when popped
            del self.members[key], self.signatures[key]
            self.index.remove(key)

    def chosen(self) -> List[Chosen]:
        """The members, least certain first."""
        return sorted(self.members.values())


def select_lines(extractor, source: Iterable[bytes], count: int, max_similarity: float, input_format: str = "auto",
                 lines_per_chunk: int = 512, name: str = "--input") -> Tuple[List[Chosen], int, int]:
    """(the chosen lines, least certain first; lines read; near-identical texts left out).  A line that
    is not UTF-8 is an error naming ``name`` and the line: a file in another encoding would otherwise
    offer no text at all."""
    selection = Selection(count, max_similarity)
    lines = 0
    for chunk, parsed in parsed_chunks(source, input_format, lines_per_chunk):
        for i, line in enumerate(parsed):
            if line.text is None and line.payload.get("error", "").startswith(NOT_UTF8):
                raise DataError(f"{name}:{lines + i + 1}: {line.payload['error']}: the file must be UTF-8; convert it "
                                f"(iconv -f GBK -t UTF-8, or from the encoding it is in)")
        readable = [i for i, p in enumerate(parsed) if p.text and p.text.strip()]
        records = extractor.records([parsed[i].text for i in readable], margins=True)
        for i, record in zip(readable, records):
            line = chunk[i].rstrip(b"\r\n")
            selection.offer(record.text, Chosen(certainty(record), lines + i, line))
        lines += len(chunk)
    return selection.chosen(), lines, selection.twins


def select_file(extractor, input_path: str, output_path: str, count: int, max_similarity: float,
                input_format: str = "auto", lines_per_chunk: int = 512) -> List[Chosen]:
    """``select_lines`` of ``input_path`` written to ``output_path`` (atomically), a line each as read."""
    with open(input_path, "rb") as source:
        chosen, lines, twins = select_lines(extractor, source, count, max_similarity, input_format, lines_per_chunk,
                                            input_path)
    with atomic_output(output_path, binary=True) as out:
        for item in chosen:
            out.write(item.line + b"\n")
    span = f"certainty {chosen[0].certainty:.4g} to {chosen[-1].certainty:.4g}" if chosen else "none"
    log.info("%s: %d of %d lines, the least certain first (%s); %d near-identical texts left out for a less "
             "certain twin", output_path, len(chosen), lines, span, twins)
    if len(chosen) < count:
        log.warning("%s: %d lines, fewer than the %d asked for: %s has no more texts to offer (empty lines, lines "
                    "that could not be read and near-identical texts are not offered)", output_path, len(chosen),
                    count, input_path)
    return chosen
