"""Which calibration map makes the scores mean what they say on texts the fit did not see
(docs/results.md, "Calibrated scores").

    python bench/calibration_maps.py --model runs/quickstart/best --fit data/cluener-sample/dev.json \
        --held-out ../shared/data/cluener/dev.json --less data/cluener-sample
    python bench/calibration_maps.py --model runs/relations-quickstart/best --fit data/duie-sample/dev.json \
        --held-out ../shared/data/relations/duie2-subset/dev.json --less data/duie-sample

The model decodes both files at its fitted minimum scores (thresholds.json) with its raw scores (the
sigmoid of each item's logit); each map is fitted on the fit file's predicted items (right: in its
gold) and applied to the held-out file's, less the texts of the files in ``--less``.  Prints, per
kind of item (entities, and a relation model's strict triples), the held-out ECE and MCE of the raw
scores and of each map: temperature, Platt's sigmoid and isotonic regression, each one map for the
kind of item (``head``) or one per entity type with ``MIN_TYPE_ITEMS`` fitted items (``type``).
The maps' F1 is the raw scores' (each map is increasing and applied after decoding).
"""
import argparse
import glob
import json
import os
import sys
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np
from scipy.optimize import minimize_scalar
from sklearn.isotonic import IsotonicRegression

import common  # noqa: F401  sys.path and Paddle's quiet import
import globalpointer
from globalpointer.evaluation.calibrate import fit_platt
from globalpointer.corpus import load_sources
from globalpointer.evaluation.reliability import MIN_TYPE_ITEMS, entity_items, reliability, triple_items

Items = List[Tuple[str, float, bool]]  # (group, raw score, right)


def logit(scores) -> np.ndarray:
    p = np.clip(np.asarray(scores, dtype="float64"), 1e-12, 1 - 1e-12)
    return np.log(p) - np.log1p(-p)


def sigmoid(z) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z)))


def temperature(scores, right) -> Callable:
    z, y = logit(scores), np.asarray(right, dtype="float64")

    def nll(t):
        p = np.clip(sigmoid(z / t), 1e-12, 1 - 1e-12)
        return -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))

    t = minimize_scalar(nll, bounds=(0.05, 20.0), method="bounded").x
    return lambda s: sigmoid(logit(s) / t)


def platt(scores, right) -> Callable:
    a, b = fit_platt(scores, right)
    return lambda s: sigmoid(a * logit(s) + b)


def isotonic(scores, right) -> Callable:
    fitted = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(logit(scores), right)
    return lambda s: fitted.predict(logit(s))


FITS = {"temperature": temperature, "platt": platt, "isotonic": isotonic}


def mapped(fit_items: Items, held: Items, fit: Callable, per_type: bool) -> List[float]:
    """The held-out items' scores under ``fit``'s map, one per group with enough fitted items if ``per_type``."""
    shared = fit([s for _, s, _ in fit_items], [r for _, _, r in fit_items])
    maps: Dict[str, Callable] = {}
    if per_type:
        for group in {g for g, _, _ in fit_items}:
            own = [(s, r) for g, s, r in fit_items if g == group]
            if len(own) >= MIN_TYPE_ITEMS:
                maps[group] = fit([s for s, _ in own], [r for _, r in own])
    return [float(maps.get(g, shared)(np.array([s]))[0]) for g, s, _ in held]


def items_of(gold, predicted, triples: bool) -> Items:
    """Each predicted item's (group, score, right): an entity's group its type, a triple's one group."""
    if triples:
        return [("triples", score, right) for score, right in triple_items(gold, predicted)]
    return entity_items([r.entities for r in gold], [r.entities for r in predicted])


def texts_of(folder: str) -> set:
    texts = set()
    for path in glob.glob(os.path.join(folder, "*.json")):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    texts.add(json.loads(line)["text"])
    return texts


def main(argv: Sequence[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--fit", required=True, help="the labelled file the maps are fitted on (the dev file)")
    parser.add_argument("--held-out", required=True, help="a labelled file of texts the fit did not see")
    parser.add_argument("--less", action="append", default=[], help="a folder whose texts the held-out file loses")
    args = parser.parse_args(argv)
    ner = globalpointer.load(args.model)
    ner.extractor.score_map = None  # the raw scores, decoded at the fitted minimum scores
    relations = ner.extractor.relations

    def read(path):
        """The file's records, less the relations of types the model was not trained on (the DuIE subset's
        dev file has 48 predicates, the relation quickstart's sample fewer): it can predict none of them."""
        records = load_sources(path, ner.config.data.reading)
        return [r._replace(relations=tuple(t for t in r.relations if t.type in relations)) for r in records]

    fit_gold = read(args.fit)
    less = set().union(*(texts_of(folder) for folder in args.less)) if args.less else set()
    held_gold = [r for r in read(args.held_out) if r.text not in less]
    fit_found = ner.extractor.records([r.text for r in fit_gold])
    held_found = ner.extractor.records([r.text for r in held_gold])
    print(f"{args.model}: fitted on {len(fit_gold)} texts of {args.fit}, measured on {len(held_gold)} held-out texts "
          f"of {args.held_out}")
    for kind in (("entities", False),) + ((("triples", True),) if relations else ()):
        fit_items, held = items_of(fit_gold, fit_found, kind[1]), items_of(held_gold, held_found, kind[1])
        right = [r for _, _, r in held]
        raw = reliability([s for _, s, _ in held], right)
        print(f"\n{kind[0]}: {len(fit_items)} fitted items, {len(held)} held-out items")
        print(f"{'map':<24}{'ECE':>8}{'MCE':>8}")
        print(f"{'raw scores':<24}{raw['ece']:>8.3f}{raw['mce']:>8.3f}")
        for name, fit in FITS.items():
            for per_type in (False, True):
                if per_type and kind[1]:
                    continue  # triples: one map (relation types rarely hold MIN_TYPE_ITEMS fitted triples)
                result = reliability(mapped(fit_items, held, fit, per_type), right)
                label = f"{name} per {'type' if per_type else 'head'}"
                print(f"{label:<24}{result['ece']:>8.3f}{result['mce']:>8.3f}")


if __name__ == "__main__":
    sys.exit(main())
