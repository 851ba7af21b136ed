"""How sure a model is of a whole text, for choosing what to label next: one certainty in [0, 1] per
text (lowest first is most worth labelling, as Label Studio's uncertainty sampling sorts a prediction's
score), the same number from ``predict --certainty``, ``select`` and the Label Studio backend.

It reads the margins the extractor keeps when asked (``Extractor.records(texts, margins=True)``): for
every cell the span mask allows (every type; a relation model's pair cells too) within ``NEAR`` logits
of its threshold, its logit minus that threshold.  A cell's probability of being an entity, seen from
its threshold, is sigmoid(margin): 0.5 at the threshold, where the decision is a coin toss.  A model
with calibrated scores (``score_map``) gives its margins on them: the raw margin times the map's slope
(the entities' map for entity cells, the triples' for pair cells).

``certainty`` is 1 / (1 + the cells' summed binary entropy): of the measures compared in
docs/annotation.md (``MEASURES``), the one whose chosen texts held the most errors of the model's.
"""
import math
from typing import Callable, Dict, Sequence

import numpy as np

# Cells further than this from their threshold (a probability below 0.018 or above 0.982 of being
# right the other way) are left out: the thousands of sure cells of a long text would otherwise add
# up to more doubt than the few that decide it.
NEAR = 4.0


def _sides(margins: Sequence[float]) -> np.ndarray:
    """Each cell's probability of being decided wrong: min(p, 1 - p) with p = sigmoid(margin)."""
    return 1.0 / (1.0 + np.exp(np.abs(np.asarray(margins, dtype=np.float64))))


def expected_errors(margins: Sequence[float]) -> float:
    """1 / (1 + the expected number of wrongly decided cells): 1 for a text with no cell near a
    threshold (a ratio rather than exp(-n), which six decimals would round to 0 for the most doubtful
    texts, ordering them no more)."""
    return 1.0 / (1.0 + float(_sides(margins).sum()))


def summed_entropy(margins: Sequence[float]) -> float:
    """The cells' summed binary entropy, in nats."""
    wrong = _sides(margins)
    wrong = wrong[wrong > 0]
    return float(-(wrong * np.log(wrong) + (1 - wrong) * np.log1p(-wrong)).sum())


def entropy(margins: Sequence[float]) -> float:
    """1 / (1 + the cells' summed binary entropy)."""
    return 1.0 / (1.0 + summed_entropy(margins))


def least_margin(margins: Sequence[float]) -> float:
    """tanh(|the closest cell's margin| / 2) = 2 sigmoid(|margin|) - 1: 0 for a cell on its threshold."""
    return math.tanh(min(map(abs, margins), default=NEAR) / 2)


MEASURES: Dict[str, Callable[[Sequence[float]], float]] = {
    "expected_errors": expected_errors,
    "entropy": entropy,
    "least_margin": least_margin,
}


def certainty(record) -> float:
    """The certainty of a record the extractor returned with its margins."""
    if record.margins is None:
        raise ValueError("this record was predicted without margins: Extractor.records(texts, margins=True)")
    return round(entropy(record.margins), 6)

