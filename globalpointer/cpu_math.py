"""Which code path the CPU math library takes, and how it treats subnormal floats.

Paddle's CPU wheels ship Intel MKL, which picks its kernels by CPU vendor: on an AMD (or other
non-Intel) CPU it takes a generic SSE path and runs float32 GEMM at about a third of the machine's
rate (measured on AMD EPYC: 34-38 GFLOP/s against 78-103 with the AVX2 path, docs/lab/PERFORMANCE.md).
``MKL_DEBUG_CPU_TYPE=5`` makes the MKL build Paddle ships take its AVX2 kernels. It must be in the
environment before the first Paddle kernel runs, so ``import globalpointer`` sets it; a user's own
value is kept, and ``GLOBALPOINTER_MKL_DISPATCH=0`` turns this off.

Subnormal floats (below 1.2e-38 in float32) turn up in training's gradients, and on Intel CPUs MKL
multiplies them about 100 times slower than normal ones (a [512, 768] x [768, 2048] matmul: 990 ms
against 5.8 ms with normal inputs, docs/lab/PERFORMANCE.md).  ``flush_denormals`` makes the CPU read and
write them as zero, as PyTorch's ``set_flush_denormal`` and TensorFlow's kernels do;
``GLOBALPOINTER_FLUSH_DENORMALS=0`` turns this off.
"""
import ctypes
import ctypes.util
import os
import platform
import sys
import warnings
from typing import Dict, NamedTuple, Optional, Set


class CpuInfo(NamedTuple):
    vendor: str  # "GenuineIntel", "AuthenticAMD", ... ("" where unknown)
    model: str
    flags: Set[str]

    def describe(self) -> str:
        simd = [flag for flag in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if flag in self.flags]
        return f"{self.model or 'unknown CPU'} ({self.vendor or 'unknown vendor'}; {', '.join(simd) or 'no AVX2'})"


def read_cpu_info(path: str = "/proc/cpuinfo") -> CpuInfo:
    fields: Dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    break  # the first processor is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return CpuInfo(fields.get("vendor_id", ""), fields.get("model name", ""), set(fields.get("flags", "").split()))


def int8_kernels(cpu: Optional[CpuInfo] = None) -> str:
    """The integer dot products INT8 inference runs on this CPU: ``vnni`` (AVX-512 VNNI, AVX-VNNI or
    AMX: 8-bit products summed in 32 bits), ``avx2`` (x86 without them: the products are summed in
    pairs into 16-bit lanes that saturate), or the machine's architecture elsewhere (``aarch64``...)."""
    cpu = cpu or read_cpu_info()
    if cpu.flags & {"avx512_vnni", "avx_vnni", "amx_int8"}:
        return "vnni"
    if "avx2" in cpu.flags:
        return "avx2"
    return platform.machine().lower() or "unknown"


SET_BY_US = "GLOBALPOINTER_SET_MKL_DEBUG_CPU_TYPE"  # says which MKL_DEBUG_CPU_TYPE this package set, not the user


class Decision(NamedTuple):
    value: Optional[str]  # what MKL_DEBUG_CPU_TYPE should be set to, None: leave it
    reason: str


def choose_mkl_cpu_type(cpu: CpuInfo, environ) -> Decision:
    """What to do, from the CPU and the environment alone (no side effects, so it can be tested)."""
    if environ.get("GLOBALPOINTER_MKL_DISPATCH", "1") == "0":
        return Decision(None, "left to MKL (GLOBALPOINTER_MKL_DISPATCH=0)")
    if "MKL_DEBUG_CPU_TYPE" in environ:
        if environ.get(SET_BY_US) == environ["MKL_DEBUG_CPU_TYPE"]:  # a process this package started inherits it
            return Decision(None, f"MKL_DEBUG_CPU_TYPE={environ['MKL_DEBUG_CPU_TYPE']}: MKL's AVX2 kernels on a "
                                  f"non-Intel CPU")
        return Decision(None, f"MKL_DEBUG_CPU_TYPE={environ['MKL_DEBUG_CPU_TYPE']} as set by the user")
    if cpu.vendor == "GenuineIntel":
        return Decision(None, "Intel CPU: MKL picks its best path itself")
    if "avx2" not in cpu.flags or "fma" not in cpu.flags:
        return Decision(None, "no AVX2/FMA: MKL's generic path is the right one")
    return Decision("5", "MKL_DEBUG_CPU_TYPE=5: MKL's AVX2 kernels on a non-Intel CPU")


CHOSEN = ""  # what configure_mkl chose when the package was imported: the line the runtime logs


def configure_mkl(environ=os.environ, cpu: Optional[CpuInfo] = None) -> str:
    """Apply the decision to ``environ``; returns the line the runtime logs."""
    cpu = cpu or read_cpu_info()
    decision = choose_mkl_cpu_type(cpu, environ)
    if decision.value is not None:
        environ["MKL_DEBUG_CPU_TYPE"] = environ[SET_BY_US] = decision.value
    return f"CPU math: {cpu.describe()}: {decision.reason}"


class _Fenv(ctypes.Structure):
    """glibc's ``fenv_t`` on x86-64: the x87 state, then the SSE control and status register."""
    _fields_ = [("x87", ctypes.c_byte * 28), ("mxcsr", ctypes.c_uint32)]


MXCSR_FLUSH_TO_ZERO, MXCSR_DENORMALS_ARE_ZERO = 0x8000, 0x0040


def flush_denormals(environ=os.environ) -> str:
    """Set flush-to-zero and denormals-are-zero in this thread's SSE control register; threads it
    starts inherit them, and Intel OpenMP (Paddle's MKL) copies them to its workers at every
    parallel region.  Returns the line the runtime logs."""
    if environ.get("GLOBALPOINTER_FLUSH_DENORMALS", "1") == "0":
        return "subnormal floats kept (GLOBALPOINTER_FLUSH_DENORMALS=0)"
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"subnormal floats kept (no flush-to-zero switch here for {sys.platform}/{platform.machine()})"
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    environment = _Fenv()
    if libm.fegetenv(ctypes.byref(environment)) != 0:
        return "subnormal floats kept (fegetenv failed)"
    environment.mxcsr |= MXCSR_FLUSH_TO_ZERO | MXCSR_DENORMALS_ARE_ZERO
    if libm.fesetenv(ctypes.byref(environment)) != 0:
        return "subnormal floats kept (fesetenv failed)"
    # numpy.finfo, which libraries call as they are imported, now finds no subnormals, as intended
    warnings.filterwarnings("ignore", message="The value of the smallest subnormal", category=UserWarning)
    return "subnormal floats flushed to zero"
