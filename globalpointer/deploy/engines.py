"""Entity extraction on the engines people already run: Ray Data and Spark, the model loaded once per
worker process.

Ray Data (``pip install "globalpointer[ray]"``)::

    ds = ray.data.read_json("texts.jsonl")
    ds = ds.map_batches(RayPredictor, fn_constructor_kwargs={"model": "runs/x/best"},
                        compute=ray.data.ActorPoolStrategy(size=2), batch_size=256)
    ds.write_parquet("out/")

Spark (``pip install "globalpointer[spark]"``)::

    df = spark.read.json("texts.jsonl")
    df.withColumn("entities", entities_udf("runs/x/best")("text")).write.parquet("out/")

Either way the entities of a text are a column of type ``ENTITIES`` (Arrow) / ``ENTITIES_DDL``
(Spark): a list of structs ``start, end, type, text, score`` with character offsets, end exclusive,
as predict.py writes them; the other columns are kept.  A null text gets null entities.
"""
import math
from typing import Dict, Optional, Sequence, Tuple

ENTITIES_DDL = "array<struct<start:int,end:int,type:string,text:string,score:double>>"


def entity_arrow_type():
    """The Arrow type of an entities column (a function: pyarrow is imported where it is used)."""
    import pyarrow as pa

    return pa.list_(pa.struct([("start", pa.int32()), ("end", pa.int32()), ("type", pa.string()),
                               ("text", pa.string()), ("score", pa.float64())]))


_LOADED: Dict[Tuple, object] = {}  # (model, overrides, backend, batch size) -> the pipeline of this process


def loaded_pipeline(model: str, overrides: Sequence[str] = (), backend: Optional[str] = None, batch_size: int = 0):
    """The pipeline of ``model`` in this process, loaded at its first use: Spark calls a UDF for
    many batches in one Python worker, which loads the model once."""
    key = (model, tuple(overrides), backend, batch_size)
    if key not in _LOADED:
        from ..inference.pipeline import load

        _LOADED[key] = load(model, list(overrides), backend=backend, window_batch_size=batch_size)
    return _LOADED[key]


def missing(value) -> bool:
    """A missing text: None, or the NaN pandas keeps for one."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def check_column(texts, column: str) -> None:
    """Every value of the text column is a text or missing; else a ValueError naming the column, the row
    of the batch and what would fix it (a lone surrogate cannot be tokenized nor written back)."""
    from ..data.reading import lone_surrogate_at

    for row, text in enumerate(texts):
        if missing(text):
            continue
        if not isinstance(text, str):
            raise ValueError(f"column {column!r}, row {row} of the batch: {type(text).__name__} {text!r:.60}, not "
                             f"text; cast the column to string first")
        at = lone_surrogate_at(text)
        if at is not None:
            raise ValueError(f"column {column!r}, row {row} of the batch holds a lone surrogate at character {at} "
                             f"(a broken \\uXXXX escape), which is no character: repair or drop that row")


def extract_column(ner, texts, column: str = "text") -> list:
    """Entity dicts for each text; None for a missing text."""
    check_column(texts, column)
    present = [index for index, text in enumerate(texts) if not missing(text)]
    found = ner([texts[index] for index in present]) if present else []
    entities = [None] * len(texts)
    for index, own in zip(present, found):
        entities[index] = own
    return entities


class RayPredictor:
    """A Ray Data ``map_batches`` class: each actor loads the model once (a checkpoint or an export,
    any backend, per-type thresholds as in ``globalpointer.load``), then adds an entities column to
    every batch it is given, whatever the batch format (numpy, pandas or pyarrow); the batch comes back
    as a pyarrow table with the other columns as they were.

    ``overrides``: config keys as ``--set`` takes them, e.g. ``["cpu_threads=1"]`` (one core per
    actor when the actor pool's size is the number of cores)."""

    def __init__(self, model: str, text_column: str = "text", entities_column: str = "entities",
                 overrides: Sequence[str] = (), backend: Optional[str] = None, batch_size: int = 0):
        self.ner = loaded_pipeline(model, overrides, backend, batch_size)
        self.text_column = text_column
        self.entities_column = entities_column

    def __call__(self, batch):
        import pyarrow as pa

        names = batch.column_names if isinstance(batch, pa.Table) else list(batch.keys())
        if self.text_column not in names:
            raise KeyError(f"the batch has no column {self.text_column!r} (columns: {', '.join(map(str, names))}); "
                           f"pass text_column= in fn_constructor_kwargs")
        # the texts are checked before Arrow converts the batch, whose own error on a mixed column names neither
        texts = batch.column(self.text_column).to_pylist() if isinstance(batch, pa.Table) else \
            list(batch[self.text_column])
        entities = pa.array(extract_column(self.ner, texts, self.text_column), type=entity_arrow_type())
        table = batch if isinstance(batch, pa.Table) else \
            pa.Table.from_pandas(batch, preserve_index=False) if hasattr(batch, "to_numpy") else \
            pa.table({name: list(values) for name, values in batch.items()})
        if self.entities_column in table.column_names:
            table = table.drop_columns([self.entities_column])
        return table.append_column(self.entities_column, entities)


def entities_udf(model: str, overrides: Sequence[str] = (), backend: Optional[str] = None, batch_size: int = 0):
    """A Spark pandas UDF: a column of texts -> a column of ``ENTITIES_DDL``.  Each Python worker
    loads the model once (``loaded_pipeline``) and keeps it for the batches that follow."""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    settings = (model, tuple(overrides), backend, batch_size)

    @pandas_udf(ENTITIES_DDL)
    def entities(texts: pd.Series) -> pd.Series:
        return pd.Series(extract_column(loaded_pipeline(*settings), list(texts)))

    return entities
