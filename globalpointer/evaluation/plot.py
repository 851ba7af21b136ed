"""Learning curves of a run: ``globalpointer plot RUN_DIR`` writes RUN_DIR/metrics.png
(train loss and dev precision / recall / F1 per evaluation, from metrics.csv; with EMA also the
trained weights' F1 without the average)."""
import os

from ..errors import UserError
from ..files import atomic_output
from .metrics_log import read_metrics


def plot_run(run_dir: str) -> str:
    """RUN_DIR/metrics.png from RUN_DIR/metrics.csv (read as ``--resume`` reads it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = os.path.join(run_dir, "metrics.csv")
    if not os.path.isfile(path):
        raise UserError(f"{run_dir} holds no metrics.csv; name a run directory (output_dir of a training run)")
    rows = read_metrics(path)
    if not rows:
        raise UserError(f"{path} has no evaluations yet: plot it once training has evaluated on dev")
    steps = [int(r["step"]) for r in rows]
    figure, (loss_axis, score_axis) = plt.subplots(1, 2, figsize=(10, 4))
    loss_axis.plot(steps, [float(r["train_loss"]) for r in rows], marker="o")
    loss_axis.set(title="train loss", xlabel="optimizer step", yscale="log")
    for key in ("precision", "recall", "f1"):
        score_axis.plot(steps, [float(r[key]) * 100 for r in rows], marker="o", label=key)
    score_axis.set(title="dev (micro, exact span match)", xlabel="optimizer step", ylabel="%")
    score_axis.legend()
    figure.suptitle(os.path.basename(os.path.abspath(run_dir)))
    figure.tight_layout()
    target = os.path.join(run_dir, "metrics.png")
    with atomic_output(target, binary=True) as out:
        figure.savefig(out, format="png", dpi=100)
    return target
