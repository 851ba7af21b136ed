"""Weights on disk: reading a weights file reads data, it never runs code.

The project writes safetensors (``save_state``): tensors by name, and the non-tensor entries of a
state (an optimizer's scheduler step, say) as JSON in the file's metadata.  Pickled files made
elsewhere (Paddle's ``.pdparams`` / ``.pdopt``, PyTorch's ``pytorch_model.bin``) are read by
``load_pickled_state``, whose unpickler builds arrays and plain containers only: a pickle naming any
other callable (``os.system``, a class of the author's) is refused, with that name in the message.
"""
import collections
import io
import json
import os
import pickle
import zipfile
from typing import Any, Dict

import numpy as np

from ..errors import CheckpointError
from ..files import atomic_output, parse_json

TREE_KEY = "globalpointer.tree"  # safetensors metadata: the state's structure and non-tensor values
TENSOR = "__tensor__"


# ---- safetensors -------------------------------------------------------------------------------

def _to_numpy(value):
    return value.numpy() if hasattr(value, "numpy") and not isinstance(value, np.ndarray) else value


def save_state(state: Dict[str, Any], path: str) -> None:
    """Write a (nested) state dict of tensors and JSON values to ``path``, atomically."""
    from safetensors.numpy import save

    tensors: Dict[str, np.ndarray] = {}

    def flatten(node, prefix):
        if isinstance(node, dict):
            return {str(key): flatten(value, f"{prefix}{key}/") for key, value in node.items()}
        array = _to_numpy(node)
        if isinstance(array, np.ndarray):
            name = prefix[:-1]
            tensors[name] = np.ascontiguousarray(array)
            return {TENSOR: name}
        return node  # numbers, strings, lists: JSON

    tree = flatten(state, "")
    with atomic_output(path, binary=True) as out:
        out.write(save(tensors, metadata={TREE_KEY: json.dumps(tree)}))


def load_state(path: str) -> Dict[str, Any]:
    """The state ``save_state`` wrote, tensors as numpy arrays."""
    from safetensors import SafetensorError
    from safetensors.numpy import safe_open

    try:
        with safe_open(path, framework="np") as handle:  # one opening: metadata and tensors
            metadata = handle.metadata() or {}
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(f"{path} is corrupted or unreadable ({error}); use another checkpoint or "
                              f"train again") from None
    if TREE_KEY not in metadata:  # a plain safetensors file (e.g. saved by another tool): flat names
        return tensors

    def unflatten(node):
        if isinstance(node, dict):
            if set(node) == {TENSOR}:
                return tensors[node[TENSOR]]
            return {key: unflatten(value) for key, value in node.items()}
        return node

    try:
        return unflatten(parse_json(metadata[TREE_KEY]))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise CheckpointError(f"{path}: its metadata does not describe its tensors ({error})") from None


# ---- pickled files, read as data ---------------------------------------------------------------

_TORCH_STORAGES = {"FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
                   "BFloat16Storage": "bfloat16", "LongStorage": np.int64, "IntStorage": np.int32,
                   "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_}


class _TorchStorageType:
    def __init__(self, name: str):
        self.dtype = _TORCH_STORAGES[name]


def _rebuild_tensor(storage, offset, size, stride, *unused):
    count = int(np.prod(size)) if len(size) else 1
    flat = storage[offset:offset + count]
    if len(size) > 1 and stride and stride[0] == 1 and stride[-1] > 1:  # column-major
        return flat.reshape(size, order="F")
    return flat.reshape(size)


def _rebuild_parameter(data, *unused):
    return data


class _DataUnpickler(pickle.Unpickler):
    """Builds numpy arrays, PyTorch tensors (as arrays) and containers; refuses every other global."""

    ALLOWED = {("collections", "OrderedDict"): collections.OrderedDict,
               ("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
               ("numpy.core.multiarray", "_reconstruct"): np.core.multiarray._reconstruct,
               ("numpy._core.multiarray", "_reconstruct"): np.core.multiarray._reconstruct,
               ("numpy.core.multiarray", "scalar"): np.core.multiarray.scalar,
               ("numpy._core.multiarray", "scalar"): np.core.multiarray.scalar,
               ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
               ("torch._utils", "_rebuild_parameter"): _rebuild_parameter}

    def __init__(self, stream, path: str, storages=None):
        super().__init__(stream, encoding="latin1")
        self.path = path
        self.storages = storages

    def find_class(self, module, name):
        if (module, name) in self.ALLOWED:
            return self.ALLOWED[(module, name)]
        if module == "torch" and name in _TORCH_STORAGES:
            return _TorchStorageType(name)
        raise CheckpointError(f"{self.path}: refused to load: the pickle asks to call {module}.{name}, which a "
                              f"weights file never needs (a crafted file can run code this way); only arrays "
                              f"are read from pickled weights")

    def persistent_load(self, saved_id):
        if self.storages is None:
            raise CheckpointError(f"{self.path}: refused to load: unexpected persistent reference in the pickle")
        return self.storages(saved_id)


def _torch_zip_state(path: str):
    archive = zipfile.ZipFile(path)
    pickles = [name for name in archive.namelist() if name.endswith("/data.pkl")]
    if len(pickles) != 1:
        raise CheckpointError(f"{path}: not a PyTorch weights archive (no single data.pkl inside)")
    prefix = pickles[0][:-len("data.pkl")]
    loaded = {}

    def storage(saved_id):
        kind, storage_type, key, _location, count = saved_id
        if kind != "storage" or not isinstance(storage_type, _TorchStorageType):
            raise CheckpointError(f"{path}: refused to load: unexpected persistent reference {kind!r}")
        if key not in loaded:
            raw = archive.read(f"{prefix}data/{key}")
            if storage_type.dtype == "bfloat16":  # numpy has no bfloat16: widen to float32 exactly
                halves = np.frombuffer(raw, dtype=np.uint16)[:count]
                loaded[key] = (halves.astype(np.uint32) << 16).view(np.float32)
            else:
                loaded[key] = np.frombuffer(raw, dtype=storage_type.dtype)[:count]
        return loaded[key]

    with archive:
        return _DataUnpickler(io.BytesIO(archive.read(pickles[0])), path, storage).load()


def load_pickled_state(path: str) -> Dict[str, Any]:
    """A pickled state dict (Paddle or PyTorch format) whose tensors become numpy arrays."""
    try:
        if zipfile.is_zipfile(path):
            state = _torch_zip_state(path)
        else:
            with open(path, "rb") as handle:
                state = _DataUnpickler(handle, path).load()
    except CheckpointError:
        raise
    except Exception as error:  # truncated or foreign files fail inside pickle, zipfile or numpy
        raise CheckpointError(f"{path} is corrupted or unreadable ({type(error).__name__}); use another "
                              f"checkpoint or train again") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: expected a dictionary of named weights, got {type(state).__name__}")
    state.pop("StructuredToParameterName@@", None)  # paddle.save's bookkeeping, not a weight
    return state


def mismatches(expected: Dict[str, Any], state: Dict[str, Any], allow_unused: bool = False) -> list:
    """Why ``state`` cannot be loaded into a model whose state dict is ``expected``, one phrase per
    name: missing, another shape, or (unless ``allow_unused``) not in the model.  Empty: it fits."""
    problems = [f"{name} missing" for name in expected if name not in state]
    problems += [f"{name} is {list(state[name].shape)} in the file but {list(value.shape)} in the model"
                 for name, value in expected.items() if name in state and list(state[name].shape) != list(value.shape)]
    if not allow_unused:
        problems += [f"{name} is not a parameter of the model" for name in state if name not in expected]
    return problems


def summary(problems: list, shown: int = 5) -> str:
    more = f" (and {len(problems) - shown} more)" if len(problems) > shown else ""
    return "; ".join(problems[:shown]) + more


def read_state(path: str) -> Dict[str, Any]:
    """Any weights file by its name: ``.safetensors`` as such, anything else as a data-only pickle."""
    if not os.path.isfile(path):
        raise CheckpointError(f"weights file not found: {path}")
    return load_state(path) if path.endswith(".safetensors") else load_pickled_state(path)
