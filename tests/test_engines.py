"""Ray Data and Spark give predict.py's entities, text for text (a text longer than one window and an
empty text among them), in columns that write to Parquet and JSON.  Local Ray with 2 CPUs, Spark in
local[2] mode; each is skipped when its extra (globalpointer[ray], globalpointer[spark]) is missing."""
import json
import os
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def texts_and_expected(trained, tmp_path_factory):
    """A JSON-lines file of texts with ids, and predict.py's entities for each line."""
    from globalpointer.cli import predict_main

    tmp = tmp_path_factory.mktemp("engines")
    texts = [json.loads(line)["text"] for line in open(trained / "dev.jsonl", encoding="utf-8")][:40]
    texts += ["", "北京大学的张三在上海" * 12]  # empty; far longer than one window (data.max_length 24)
    source = tmp / "texts.jsonl"
    source.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(texts)),
                      encoding="utf-8")
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(source),
                         "--output", str(tmp / "predicted.jsonl")]) == 0
    expected = {row["id"]: row["entities"] for row in map(json.loads, open(tmp / "predicted.jsonl", encoding="utf-8"))}
    assert len(expected[len(texts) - 1]) > 12  # the long text's entities come from several windows
    return tmp, source, expected


def rows(entities):
    return [dict(entity) if not hasattr(entity, "asDict") else entity.asDict() for entity in entities]


def test_ray_data_map_batches_gives_predict_pys_entities(trained, texts_and_expected):
    ray = pytest.importorskip("ray")
    import pyarrow.parquet as pq

    from globalpointer.deploy.engines import RayPredictor, entity_arrow_type

    tmp, source, expected = texts_and_expected
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ds = ray.data.read_json(str(source)).map_batches(
            RayPredictor, fn_constructor_kwargs={"model": str(trained / "run" / "best"), "overrides": ["cpu_threads=1"]},
            # 1 of the 2 CPUs left for reading and writing; compute=, as Ray 2.51 deprecated concurrency=
            compute=ray.data.ActorPoolStrategy(size=2), num_cpus=0.5, batch_size=8)
        ds.write_parquet(str(tmp / "ray-parquet"))
        ds.write_json(str(tmp / "ray-json"))
    finally:
        ray.shutdown()
    table = pq.read_table(str(tmp / "ray-parquet"))
    assert table.schema.field("entities").type == entity_arrow_type()
    found = {row["id"]: rows(row["entities"]) for row in table.to_pylist()}
    assert found == expected
    written = [json.loads(line) for name in sorted(os.listdir(tmp / "ray-json"))
               for line in open(tmp / "ray-json" / name, encoding="utf-8")]
    assert {row["id"]: row["entities"] for row in written} == expected


def stop_spark_jvm():
    """Spark's JVM otherwise lives on, busy now and then, until the test process ends."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is not None and getattr(gateway, "proc", None) is not None:
        gateway.shutdown()
        gateway.proc.kill()
        gateway.proc.wait(timeout=60)
        SparkContext._gateway = SparkContext._jvm = None


def test_spark_udf_gives_predict_pys_entities(trained, texts_and_expected, monkeypatch):
    pytest.importorskip("pyspark")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # the workers' Python: this one, activated or not
    from pyspark.sql import SparkSession

    from globalpointer.deploy.engines import ENTITIES_DDL, entities_udf

    tmp, source, expected = texts_and_expected
    spark = (SparkSession.builder.master("local[2]").appName("globalpointer-test")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false").config("spark.executorEnv.PYTHONPATH", ROOT).getOrCreate())
    try:
        df = spark.read.json(str(source))
        out = df.withColumn("entities", entities_udf(str(trained / "run" / "best"), ["cpu_threads=1"])("text"))
        assert out.schema["entities"].dataType.simpleString() == ENTITIES_DDL
        out.write.parquet(str(tmp / "spark-parquet"))
        found = {row["id"]: rows(row["entities"]) for row in out.collect()}
        with_null = spark.createDataFrame([(0, None)], "id long, text string")
        assert with_null.withColumn("entities", entities_udf(str(trained / "run" / "best"))("text")) \
            .collect()[0]["entities"] is None
    finally:
        spark.stop()
        stop_spark_jvm()
    assert found == expected
    import pyarrow.parquet as pq

    assert {row["id"]: row["entities"] for row in pq.read_table(str(tmp / "spark-parquet")).to_pylist()} == expected


class FakeNer:
    def __call__(self, texts):
        return [[{"start": 0, "end": 1, "type": "X", "text": text[:1], "score": 0.5}] if text else [] for text in texts]


@pytest.mark.parametrize("batch_format", ["pandas", "numpy"])  # an Arrow column has one type and holds UTF-8
def test_a_text_column_that_holds_no_text_is_named_with_its_row(batch_format):
    """RELIABILITY: attack 4, case 16."""
    import numpy as np
    import pandas as pd

    from globalpointer.deploy.engines import RayPredictor

    predictor = RayPredictor.__new__(RayPredictor)  # the model is a stand-in: the column's check is under test
    predictor.ner, predictor.text_column, predictor.entities_column = FakeNer(), "body", "entities"
    cases = [(["a", 7, "b"], r"column 'body', row 1 of the batch: int 7, not text; cast the column to string"),
             (["a", "b\ud800c"], r"column 'body', row 1 of the batch holds a lone surrogate at character 1")]
    for texts, message in cases:
        if batch_format == "pandas":
            batch = pd.DataFrame({"body": pd.Series(texts, dtype=object), "id": range(len(texts))})
        else:
            batch = {"body": np.array(texts, dtype=object), "id": np.arange(len(texts))}
        with pytest.raises(ValueError, match=message):
            predictor(batch)
    ok = predictor(pd.DataFrame({"body": ["abc", None, float("nan")]}))
    found = ok.column("entities").to_pylist()
    assert found[1:] == [None, None] and found[0][0]["text"] == "a"
