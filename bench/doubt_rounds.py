"""Annotation rounds ordered by the model's doubt, at random, and by the least certain entity: how many
labelled texts each ordering needs (docs/annotation.md).

From ``--start`` labelled texts drawn at random, each round adds ``--per-round`` texts of a pool of
unlabelled ones (the training file's other texts, their labels hidden until chosen), chosen by

- ``doubt``: ``globalpointer select`` (the least certain texts, ``inference.doubt.certainty``, no two
  near-identical),
- ``least_entity``: the lowest score of a text's entities, the Label Studio score before ``certainty``
  (texts without entities after every scored one, in random order),
- ``random``,

and the model is trained again from the encoder with the defaults on what is labelled (``train.py``,
one CPU thread per run).  Early stopping and the fitted threshold read the first ``--dev`` texts of
the set's dev file; F1 is measured on held-out texts the rounds never see (CLUENER: the rest of its dev
file, whose test file has no labels; CoNLL-2003: its test file).

After the first round's model, every doubt measure of ``inference.doubt.MEASURES`` is scored on the
pool once: the entity errors (missed + spurious) of the texts each would choose, beside random's, the
measure chosen by (``measures.json``).

    python bench/doubt_rounds.py --set cluener --seed 0 --out runs/doubt/cluener-0
    python bench/doubt_rounds.py --set conll2003 --seed 0 --out runs/doubt/conll2003-0
    python bench/doubt_rounds.py --plot runs/doubt --output docs/doubt_rounds.png
    python bench/doubt_rounds.py --summary runs/doubt

Each run writes ``rounds.json`` (F1 per ordering and round, and the labelled characters) as it goes and
picks up where it stopped; ``--orderings`` splits a run's orderings over processes sharing ``--out``.
The rounds.json of the runs docs/annotation.md reports are kept in bench/results/doubt-rounds (those of
seed 0 written from its table: that run's folder was lost).
"""
import argparse
import json
import os
import random
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

from common import SHARED
from globalpointer.data.readers import read_records

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORDERINGS = ("doubt", "least_entity", "random")

SETS = {
    "cluener": dict(config="configs/quickstart.yaml", train="cluener/train.json", dev="cluener/dev.json",
                    held_out=None, format="cluener"),
    "conll2003": dict(config="configs/conll2003.yaml", train="conll2003/train.txt", dev="conll2003/valid.txt",
                      held_out="conll2003/test.txt", format="conll"),
}


def units(path: str, kind: str) -> List[str]:
    """The file's records as they are written in it: a JSON line, or a CoNLL sentence block."""
    with open(path, encoding="utf-8") as handle:
        if kind == "cluener":
            return [line if line.endswith("\n") else line + "\n" for line in handle if line.strip()]
        blocks = handle.read().split("\n\n")
    return [block.strip("\n") + "\n\n" for block in blocks if block.strip() and not block.startswith("-DOCSTART-")]


def write_units(path: str, chosen: Sequence[str]) -> str:
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(chosen)
    return path


def train(work: str, name: str, spec: dict, train_file: str, dev_file: str, held_out: str, seed: int) -> float:
    """The held-out F1 of a model trained with the defaults on ``train_file`` (trained once)."""
    run = os.path.join(work, name)
    report = os.path.join(run, "test_report.json")
    if not os.path.exists(report):
        command = [sys.executable, os.path.join(ROOT, "train.py"), "--config", os.path.join(ROOT, spec["config"]),
                   "--set", f"data.train={train_file}", "--set", f"data.dev={dev_file}", "--set",
                   f"data.test={held_out}", "--set", f"data.format={spec['format']}", "--set", f"output_dir={run}",
                   "--set", f"train.seed={seed}", "--set", "cpu_threads=1"]
        with open(os.path.join(work, f"{name}.log"), "w") as log:
            subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT)
    with open(report, encoding="utf-8") as handle:
        return json.load(handle)["micro"]["f1"]


def scored_pool(model_dir: str, texts: Dict[int, str]):
    """Each pool text's record with margins (``Extractor.records(..., margins=True)``), by its index."""
    import globalpointer

    ner = globalpointer.load(model_dir, ["cpu_threads=1"])
    keys = sorted(texts)
    return dict(zip(keys, ner.extractor.records([texts[k] for k in keys], margins=True)))


def pick_doubt(work: str, model_dir: str, pool: Dict[int, str], count: int, name: str) -> List[int]:
    """What ``globalpointer select`` picks from the pool (its JSON lines carry each text's index)."""
    pool_file = os.path.join(work, f"{name}.pool.jsonl")
    with open(pool_file, "w", encoding="utf-8") as out:
        for key, text in sorted(pool.items()):
            out.write(json.dumps({"text": text, "id": key}, ensure_ascii=False) + "\n")
    picked = os.path.join(work, f"{name}.picked.jsonl")
    subprocess.run([sys.executable, "-m", "globalpointer", "select", "--model", model_dir, "--input", pool_file,
                    "--count", str(count), "--output", picked, "--set", "cpu_threads=1"], check=True,
                   stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, f"{name}.select.log"), "w"))
    with open(picked, encoding="utf-8") as handle:
        return [json.loads(line)["id"] for line in handle]


def least_certain_result(record) -> Optional[float]:
    """The score of a record's least certain entity or relation, None when it has none: the Label Studio
    prediction's score before ``doubt.certainty``."""
    scores = [entity.score for entity in record.entities] + [relation.score for relation in record.relations]
    return min(scores) if scores else None


def least_entity_order(records: dict, rng: Optional[random.Random] = None) -> List[int]:
    """The keys of ``records`` by ``least_certain_result``, lowest first; those without one after them
    (shuffled by ``rng``, else in key order)."""
    scored = {key: least_certain_result(record) for key, record in records.items()}
    unscored = sorted(key for key, score in scored.items() if score is None)
    if rng is not None:
        rng.shuffle(unscored)
    return sorted((key for key in scored if scored[key] is not None), key=lambda k: (scored[k], k)) + unscored


def pick_least_entity(model_dir: str, pool: Dict[int, str], count: int, rng: random.Random) -> List[int]:
    return least_entity_order(scored_pool(model_dir, pool), rng)[:count]


def errors(record, gold) -> int:
    """Missed + spurious entities of one text."""
    found = {entity.key for entity in record.entities}
    truth = {entity.key for entity in gold.entities}
    return len(found ^ truth)


def compare_measures(work: str, model_dir: str, pool: Dict[int, str], gold: Dict[int, object], count: int,
                     rng: random.Random) -> dict:
    """The entity errors and the characters of the ``count`` texts each measure would choose, and random's
    (the mean over 20 draws).  Beside ``MEASURES`` and the least certain entity, the summed entropy per
    character: what a measure for labelling cost counted in characters rather than texts would rank by."""
    from globalpointer.inference.doubt import MEASURES, summed_entropy

    records = scored_pool(model_dir, pool)
    wrong = {key: errors(record, gold[key]) for key, record in records.items()}
    orders = {name: sorted(records, key=lambda key, m=measure: (m(records[key].margins), key))
              for name, measure in MEASURES.items()}
    orders["entropy_per_character"] = sorted(
        records, key=lambda key: (-summed_entropy(records[key].margins) / max(len(pool[key]), 1), key))
    orders["least_entity"] = least_entity_order(records)
    out = {"texts": len(records), "count": count, "errors_in_pool": sum(wrong.values()),
           "characters_in_pool": sum(len(pool[key]) for key in records)}
    for name, order in orders.items():
        out[name] = {"errors": sum(wrong[key] for key in order[:count]),
                     "characters": sum(len(pool[key]) for key in order[:count])}
    keys = sorted(records)
    draws = [rng.sample(keys, count) for _ in range(20)]
    out["random"] = {"errors": sum(wrong[k] for draw in draws for k in draw) / 20,
                     "characters": sum(len(pool[k]) for draw in draws for k in draw) / 20}
    with open(os.path.join(work, "measures.json"), "w") as handle:
        json.dump(out, handle, indent=1)
    return out


def run(args) -> None:
    spec = SETS[args.set]
    work = os.path.abspath(args.out)
    os.makedirs(work, exist_ok=True)
    train_path = os.path.join(SHARED, spec["train"])
    every = units(train_path, args.set)
    records = read_records(train_path, spec["format"])
    assert len(every) == len(records), (len(every), len(records))
    rng = random.Random(args.seed)
    order = list(range(len(every)))
    rng.shuffle(order)
    start, pool_keys = order[:args.start], order[args.start:args.start + args.pool]
    suffix = os.path.splitext(spec["train"])[1]
    dev_units = units(os.path.join(SHARED, spec["dev"]), args.set)
    dev_file = write_units(os.path.join(work, "dev" + suffix), dev_units[:args.dev])
    held_out = os.path.join(SHARED, spec["held_out"]) if spec["held_out"] else \
        write_units(os.path.join(work, "held_out" + suffix), dev_units[args.dev:])
    results_path = os.path.join(work, "rounds.json")

    def record(key: str, value) -> None:
        """One entry into rounds.json, read again first: runs of other orderings write it too."""
        results = json.load(open(results_path)) if os.path.exists(results_path) else {}
        if isinstance(value, tuple):
            results.setdefault(key, {})[value[0]] = value[1]
        else:
            results[key] = value
        with open(results_path + ".tmp", "w") as handle:
            json.dump(results, handle, indent=1)
        os.replace(results_path + ".tmp", results_path)

    def trained(name: str, chosen: List[int]) -> float:
        train_file = write_units(os.path.join(work, f"{name}{suffix}"), [every[k] for k in chosen])
        return train(work, name, spec, train_file, dev_file, held_out, args.seed)

    first = trained("round-0", start)
    characters = {k: len(records[k].text) for k in order}
    record("start", {"labelled": len(start), "f1": first, "characters": sum(characters[k] for k in start)})
    pool_texts = {k: records[k].text for k in pool_keys}
    if not os.path.exists(os.path.join(work, "measures.json")):
        compare_measures(work, os.path.join(work, "round-0", "best"), pool_texts, {k: records[k] for k in pool_keys},
                         args.per_round, random.Random(args.seed))
    for ordering in args.orderings.split(","):
        labelled, model = list(start), os.path.join(work, "round-0", "best")
        pick_rng = random.Random(args.seed * 1000 + 1)
        for number in range(1, args.rounds + 1):
            name = f"{ordering}-{number}"
            chosen_file = os.path.join(work, f"{name}.chosen.json")
            if os.path.exists(chosen_file):
                picked = json.load(open(chosen_file))
            else:
                left = {k: pool_texts[k] for k in pool_keys if k not in set(labelled)}
                if ordering == "doubt":
                    picked = pick_doubt(work, model, left, args.per_round, name)
                elif ordering == "least_entity":
                    picked = pick_least_entity(model, left, args.per_round, pick_rng)
                else:
                    picked = pick_rng.sample(sorted(left), args.per_round)
                json.dump(picked, open(chosen_file, "w"))
            labelled += picked
            f1 = trained(name, labelled)
            record(ordering, (str(len(labelled)), f1))
            record(f"{ordering}_characters", (str(len(labelled)), sum(characters[k] for k in labelled)))
            model = os.path.join(work, name, "best")
            print(f"{args.set} seed {args.seed} {ordering} {len(labelled)} texts: F1 {f1:.4f}", flush=True)


def finished_runs(folder: str) -> Dict[str, List[dict]]:
    """The rounds.json of every run under ``folder`` (SET-SEED/rounds.json), by set."""
    runs: Dict[str, List[dict]] = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name, "rounds.json")
        if os.path.exists(path):
            runs.setdefault(name.rsplit("-", 1)[0], []).append(json.load(open(path)))
    return runs


def curve(seeds: List[dict], ordering: str) -> List[tuple]:
    """(labelled texts, mean F1 in points) from the start on, over the seeds that reached each count."""
    points = [(seeds[0]["start"]["labelled"], 100 * sum(seed["start"]["f1"] for seed in seeds) / len(seeds))]
    for count in sorted({int(c) for seed in seeds for c in seed.get(ordering, {})}):
        values = [seed[ordering][str(count)] for seed in seeds if str(count) in seed.get(ordering, {})]
        points.append((count, 100 * sum(values) / len(values)))
    return points


def texts_to_reach(points: List[tuple], target: float) -> Optional[float]:
    """Where the curve, a straight line between rounds, first reaches ``target``; None if it never does."""
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if y1 >= target:
            return x0 + (x1 - x0) * (target - y0) / (y1 - y0) if y1 != y0 else x1
    return None


def summary(folder: str) -> None:
    """A markdown table of the mean F1 per set, ordering and round, with the labelled texts each ordering
    needs to reach random's final F1."""
    print("| set | ordering | seeds | mean F1 from the start, round by round | texts to random's final F1 |")
    print("|---|---|---|---|---|")
    for dataset, seeds in sorted(finished_runs(folder).items()):
        target = curve(seeds, "random")[-1][1]
        for ordering in ORDERINGS:
            points = curve(seeds, ordering)
            reach = texts_to_reach(points, target)
            print(f"| {dataset} | {ordering} | {len(seeds)} | " + ", ".join(f"{f1:.2f}" for _, f1 in points) +
                  f" | {'not reached' if reach is None else f'{reach:.0f}'} |")


def plot(folder: str, output: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = finished_runs(folder)
    figure, axes = plt.subplots(1, len(runs), figsize=(5 * len(runs), 3.6), squeeze=False)
    for axis, (dataset, seeds) in zip(axes[0], sorted(runs.items())):
        for ordering, style in zip(ORDERINGS, ("-o", "--s", ":^")):
            axis.plot(*zip(*curve(seeds, ordering)), style, label=ordering)
        axis.set_title(f"{dataset} ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})")
        axis.set_xlabel("labelled texts")
        axis.set_ylabel("held-out F1")
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    figure.savefig(output, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=SETS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out")
    parser.add_argument("--start", type=int, default=200, help="texts labelled at random before the first round")
    parser.add_argument("--per-round", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--orderings", default=",".join(ORDERINGS),
                        help="comma-separated: the orderings this process runs (several processes may share --out)")
    parser.add_argument("--pool", type=int, default=4000, help="unlabelled texts offered to the orderings")
    parser.add_argument("--dev", type=int, default=400, help="dev texts for early stopping and the threshold")
    parser.add_argument("--plot", metavar="FOLDER", help="draw the runs under FOLDER (--output PNG) and exit")
    parser.add_argument("--summary", metavar="FOLDER", help="print the runs under FOLDER as a table and exit")
    parser.add_argument("--output")
    args = parser.parse_args()
    if args.summary:
        summary(args.summary)
    elif args.plot:
        plot(args.plot, args.output)
    else:
        run(args)


if __name__ == "__main__":
    main()
