"""predict.py against Ray Data and Spark on the same model: texts/s side by side, entities compared.

    python bench/engines.py --model RUN/export [--texts 2000] [--rounds 3]

The texts are CLUENER's test texts, then its dev texts (2,000 by default), one JSON line each with an
id.  Each round runs, in turns: predict.py in its own process (its wall time: start, load, predict,
write), a Ray Data job (read_json -> map_batches(RayPredictor), 2 actors of one thread each holding
half a CPU, so reading and writing keep one -> write_json) and a Spark job (read.json -> the pandas
UDF -> write.json, local[2]).  Each job's wall time includes loading the model in its workers; Ray
starts new actors for every job, Spark's Python workers keep the model from the first job on.  The
engines' own start-up (ray.init, the Spark session) is reported apart.  The medians over the rounds
give texts/s and the ratio to predict.py; the entities of every text are compared with predict.py's:
texts whose spans differ, texts whose scores (6 decimals) differ, and the largest score difference.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from common import SHARED, public_set_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_texts(path: str, count: int) -> int:
    texts = []
    for split in ("test", "dev"):
        with open(public_set_file(SHARED, "cluener", f"{split}.json"), encoding="utf-8") as handle:
            texts += [json.loads(line)["text"] for line in handle if line.strip()]
    texts = texts[:count]
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(texts))
    return len(texts)


def read_entities(paths) -> dict:
    """id -> entity dicts, from JSON-lines files."""
    found = {}
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                found[row["id"]] = [{key: e[key] for key in ("start", "end", "type", "text", "score")}
                                    for e in row.get("entities") or []]
    return found


def spans(entities) -> list:
    return [(e["start"], e["end"], e["type"]) for e in entities]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="an export (or a checkpoint) directory")
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256, help="texts per Ray batch")
    args = parser.parse_args()
    model = os.path.abspath(args.model)
    work = tempfile.mkdtemp(prefix="engines-")
    source = os.path.join(work, "texts.jsonl")
    count = write_texts(source, args.texts)

    import ray
    from pyspark.sql import SparkSession

    from globalpointer.deploy.engines import RayPredictor, entities_udf

    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    startup = {"ray": time.perf_counter() - start}
    start = time.perf_counter()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers' Python: this one
    spark = (SparkSession.builder.master("local[2]").appName("bench-engines")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    startup["spark"] = time.perf_counter() - start
    one_thread = ["cpu_threads=1"]  # two workers share the two cores

    def run_predict(out: str) -> None:
        subprocess.run([sys.executable, os.path.join(ROOT, "predict.py"), "--model", model, "--input", source,
                        "--output", out], cwd=ROOT, check=True, stderr=subprocess.DEVNULL)

    def run_ray(out: str) -> None:
        ray.data.read_json(source).map_batches(
            RayPredictor, fn_constructor_kwargs={"model": model, "overrides": one_thread},
            compute=ray.data.ActorPoolStrategy(size=2), num_cpus=0.5, batch_size=args.batch_size).write_json(out)

    def run_spark(out: str) -> None:
        frame = spark.read.json(source).repartition(2)
        frame.withColumn("entities", entities_udf(model, one_thread)("text")).write.json(out)

    runs = {"predict.py": run_predict, "ray": run_ray, "spark": run_spark}
    seconds = {name: [] for name in runs}
    outputs = {}
    for round_number in range(args.rounds):
        for name, run in runs.items():  # in turns: a change in the machine's load touches each alike
            out = os.path.join(work, f"{name}-{round_number}")
            begin = time.perf_counter()
            run(out + (".jsonl" if name == "predict.py" else ""))
            seconds[name].append(time.perf_counter() - begin)
            outputs[name] = [out + ".jsonl"] if name == "predict.py" else \
                sorted(glob.glob(os.path.join(out, "*.json")) + glob.glob(os.path.join(out, "part-*")))
    spark.stop()
    ray.shutdown()

    expected = read_entities(outputs["predict.py"])
    base = statistics.median(seconds["predict.py"])
    print(f"{count} CLUENER texts, model {args.model}, {args.rounds} rounds in turns; medians")
    print(f"{'':<12}{'start-up s':>11}{'wall s':>9}{'texts/s':>9}{'vs predict.py':>15}{'spans differ':>14}"
          f"{'scores differ':>15}{'largest':>9}")
    for name in runs:
        found = read_entities(outputs[name])
        assert set(found) == set(expected), f"{name} wrote {len(found)} texts of {len(expected)}"
        spans_differ = sum(spans(found[i]) != spans(entities) for i, entities in expected.items())
        # the same spans, scores rounded to 6 decimals: a sum over other batch shapes can round the other way
        gaps = [max((abs(a["score"] - b["score"]) for a, b in zip(found[i], entities)), default=0.0)
                for i, entities in expected.items() if spans(found[i]) == spans(entities)]
        wall = statistics.median(seconds[name])
        print(f"{name:<12}{startup.get(name, 0.0):>11.1f}{wall:>9.2f}{count / wall:>9.1f}{base / wall:>15.2f}"
              f"{spans_differ:>14}{sum(gap > 0 for gap in gaps):>15}{max(gaps, default=0.0):>9.0e}")
    print("each round's wall s: " + "; ".join(f"{name} " + ", ".join(f"{s:.2f}" for s in values)
                                            for name, values in seconds.items()))


if __name__ == "__main__":
    main()
