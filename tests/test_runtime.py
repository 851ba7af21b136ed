import pytest

from globalpointer.errors import ConfigError
from globalpointer.runtime import choose_device, cpu_thread_count
from globalpointer.training.step import amp_dtype, step_seed


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


def test_mkl_takes_its_avx2_path_only_on_non_intel_cpus_with_avx2():
    from globalpointer.cpu_math import CpuInfo, choose_mkl_cpu_type, configure_mkl

    amd = CpuInfo("AuthenticAMD", "AMD EPYC", {"avx", "avx2", "fma"})
    assert choose_mkl_cpu_type(amd, {}).value == "5"
    assert choose_mkl_cpu_type(CpuInfo("GenuineIntel", "Xeon", {"avx2", "fma"}), {}).value is None
    assert choose_mkl_cpu_type(CpuInfo("AuthenticAMD", "Opteron", {"avx", "sse4_2"}), {}).value is None
    assert choose_mkl_cpu_type(CpuInfo("HygonGenuine", "Hygon", {"avx2", "fma"}), {}).value == "5"
    assert choose_mkl_cpu_type(amd, {"MKL_DEBUG_CPU_TYPE": "4"}).value is None  # the user's value stays
    assert choose_mkl_cpu_type(amd, {"GLOBALPOINTER_MKL_DISPATCH": "0"}).value is None
    environ = {}
    line = configure_mkl(environ, amd)
    assert environ["MKL_DEBUG_CPU_TYPE"] == "5" and "AMD EPYC (AuthenticAMD; avx2)" in line
    # a service's worker process inherits the variable: it was set by the package, not the user
    worker = configure_mkl(dict(environ), amd)
    assert "as set by the user" not in worker and "MKL_DEBUG_CPU_TYPE=5: MKL's AVX2 kernels" in worker
    assert "as set by the user" in configure_mkl({"MKL_DEBUG_CPU_TYPE": "5"}, amd)
    environ = {"GLOBALPOINTER_MKL_DISPATCH": "0"}
    configure_mkl(environ, amd)
    assert "MKL_DEBUG_CPU_TYPE" not in environ


def test_cpu_info_is_read_from_the_first_processor(tmp_path):
    from globalpointer.cpu_math import read_cpu_info

    path = tmp_path / "cpuinfo"
    path.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\n"
                    "flags\t\t: fpu avx avx2 fma avx512f\n\nprocessor\t: 1\nvendor_id\t: Other\n")
    info = read_cpu_info(str(path))
    assert info == ("AuthenticAMD", "AMD EPYC 9R14", {"fpu", "avx", "avx2", "fma", "avx512f"})
    assert read_cpu_info(str(tmp_path / "missing")).vendor == ""


@pytest.mark.slow  # a fresh interpreter
def test_import_sets_the_mkl_path_before_paddle_runs():
    """In a fresh interpreter, as a library user would: `import globalpointer` decides for this host."""
    import os
    import subprocess
    import sys

    from globalpointer.cpu_math import choose_mkl_cpu_type, read_cpu_info

    environ = {k: v for k, v in os.environ.items() if k not in ("MKL_DEBUG_CPU_TYPE", "GLOBALPOINTER_MKL_DISPATCH")}
    code = "import os, globalpointer; print(os.environ.get('MKL_DEBUG_CPU_TYPE'))"
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(choose_mkl_cpu_type(read_cpu_info(), environ).value)


FLUSH_CHECK = """
import threading, time
import numpy as np
import paddle
import globalpointer
from globalpointer.runtime import setup_runtime
subnormal = np.float32(1e-39)  # below float32's smallest normal, 1.18e-38
before = float(subnormal * np.float32(1.0))
setup_runtime("cpu")
after, in_thread = float(subnormal * np.float32(1.0)), []
thread = threading.Thread(target=lambda: in_thread.append(float(subnormal * np.float32(1.0))))
thread.start(); thread.join()
x, g = paddle.randn([256, 512]), paddle.full([256, 1024], 1e-39)
product = paddle.matmul(x, g, transpose_x=True)  # on Paddle's math threads
print(before, after, in_thread[0], float(product.abs().max()))
"""


@pytest.mark.slow  # a fresh interpreter each
@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="the switch exists on x86-64 only")
@pytest.mark.parametrize("switch", ["1", "0"])
def test_setup_runtime_flushes_subnormal_floats_unless_told_not_to(switch):
    """In a fresh interpreter (the switch is per thread and stays on): after setup_runtime a
    subnormal reads as zero in this thread, in threads it starts and in Paddle's matmul."""
    import os
    import subprocess
    import sys

    environ = dict(os.environ, GLOBALPOINTER_FLUSH_DENORMALS=switch)
    out = subprocess.run([sys.executable, "-c", FLUSH_CHECK], env=environ, capture_output=True, text=True, check=True)
    before, after, in_thread, product = map(float, out.stdout.split())
    assert before == pytest.approx(1e-39, rel=1e-3)
    if switch == "1":
        assert after == in_thread == product == 0.0
    else:
        assert after == in_thread == pytest.approx(1e-39, rel=1e-3) and product > 0


@pytest.mark.parametrize("capability, fits", [((6, 1), True), ((6, 0), False), ((7, 5), True), ((8, 6), True),
                                              ((8, 9), True), ((9, 0), False), ((10, 0), False), ((12, 0), False)])
def test_pypis_gpu_build_is_known_to_run_only_where_its_kernels_do(capability, fits):
    from globalpointer.runtime import gpu_mismatch

    problem = gpu_mismatch("NVIDIA H200", capability, "2.6.2")
    assert (problem == "") == fits
    if not fits:
        assert problem.startswith(f"NVIDIA H200 (compute capability {capability[0]}.{capability[1]}): Paddle 2.6.2 "
                                  f"has kernels for compute capabilities 6.1, 7.0, 7.5, 8.0, 8.6 only")
        assert "install Paddle 3.3 built for this GPU from Paddle's own index" in problem
    assert gpu_mismatch("any", capability, "3.3.1") == ""  # its list is not known: the first operation tells


def test_a_gpu_the_build_cannot_drive_stops_before_any_work(monkeypatch):
    import paddle

    from globalpointer.errors import ConfigError
    from globalpointer.runtime import check_gpu

    monkeypatch.setattr(paddle.device.cuda, "get_device_name", lambda index: "NVIDIA H200")
    monkeypatch.setattr(paddle.device.cuda, "get_device_capability", lambda index: (9, 0))
    monkeypatch.setattr(paddle, "__version__", "2.6.2")
    with pytest.raises(ConfigError, match=r"NVIDIA H200 \(compute capability 9.0\): Paddle 2.6.2 has kernels"):
        check_gpu(0)

    def no_kernel(*args, **kwargs):
        raise RuntimeError("(PreconditionNotMet) ...\n  [Hint: 'cudaErrorNoKernelImageForDevice'. This indicates that "
                           "there is no kernel image available suitable for the device.] (at gpu_info.cc:123)")

    monkeypatch.setattr(paddle, "__version__", "3.3.1")
    monkeypatch.setattr(paddle, "ones", no_kernel)
    with pytest.raises(ConfigError, match=r"NVIDIA H200 \(compute capability 9.0\): Paddle 3.3.1 cannot run on it "
                                          r"\(\[Hint: 'cudaErrorNoKernelImageForDevice'.*; install Paddle 3.3"):
        check_gpu(0)
