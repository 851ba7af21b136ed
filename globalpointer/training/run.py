"""The run: its directory (checkpoints, metrics.csv, reports, written by the main process only and
atomically), where training stands (``Progress``), resuming it, and stopping it cleanly."""
import contextlib
import csv
import dataclasses
import logging
import os
import shutil
import signal
import time
from typing import List, Optional

from tqdm import tqdm

from ..model_directory.compiled import DECODING_KEYS
from ..model_directory.layout import CONFIG, OPTIMIZER_STATE, TRAINER_STATE, resolve_checkpoint
from ..model_directory.opening import TrainedFor, read_record
from ..model_directory.writing import write_checkpoint
from ..config import PATH_KEYS, RunConfig, dump_config, flatten_config
from ..errors import CheckpointError, ConfigError
from ..evaluation.metrics import types_scores
from ..evaluation.relations import headline
from ..evaluation.metrics_log import METRICS_COLUMNS, read_metrics
from ..inference.extractor import stop_between_passes
from ..files import (PARTIAL, PREVIOUS, atomic_write_json, atomic_write_text, input_relation, previous_versions, read_json, remove_unless_held, temporaries)
from ..model.network import load_weights
from ..model.weights import read_state
from ..runtime import Runtime

log = logging.getLogger(__name__)

# What a run writes into its directory; --overwrite removes exactly these (and the copies of best/
# and last/ that a kill during a save leaves), nothing else in it.
CHECKPOINTS = ("best", "last")
RUN_FILES = (*CHECKPOINTS, "metrics.csv", "metrics.png", CONFIG, "dev_report.json", "test_report.json",
             "summary.json")
RUN_MARKERS = (*CHECKPOINTS, "metrics.csv")  # a directory holding one of these holds a run


@dataclasses.dataclass
class Progress:
    """Where training stands; saved with the last checkpoint so --resume continues exactly."""
    epoch: int = 0
    batch_in_epoch: int = 0  # batches of `epoch` already consumed
    global_step: int = 0  # optimizer steps taken
    best_f1: float = -1.0
    best_step: int = 0
    evals_since_best: int = 0
    dropped_gold: int = 0  # gold spans the head could not learn: masked cells
    seconds: float = 0.0  # wall time, evaluations included
    eval_seconds: float = 0.0  # of `seconds`: dev evaluations and checkpoint writing
    evaluated_step: int = -1  # global_step of the latest evaluation
    windows: int = 0  # training windows this process has consumed
    # the batch losses since the latest evaluation, whose mean is its row's train_loss: kept by a stop's
    # checkpoint, so that a resumed run logs the row it would have logged
    interval_losses: List[float] = dataclasses.field(default_factory=list)
    evaluation_due: bool = False  # a stop cut the evaluation at global_step short: the resumed run makes it first

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
        """Whether the model just evaluated is kept as the best: the best dev F1 so far, or the latest (without
        dev data; or while every dev F1 has been 0: nothing learned yet, so train.patience counts from the first
        F1 above 0, and a run that learns late is not stopped with its first model)."""
        self.evaluated_step = self.global_step
        improved = f1 is None or f1 > self.best_f1 or (f1 == 0 and self.best_f1 <= 0)
        if improved:
            self.best_f1, self.best_step, self.evals_since_best = f1 if f1 is not None else 0.0, self.global_step, 0
        else:
            self.evals_since_best += 1
        return improved


def check_run_directory(run_dir: str, inputs: List[str]) -> None:
    """Before any work: the directory is usable, and nothing the run writes is one of its inputs
    (``train.py --config RUN/config.yaml`` would rewrite the user's config)."""
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise ConfigError(f"output_dir {run_dir} is a file, not a directory; set output_dir to a directory "
                          f"(--set output_dir=runs/NAME)")
    for name in CHECKPOINTS:  # replaced by rename at every save: a link would be replaced, not followed
        path = os.path.join(run_dir, name)
        if os.path.islink(path):
            raise ConfigError(f"{path} is a link (to {os.path.realpath(path)}): a run saves {name}/ by renaming a "
                              f"new copy into its place, which would replace the link; remove it, or set output_dir "
                              f"to the directory it points into")
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


def can_resume(run_dir: str) -> bool:
    """A run stopped by SIGINT / SIGTERM, or killed after a checkpoint: ``train(..., resume=True)``
    continues it from ``last/`` (or the copy a kill between a save's renames left, as ``restore``
    reads it), bit for bit."""
    try:
        return os.path.exists(os.path.join(resolve_checkpoint(os.path.join(run_dir, "last")), TRAINER_STATE))
    except CheckpointError:
        return False


def _checkpoint_leftovers(run_dir: str, infixes=(PARTIAL, PREVIOUS)) -> List[str]:
    return [path for name in CHECKPOINTS for infix in infixes
            for path in temporaries(os.path.join(run_dir, name), infix)]


def remove_run_files(run_dir: str) -> None:
    for path in [os.path.join(run_dir, name) for name in RUN_FILES] + _checkpoint_leftovers(run_dir):
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)


def remove_unfinished_checkpoints(run_dir: str) -> None:
    """Remove the partial checkpoints a run killed while saving one (SIGKILL, out of memory) left: under
    the run's lock (``RunLock``) no other process writes them, and nothing reads them."""
    for path in _checkpoint_leftovers(run_dir, (PARTIAL,)):
        if remove_unless_held(path):
            log.info("removed %s, a checkpoint the stopped run did not finish writing", path)


# Keys (or whole sections) that may change on --resume: they decide what is evaluated, kept, shown or
# served, not what is learned.
RESUME_MAY_CHANGE = {"data.dev", "data.test", *(f"model.{key}" for key in DECODING_KEYS),
                     "train.eval_every", "train.patience", "train.calibrate", "train.log_every", "device",
                     "cpu_threads", "output_dir", "inference", "serve"}


def resume_conflicts(saved: RunConfig, new: RunConfig) -> List[str]:
    # paths compared as absolute: a run of an earlier version saved them as written, relative to where it ran
    def absolute(value):
        if isinstance(value, list):  # data entries
            return [{**entry, "path": os.path.abspath(entry["path"])} for entry in value]
        return os.path.abspath(value) if value else value

    before, after = ({key: absolute(value) if key in PATH_KEYS else value
                      for key, value in flatten_config(config).items()} for config in (saved, new))
    return [f"{key} was {before[key]!r}, now {after.get(key)!r}" for key in before
            if not {key, key.split(".")[0]} & RESUME_MAY_CHANGE and before[key] != after.get(key)]


class StopRequest:
    """First Ctrl-C or SIGTERM (what schedulers send before they kill a job): finish the current step,
    save, exit; inside a stoppable dev evaluation (``evaluation``), the evaluation stops after its forward
    pass and is made again when the run resumes.  A second one: stop at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.requested = False
        self.previous = {}
        self.evaluating = False

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
        log.warning("%s: %s (again to quit at once)", signal.Signals(signum).name,
                    "the dev evaluation stops; saving a checkpoint (--resume makes the evaluation again)"
                    if self.evaluating else "saving a checkpoint after this step")

    @contextlib.contextmanager
    def evaluation(self, stoppable: bool):
        """A dev evaluation; where ``stoppable`` (one process: in a data-parallel run the others wait for its
        F1), a stop ends it after its current forward pass (``extractor.PassesStopped``)."""
        self.evaluating = stoppable
        try:
            with stop_between_passes(lambda: self.requested) if stoppable else contextlib.nullcontext():
                yield
        finally:
            self.evaluating = False

    def __exit__(self, *exc):
        for signum, previous in self.previous.items():
            signal.signal(signum, previous)


def _keep_metrics_until(path: str, step: int) -> None:
    """A fresh run starts a new metrics.csv; a resumed one drops rows logged after its checkpoint
    (the resumed run logs those steps again)."""
    if not os.path.exists(path):
        return
    rows = [row for row in read_metrics(path) if int(row["step"]) <= step]
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

    def __init__(self, config: RunConfig, trained_for: TrainedFor, encoder, runtime: Runtime):
        self.config, self.trained_for, self.encoder, self.runtime = config, trained_for, encoder, runtime
        self.path = config.output_dir
        self.last, self.best = os.path.join(self.path, "last"), os.path.join(self.path, "best")
        self.metrics = os.path.join(self.path, "metrics.csv")
        self.added: List[str] = []  # the types a run from train.init_from adds: their own F1 is said apart

    def start(self, progress: Progress) -> None:
        if self.runtime.is_main:
            atomic_write_text(os.path.join(self.path, CONFIG), dump_config(self.config))
            _keep_metrics_until(self.metrics, progress.global_step)

    def save_last(self, model, optimizer, progress: Progress) -> None:
        if self.runtime.is_main:
            write_checkpoint(self.last, model, self.encoder, self.config, self.trained_for,
                             extra_state={OPTIMIZER_STATE: keyed_by_path(optimizer.state_dict(), model)},
                             extra_json={TRAINER_STATE: dataclasses.asdict(progress)})

    def log_evaluation(self, model, progress: Progress, report: Optional[dict], train_loss: float,
                       improved: bool, steps_per_epoch: int) -> None:
        if not self.runtime.is_main:
            return
        micro = headline(report) if report else {"precision": 0.0, "recall": 0.0, "f1": 0.0}
        _append_metrics(self.metrics, {
            "step": progress.global_step, "epochs_done": round(progress.global_step / steps_per_epoch, 3),
            "train_loss": round(train_loss, 6), **{k: round(micro[k], 6) for k in ("precision", "recall", "f1")},
            "seconds": round(progress.seconds, 1), "windows_per_second": round(progress.windows_per_second(), 2)})
        if improved:
            write_checkpoint(self.best, model, self.encoder, self.config, self.trained_for)
            if report:
                atomic_write_json(os.path.join(self.path, "dev_report.json"), report)
        if report:
            added = ""
            if self.added:
                added = f"; the added types ({', '.join(self.added)}) F1 {types_scores(report, self.added)['f1']:.4f}"
            tqdm.write(f"step {progress.global_step}: dev P {micro['precision']:.4f} R {micro['recall']:.4f} "
                       f"F1 {micro['f1']:.4f}{_kept(improved, micro['f1'])}{added}")

    def write_json(self, name: str, value: dict) -> None:
        if self.runtime.is_main:
            atomic_write_json(os.path.join(self.path, name), value)


def _kept(improved: bool, f1: float) -> str:
    if not improved:
        return ""
    return " (best)" if f1 else " (kept as the latest: nothing learned yet; train.patience counts from the first F1 above 0)"


def keyed_by_path(state: dict, model) -> dict:
    """An optimizer's state keyed by each parameter's path in the network (``encoder.pooler.dense.weight:
    moment1_0``) rather than by Paddle's name for it (``linear_72.w_0_moment1_0``), which counts the layers
    built before it in the process: a run trained beside others (a notebook, a comparison) resumes in a
    process of its own."""
    paths = {parameter.name: path for path, parameter in model.named_parameters()}
    names = sorted(paths, key=len, reverse=True)

    def key(name: str) -> str:
        if name in paths:
            return paths[name]
        owner = next((n for n in names if name.startswith(n + "_")), None)
        return f"{paths[owner]}:{name[len(owner) + 1:]}" if owner else name

    return {key(k): ({key(n): v for n, v in value.items()} if k == "master_weights" else value)
            for k, value in state.items()}


def keyed_by_name(state: dict, model) -> dict:
    """``keyed_by_path``'s state keyed by this process's parameter names again (a checkpoint of an earlier
    version, keyed by names, as it is)."""
    names = {path: parameter.name for path, parameter in model.named_parameters()}

    def key(stored: str) -> str:
        path, _, accumulator = stored.partition(":")
        if path not in names:
            return stored
        return f"{names[path]}_{accumulator}" if accumulator else names[path]

    return {key(k): ({key(n): v for n, v in value.items()} if k == "master_weights" else value)
            for k, value in state.items()}


def restore(last_dir: str, config: RunConfig, epochs: int, model, optimizer, resume_anyway: bool) -> Progress:
    """Where the run in ``last_dir`` stood, its weights and optimizer state loaded; ``epochs``: what the
    run trains (``train.epochs``, or fewer within ``train.max_steps``)."""
    directory = resolve_checkpoint(last_dir)
    conflicts = resume_conflicts(read_record(directory)[0], config)
    if conflicts and not resume_anyway:
        raise ConfigError(f"--resume: the config differs from the run's ({directory}/config.yaml) in what an identical "
                          f"continuation needs: {'; '.join(conflicts)}. Undo the change, start a new run with "
                          f"--overwrite or another output_dir, or pass --resume-anyway")
    try:
        state = read_json(os.path.join(directory, TRAINER_STATE))
        state.pop("best_f1_without_average", None)  # of the removed train.ema_decay, in runs of earlier versions
        progress = Progress(**state)
    except (OSError, ValueError, TypeError) as error:
        raise CheckpointError(f"{directory}: cannot resume, the trainer state is missing or corrupted ({error}); "
                              f"start without --resume") from None
    optimizer_state = read_state(os.path.join(directory, OPTIMIZER_STATE))
    load_weights(model, directory)
    optimizer.set_state_dict(keyed_by_name(optimizer_state, model))
    if progress.epoch >= epochs:  # progress.epoch counts the epochs done
        log.info("resumed from %s at step %d: its %d epoch(s) are done, nothing is left to train (raise "
                 "train.epochs, or train.max_steps, to train on)", last_dir, progress.global_step, progress.epoch)
    else:
        log.info("resumed from %s at step %d (epoch %d of %d)", last_dir, progress.global_step, progress.epoch + 1,
                 epochs)
    return progress
