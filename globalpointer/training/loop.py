"""The training loop, read top to bottom: the data, the network and its optimizer; the steps; dev
evaluation with the best and last checkpoints and early stopping; the test report.  step.py holds
the step (micro-batches, recipes, the update), run.py the run directory, progress and resume."""
import contextlib
import dataclasses
import logging
import math
import os
import sys
from dataclasses import dataclass
from typing import Callable, Iterator, List, Optional, Tuple

import numpy as np
import paddle
from tqdm import tqdm

from ..model_directory.opening import LoadedModel, MODEL_RECORD_KEYS, NESTED_MIN_SHARE, TrainedFor, load_checkpoint, record_differences, trained_config
from ..config import RunConfig, flatten_config, require_files, yaml_scalar
from ..corpus import check_types, featurizer_for, infer_labels, load_sources, resolve_tokenization
from ..data.batching import collate, length_grouped_batches
from ..data.features import Featurizer
from ..data.sources import Sources, check_declared, source_paths, sources_name
from ..errors import ConfigError
from ..evaluation.calibrate import fit_thresholds, write_thresholds
from ..evaluation.evaluate import evaluate_records, labelled_records
from ..evaluation.metrics import types_scores
from ..evaluation.relations import entities_found_line, format_reports, headline
from ..files import RunLock, read_json
from ..inference.extractor import Extractor, PassesStopped
from ..model.score_map import score_map_from_json
from ..model.encoders import AUTO, Encoder, check_position_limit, choose_encoder, load_encoder, position_limit
from ..model.decode import score_logit
from ..model_directory.layout import resolve_checkpoint
from ..model.network import build_network, load_weights, start_from
from ..runtime import Runtime, launch_position, seed_everything, setup_runtime
from ..spans import Record, on_word_boundaries, overlapping_share
from .checks import (measuring_dev, relation_rows, relation_types, training_planes, warn_long_texts,
                     warn_unmeasured_test)
from .recipes import applied_adversarial, applied_smoothing, resolved_small_set, weigh_event_losses
from .run import (Progress, RunDirectory, StopRequest, check_no_run, check_run_directory, remove_run_files,
                  remove_unfinished_checkpoints, restore)
from .step import Stepper, build_optimizer, check_finite_weights

log = logging.getLogger(__name__)


def train(config: RunConfig, resume: bool = False, build: Callable = build_network, overwrite: bool = False,
          resume_anyway: bool = False, config_file: str = "") -> dict:
    """Train, evaluate and checkpoint into ``config.output_dir``; returns the run summary.

    A directory that holds a run is continued (``resume``, which refuses a changed config unless
    ``resume_anyway``) or replaced (``overwrite``); otherwise it is an error, before any work.
    ``build(config.model, encoder, num_types)`` makes the network: another model (bench/vs_paddlenlp_f1.py
    trains PaddleNLP's GlobalPointer this way) needs the same call signature, a ``head`` with
    ``loss`` and a ``decode``, and its checkpoints load only with it.  ``config_file``: where ``config``
    was read from (an input the run must not overwrite).  One process at a time writes a run
    directory (``RunLock``)."""
    require_files(config, ["train"])
    check_run_directory(config.output_dir, [config_file, *(path for key in ("train", "dev", "test")
                                                           for path in source_paths(getattr(config.data, key))),
                                            config.model.encoder, config.train.init_from])
    check_no_run(config.output_dir, resume, overwrite)
    writes = launch_position()[0] == 0  # data parallel: only rank 0 writes
    with RunLock(config.output_dir) if writes else contextlib.nullcontext():
        check_no_run(config.output_dir, resume, overwrite)  # again, now that no other run can start writing
        return _train(config, resume, build, overwrite, resume_anyway)


@dataclass
class Training:
    """What the preparation of a run hands to its steps: the data as windows, the network and its
    optimizer, the run directory and where the run stands."""
    config: RunConfig
    runtime: Runtime
    labels: List[str]
    relations: List[str]  # a relation model's relation types (none: an entity model)
    dev_records: List[Record]
    test_records: List[Record]
    featurizer: Featurizer
    windows: list
    alignment: object
    network: paddle.nn.Layer
    optimizer: object
    stepper: Stepper
    run: RunDirectory
    progress: Progress
    extractor: Extractor
    steps_per_epoch: int
    epochs: int  # what the run trains: train.epochs, more for train.min_steps, fewer within train.max_steps
    epochs_per_evaluation: int  # 1, or more on a small file (train.min_steps)
    planes: Optional[np.ndarray]  # the types each training record annotates (data/sources.py); None: all
    relation_rows: Optional[np.ndarray]  # a relation model's records whose file has relations (checks.relation_rows)


def _train(config: RunConfig, resume: bool, build: Callable, overwrite: bool, resume_anyway: bool) -> dict:
    state = prepare(config, resume, build, overwrite, resume_anyway)
    progress, stopped_early = state.progress, False
    with StopRequest() as stop:
        for train_loss in due_evaluations(state, stop):
            if evaluate_and_save(state, train_loss, stop):
                stopped_early = True
                break
        interrupted = stop.requested
    if interrupted:
        check_finite_weights(state.network, progress.global_step, config.train)
        state.run.save_last(state.network, state.optimizer, progress)
        raise KeyboardInterrupt(f"interrupted at step {progress.global_step}; saved {state.run.last}, "
                                f"continue with --resume")
    if stopped_early and state.runtime.is_main:
        log.info("early stop: no better dev F1 for %d evaluations", config.train.patience)
    summary = run_summary(state, stopped_early)
    if state.run.added and state.dev_records:
        summary["added_types"] = added_types_at_best(state)
    if state.dev_records and not progress.best_f1 and state.runtime.is_main:
        warn_nothing_learned(state)
    fit = bool(state.dev_records) and config.train.calibrate != "none"
    if (fit or state.test_records) and state.runtime.is_main:  # the main process decodes the saved model
        load_weights(state.network, resolve_checkpoint(state.run.best))
    if fit:
        summary["thresholds"] = fit_best_thresholds(state)
    if state.test_records:
        summary["test"] = test_best(state)
    state.run.write_json("summary.json", summary)
    if state.runtime.is_main:
        log.info("the model is in %s (the best dev checkpoint; %s holds the last, for --resume)", state.run.best,
                 state.run.last)
    return summary


def prepare(config: RunConfig, resume: bool, build: Callable, overwrite: bool, resume_anyway: bool) -> Training:
    """Records -> windows; the network, its optimizer and where the run starts (``resume``)."""
    runtime = setup_runtime(config.device, config.cpu_threads)
    data, train = config.data, config.train
    train_records = load_sources(data.train, data.reading)
    labels = infer_labels(train_records, data.labels, sources_name(data.train, "data.train"))
    config = resolved_encoder(config, train_records)
    encoder, start, labels = starting_point(config, labels)
    relations = relation_types(train_records, sources_name(data.train, "data.train"), start)
    config = resolved_small_set(config, len(train_records), bool(relations))
    train = config.train
    if start is not None and config.model.encoder == AUTO:  # the trained model's, as its weights are
        config = dataclasses.replace(config, model=dataclasses.replace(config.model,
                                                                       encoder=start.config.model.encoder))
    for key in ("train", "dev", "test"):
        check_declared(getattr(data, key), labels, f"data.{key}")
    planes = training_planes(train_records, labels, start, config.model.head)
    pair_rows = relation_rows(train_records, relations)
    check_types(train_records, labels, declared=bool(data.labels))  # the training file first, where a type is new
    dev_records, test_records = measuring_files(data, labels, relations, train_records)
    check_position_limit(config, position_limit(encoder.model))
    tokenization = start.trained_for.tokenization if start else resolve_tokenization(data.tokenization,
                                                                                      encoder.tokenizer)
    if data.tokenization == "auto" and not start:
        log.info("data.tokenization auto: %s (%s)", tokenization, "a Chinese vocabulary: one token per character"
                 if tokenization == "char" else "the tokenizer's own pieces, as its vocabulary is not Chinese")
    featurizer = featurizer_for(encoder.tokenizer, tokenization, data.max_length, data.window_overlap)
    share = overlapping_share(train_records)
    trained_for = TrainedFor(labels, featurizer.mode, share > 0, on_word_boundaries(train_records), share,
                             tuple(relations))
    config = trained_config(config, trained_for)  # from here on the run reads, and saves, what it trains
    if config.model.decode == "auto":
        log.info("model.decode auto: %s (%.3f%% of the training entities overlap another; nested from %g%%)",
                 trained_for.decoding("auto"), 100 * trained_for.overlapping_share, 100 * NESTED_MIN_SHARE)
    windows, alignment = featurizer.training_windows(train_records, {t: i for i, t in enumerate(labels)}, "train",
                                                     {t: i for i, t in enumerate(relations)})
    warn_long_texts(windows, train_records, data.max_length, sources_name(data.train, "data.train"))
    # Seeded again: loading an encoder may draw random numbers (a first-time conversion builds a
    # model), and the head's initialisation must not depend on whether the cache was warm.
    seed_everything(train.seed)
    network = build(config.model, encoder, len(labels), **({"num_relations": len(relations)} if relations else {}))
    weigh_event_losses(network.head, len(labels), relations)
    if start is not None:
        start_from(network, start.network)
    model = paddle.DataParallel(network) if runtime.world_size > 1 else network
    steps_per_epoch = math.ceil(len(epoch_batches(windows, config, runtime, 0)) / train.grad_accum_steps)
    epochs = planned_epochs(train, steps_per_epoch)
    if not dev_records and train.patience:
        log.warning("no dev F1 to choose by: train.patience (%d) has no dev F1 to watch, so training runs all %d planned "
                    "epoch(s) (train.epochs %d, train.max_steps %d) and keeps the last model; the defaults' length "
                    "is chosen on a dev file (docs/results.md): name one with data.dev, or set train.epochs to the "
                    "length you want", train.patience, epochs, train.epochs, train.max_steps)
    optimizer, scheduler = build_optimizer(network, config, steps_per_epoch * epochs)
    stepper = Stepper(model, network, optimizer, scheduler, train, runtime.on_gpu,
                      applied_smoothing(train, len(train_records), network.head.smooths_boundaries),
                      applied_adversarial(train, len(train_records), network))
    run = RunDirectory(config, trained_for, encoder, runtime)
    run.added = [label for label in labels if start is not None and label not in start.trained_for.labels]
    progress = restore(run.last, config, epochs, network, optimizer, resume_anyway) if resume \
        else Progress()
    if overwrite and not resume and runtime.is_main:
        remove_run_files(run.path)
    elif resume and runtime.is_main:
        remove_unfinished_checkpoints(run.path)
    run.start(progress)
    extractor = Extractor.for_run(network, featurizer, trained_for, config)
    return Training(config, runtime, labels, relations, dev_records, test_records, featurizer, windows, alignment, network,
                    optimizer, stepper, run, progress, extractor, steps_per_epoch, epochs,
                    epochs_per_evaluation(train, steps_per_epoch), planes, pair_rows)


def measuring_files(data, labels: List[str], relations: List[str], train_records: List[Record]) -> Tuple[list, list]:
    """The dev and test records (none without the file), their types checked against the run's; a dev
    file that cannot choose is dropped and a test file that cannot measure said (``checks``)."""
    def read(value: Sources) -> List[Record]:
        return labelled_records(value, data.reading, labels, False, bool(data.labels), relations) if value else []

    dev_records = measuring_dev(read(data.dev), train_records, sources_name(data.dev, "data.dev"), relations)
    test_records = read(data.test)
    if test_records:
        warn_unmeasured_test(test_records, relations, sources_name(data.test, "data.test"))
    return dev_records, test_records


def epochs_per_evaluation(train, steps_per_epoch: int) -> int:
    """1, or for a training file too small for ``train.min_steps`` in ``train.epochs``: the epochs each of
    the ``train.epochs`` evaluations follows, so that together they reach ``train.min_steps`` steps."""
    if not train.min_steps or steps_per_epoch * train.epochs >= train.min_steps:
        return 1
    return math.ceil(train.min_steps / (steps_per_epoch * train.epochs))


def planned_epochs(train, steps_per_epoch: int) -> int:
    """``train.epochs``; more for a small file (``epochs_per_evaluation``: a multiple reaching
    ``train.min_steps``), fewer for a large one: the whole epochs that first reach ``train.max_steps``."""
    repeats = epochs_per_evaluation(train, steps_per_epoch)
    if repeats > 1:
        log.info("training length: %d epochs of %d steps, an evaluation after every %d, to reach train.min_steps "
                 "(%d) on a small training file (train.epochs %d is the number of evaluations)", train.epochs * repeats,
                 steps_per_epoch, repeats, train.min_steps, train.epochs)
        return train.epochs * repeats
    if not train.max_steps or steps_per_epoch * train.epochs <= train.max_steps:
        return train.epochs
    epochs = math.ceil(train.max_steps / steps_per_epoch)
    log.info("training length: %d epoch(s) of %d steps, within train.max_steps (%d) rounded up to a whole epoch "
             "(train.epochs %d is the ceiling for smaller training files)", epochs, steps_per_epoch,
             train.max_steps, train.epochs)
    return epochs


def resolved_encoder(config: RunConfig, train_records: List[Record]) -> RunConfig:
    """``config`` with ``model.encoder: auto`` resolved by the training texts' script (``choose_encoder``);
    a run from ``train.init_from`` resolves it to that model's encoder (``prepare``)."""
    if config.model.encoder != AUTO or config.train.init_from:
        return config
    name, why = choose_encoder(record.text for record in train_records)
    log.info("model.encoder auto: %s (%s; set model.encoder to choose another)", name, why)
    return dataclasses.replace(config, model=dataclasses.replace(config.model, encoder=name))


def starting_point(config: RunConfig, labels: List[str]) -> Tuple[Encoder, Optional[LoadedModel], List[str]]:
    """The encoder a run starts from, the trained model it starts from (``train.init_from``, else
    None) and its types: the trained model's, in their order, then those of ``labels`` it lacks."""
    if not config.train.init_from:
        seed_everything(config.train.seed)  # the 'tiny' test encoder is random
        return load_encoder(config.model.encoder), None, labels
    start = load_checkpoint(config.train.init_from)
    # what the trained model is, but its types: a run from it adds types
    for key in record_differences(start.config, config, [k for k in MODEL_RECORD_KEYS if k != "data.labels"]):
        recorded, asked = (flatten_config(c)[key] for c in (start.config, config))
        raise ConfigError(f"train.init_from: {start.directory} was trained with {key}={yaml_scalar(recorded)}, the "
                          f"config says {yaml_scalar(asked)}; set {key} to the trained model's")
    known = start.trained_for.labels
    added = [label for label in labels if label not in known]
    log.info("train.init_from %s: its types %s; added %s", start.directory, ", ".join(known),
             ", ".join(added) or "none")
    return start.encoder, start, known + added


def interval_mean(losses: List[float]) -> float:
    """The mean of an evaluation interval's losses, emptying it first: the checkpoint the evaluation
    saves starts the next interval."""
    value = mean(losses)
    losses.clear()
    return value


def due_evaluations(state: Training, stop: StopRequest) -> Iterator[float]:
    """The steps, ``train.grad_accum_steps`` batches each (an epoch's last step takes what is left),
    from where the run stands; yields the mean training loss since the last evaluation whenever one is
    due (every ``train.eval_every`` steps, else after every ``epochs_per_evaluation`` epochs), and returns when the epochs are
    done (after one more evaluation for steps since the last) or a stop is requested.  The consumer
    may stop early by leaving the loop."""
    config, progress, train = state.config, state.progress, state.config.train
    state.network.train()
    # a bar drawn in place on a terminal; to a file (a log, a pipe) a line per epoch instead of a redraw per step
    on_terminal = sys.stderr.isatty()
    bar = tqdm(total=state.steps_per_epoch * state.epochs, initial=progress.global_step, desc="train", unit="step",
               disable=not (state.runtime.is_main and on_terminal), dynamic_ncols=True)
    losses = progress.interval_losses
    progress.start_clock()
    with bar:
        if progress.evaluation_due:  # the evaluation a stop cut short, at the step the run resumes from
            progress.evaluation_due = False
            yield interval_mean(losses)
        while progress.epoch < state.epochs and not stop.requested:
            batches = epoch_batches(state.windows, config, state.runtime, progress.epoch)
            for first in range(progress.batch_in_epoch, len(batches), train.grad_accum_steps):
                step_batches = batches[first:first + train.grad_accum_steps]
                losses.extend(run_step(state, step_batches))
                progress.batch_in_epoch = first + len(step_batches)
                bar.update(1)
                if progress.global_step % train.log_every == 0:
                    bar.set_postfix(loss=f"{mean(losses):.4f}", epoch=progress.epoch + 1,
                                    win_s=f"{progress.windows_per_second():.1f}")
                if train.eval_every and progress.global_step % train.eval_every == 0:
                    yield interval_mean(losses)
                if stop.requested:
                    return
            progress.epoch, progress.batch_in_epoch = progress.epoch + 1, 0
            if not on_terminal and state.runtime.is_main:
                log.info("epoch %d of %d done: step %d, loss %.4f, %.1f windows/s", progress.epoch, state.epochs,
                         progress.global_step, mean(losses) if losses else float("nan"),
                         progress.windows_per_second())
            if not train.eval_every and progress.epoch % state.epochs_per_evaluation == 0:
                yield interval_mean(losses)
    if progress.evaluated_step != progress.global_step and not stop.requested:
        yield mean(losses)  # no batches since the last evaluation (a resumed run's last step): 0


def run_step(state: Training, step_batches: List[List[int]]) -> List[float]:
    """One update from its micro-batches; their losses."""
    progress, losses = state.progress, []
    for micro, window_ids in enumerate(step_batches):
        batch = collate([state.windows[i] for i in window_ids], state.featurizer.pad_id, state.planes,
                        len(state.relations), state.relation_rows)
        loss, dropped = state.stepper.micro_batch(batch, progress.global_step, micro, len(step_batches))
        losses.append(loss)
        progress.dropped_gold += dropped
        progress.windows += len(window_ids)
    state.stepper.update()
    progress.global_step += 1
    progress.tick()
    return losses


def evaluate_and_save(state: Training, train_loss: float, stop: StopRequest) -> bool:
    """Dev F1, a metrics row, the best and last checkpoints; True when patience has run out, and at least
    ``train.min_steps`` steps are trained (the dev F1 of a few texts stalls a while early on).  An
    evaluation a stop cuts short is left due, with its interval's loss, for the resumed run."""
    network, progress, train = state.network, state.progress, state.config.train
    check_finite_weights(network, progress.global_step, train)
    with progress.evaluation_time():
        try:
            with stop.evaluation(stoppable=state.runtime.world_size == 1):
                report, f1 = evaluate_on_main(state.extractor, state.dev_records, state.labels, state.runtime)
        except PassesStopped:
            progress.evaluation_due, progress.interval_losses[:] = True, [train_loss]
            return False
        improved = progress.record_evaluation(f1)
        state.run.log_evaluation(network, progress, report, train_loss, improved, state.steps_per_epoch)
    state.run.save_last(network, state.optimizer, progress)
    return 0 < train.patience <= progress.evals_since_best and progress.global_step >= train.min_steps


def added_types_at_best(state: Training) -> dict:
    """The types a run from ``train.init_from`` added, scored apart at the best checkpoint, which the
    micro F1 of all types chose: where the added types have few dev entities, it may not be their best
    (docs/merging.md says how to choose)."""
    report = read_json(os.path.join(state.run.path, "dev_report.json"))
    scores = types_scores(report, state.run.added)
    log.info("the added types (%s): dev F1 %.2f at the best checkpoint (step %d), chosen by the micro F1 of every "
             "type; their dev entities: %d", ", ".join(state.run.added), 100 * scores["f1"], state.progress.best_step,
             sum(report["per_type"].get(kind, {}).get("support", 0) for kind in state.run.added))
    return {"types": state.run.added, **{key: round(value, 6) for key, value in scores.items()}}


def warn_nothing_learned(state: Training) -> None:
    """A run whose best dev F1 is 0 learned nothing it could show: said with what usually causes it.  A
    relation model that found the dev entities but no triple is said so, not blamed on its encoder."""
    config = state.config
    path = os.path.join(state.run.path, "dev_report.json")
    report = read_json(path) if os.path.exists(path) else None
    entity_f1 = report["micro"]["f1"] if report else 0.0
    if state.relations and entity_f1 > 0:
        log.warning("the best dev strict triple F1 is 0.00: the model found the dev file's entities (entity F1 %.2f; "
                    "%s) but none of its triples. Likely causes: too little training for %d relation type(s) (%d "
                    "training windows, %d steps: set train.epochs higher); or a dev file whose triples are of other "
                    "types or entities than the training file's", 100 * entity_f1,
                    entities_found_line(report["relations"]), len(state.relations), len(state.windows),
                    state.progress.global_step)
        return
    what = "triples or entities" if state.relations else "entities"
    log.warning("the best dev F1 is 0.00: the model found none of the dev file's %s. Likely causes: an encoder "
                "for another language (model.encoder %s, data.tokenization %s: set model.encoder to one for your "
                "texts, docs/training.md#encoders); too little training for the types (%d training windows, %d "
                "steps); a learning rate too high or too low (train.lr %s); or a dev file annotated with other "
                "types or spans than the training file", what, config.model.encoder, config.data.tokenization,
                len(state.windows), state.progress.global_step, config.train.lr)


def run_summary(state: Training, stopped_early: bool) -> dict:
    progress = state.progress
    return {"best_dev_f1": progress.best_f1 if state.dev_records else None, "best_step": progress.best_step,
            "steps": progress.global_step, "epochs_planned": state.epochs, "epochs_completed": progress.epoch,
            "boundary_smoothing": state.stepper.smoothing, "adversarial": state.stepper.adversarial,
            "stopped_early": stopped_early,
            "seconds": round(progress.seconds, 1), "eval_seconds": round(progress.eval_seconds, 1),
            "train_windows": len(state.windows), "gold_spans_lost_in_alignment": state.alignment.lost,
            "gold_spans_dropped_by_head": progress.dropped_gold, "labels": state.labels,
            "world_size": state.runtime.world_size, "model": state.run.best}


def fit_best_thresholds(state: Training) -> Optional[dict]:
    """train.calibrate: the minimum scores of the best checkpoint (loaded into the network) fitted on
    the dev file, written into it as thresholds.json (by the main process, which decodes); the run's
    extractor decodes with them from here on, so the test report is what the saved model gives.  The
    fitted thresholds' kind, scores and dev F1 before and after, for the summary."""
    if not state.runtime.is_main:
        return None
    config, labels = state.config, state.labels
    report = fit_thresholds(state.extractor, state.dev_records, labels, score_logit(config.model.min_score),
                            config.train.calibrate)
    report = {"data": sources_name(config.data.dev, "data.dev"), **report}
    write_thresholds(state.run.best, report, config.model.min_score)
    score_map = score_map_from_json(report["score_map"], bool(state.extractor.relations))
    state.extractor.threshold = score_map.threshold_logits([report["min_scores"][label] for label in labels])
    state.extractor.score_map = score_map
    if "pair_min_score" in report:  # a relation model's, fitted with them by triple F1
        state.extractor.pair_threshold = score_logit(report["pair_min_score"])
    before, after = report["micro_f1"]["before"], report["micro_f1"]["after"]
    log.info("train.calibrate=%s: minimum scores fitted on the dev file (%s), dev F1 %.2f -> %.2f (on the texts "
             "they were fitted on: report F1 on others)", config.train.calibrate,
             ", ".join(f"{label} {score:.3g}" for label, score in report["min_scores"].items()),
             before * 100, after * 100)
    fitted = {key: report[key] for key in ("kind", "min_scores", "pair_min_score") if key in report}
    return fitted | {"dev_f1_before": before, "dev_f1_after": after}


def test_best(state: Training) -> Optional[dict]:
    """The test report of the best checkpoint (loaded into the network by the main process, which
    decodes); its micro scores, for the summary (a relation model's: its strict triples')."""
    report, _ = evaluate_on_main(state.extractor, state.test_records, state.labels, state.runtime)
    if not state.runtime.is_main:
        return None
    state.run.write_json("test_report.json", report)
    tqdm.write("test (best checkpoint):\n" + format_reports(report))
    return headline(report)


def evaluate_on_main(extractor: Extractor, records: List[Record], labels: List[str],
                     runtime: Runtime) -> Tuple[Optional[dict], Optional[float]]:
    """(the span report, its micro F1) on ``records``; (None, None) without records.  Only the main
    process decodes: in a data-parallel run the others get the report as None and the F1 from it."""
    if not records:
        return None, None
    report = evaluate_records(extractor, records, labels).report if runtime.is_main else None
    f1 = headline(report)["f1"] if report else 0.0
    if runtime.world_size > 1:
        import paddle.distributed as dist

        shared = paddle.to_tensor([f1], dtype="float64")
        dist.broadcast(shared, src=0)
        f1 = float(shared.numpy()[0])
    return report, f1


def mean(losses: List[float]) -> float:
    return sum(losses) / max(len(losses), 1)


def epoch_batches(windows: list, config: RunConfig, runtime: Runtime, epoch: int) -> List[List[int]]:
    """This process's batches of window indices in one epoch: the same for a resumed run."""
    return length_grouped_batches([len(w.input_ids) for w in windows], config.train.batch_size, True, config.train.seed + epoch, runtime.rank,
                                  runtime.world_size)
