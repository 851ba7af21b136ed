"""Strict triple F1 and speed of this project's relation model and PaddleNLP's GPLinker layer, trained
by the same loop on the same encoder, data, batches and epochs.

    python bench/vs_paddlenlp_relations.py --config configs/conll04.yaml [--set KEY=VALUE ...] [--seeds 0,1,2]
        [--models "ours global_pointer,paddlenlp GPLinker"] [--out runs/vs-relations]

Every model is trained by ``globalpointer.training.loop.train`` from the one config; only the network
differs (bench/peer.py: PaddleNLP's layer with the loss its UIE distillation trains it with), and for the
``ema`` models the weights evaluated and saved (bench/ema.py: the published GPLinker's average, 0.999).  The
dev file chooses the checkpoint; the test file (when the config names one) is scored at the end, at
``model.min_score`` (the threshold the dev file chose the checkpoint at; no fitted minimum score).
Training windows/s are each run's own (runs go one after another, on the same cores); prediction
texts/s are timed in turns (a, b, a, b) on the dev texts once every model is trained; the peer is
timed twice, through this project's Extractor (the same batching, rows and decoding rule: what the
networks cost) and as PaddleNLP's users predict with it (``peer.PaddleNLPRelationPipeline``: its
Taskflow's tokenization, batches and ``gp_decode``; ``own_pipeline_texts_per_s``), after checking that
the two give the same triples.  A run stopped before
its end (SIGTERM, or a session's end after an evaluation) is continued from its ``last/`` checkpoint by
the same command, bit for bit (tests/test_resume.py; the ``ema`` models start again: their average is not
kept in the checkpoint).  Each run's row is
kept as RUN/result.json, so that seeds trained in different sessions make one table:

    python bench/vs_paddlenlp_relations.py --summary bench/results/vs-relations/duie

``--time-training N`` times training alone, in turns: N rounds of one epoch of each model (a, b, a, b),
the dev file's scoring left out of the time, the median windows/s per model and its ratio to the peer's.
"""
import argparse
import contextlib
import copy
import json
import logging
import os
import statistics
import sys

from common import Rows, chosen_models, interleaved_medians, table
from ema import averaged_weights
from globalpointer.config import load_config
from globalpointer.corpus import featurizer_for, load_sources
from globalpointer.evaluation.evaluate import evaluate_records
from globalpointer.evaluation.relations import headline
from globalpointer.inference.extractor import Extractor
from globalpointer.model.network import build_network
from globalpointer.model_directory.opening import load_checkpoint, open_model
from globalpointer.training.loop import train
from globalpointer.training.run import can_resume
from peer import PaddleNLPRelationPipeline, build_peer_events, build_peer_relations


def build_with_summed_losses(settings, encoder, num_types: int, num_relations: int = 0):
    """``build_network`` with each head's loss summed over its types, the three summed, as the published
    GPLinker and PaddleNLP's distillation train it (``relation_head`` sums the three heads' means): on
    DuIE's 26 entity and 53 relation types the pair planes weigh 2 * 53 / 26 times the entity planes in
    the encoder's gradient instead of 2 times."""
    network = build_network(settings, encoder, num_types, num_relations)
    network.head.loss_weights = (float(num_types), 2.0 * num_relations)
    return network


def build_with_published_pair_heads(settings, encoder, num_types: int, num_relations: int = 0):
    """``build_network`` with the pair heads of the published GPLinker and PaddleNLP's layer: no RoPE
    in them, so a pair's score cannot see how far apart its two entities are."""
    network = build_network(settings, encoder, num_types, num_relations)
    network.head.starts.rope = network.head.ends.rope = None
    return network


PEER = "paddlenlp GPLinker"
EVENT_PEER = "paddlenlp GPLinker events"  # GPLinkerForEventExtraction, for a config whose data has events
OWN_PIPELINE = "paddlenlp GPLinker, its own pipeline"
MODELS = {"ours global_pointer": ("global_pointer", build_network),
          "ours efficient_global_pointer": ("efficient_global_pointer", build_network),
          "ours global_pointer summed-losses": ("global_pointer", build_with_summed_losses),
          "ours efficient_global_pointer summed-losses": ("efficient_global_pointer", build_with_summed_losses),
          "ours global_pointer published-pair-heads": ("global_pointer", build_with_published_pair_heads),
          "ours efficient_global_pointer published-pair-heads": ("efficient_global_pointer",
                                                                 build_with_published_pair_heads),
          "ours efficient_global_pointer ema": ("efficient_global_pointer", build_network),
          "ours global_pointer ema": ("global_pointer", build_network),
          PEER: ("efficient_global_pointer", build_peer_relations),
          EVENT_PEER: ("efficient_global_pointer", build_peer_events)}
# How a model's training differs from the loop's own, where it does: the published GPLinker's EMA (0.999)
TRAINING = {"ours efficient_global_pointer ema": lambda: averaged_weights(0.999),
            "ours global_pointer ema": lambda: averaged_weights(0.999)}


def own_pipeline(extractor: Extractor) -> PaddleNLPRelationPipeline:
    """The trained peer in ``extractor`` as PaddleNLP's Taskflow predicts with it (bench/peer.py)."""
    return PaddleNLPRelationPipeline(extractor.model, extractor.featurizer.tokenizer, extractor.labels,
                                     extractor.relations)


def pipeline_agreement(extractor: Extractor, pipeline: PaddleNLPRelationPipeline, texts) -> float:
    """The share of ``texts`` whose (subject, relation, object) strings are the same from the peer's own
    pipeline and from ours running the same network, decoding nested spans as ``gp_decode`` does (a
    config's flat decoding keeps one of overlapping entities, ``gp_decode`` keeps every one): the two
    decode by the same rule."""
    nested = copy.copy(extractor)
    nested.flat = False
    ours = [{(record.text[r.head.start:r.head.end], r.type, record.text[r.tail.start:r.tail.end])
             for r in record.relations} for record in nested.records(texts)]
    return sum(a == b for a, b in zip(ours, pipeline.triples(texts))) / max(len(texts), 1)


def extractor_of(run: str, build) -> Extractor:
    """The best checkpoint of ``run``, built by ``build`` (the peer's weights load only into the peer)."""
    from globalpointer.model.network import load_weights

    opened = open_model(os.path.join(run, "best"))
    loaded = load_checkpoint(opened) if build is build_network else None
    config = opened.run_config()
    if loaded is None:
        from globalpointer.model.encoders import Encoder, encoder_architecture

        model = encoder_architecture(opened.architecture)
        network = build(config.model, Encoder(model, opened.tokenizer, model.config.hidden_size),
                        len(opened.trained_for.labels), len(opened.trained_for.relations))
        load_weights(network, opened.path)
        network.eval()
    else:
        network = loaded.network
    featurizer = featurizer_for(opened.tokenizer, opened.trained_for.tokenization, config.data.max_length,
                                config.data.window_overlap)
    return Extractor.for_run(network, featurizer, opened.trained_for, config)  # model.min_score: as chosen on dev


def print_summary(folder: str) -> None:
    """The mean and spread per model of the rows kept under ``folder`` (``*/result.json``)."""
    rows: dict = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name, "result.json")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as file:
                result = json.load(file)
            rows.setdefault(result["model"], []).append(result)
    if not rows:
        raise SystemExit(f"{folder}: no */result.json (the runs of a finished measurement keep one each)")
    print(table([row for results in rows.values() for row in sorted(results, key=lambda r: r["seed"])]))
    print()
    print(table([spread(results) for results in rows.values()]))


def windows_per_s(summary: dict) -> float:
    """Training windows/s of a run from its summary.json: the dev file's scoring left out."""
    return summary["train_windows"] * summary["epochs_completed"] / (summary["seconds"] - summary["eval_seconds"])


def training_rates(config_path: str, overrides, names, rounds: int, out: str) -> dict:
    """Each model's median training windows/s over ``rounds`` epochs of one, in turns (a, b, a, b)."""
    rates = {name: [] for name in names}
    for _ in range(rounds):
        for name in names:
            head, build = MODELS[name]
            config = load_config(config_path, overrides + [
                f"model.head={head}", "train.epochs=1", "train.calibrate=none", "data.test=null",
                f"output_dir={os.path.join(out, 'timing', name.replace(' ', '-'))}"])
            with TRAINING.get(name, contextlib.nullcontext)():
                rates[name].append(windows_per_s(train(config, build=build, overwrite=True)))
            print(f"{name}: {rates[name][-1]:.2f} training windows/s", file=sys.stderr, flush=True)
    return {name: statistics.median(values) for name, values in rates.items()}


def spread(results) -> dict:
    """One model's row over its seeds: F1 as mean +- population spread, training windows/s as the median,
    prediction texts/s as timed (in turns with the other models, with the first seed's model)."""
    row = {"model": results[0]["model"], "seeds": len(results)}
    for key in ("dev_f1", "test_f1"):
        values = [r[key] for r in results if r[key] is not None]
        if values:
            row[key] = f"{statistics.mean(values):.2f} +- {statistics.pstdev(values):.2f}"
    row["train_windows_per_s"] = round(statistics.median(r["train_windows_per_s"] for r in results), 2)
    timed = [r["predict_texts_per_s"] for r in results if r["predict_texts_per_s"] is not None]
    row["predict_texts_per_s"] = timed[0] if timed else None
    own = [r["own_pipeline_texts_per_s"] for r in results if r.get("own_pipeline_texts_per_s") is not None]
    if own:
        row["own_pipeline_texts_per_s"] = own[0]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/conll04.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override (repeatable)")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated train.seed values")
    parser.add_argument("--models", default="ours global_pointer,paddlenlp GPLinker",
                        help=f"comma-separated subset of: {', '.join(MODELS)}")
    parser.add_argument("--out", default="runs/vs-relations", help="the runs are kept here (RUN/<model>-<seed>)")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes over the dev texts per model (0: "
                        "no timing, for runs that do not share the cores in turns)")
    parser.add_argument("--summary", metavar="FOLDER", help="print the rows kept under FOLDER as tables and exit")
    parser.add_argument("--time-training", type=int, metavar="N", help="time training alone: N rounds of one epoch "
                        "of each model in turns (the first seed), print the medians and exit")
    args = parser.parse_args()
    if args.summary:
        return print_summary(args.summary)
    logging.basicConfig(level=logging.WARNING)
    names = chosen_models(parser, args.models, MODELS)
    if args.time_training:
        seed = args.seeds.split(",")[0]
        rates = training_rates(args.config, args.set + [f"train.seed={seed}"], names, args.time_training, args.out)
        return print(table([{"model": name, "train_windows_per_s": round(rate, 2),
                             "against_the_peer": round(rate / rates[PEER], 3) if PEER in rates else None}
                            for name, rate in rates.items()]))
    rows, runs = Rows(), {name: [] for name in names}
    for seed in [int(seed) for seed in args.seeds.split(",")]:
        for name in names:
            head, build = MODELS[name]
            out = os.path.join(args.out, f"{name.replace(' ', '-')}-{seed}")
            config = load_config(args.config, args.set + [f"model.head={head}", f"train.seed={seed}", f"output_dir={out}"])
            summary_path = os.path.join(out, "summary.json")
            if os.path.isfile(summary_path):  # a finished run is read, not trained again
                with open(summary_path, encoding="utf-8") as file:
                    summary = json.load(file)
            else:  # a run stopped mid-way (a session's end) continues from its last checkpoint, bit for bit
                resume = can_resume(out) and name not in TRAINING
                if resume:
                    print(f"{out}: continued from its last checkpoint", file=sys.stderr, flush=True)
                with TRAINING.get(name, contextlib.nullcontext)():
                    summary = train(config, build=build, resume=resume, overwrite=not resume)
            result = {"model": name, "seed": seed, "dev_f1": round(100 * summary["best_dev_f1"], 2),
                      "epochs": summary["epochs_completed"], "train_windows_per_s": round(windows_per_s(summary), 2)}
            runs[name].append((out, result))
    data = load_config(args.config, args.set).data
    texts = [record.text for record in load_sources(data.dev, data.reading)]
    test = load_sources(data.test, data.reading) if data.test else []
    for name in names:  # the test file's strict triples at model.min_score, the threshold the dev file chose by
        for out, result in runs[name]:
            result["test_f1"] = round(100 * headline(evaluate_records(
                extractor_of(out, MODELS[name][1]), test, open_model(os.path.join(out, "best")).trained_for.labels
            ).report)["f1"], 2) if test else None
    seconds = {}
    if args.repeats:
        extractors = {name: extractor_of(runs[name][0][0], MODELS[name][1]) for name in names}
        timed = {name: (lambda e=e: e.records(texts)) for name, e in extractors.items()}
        if PEER in extractors:  # and the peer as PaddleNLP's users predict with it
            pipeline = own_pipeline(extractors[PEER])
            agreement = pipeline_agreement(extractors[PEER], pipeline, texts)
            print(f"{PEER}: its own pipeline and ours give the same triples on {agreement:.1%} of the dev texts")
            timed[OWN_PIPELINE] = lambda: pipeline.triples(texts)
        seconds = interleaved_medians(timed, args.repeats, warmup=1)
    for name in names:
        for index, (out, result) in enumerate(runs[name]):  # timed: the first seed's model
            result["predict_texts_per_s"] = round(len(texts) / seconds[name], 1) if name in seconds and not index \
                else None
            if name == PEER and OWN_PIPELINE in seconds and not index:
                result["own_pipeline_texts_per_s"] = round(len(texts) / seconds[OWN_PIPELINE], 1)
                result["own_pipeline_agreement"] = round(agreement, 4)
            rows.add(result)
            with open(os.path.join(out, "result.json"), "w", encoding="utf-8") as file:
                json.dump(result, file, indent=1)
    rows.finish()
    summary = [spread([result for _, result in runs[name]]) for name in names]
    print()
    print(table(summary))


if __name__ == "__main__":
    main()
