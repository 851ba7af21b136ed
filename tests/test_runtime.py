import pytest

from globalpointer.errors import ConfigError
from globalpointer.runtime import choose_device, cpu_thread_count
from globalpointer.training import amp_dtype, step_seed


def test_auto_device_falls_back_to_cpu_and_gpu_is_checked():
    assert choose_device("auto", has_gpu=False) == "cpu"
    assert choose_device("auto", local_rank=1, has_gpu=True) == "gpu:1"
    assert choose_device("cpu", has_gpu=True) == "cpu"
    assert choose_device("gpu", local_rank=0, has_gpu=True) == "gpu:0"
    with pytest.raises(ConfigError, match="device: gpu, but"):
        choose_device("gpu", has_gpu=False)
    assert choose_device("auto") in ("cpu", "gpu:0")  # this machine, whatever it has: never raises


def test_amp_only_on_gpu():
    assert amp_dtype("none", True) is None
    assert amp_dtype("float16", True) == "float16" and amp_dtype("bfloat16", True) == "bfloat16"
    assert amp_dtype("float16", False) is None


def test_cpu_threads_shared_between_processes():
    assert cpu_thread_count(3, 2) == 3
    assert cpu_thread_count(0, 1) >= 1
    assert cpu_thread_count(0, 1000) == 1


def test_step_seeds_differ_per_step_and_repeat():
    assert step_seed(42, 10) == step_seed(42, 10) != step_seed(42, 11)
    assert 0 <= step_seed(2 ** 40, 5) < 2 ** 31
