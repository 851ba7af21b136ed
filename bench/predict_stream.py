"""predict.py end to end: texts per second and peak memory over files of growing size.

    python bench/predict_stream.py --model RUN/best [--model RUN/export] [--lines 1000,10000,100000]

With several --model (a checkpoint and its export, say) each size runs on each model, side by side.

Each size is a file of CLUENER-like lines (the dev texts, repeated); predict.py runs on it in its own
process whose resident memory is sampled every 0.1 s (psutil), so memory flatness shows as equal
peaks across sizes.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import psutil

from common import Rows, cluener_texts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_predict(model: str, source: str, target: str) -> dict:
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, os.path.join(ROOT, "predict.py"), "--model", os.path.abspath(model),
                                "--input", source, "--output", target], cwd=ROOT, stderr=subprocess.DEVNULL)
    watched, peak = psutil.Process(process.pid), 0
    while process.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    seconds = time.perf_counter() - start
    if process.returncode:
        raise SystemExit(f"predict.py failed with exit status {process.returncode}")
    with open(target, encoding="utf-8") as handle:
        written = sum(1 for _ in handle)
    lines = sum(1 for _ in open(source, encoding="utf-8"))
    return {"written": written, "seconds": f"{seconds:.1f}", "texts_per_s": f"{lines / seconds:.1f}",
            "peak_rss_mb": f"{peak / 2 ** 20:.0f}"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="append", required=True, help="checkpoint or export directory")
    parser.add_argument("--lines", default="1000,10000,100000")
    args = parser.parse_args()
    rows = Rows()
    with tempfile.TemporaryDirectory() as work:
        for count in map(int, args.lines.split(",")):
            source = os.path.join(work, f"{count}.txt")
            with open(source, "w", encoding="utf-8") as out:
                out.write("\n".join(cluener_texts(count)) + "\n")
            for model in args.model:
                rows.add({"model": model, "lines": count, **run_predict(model, source, os.path.join(work, "out.jsonl"))})
    rows.finish()


if __name__ == "__main__":
    main()
