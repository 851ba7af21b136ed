"""The training loop: AdamW with warmup and linear decay, clipping, accumulation, AMP on GPU,
dev evaluation, best and last checkpoints, early stopping, resume, data parallel."""
import contextlib
import csv
import dataclasses
import functools
import glob
import json
import logging
import math
import os
import shutil
import signal
import time
from typing import Callable, List, Optional, Tuple

import paddle
from tqdm import tqdm

from ..config import RunConfig, dump_config, flatten_config, load_config, require_files
from ..data.batching import collate, length_grouped_batches
from ..corpus import check_types, infer_labels, load_records, resolve_tokenization, text_encoder_for
from ..model.encoders import check_position_limit, load_encoder, position_limit
from ..errors import CheckpointError, ConfigError, TrainingError
from ..files import (PARTIAL, PREVIOUS, RunLock, atomic_write_json, atomic_write_text, input_relation,
                    previous_versions)
from ..inference.extractor import Extractor, model_inputs
from ..evaluation.metrics import format_report, span_report
from ..checkpoint import ModelRecord, build_model, load_weights, resolve_checkpoint, write_checkpoint
from .recipes import EMA, FGM, layer_rates, word_embeddings
from ..runtime import Runtime, seed_everything, setup_runtime
from ..spans import Record
from ..model.weights import read_state

log = logging.getLogger(__name__)

TRAINER_STATE = "trainer_state.json"
OPTIMIZER_STATE = "optimizer.safetensors"
EMA_STATE = "ema.safetensors"  # with train.ema_decay: the average's weights, in last/ for --resume
# What a run writes into its directory; --overwrite removes exactly these (and the copies of best/
# and last/ that a kill during a save leaves), nothing else in it.
CHECKPOINTS = ("best", "last")
RUN_FILES = (*CHECKPOINTS, "metrics.csv", "metrics.png", "config.yaml", "dev_report.json", "test_report.json",
             "summary.json")
RUN_MARKERS = (*CHECKPOINTS, "metrics.csv")  # a directory holding one of these holds a run
# f1_without_average: with train.ema_decay, the dev F1 of the trained weights themselves (the other
# columns are the average's), so that one run shows what the average adds
METRICS_COLUMNS = ["step", "epochs_done", "train_loss", "precision", "recall", "f1", "f1_without_average", "seconds",
                   "windows_per_second"]


@dataclasses.dataclass
class Progress:
    """Where training stands; saved with the last checkpoint so --resume continues exactly."""
    epoch: int = 0
    batch_in_epoch: int = 0  # batches of `epoch` already consumed
    global_step: int = 0  # optimizer steps taken
    best_f1: float = -1.0
    best_step: int = 0
    best_f1_without_average: Optional[float] = None  # with train.ema_decay: the best dev F1 of the trained weights
    evals_since_best: int = 0
    dropped_gold: int = 0  # gold spans the head could not learn: masked cells, or overlaps for a tagger
    seconds: float = 0.0  # wall time, evaluations included
    eval_seconds: float = 0.0  # of `seconds`: dev evaluations and checkpoint writing
    evaluated_step: int = -1  # global_step of the latest evaluation
    windows: int = 0  # training windows this process has consumed

    def start_clock(self) -> None:
        self._started = time.time() - self.seconds  # not a field: not saved

    def tick(self) -> None:
        self.seconds = time.time() - self._started

    @contextlib.contextmanager
    def evaluation_time(self):
        """Time spent inside counts as evaluation, not training."""
        started = time.time()
        yield
        self.eval_seconds += time.time() - started
        self.tick()

    def windows_per_second(self) -> float:
        """Training throughput of this process: evaluations and checkpoints left out."""
        return self.windows / max(self.seconds - self.eval_seconds, 1e-9)

    def record_evaluation(self, f1: Optional[float]) -> bool:
        """Whether the model just evaluated is the best so far (without dev data: the latest is)."""
        self.evaluated_step = self.global_step
        improved = f1 is None or f1 > self.best_f1
        if improved:
            self.best_f1, self.best_step, self.evals_since_best = f1 if f1 is not None else 0.0, self.global_step, 0
        else:
            self.evals_since_best += 1
        return improved


def amp_dtype(requested: str, on_gpu: bool) -> Optional[str]:
    """The autocast dtype, or None.  AMP is a GPU feature; on CPU it is switched off with a warning."""
    if requested == "none":
        return None
    if not on_gpu:
        log.warning("train.amp=%s is ignored on CPU; training in float32", requested)
        return None
    return requested


def check_run_directory(run_dir: str, inputs: List[str]) -> None:
    """Before any work: the directory is usable, and nothing the run writes is one of its inputs
    (``train.py --config RUN/config.yaml`` would rewrite the user's config)."""
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise ConfigError(f"output_dir {run_dir} is a file, not a directory; set output_dir to a directory "
                          f"(--set output_dir=runs/NAME)")
    for name in RUN_FILES:
        for source in inputs:
            relation = input_relation(os.path.join(run_dir, name), source)
            if relation:
                raise ConfigError(f"{source} is an input of this run, but output_dir {run_dir} would replace "
                                  f"{os.path.join(run_dir, name)}, which {relation} it; copy the input out of the run "
                                  f"directory and name the copy, or set another output_dir")
    try:
        os.makedirs(run_dir, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"output_dir {run_dir} cannot be created ({error.strerror}); choose another") from None
    if not os.access(run_dir, os.W_OK | os.X_OK):
        raise ConfigError(f"output_dir {run_dir} is not writable; choose another (--set output_dir=...)")


def check_no_run(run_dir: str, resume: bool, overwrite: bool) -> None:
    """A finished run is never replaced by accident."""
    held = [name for name in RUN_MARKERS if os.path.exists(os.path.join(run_dir, name))]
    held += [os.path.basename(path) for name in CHECKPOINTS for path in previous_versions(os.path.join(run_dir, name))]
    if held and not (resume or overwrite):
        raise ConfigError(f"output_dir {run_dir} already holds a run ({', '.join(held)}); pass --resume to continue "
                          f"it, --overwrite to replace it, or --set output_dir=ANOTHER_DIR for a new run")


def remove_run_files(run_dir: str) -> None:
    leftovers = [path for name in CHECKPOINTS for infix in (PARTIAL, PREVIOUS)
                 for path in glob.glob(glob.escape(os.path.join(run_dir, name)) + infix + "*")]
    for path in [os.path.join(run_dir, name) for name in RUN_FILES] + leftovers:
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)


def diverged(found: str, progress: "Progress", config: RunConfig) -> TrainingError:
    return TrainingError(f"step {progress.global_step + 1}: {found}; training diverged, most likely because the "
                         f"learning rate is too high (train.lr={config.train.lr:g}, train.head_lr="
                         f"{config.train.head_lr:g}): lower it, e.g. --set train.lr={config.train.lr / 10:g}, and "
                         f"train again (--overwrite). Nothing was saved from these weights")


def check_finite_weights(model, progress: "Progress", config: RunConfig) -> None:
    """Before anything is evaluated or saved: a checkpoint never holds NaN or infinite weights."""
    bad = [name for name, parameter in model.named_parameters() if not bool(paddle.isfinite(parameter).all())]
    if bad:
        raise diverged(f"{len(bad)} weight tensors are not finite ({', '.join(bad[:3])}, ...)", progress, config)


# Keys (or whole sections) that may change on --resume: they decide what is evaluated, kept, shown or
# served, not what is learned.
RESUME_MAY_CHANGE = {"data.dev", "data.test", "model.decode", "model.threshold", "model.calibrated_thresholds",
                     "train.eval_batch_size", "train.eval_every", "train.patience", "train.log_every", "device",
                     "cpu_threads", "output_dir", "inference", "serve"}


def resume_conflicts(saved: RunConfig, new: RunConfig) -> List[str]:
    before, after = flatten_config(saved), flatten_config(new)
    return [f"{key} was {before[key]!r}, now {after.get(key)!r}" for key in before
            if not {key, key.split(".")[0]} & RESUME_MAY_CHANGE and before[key] != after.get(key)]


def step_seed(seed: int, global_step: int) -> int:
    """Dropout masks depend only on (seed, step), so a resumed run repeats an uninterrupted one."""
    return (seed * 1_000_003 + global_step) % (2 ** 31)


def build_optimizer(model, config: RunConfig, total_steps: int):
    from paddlenlp.transformers import LinearDecayWithWarmup

    train = config.train
    # The schedule is a factor from 0 to 1; each group's rate multiplies it, so either may be 0
    # (e.g. lr 0 freezes the encoder while the head trains at head_lr).
    scheduler = LinearDecayWithWarmup(1.0, max(total_steps, 1), train.warmup_ratio)
    head_ids = {id(p) for p in model.head.parameters()}
    # parameter name -> its group's rate
    rates = layer_rates([(n, p) for n, p in model.named_parameters() if id(p) not in head_ids], train.lr,
                        train.layer_lr_decay)
    rates.update({n: train.head_lr for n, p in model.named_parameters() if id(p) in head_ids})
    by_rate: dict = {}
    for name, parameter in model.named_parameters():
        by_rate.setdefault(rates[name], []).append(parameter)
    no_decay = {p.name for n, p in model.named_parameters() if "bias" in n or "norm" in n}
    groups = [{"params": params, "learning_rate": rate} for rate, params in by_rate.items()]
    clip = paddle.nn.ClipGradByGlobalNorm(train.max_grad_norm) if train.max_grad_norm > 0 else None
    optimizer = paddle.optimizer.AdamW(learning_rate=scheduler, parameters=groups, weight_decay=train.weight_decay,
                                       apply_decay_param_fun=lambda name: name not in no_decay, grad_clip=clip)
    return optimizer, scheduler


class StopRequest:
    """First Ctrl-C or SIGTERM (what schedulers send before they kill a job): finish the current step,
    save, exit.  A second one: stop at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.requested = False
        self.previous = {}

    def __enter__(self):
        try:
            self.previous = {signum: signal.signal(signum, self._handle) for signum in self.SIGNALS}
        except ValueError:  # not the main thread
            self.previous = {}
        return self

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        log.warning("%s: saving a checkpoint after this step (again to quit at once)", signal.Signals(signum).name)

    def __exit__(self, *exc):
        for signum, previous in self.previous.items():
            signal.signal(signum, previous)


def _keep_metrics_until(path: str, step: int) -> None:
    """A fresh run starts a new metrics.csv; a resumed one drops rows logged after its checkpoint
    (the resumed run logs those steps again)."""
    if not os.path.exists(path):
        return
    rows = []
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        for row in reader:
            if not (row.get("step") or "").isdigit():
                raise CheckpointError(f"{path}:{reader.line_num}: step {row.get('step')!r} is not a whole number; "
                                      f"the file was edited or is corrupted: fix or delete that row")
            if int(row["step"]) <= step:
                rows.append(row)
    if not rows:
        os.remove(path)
        return
    lines = [",".join(METRICS_COLUMNS)] + [",".join(row.get(k) or "" for k in METRICS_COLUMNS) for row in rows]
    atomic_write_text(path, "\n".join(lines) + "\n")


def _append_metrics(path: str, row: dict) -> None:
    new = not os.path.exists(path)
    with open(path, "a", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=METRICS_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow({k: row[k] for k in METRICS_COLUMNS})


class RunDirectory:
    """Everything a run writes into ``output_dir``: checkpoints, metrics.csv and reports.  Only the
    main process writes; every write is atomic."""

    def __init__(self, config: RunConfig, record: ModelRecord, encoder, runtime: Runtime):
        self.config, self.record, self.encoder, self.runtime = config, record, encoder, runtime
        self.path = config.output_dir
        self.last, self.best = os.path.join(self.path, "last"), os.path.join(self.path, "best")
        self.metrics = os.path.join(self.path, "metrics.csv")

    def start(self, progress: Progress) -> None:
        if self.runtime.is_main:
            atomic_write_text(os.path.join(self.path, "config.yaml"), dump_config(self.config))
            _keep_metrics_until(self.metrics, progress.global_step)

    def save_last(self, model, optimizer, ema: Optional[EMA], progress: Progress) -> None:
        if self.runtime.is_main:
            state = {OPTIMIZER_STATE: optimizer.state_dict(), **({EMA_STATE: ema.state_dict()} if ema else {})}
            write_checkpoint(self.last, model, self.encoder, self.config, self.record, extra_state=state,
                             extra_json={TRAINER_STATE: dataclasses.asdict(progress)})

    def log_evaluation(self, model, progress: Progress, report: Optional[dict], train_loss: float,
                       improved: bool, steps_per_epoch: int, f1_without_average: Optional[float]) -> None:
        if not self.runtime.is_main:
            return
        micro = report["micro"] if report else {"precision": 0.0, "recall": 0.0, "f1": 0.0}
        _append_metrics(self.metrics, {
            "step": progress.global_step, "epochs_done": round(progress.global_step / steps_per_epoch, 3),
            "train_loss": round(train_loss, 6), **{k: round(micro[k], 6) for k in ("precision", "recall", "f1")},
            "f1_without_average": None if f1_without_average is None else round(f1_without_average, 6),
            "seconds": round(progress.seconds, 1), "windows_per_second": round(progress.windows_per_second(), 2)})
        if improved:
            write_checkpoint(self.best, model, self.encoder, self.config, self.record)
            if report:
                atomic_write_json(os.path.join(self.path, "dev_report.json"), report)
        if report:
            without = "" if f1_without_average is None else f" (without the average: {f1_without_average:.4f})"
            tqdm.write(f"step {progress.global_step}: dev P {micro['precision']:.4f} R {micro['recall']:.4f} "
                       f"F1 {micro['f1']:.4f}{without}{' (best)' if improved else ''}")

    def write_json(self, name: str, value: dict) -> None:
        if self.runtime.is_main:
            atomic_write_json(os.path.join(self.path, name), value)


def evaluate(extractor: Extractor, records: List[Record], labels: List[str], runtime: Runtime) -> Optional[dict]:
    """The span report on ``records`` (None without records).  In a data-parallel run the main
    process evaluates and the others wait for its micro F1, which is all they need."""
    report = None
    if records and runtime.is_main:
        report = span_report([r.entities for r in records], extractor.extract([r.text for r in records]), labels)
    if records and runtime.world_size > 1:
        import paddle.distributed as dist

        f1 = paddle.to_tensor([report["micro"]["f1"] if report else 0.0], dtype="float64")
        dist.broadcast(f1, src=0)
        report = report or {"micro": {"f1": float(f1.numpy()[0])}}
    return report


def train(config: RunConfig, resume: bool = False, build: Callable = build_model, overwrite: bool = False,
          resume_anyway: bool = False, config_file: str = "") -> dict:
    """Train, evaluate and checkpoint into ``config.output_dir``; returns the run summary.

    A directory that holds a run is continued (``resume``, which refuses a changed config unless
    ``resume_anyway``) or replaced (``overwrite``); otherwise it is an error, before any work.
    ``build(config, encoder, num_types)`` makes the model: another model (bench/vs_paddlenlp_f1.py
    trains PaddleNLP's GlobalPointer this way) needs the same call signature and a ``head`` with
    ``loss`` and ``decode``, and its checkpoints load only with it.  ``config_file``: where ``config``
    was read from (an input the run must not overwrite).  One process at a time writes a run
    directory (``RunLock``)."""
    require_files(config, ["train"])
    check_run_directory(config.output_dir, [config_file, config.data.train, config.data.dev, config.data.test,
                                            config.model.encoder])
    check_no_run(config.output_dir, resume, overwrite)
    writes = int(os.environ.get("PADDLE_TRAINER_ID", "0")) == 0  # data parallel: only rank 0 writes
    with RunLock(config.output_dir) if writes else contextlib.nullcontext():
        check_no_run(config.output_dir, resume, overwrite)  # again, now that no other run can start writing
        return _train(config, resume, build, overwrite, resume_anyway)


def _train(config: RunConfig, resume: bool, build: Callable, overwrite: bool, resume_anyway: bool) -> dict:
    runtime: Runtime = setup_runtime(config.device, config.cpu_threads)
    train_cfg = config.train

    # data
    data = config.data
    train_records = load_records(data.train, **data.reading)
    labels = infer_labels(train_records, data.labels, data.train)
    dev_records = load_records(data.dev, **data.reading) if data.dev else []
    test_records = load_records(data.test, **data.reading) if data.test else []
    check_types(dev_records, labels)
    check_types(test_records, labels)

    # encoder, windows, model, optimizer
    seed_everything(train_cfg.seed)  # the 'tiny' test encoder is random
    encoder = load_encoder(config.model.encoder)
    check_position_limit(config, position_limit(encoder.model))
    text_encoder = text_encoder_for(encoder.tokenizer, resolve_tokenization(data.tokenization, encoder.tokenizer),
                                    data.max_length, data.window_overlap)
    record = ModelRecord(labels, text_encoder.mode)  # what "auto" became and the types; the config stays as written
    windows, alignment = text_encoder.training_windows(train_records, {t: i for i, t in enumerate(labels)}, "train")
    lengths = [len(w.input_ids) for w in windows]
    # Seeded again: loading an encoder may draw random numbers (a first-time conversion builds a
    # model), and the head's initialisation must not depend on whether the cache was warm.
    seed_everything(train_cfg.seed)
    model = build(config, encoder, len(labels))
    trained = paddle.DataParallel(model) if runtime.world_size > 1 else model
    batches_per_epoch = len(epoch_batches(lengths, config, runtime, 0))
    steps_per_epoch = math.ceil(batches_per_epoch / train_cfg.grad_accum_steps)
    total_steps = steps_per_epoch * train_cfg.epochs
    optimizer, scheduler = build_optimizer(model, config, total_steps)
    dtype = amp_dtype(train_cfg.amp, runtime.on_gpu)
    scaler = paddle.amp.GradScaler(init_loss_scaling=2.0 ** 15) if dtype == "float16" else None
    fgm = FGM(word_embeddings(model), train_cfg.adversarial_epsilon) if train_cfg.adversarial == "fgm" else None
    ema = EMA(model, train_cfg.ema_decay) if train_cfg.ema_decay else None

    # where the run starts
    run = RunDirectory(config, record, encoder, runtime)
    progress = Progress()
    if resume:
        progress = _restore(run.last, config, model, optimizer, ema, resume_anyway)
    elif overwrite and runtime.is_main:
        remove_run_files(run.path)
    run.start(progress)
    extractor = Extractor(model, text_encoder, labels, config.model.decode, config.model.threshold,
                          train_cfg.eval_batch_size, pack_texts=config.inference.pack_texts)

    model.train()
    bar = tqdm(total=total_steps, initial=progress.global_step, desc="train", unit="step",
               disable=not runtime.is_main, dynamic_ncols=True)
    losses: List[float] = []  # of the batches since the last evaluation
    # evaluate on dev, log, save best and last, reset the running loss; True when patience has run out
    evaluate_and_save = functools.partial(_evaluate_and_save, run, model, optimizer, ema, extractor, dev_records,
                                          labels, progress, losses, steps_per_epoch, config, runtime)
    stopped_early = interrupted = False
    progress.start_clock()
    with StopRequest() as stop:
        while progress.epoch < train_cfg.epochs and not (stopped_early or interrupted):
            batches = epoch_batches(lengths, config, runtime, progress.epoch)
            accumulated = 0
            for index in range(progress.batch_in_epoch, len(batches)):
                # forward and backward of one batch (twice with FGM: then also on moved embeddings)
                batch = collate([windows[i] for i in batches[index]], text_encoder.pad_id)
                paddle.seed(step_seed(train_cfg.seed, progress.global_step * train_cfg.grad_accum_steps + accumulated))
                inputs, gold = model_inputs(batch), paddle.to_tensor(batch["gold"])
                if fgm is not None and accumulated:
                    fgm.remember_gradient()
                loss, dropped = forward_backward(trained, model.head, inputs, gold, dtype, scaler,
                                                 train_cfg.grad_accum_steps, train_cfg.rdrop_alpha)
                if scaler is None and not math.isfinite(loss):  # float16's loss scaling skips such steps itself
                    raise diverged(f"the training loss is {loss}", progress, config)
                if fgm is not None and fgm.attack():  # the loss on moved embeddings: one pass, without R-Drop
                    forward_backward(trained, model.head, inputs, gold, dtype, scaler, train_cfg.grad_accum_steps)
                    fgm.restore()
                losses.append(loss)
                progress.dropped_gold += dropped
                progress.windows += len(batches[index])
                accumulated += 1
                if accumulated < train_cfg.grad_accum_steps and index < len(batches) - 1:
                    continue

                # one optimizer step
                if scaler:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                optimizer.clear_grad()
                scheduler.step()
                if ema is not None:
                    ema.update(model)
                accumulated = 0
                progress.global_step += 1
                progress.batch_in_epoch = index + 1
                progress.tick()
                bar.update(1)
                if progress.global_step % train_cfg.log_every == 0:
                    bar.set_postfix(loss=f"{sum(losses) / max(len(losses), 1):.4f}", epoch=progress.epoch + 1,
                                    win_s=f"{progress.windows_per_second():.1f}")

                # evaluation every eval_every steps
                if train_cfg.eval_every and progress.global_step % train_cfg.eval_every == 0:
                    stopped_early = evaluate_and_save()
                if stop.requested or stopped_early:
                    interrupted = stop.requested
                    break
            else:  # the epoch ran to its end
                progress.epoch += 1
                progress.batch_in_epoch = 0
                if not train_cfg.eval_every:
                    stopped_early = evaluate_and_save()
    bar.close()
    if interrupted:
        check_finite_weights(model, progress, config)
        run.save_last(model, optimizer, ema, progress)
        raise KeyboardInterrupt(f"interrupted at step {progress.global_step}; saved {run.last}, continue with --resume")
    if stopped_early and runtime.is_main:
        log.info("early stop: no better dev F1 for %d evaluations", train_cfg.patience)
    if progress.evaluated_step != progress.global_step:  # steps after the last evaluation
        evaluate_and_save()

    summary = {"best_dev_f1": progress.best_f1 if dev_records else None, "best_step": progress.best_step,
               "best_dev_f1_without_average": progress.best_f1_without_average,
               "steps": progress.global_step, "epochs_completed": progress.epoch, "stopped_early": stopped_early,
               "seconds": round(progress.seconds, 1), "eval_seconds": round(progress.eval_seconds, 1),
               "train_windows": len(windows), "gold_spans_lost_in_alignment": alignment.lost,
               "gold_spans_dropped_by_head": progress.dropped_gold, "labels": labels, "world_size": runtime.world_size}
    if test_records:
        if runtime.is_main:  # the only process that decodes
            load_weights(model, resolve_checkpoint(run.best))
        report = evaluate(extractor, test_records, labels, runtime)
        if runtime.is_main:
            summary["test"] = report["micro"]
            run.write_json("test_report.json", report)
            tqdm.write("test (best checkpoint):\n" + format_report(report))
    run.write_json("summary.json", summary)
    return summary


def forward_backward(trained, head, inputs: dict, gold: paddle.Tensor, dtype: Optional[str], scaler,
                     accumulation: int, rdrop_alpha: float = 0.0) -> Tuple[float, int]:
    """One batch's loss, its gradients added to the parameters'; (loss, gold spans the head dropped).
    With ``rdrop_alpha`` the batch runs twice in one forward pass (stacked, so each copy gets its
    own dropout): the mean of the two losses plus ``rdrop_alpha`` x the head's ``consistency``."""
    token_mask = inputs["token_mask"]
    if rdrop_alpha:
        inputs = {key: paddle.concat([value, value]) for key, value in inputs.items()}
    with paddle.amp.auto_cast(enable=dtype is not None, dtype=dtype or "float16", level="O1"):
        logits = trained(**inputs)
    if rdrop_alpha:
        first, second = paddle.split(logits, 2)
        loss, dropped = head.loss(first, gold, token_mask)
        loss = (loss + head.loss(second, gold, token_mask)[0]) / 2 + rdrop_alpha * head.consistency(
            first, second, token_mask)
    else:
        loss, dropped = head.loss(logits, gold, token_mask)
    loss = loss / accumulation
    (scaler.scale(loss) if scaler else loss).backward()
    return float(loss) * accumulation, dropped


def epoch_batches(lengths: List[int], config: RunConfig, runtime: Runtime, epoch: int) -> List[List[int]]:
    """This process's batches of window indices in one epoch: the same for a resumed run."""
    return length_grouped_batches(lengths, config.train.batch_size, True, config.train.seed + epoch, runtime.rank,
                                  runtime.world_size)


def _evaluate_and_save(run: RunDirectory, model, optimizer, ema: Optional[EMA], extractor: Extractor,
                       dev_records: List[Record], labels: List[str], progress: Progress, losses: List[float],
                       steps_per_epoch: int, config: RunConfig, runtime: Runtime) -> bool:
    """Evaluate on dev, log a metrics row, save the best (with EMA: the average's weights, also
    scoring the trained weights for the log) and last checkpoints, reset the running loss; True when
    patience has run out."""
    check_finite_weights(model, progress, config)
    with progress.evaluation_time():
        train_loss = sum(losses) / max(len(losses), 1)
        losses.clear()
        f1_without_average = None
        if ema is not None and dev_records:
            trained = evaluate(extractor, dev_records, labels, runtime)
            if trained:
                f1_without_average = trained["micro"]["f1"]
                progress.best_f1_without_average = max(progress.best_f1_without_average or 0.0, f1_without_average)
        with ema.applied(model) if ema else contextlib.nullcontext():
            report = evaluate(extractor, dev_records, labels, runtime)
            improved = progress.record_evaluation(report["micro"]["f1"] if report else None)
            run.log_evaluation(model, progress, report if runtime.is_main else None, train_loss, improved,
                               steps_per_epoch, f1_without_average)
    run.save_last(model, optimizer, ema, progress)
    return 0 < config.train.patience <= progress.evals_since_best


def _restore(last_dir: str, config: RunConfig, model, optimizer, ema: Optional[EMA], resume_anyway: bool) -> Progress:
    directory = resolve_checkpoint(last_dir)
    conflicts = resume_conflicts(load_config(os.path.join(directory, "config.yaml")), config)
    if conflicts and not resume_anyway:
        raise ConfigError(f"--resume: the config differs from the run's ({directory}/config.yaml) in what an identical "
                          f"continuation needs: {'; '.join(conflicts)}. Undo the change, start a new run with "
                          f"--overwrite or another output_dir, or pass --resume-anyway")
    try:
        with open(os.path.join(directory, TRAINER_STATE), encoding="utf-8") as handle:
            progress = Progress(**json.load(handle))
    except (OSError, ValueError, TypeError) as error:
        raise CheckpointError(f"{directory}: cannot resume, the trainer state is missing or corrupted ({error}); "
                              f"start without --resume") from None
    optimizer_state = read_state(os.path.join(directory, OPTIMIZER_STATE))
    load_weights(model, directory)
    optimizer.set_state_dict(optimizer_state)
    if ema is not None:
        ema.set_state_dict(read_state(os.path.join(directory, EMA_STATE)))
    log.info("resumed from %s at step %d (epoch %d)", last_dir, progress.global_step, progress.epoch + 1)
    return progress
