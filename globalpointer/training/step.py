"""One optimizer step: the loss of each micro-batch (FGM, AMP), its gradients, the update;
and the optimizer it runs (AdamW, warmup then linear decay, per-layer rates, clipping)."""
import contextlib
import logging
import math
from typing import Optional, Tuple

import paddle

from ..config import RunConfig, TrainConfig
from ..errors import TrainingError
from ..model.network import model_inputs
from ..model.smoothing import smoothed_targets
from .recipes import FGM, layer_rates, word_embeddings

log = logging.getLogger(__name__)


def amp_dtype(requested: str, on_gpu: bool) -> Optional[str]:
    """The autocast dtype, or None.  AMP is a GPU feature; on CPU it is switched off with a warning."""
    if requested == "none":
        return None
    if not on_gpu:
        log.warning("train.amp=%s is ignored on CPU; training in float32", requested)
        return None
    return requested


def diverged(found: str, step: int, train: TrainConfig) -> TrainingError:
    return TrainingError(f"step {step}: {found}; training diverged, most likely because the learning rate is too "
                         f"high (train.lr={train.lr:g}, train.head_lr={train.head_lr:g}): lower it, e.g. --set "
                         f"train.lr={train.lr / 10:g}, and train again (--overwrite). Nothing was saved from these "
                         f"weights")


def check_finite_weights(network, step: int, train: TrainConfig) -> None:
    """Before anything is evaluated or saved: a checkpoint never holds NaN or infinite weights."""
    bad = [name for name, parameter in network.named_parameters() if not bool(paddle.isfinite(parameter).all())]
    if bad:
        raise diverged(f"{len(bad)} weight tensors are not finite ({', '.join(bad[:3])}, ...)", step, train)


def step_seed(seed: int, global_step: int) -> int:
    """Dropout masks depend only on (seed, step), so a resumed run repeats an uninterrupted one."""
    return (seed * 1_000_003 + global_step) % (2 ** 31)


def build_optimizer(model, config: RunConfig, total_steps: int):
    from paddlenlp.transformers import LinearDecayWithWarmup

    train = config.train
    # The schedule is a factor from 0 to 1; each group's rate multiplies it, so either may be 0
    # (e.g. lr 0 freezes the encoder while the head trains at head_lr).
    scheduler = LinearDecayWithWarmup(1.0, max(total_steps, 1), train.warmup_ratio)
    head_ids = {id(p) for p in model.fresh_parameters()}  # the fresh weights (the head's): head_lr
    # parameter name -> its group's rate
    rates = layer_rates([(n, p) for n, p in model.named_parameters() if id(p) not in head_ids], train.encoder_lr,
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


def forward_backward(trained, head, inputs: dict, gold: paddle.Tensor, dtype: Optional[str], scaler,
                     accumulation: int, planes: Optional[paddle.Tensor] = None,
                     soft: Optional[Tuple[paddle.Tensor, paddle.Tensor]] = None,
                     pairs: Optional[paddle.Tensor] = None,
                     pair_planes: Optional[paddle.Tensor] = None) -> Tuple[float, int]:
    """One batch's loss, its gradients added to the parameters'; (loss, gold spans the head dropped).
    ``soft``: the gold rows' smoothed targets (``smoothing.smoothed_targets``, as tensors); ``pairs``:
    a relation head's gold pair cells, ``pair_planes`` the pair planes each row's file annotates
    (``batching.collate``)."""
    with paddle.amp.auto_cast(enable=dtype is not None, dtype=dtype or "float16", level="O1"):
        logits = trained(**inputs)
    targets = {"pairs": pairs} if pairs is not None else {}
    if pair_planes is not None:  # only where a file without relations is trained (heads of peers take none)
        targets["pair_planes"] = pair_planes
    loss, dropped = head.loss(logits, gold, inputs["span_text"], planes, soft, **targets)
    loss = loss / accumulation
    (scaler.scale(loss) if scaler else loss).backward()
    return float(loss) * accumulation, dropped


class Stepper:
    """The optimizer steps of a run: ``micro_batch`` for each of a step's (``train.grad_accum_steps``)
    batches, then ``update``.  ``model`` is the network, or its ``paddle.DataParallel`` wrapper."""

    def __init__(self, model, network, optimizer, scheduler, train: TrainConfig, on_gpu: bool, smoothing: float,
                 adversarial: str):
        self.model, self.network, self.optimizer, self.scheduler, self.train = model, network, optimizer, scheduler, train
        self.smoothing = smoothing  # train.boundary_smoothing as this run applies it (training.recipes.applied_smoothing)
        self.adversarial = adversarial  # train.adversarial as this run applies it (training.recipes.applied_adversarial)
        self.dtype = amp_dtype(train.amp, on_gpu)
        self.scaler = paddle.amp.GradScaler(init_loss_scaling=2.0 ** 15) if self.dtype == "float16" else None
        self.fgm = FGM(word_embeddings(network), train.adversarial_epsilon) if adversarial == "fgm" else None

    def micro_batch(self, batch: dict, step: int, micro: int, micros: int) -> Tuple[float, int]:
        """Batch ``micro`` of ``micros`` in optimizer step ``step`` (0-based): its loss and the gold spans
        the head dropped; its gradients are added to those of the step's earlier batches."""
        paddle.seed(step_seed(self.train.seed, step * self.train.grad_accum_steps + micro))
        inputs, gold = model_inputs(batch), paddle.to_tensor(batch["gold"])
        planes = paddle.to_tensor(batch["annotated"]) if "annotated" in batch else None
        pairs = paddle.to_tensor(batch["pairs"]) if "pairs" in batch else None
        pair_planes = paddle.to_tensor(batch["pair_annotated"]) if "pair_annotated" in batch else None
        soft = None
        if self.smoothing:
            soft = tuple(paddle.to_tensor(part) for part in smoothed_targets(
                batch["gold"], batch["span_text"], self.network.head.tril_mask, self.smoothing,
                self.train.boundary_smoothing_size))
        # Data parallel: the gradients are summed in each process and all-reduced once, in the
        # step's last batch; all-reducing every batch would only move the same sum more often.
        last = micro == micros - 1
        with self.model.no_sync() if isinstance(self.model, paddle.DataParallel) and not last \
                else contextlib.nullcontext():
            if self.fgm is not None and micro:
                self.fgm.remember_gradient()
            loss, dropped = forward_backward(self.model, self.network.head, inputs, gold, self.dtype, self.scaler,
                                             self.train.grad_accum_steps, planes, soft, pairs, pair_planes)
            if self.scaler is None and not math.isfinite(loss):  # float16's loss scaling skips such steps itself
                raise diverged(f"the training loss is {loss}", step + 1, self.train)
            if self.fgm is not None and self.fgm.attack():  # the loss on moved embeddings: one pass more
                forward_backward(self.model, self.network.head, inputs, gold, self.dtype, self.scaler,
                                 self.train.grad_accum_steps, planes=planes, soft=soft, pairs=pairs,
                                 pair_planes=pair_planes)
                self.fgm.restore()
        return loss, dropped

    def update(self) -> None:
        """The optimizer step on the summed gradients, then the schedule."""
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.clear_grad()
        self.scheduler.step()
