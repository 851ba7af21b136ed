"""Fitted thresholds: the searches find the best threshold of each type (per_type) or of all types
together (shared), decoding applies one threshold per type, the CLI stores them where predict /
evaluate / the API use them, and training fits the same ones on its dev file (train.calibrate)."""
import json
import shutil

import numpy as np
import paddle
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from globalpointer.evaluation.calibrate import GRID, apply_thresholds, choose_shared_threshold, choose_thresholds
from globalpointer.model.decode import sigmoid
from globalpointer.model.reference import decode_spans
from globalpointer.model.heads import decode_span_logits
from globalpointer.spans import Entity


def random_task(seed, texts=40, labels=("A", "B")):
    """Candidates with random logits; a candidate is gold with a probability rising with its logit."""
    rng = np.random.default_rng(seed)
    candidates, gold = [], []
    for _ in range(texts):
        found, truth = [], []
        for start in range(0, 30, 3):
            label = labels[rng.integers(len(labels))]
            logit = float(rng.uniform(-4, 4)) * (1.5 if label == "B" else 1.0)
            entity = Entity(start, start + 2, label, float(sigmoid(np.float64(logit))))
            if logit > -4:
                found.append(entity)
            if rng.random() < 1 / (1 + np.exp(-(logit - (1.0 if label == "A" else -1.5)))):
                truth.append(entity._replace(score=1.0))
        candidates.append(found)
        gold.append(truth)
    return candidates, gold


def f1_by_hand(candidates, gold, label, threshold):
    """Independent of span_report: count per type with sets of (text, start, end)."""
    limit = 1 / (1 + np.exp(-threshold))
    predicted = {(i, e.start, e.end) for i, found in enumerate(candidates) for e in found
                 if e.type == label and e.score > limit}
    truth = {(i, e.start, e.end) for i, entities in enumerate(gold) for e in entities if e.type == label}
    return 2 * len(predicted & truth) / (len(predicted) + len(truth)) if predicted or truth else 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nested_search_finds_each_types_best_threshold(seed):
    candidates, gold = random_task(seed)
    chosen = choose_thresholds(candidates, gold, ["A", "B"], 0.0, flat=False)
    for label in ("A", "B"):
        best = max(f1_by_hand(candidates, gold, label, t) for t in GRID)
        assert f1_by_hand(candidates, gold, label, chosen[label]) == pytest.approx(best)
        assert best > f1_by_hand(candidates, gold, label, 0.0) or chosen[label] == 0.0
    assert chosen["A"] > chosen["B"]  # A's spans are gold only at higher logits than B's


def micro_f1_by_hand(candidates, gold, threshold):
    """Independent of span_report: all types' spans as sets of (text, start, end, type)."""
    limit = 1 / (1 + np.exp(-threshold))
    predicted = {(i, e.start, e.end, e.type) for i, found in enumerate(candidates) for e in found if e.score > limit}
    truth = {(i, e.start, e.end, e.type) for i, entities in enumerate(gold) for e in entities}
    return 2 * len(predicted & truth) / (len(predicted) + len(truth)) if predicted or truth else 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shared_search_finds_the_best_threshold_for_all_types_together(seed):
    candidates, gold = random_task(seed)
    chosen = choose_shared_threshold(candidates, gold, ["A", "B"], 0.0, flat=False)
    assert chosen["A"] == chosen["B"]
    best = max(micro_f1_by_hand(candidates, gold, t) for t in GRID)
    assert micro_f1_by_hand(candidates, gold, chosen["A"]) == pytest.approx(best)
    ties = [t for t in GRID if micro_f1_by_hand(candidates, gold, t) == pytest.approx(best)]
    assert abs(chosen["A"]) == min(abs(t) for t in ties)  # of equals, the one closest to the default


@pytest.mark.parametrize("choose", [choose_shared_threshold, choose_thresholds])
def test_spans_of_a_type_the_file_does_not_annotate_are_not_counted(choose):
    """Half the texts come from a file that annotates A only: the B spans found there are neither right
    nor wrong (as evaluate scores them), so the search finds what it finds without them."""
    from globalpointer.spans import Record

    candidates, gold = random_task(5)
    partial = [i % 2 == 0 for i in range(len(gold))]
    extra_score = float(sigmoid(np.float64(0.5)))  # B spans there at a logit of 0.5: counted, they would lift the thresholds
    candidates = [found + [Entity(start, start + 2, "B", extra_score) for start in range(31, 45, 3)] if only_a else found
                  for found, only_a in zip(candidates, partial)]
    gold = [[e for e in entities if e.type == "A"] if only_a else entities for entities, only_a in zip(gold, partial)]
    records = [Record(f"text {i}", entities, types=("A",) if only_a else None)
               for i, (entities, only_a) in enumerate(zip(gold, partial))]
    without = [[e for e in found if e.type == "A"] if only_a else found for found, only_a in zip(candidates, partial)]
    chosen = choose(candidates, gold, ["A", "B"], 0.0, False, records=records)
    assert chosen == choose(without, gold, ["A", "B"], 0.0, False)
    assert chosen != choose(candidates, gold, ["A", "B"], 0.0, False)  # counted, B's spans there are all wrong


def test_flat_search_improves_on_the_default_when_types_compete():
    from globalpointer.evaluation.metrics import span_report

    candidates, gold = random_task(3)
    overlapping = [found + [Entity(e.start, e.end + 1, "B", e.score * 0.9) for e in found] for found in candidates]
    chosen = choose_thresholds(overlapping, gold, ["A", "B"], 0.0, flat=True)
    before = span_report(gold, apply_thresholds(overlapping, {"A": 0.0, "B": 0.0}, True), ["A", "B"])
    after = span_report(gold, apply_thresholds(overlapping, chosen, True), ["A", "B"])
    assert after["micro"]["f1"] > before["micro"]["f1"]


def test_a_type_without_gold_keeps_the_default():
    candidates, gold = random_task(4, labels=("A",))
    assert choose_thresholds(candidates, gold, ["A", "Z"], 0.5, flat=False)["Z"] == 0.5


def test_per_type_thresholds_decode_like_one_threshold_per_type():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 2, size=(3, 2, 6, 6)).astype("float32")
    mask = np.triu(np.ones((6, 6), bool))[None, None]
    both = decode_spans(logits, mask, [1.0, -0.5])
    first, second = decode_spans(logits, mask, 1.0), decode_spans(logits, mask, -0.5)
    for b in range(3):
        expected = [s for s in first[b] if s.type == 0] + [s for s in second[b] if s.type == 1]
        assert sorted(both[b]) == sorted(expected) and both[b]
    span_text = paddle.ones([3, 6], dtype="bool")
    on_device = decode_span_logits(paddle.to_tensor(logits), span_text, True, [1.0, -0.5])
    assert [sorted((s.type, s.start, s.end) for s in x) for x in on_device] == \
        [sorted((s.type, s.start, s.end) for s in x) for x in both]


# the command ------------------------------------------------------------------------------------

def test_calibrate_stores_thresholds_that_predict_and_evaluate_use(trained, tmp_path, capsys):
    from globalpointer.cli import main as cli
    from globalpointer.cli import evaluate_main, predict_main

    model = tmp_path / "best"
    shutil.copytree(trained / "run" / "best", model)
    dev = str(trained / "dev.jsonl")
    assert cli(["calibrate", "--model", str(model), "--data", dev]) == 0
    printed = capsys.readouterr().out
    stored = json.loads((model / "thresholds.json").read_text())
    assert set(stored["min_scores"]) == set(json.loads((model / "labels.json").read_text()))
    assert all(0 < score < 1 for score in stored["min_scores"].values())
    assert "micro" in printed and stored["micro_f1"]["after"] >= stored["micro_f1"]["before"]

    def evaluate(*extra):
        output = tmp_path / "report.json"
        assert evaluate_main(["--model", str(model), "--data", dev, "--output", str(output), *extra]) == 0
        return json.loads(output.read_text())["micro"]["f1"]

    # what the search promised is what decoding with the stored thresholds gives
    assert evaluate() == pytest.approx(stored["micro_f1"]["after"], abs=1e-9)
    assert evaluate("--set", "model.use_calibration=false") == pytest.approx(stored["micro_f1"]["before"], abs=1e-9)

    # a type whose threshold nobody reaches is never predicted
    stored["min_scores"]["PER"] = 1 - 1e-12
    (model / "thresholds.json").write_text(json.dumps(stored))
    (tmp_path / "in.txt").write_text("北京大学的张三\n", encoding="utf-8")
    assert predict_main(["--model", str(model), "--input", str(tmp_path / "in.txt"),
                         "--output", str(tmp_path / "out.jsonl")]) == 0
    types = {e["type"] for e in json.loads((tmp_path / "out.jsonl").read_text())["entities"]}
    assert "PER" not in types and "ORG" in types

    # a file from before min_scores: logits under "thresholds", read as the scores they mean
    old = {"thresholds": {label: float(np.log(score) - np.log1p(-score)) for label, score in stored["min_scores"].items()}}
    (model / "thresholds.json").write_text(json.dumps(old))
    assert predict_main(["--model", str(model), "--input", str(tmp_path / "in.txt"),
                         "--output", str(tmp_path / "out-old.jsonl")]) == 0
    assert (tmp_path / "out-old.jsonl").read_text() == (tmp_path / "out.jsonl").read_text()

    del stored["min_scores"]["PER"]
    (model / "thresholds.json").write_text(json.dumps(stored))
    capsys.readouterr()
    assert predict_main(["--model", str(model), "--input", str(tmp_path / "in.txt"),
                         "--output", str(tmp_path / "out.jsonl")]) == 2
    assert "thresholds.json is corrupted or not for this model's labels" in capsys.readouterr().err


def test_calibrate_needs_data(trained, capsys):
    from globalpointer.cli import main as cli

    assert cli(["calibrate", "--model", str(trained / "run" / "best"), "--data", "/nope.jsonl"]) == 2
    assert "file not found: /nope.jsonl" in capsys.readouterr().err


# calibrated scores ------------------------------------------------------------------------------

def test_platts_map_is_the_logistic_regression_of_right_on_the_logit():
    """The fit recovers the map that generated the items, and matches an independent fit: the
    log-likelihood maximised by Nelder-Mead."""
    from scipy.optimize import minimize

    from globalpointer.evaluation.calibrate import fit_platt

    rng = np.random.default_rng(0)
    z = rng.normal(0, 2, 20000)
    right = rng.random(20000) < 1 / (1 + np.exp(-(0.6 * z + 0.4)))
    a, b = fit_platt(sigmoid(z), right)
    assert (a, b) == pytest.approx((0.6, 0.4), abs=0.05)

    def loss(ab):
        logits = ab[0] * z + ab[1]
        return np.sum(np.logaddexp(0, logits) - right * logits)

    assert (a, b) == pytest.approx(tuple(minimize(loss, [1.0, 0.0], method="Nelder-Mead",
                                                  options={"xatol": 1e-7, "fatol": 1e-9}).x), abs=1e-3)
    assert fit_platt([0.9, 0.8, 0.7], [True, True, True]) is None  # all right: nothing to fit
    assert fit_platt([0.9, 0.8, 0.7, 0.6], [False, False, True, True]) is None  # falling: no increasing map


@given(a=st.floats(0.05, 5, allow_subnormal=False), b=st.floats(-3, 3, allow_subnormal=False),
       min_score=st.floats(0.01, 0.99, allow_subnormal=False))
def test_a_minimum_score_on_the_calibrated_score_is_read_back_through_the_maps_inverse(a, b, min_score):
    """An item is kept exactly when its calibrated score is above the minimum score (raw thresholds within
    12 logits of 0: a score below sigmoid(-12) is read back from decode.sigmoid's float64 with too few digits)."""
    from globalpointer.model.score_map import ScoreMap, platt_score

    score_map = ScoreMap((a, b))
    z = score_map.threshold_logits([min_score])[0]
    assume(abs(z) < 12)
    for step in (1e-6, -1e-6):
        calibrated = platt_score((a, b), float(sigmoid(np.float64(z + step))))
        assert (calibrated > min_score) == (step > 0)
    assert score_map.calibrated_min_scores(["A"], [z])["A"] == pytest.approx(min_score, rel=1e-9)


def test_the_map_keeps_every_item_and_its_order(trained):
    """A record's entities and relations keep their spans, types and order of scores."""
    from globalpointer.model.score_map import ScoreMap
    from globalpointer.spans import Record, Relation

    head, tail = Entity(0, 2, "PER", 0.9), Entity(3, 5, "LOC", 0.6)
    record = Record("张三在北京", [head, tail], relations=(Relation(head, "lives_in", tail, 0.7),))
    mapped = ScoreMap((0.5, 0.2), (2.0, -1.0)).record(record)
    assert [e.key for e in mapped.entities] == [e.key for e in record.entities]
    assert mapped.entities[0].score > mapped.entities[1].score
    assert mapped.relations[0].head == mapped.entities[0] and mapped.relations[0].tail == mapped.entities[1]
    assert mapped.relations[0].score == pytest.approx(1 / (1 + np.exp(-(2.0 * np.log(0.7 / 0.3) - 1.0))))


def test_calibrate_fits_the_map_of_what_its_thresholds_keep(trained, tmp_path, capsys):
    """On a dev file whose gold misses half the entities the model scores lowest, calibrate stores the map
    fitted on the items its thresholds keep (refitted here from the raw scores), its minimum scores on the
    calibrated score; evaluate then gives the F1 it promised, with the calibrated scores' ECE."""
    from globalpointer.cli import evaluate_main
    from globalpointer.cli import main as cli
    from globalpointer.evaluation.calibrate import fit_platt
    import globalpointer

    model = tmp_path / "best"
    shutil.copytree(trained / "run" / "best", model)
    raw = globalpointer.load(str(model), ["model.use_calibration=false"])
    lines = [json.loads(line) for line in open(trained / "dev.jsonl", encoding="utf-8")]
    found = [raw(line["text"]) for line in lines]
    median = float(np.median([e["score"] for entities in found for e in entities]))
    low = sorted((e["score"], index, e["start"], e["end"], e["type"]) for index, entities in enumerate(found)
                 for e in entities if e["score"] < median)
    dropped = {key[1:] for key in low[::2]}  # the gold misses every other one of the lowest scored
    for index, line in enumerate(lines):
        line["entities"] = [e for e in line["entities"] if (index, e["start"], e["end"], e["type"]) not in dropped]
    noisy = tmp_path / "noisy.jsonl"
    noisy.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    assert cli(["calibrate", "--model", str(model), "--data", str(noisy), "--thresholds", "shared"]) == 0
    assert "ECE of the entities' scores on it" in capsys.readouterr().out
    stored = json.loads((model / "thresholds.json").read_text())
    a, b = stored["score_map"]["entities"]
    assert a > 0 and (a, b) != (1.0, 0.0)

    limit = float(sigmoid(np.float64((np.log(next(iter(stored["min_scores"].values())) /
                                             (1 - next(iter(stored["min_scores"].values())))) - b) / a)))
    items = [(e["score"], (e["start"], e["end"], e["type"]) in {(g["start"], g["end"], g["type"])
                                                                 for g in line["entities"]})
             for line, entities in zip(lines, found) for e in entities if e["score"] > limit]
    # the scores predict gives are rounded to 6 decimals: the refit is as near as they allow
    assert (a, b) == pytest.approx(fit_platt([s for s, _ in items], [r for _, r in items]), abs=2e-3)

    # a minimum score the user gives such a model is on the calibrated score too
    mapped = globalpointer.load(str(model), ["model.min_score=0.7"])
    calibrated = lambda score: 1 / (1 + np.exp(-(a * np.log(score / (1 - score)) + b)))
    for line, entities in zip(lines[:20], found):
        # (abs 1e-3: the raw scores are rounded to 6 decimals, whose logits near 1 move by up to 5e-3)
        assert [(e["start"], e["end"], e["type"], pytest.approx(calibrated(e["score"]), abs=1e-3)) for e in entities
                if calibrated(e["score"]) > 0.7] == [(e["start"], e["end"], e["type"], e["score"])
                                                     for e in mapped(line["text"])]

    output = tmp_path / "report.json"
    assert evaluate_main(["--model", str(model), "--data", str(noisy), "--output", str(output)]) == 0
    report = json.loads(output.read_text())
    assert report["micro"]["f1"] == pytest.approx(stored["micro_f1"]["after"], abs=1e-9)
    assert report["calibration"]["ece"] == pytest.approx(stored["ece"]["entities"]["after"], abs=1e-6)


@pytest.mark.parametrize("score_map, says", [
    ({"kind": "platt", "entities": [0.0, 1.0]}, "score_map.entities: a must be above 0"),
    ({"kind": "platt", "entities": [1.0]}, "score_map.entities must be [a, b]"),
    ({"kind": "isotonic", "entities": [1.0, 0.0]}, 'score_map must be an object with kind "platt"'),
    ({"kind": "platt", "entities": [1.0, 0.0], "per_type": {}}, "score_map has keys no calibration writes: per_type"),
    ({"kind": "platt", "entities": [1.0, 0.0], "triples": [1.0, 0.0]}, "score_map.triples is a relation model's map"),
])
def test_a_stored_map_no_calibration_writes_is_refused_naming_it(trained, tmp_path, capsys, score_map, says):
    from globalpointer.cli import predict_main

    model = tmp_path / "best"
    shutil.copytree(trained / "run" / "best", model)
    labels = json.loads((model / "labels.json").read_text())
    (model / "thresholds.json").write_text(json.dumps({"min_scores": {label: 0.5 for label in labels},
                                                       "score_map": score_map}))
    (tmp_path / "in.txt").write_text("北京大学的张三\n", encoding="utf-8")
    assert predict_main(["--model", str(model), "--input", str(tmp_path / "in.txt"),
                         "--output", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{model}/thresholds.json: {says}" in err and "rerun globalpointer calibrate" in err


# training's last step ---------------------------------------------------------------------------

@pytest.mark.slow  # trains models of its own
@pytest.mark.parametrize("kind", ["shared", "per_type"])
def test_training_fits_on_its_dev_file_what_calibrate_fits(tmp_path, kind, capsys):
    """train.calibrate writes best/thresholds.json: the thresholds `globalpointer calibrate --thresholds
    KIND` fits on the dev file for the same checkpoint, and the test report training gives is what
    evaluate.py gives for the saved model."""
    from globalpointer.cli import evaluate_main, train_main
    from globalpointer.cli import main as cli
    from synthetic import make_records, tiny_config, write_jsonl

    test = write_jsonl(tmp_path / "test.jsonl", make_records(40, 3))
    config = tiny_config(tmp_path, train__epochs=2, train__calibrate=kind, data__test=test)
    assert train_main(["--config", config]) == 0
    best = tmp_path / "run" / "best"
    fitted = json.loads((best / "thresholds.json").read_text())
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert fitted["kind"] == kind and fitted["data"] == str(tmp_path / "dev.jsonl")
    assert summary["thresholds"]["min_scores"] == fitted["min_scores"]
    assert summary["thresholds"]["dev_f1_after"] >= summary["thresholds"]["dev_f1_before"]
    if kind == "shared":
        assert len(set(fitted["min_scores"].values())) == 1

    again = tmp_path / "again"
    shutil.copytree(best, again)
    (again / "thresholds.json").unlink()
    assert cli(["calibrate", "--model", str(again), "--data", str(tmp_path / "dev.jsonl"), "--thresholds", kind]) == 0
    assert json.loads((again / "thresholds.json").read_text())["min_scores"] == fitted["min_scores"]

    report = tmp_path / "test_report.json"
    assert evaluate_main(["--model", str(best), "--data", test, "--output", str(report)]) == 0
    assert json.loads(report.read_text())["micro"] == pytest.approx(summary["test"])


class _Candidates:
    """An extractor whose ``records`` are given (what it finds above the lowest threshold)."""

    def __init__(self, found):
        self.found, self.relations = found, ["r", "s"]
        self.threshold = self.pair_threshold = 0.0
        self.flat, self.score_map = False, None

    def records(self, texts):
        return self.found


@pytest.mark.parametrize("seed", [0, 1])
def test_a_relation_models_thresholds_are_the_best_pair_found_by_decoding_each_entity_threshold_once(seed, monkeypatch):
    """fit_relation_thresholds against the plain search (every pair of GRID and PAIR_GRID thresholds decoded from the
    candidates with kept_relations), and with kept_relations run once per entity threshold and text: at
    once per pair, an under-trained model's thousands of candidate relations per text took 103 s on 16
    texts (13 s now)."""
    from globalpointer.evaluation import calibrate
    from globalpointer.evaluation.relations import relation_report
    from globalpointer.model.decode import score_logit
    from globalpointer.spans import Record, Relation, kept_relations

    rng = np.random.default_rng(seed)
    gold, found = [], []
    for t in range(12):
        entities = [Entity(i, i + 1, "AB"[i % 2], float(rng.uniform(0.01, 0.99))) for i in range(0, 16, 2)]
        relations = [Relation(h, str(rng.choice(["r", "s"])), e, float(rng.uniform(0.01, 0.99)))
                     for h in entities for e in entities if h != e and rng.uniform() < 0.3]
        found.append(Record(f"text {t} " + "x" * 20, entities, relations=tuple(relations)))
        right = [r for r in relations if rng.uniform() < 0.4]
        kept = {e for r in right for e in (r.head, r.tail)}
        gold.append(Record(found[-1].text, [e._replace(score=1.0) for e in kept],
                           relations=tuple(Relation(r.head._replace(score=1.0), r.type, r.tail._replace(score=1.0))
                                           for r in right)))

    def plain(entity, pair):
        decoded = []
        for candidates in found:
            kept = [e for e in candidates.entities if e.score > sigmoid(entity)]
            decoded.append(Record(candidates.text, kept, relations=kept_relations(
                kept, [r for r in candidates.relations if r.score > sigmoid(pair)])))
        return relation_report(gold, decoded)["micro"]["f1"], -abs(entity) - abs(pair)

    grid = sorted(set(GRID))
    best = max(((entity, pair) for entity in grid for pair in sorted(set(calibrate.PAIR_GRID))), key=lambda p: plain(*p))
    calls = []
    monkeypatch.setattr(calibrate, "kept_relations", lambda *a: calls.append(1) or kept_relations(*a))
    fitted = calibrate.fit_relation_thresholds(_Candidates(found), gold, ["A", "B"], 0.0)
    assert fitted["micro_f1"]["after"] == pytest.approx(plain(*best)[0])
    assert fitted["micro_f1"]["after"] > fitted["micro_f1"]["before"]
    assert score_logit(fitted["pair_min_score"]) == pytest.approx(best[1])
    assert len(calls) <= len(grid) * len(found)


def test_a_relation_models_pair_cells_are_fitted_below_the_lowest_entity_score_tried():
    """A model trained on few texts scores its right pairs far below its entities (on CoNLL04's first 30
    texts most right triples whose entities are found score under 0.01, docs/results.md): the fit reaches
    them, where a pair minimum score of GRID's (0.018 at least) kept none."""
    from globalpointer.evaluation import calibrate
    from globalpointer.spans import Record, Relation

    gold, found = [], []
    for t in range(10):
        text = f"text {t} " + "x" * 20
        head, tail, other = Entity(0, 3, "A", 0.9), Entity(5, 8, "B", 0.9), Entity(10, 13, "B", 0.9)
        found.append(Record(text, [head, tail, other], relations=(Relation(head, "r", tail, 0.004),
                                                                  Relation(head, "r", other, 0.0002))))
        gold.append(Record(text, [head._replace(score=1.0), tail._replace(score=1.0)],
                           relations=(Relation(head._replace(score=1.0), "r", tail._replace(score=1.0)),)))
    fitted = calibrate.fit_relation_thresholds(_Candidates(found), gold, ["A", "B"], 0.0)
    assert fitted["micro_f1"] == {"before": 0.0, "after": 1.0}
    assert 0.0002 < fitted["pair_min_score"] < 0.004 < sigmoid(min(GRID))


class _EventCandidates(_Candidates):
    """An event model's extractor whose ``records`` are given, decoding events as the Extractor does."""

    def __init__(self, found):
        super().__init__(found)
        self.relations, self.events, self.max_events = ["(same event)"], True, 0

    def with_events(self, records):
        from globalpointer.inference.extractor import Extractor
        return Extractor.with_events(self, records)


@pytest.mark.parametrize("kind", ["shared", "per_type"])
def test_an_event_models_argument_scores_are_fitted_on_the_arguments_its_decoding_keeps(kind):
    """Event decoding keeps the best of one label's overlapping arguments, so a wrong span inside a right
    one of its label, scored below it, costs nothing at any minimum score: the fit keeps every right
    argument. Fitted on the raw overlaps (the earlier fit), the minimum score rose above the wrong spans
    and cut the right arguments scored below them."""
    from globalpointer.data.event_formats import event_record
    from globalpointer.evaluation import calibrate
    from globalpointer.spans import EVENT_LINK, TRIGGER, Argument, Event, Record, Relation

    rng = np.random.default_rng(0)
    gold, found = [], []
    for t in range(30):
        text = f"text {t} " + "x" * 20
        gold.append(event_record(text, [Event("E", Argument(0, 3, TRIGGER), (Argument(5, 12, "A"),))], "gold"))
        right = float(rng.uniform(0.3, 0.95))
        trigger, argument, inside = Entity(0, 3, "E:trigger", 0.97), Entity(5, 12, "E:A", right), Entity(5, 9, "E:A", right - 0.05)
        found.append(Record(text, [trigger, inside, argument], relations=(
            Relation(trigger, EVENT_LINK, argument, 0.9), Relation(trigger, EVENT_LINK, inside, 0.9))))
    fitted = calibrate.fit_event_thresholds(_EventCandidates(found), gold, ["E:A", "E:trigger"], 0.0, kind)
    assert fitted["events_f1"]["after"] == 1.0
    assert fitted["per_type"]["E:A"]["f1_after"] == 1.0 and fitted["per_type"]["E:A"]["f1_before"] < 1.0
