"""GlobalPointer named-entity recognition on PaddlePaddle: ``globalpointer.load(DIR)`` gives a
pipeline, ``ner(text)`` its entities (docs/api.md)."""
import logging as _logging
import warnings as _warnings
import zlib as _zlib  # noqa: F401  before Paddle: PyPI's paddlepaddle-gpu 2.6.2 bundles a zlib that, loaded first,
# breaks Python's own zlib module where that is a separate library
from typing import Optional as _Optional, Sequence as _Sequence

__version__ = "0.1.0"  # pyproject.toml's (a test keeps them equal)
__all__ = ["load", "__version__"]

# Noise that paddle prints on import and that no user can act on.
_warnings.filterwarnings("ignore", message="No ccache found")
_warnings.filterwarnings("ignore", message="Setuptools is replacing distutils")
# paddle.jit.save's static graph asks each tensor for a place it does not have; nothing to act on
_warnings.filterwarnings("ignore", message="Tensor do not have 'place' interface")
# the GPU build without a visible GPU, at every command: the runtime's log line says the CPU runs it, and why
_warnings.filterwarnings("ignore", message="You are using GPU version Paddle, but your CUDA device is not set properly")

# A library says what went wrong, not what it is doing: the Python API logs warnings only (PaddleNLP
# sets up the root logger at INFO); the commands log INFO (errors.setup_logging), and so does
# logging.getLogger("globalpointer").setLevel("INFO").
_logging.getLogger("globalpointer").setLevel(_logging.WARNING)

# Before any Paddle kernel runs: MKL's fast path on non-Intel CPUs (cpu_math.py says why).
from . import cpu_math as _cpu_math  # noqa: E402

_cpu_math.CHOSEN = _cpu_math.configure_mkl()  # the line the runtime logs


def load(model: str, overrides: _Optional[_Sequence[str]] = None, backend: _Optional[str] = None,
         window_batch_size: int = 0, **keyword_overrides):
    """A Pipeline over a checkpoint (``runs/x/best``) or an export: ``ner(text)`` gives the entities of
    one text, ``ner.pipe(texts)`` of many.  ``overrides``: config keys as ``--set`` takes them
    (``["model.min_score=0.8"]``), or as keywords (``model__min_score=0.8``); ``backend``: as
    ``inference.backend``; ``window_batch_size``: rows per forward pass (``inference.batch_size``).
    Paddle is imported here, not by ``import globalpointer`` (``inference.pipeline.load``)."""
    from .inference.pipeline import load as load_pipeline

    return load_pipeline(model, overrides, backend, window_batch_size, **keyword_overrides)


def __dir__():
    return sorted(__all__)
