"""GlobalPointer named-entity recognition on PaddlePaddle."""
import logging
import warnings
import zlib  # noqa: F401  before Paddle: PyPI's paddlepaddle-gpu 2.6.2 bundles a zlib that, loaded first, breaks
# Python's own zlib module where that is a separate library

# Noise that paddle prints on import and that no user can act on.
warnings.filterwarnings("ignore", message="No ccache found")
warnings.filterwarnings("ignore", message="Setuptools is replacing distutils")

# A library says what went wrong, not what it is doing: the Python API logs warnings only (PaddleNLP
# sets up the root logger at INFO); the commands log INFO (errors.setup_logging), and so does
# logging.getLogger("globalpointer").setLevel("INFO").
logging.getLogger("globalpointer").setLevel(logging.WARNING)

# Before any Paddle kernel runs: MKL's fast path on non-Intel CPUs (mathlib.py says why).
from . import mathlib

MATH_LIBRARY = mathlib.CHOSEN = mathlib.configure_mkl()


def load(model: str, *args, **kwargs):
    """``globalpointer.load("runs/x/best")`` -> a Pipeline: ``ner(text)``, ``ner.pipe(texts)`` (pipeline.py)."""
    from .inference.pipeline import load as load_pipeline

    return load_pipeline(model, *args, **kwargs)
