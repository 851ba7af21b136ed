"""``globalpointer plot``: the learning curves of a run."""
import argparse


def run(argv, prog) -> int:
    from ..evaluation.plot import plot_run

    parser = argparse.ArgumentParser(prog=prog, description="Learning curves of a run: RUN_DIR/metrics.png.")
    parser.add_argument("run_dir", help="a run directory (output_dir of train) holding metrics.csv")
    args = parser.parse_args(argv)
    print(plot_run(args.run_dir))
    return 0
