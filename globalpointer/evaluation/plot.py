"""Learning curves of a run: ``globalpointer plot RUN_DIR`` writes RUN_DIR/metrics.png
(train loss and dev precision / recall / F1 per evaluation, from metrics.csv), and where the run's
dev_report.json measured it, the best checkpoint's reliability diagram (``reliability.py``: how often the
dev predictions scored in each bin were right)."""
import os

from ..errors import UserError
from ..files import atomic_output, read_json
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
    report_path = os.path.join(run_dir, "dev_report.json")
    report = read_json(report_path) if os.path.isfile(report_path) else {}
    measured = report.get("relations", report).get("calibration") or {}
    panels = 3 if measured.get("items") else 2
    figure, axes = plt.subplots(1, panels, figsize=(5 * panels, 4))
    loss_axis, score_axis = axes[:2]
    loss_axis.plot(steps, [float(r["train_loss"]) for r in rows], marker="o")
    loss_axis.set(title="train loss", xlabel="optimizer step", yscale="log")
    for key in ("precision", "recall", "f1"):
        score_axis.plot(steps, [float(r[key]) * 100 for r in rows], marker="o", label=key)
    score_axis.set(title="dev (micro, exact span match)", xlabel="optimizer step", ylabel="%")
    score_axis.legend()
    if panels == 3:
        _reliability_diagram(axes[2], measured, "triples" if "relations" in report else "entities")
    figure.suptitle(os.path.basename(os.path.abspath(run_dir)))
    figure.tight_layout()
    target = os.path.join(run_dir, "metrics.png")
    with atomic_output(target, binary=True) as out:
        figure.savefig(out, format="png", dpi=100)
    return target


def _reliability_diagram(axis, measured: dict, what: str) -> None:
    """The share right of each score bin against its mean score; on the diagonal, scores mean what they say."""
    bins = measured["bins"]
    axis.bar([row["mean_score"] for row in bins], [row["accuracy"] for row in bins], width=0.08, alpha=0.7,
             label="share right")
    axis.plot([0, 1], [0, 1], linestyle="--", color="grey", label="calibrated")
    axis.set(title=f"best checkpoint's dev {what}: ECE {measured['ece']:.3f}", xlabel="score", ylabel="share right",
             xlim=(0, 1), ylim=(0, 1))
    axis.legend()
