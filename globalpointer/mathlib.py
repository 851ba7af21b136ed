"""Which code path the CPU math library takes.

Paddle's CPU wheels ship Intel MKL, which picks its kernels by CPU vendor: on an AMD (or other
non-Intel) CPU it takes a generic SSE path and runs float32 GEMM at about a third of the machine's
rate (measured on AMD EPYC: 34-38 GFLOP/s against 78-103 with the AVX2 path, docs/PERFORMANCE.md).
``MKL_DEBUG_CPU_TYPE=5`` makes the MKL build Paddle ships take its AVX2 kernels. It must be in the
environment before the first Paddle kernel runs, so ``import globalpointer`` sets it; a user's own
value is kept, and ``GLOBALPOINTER_MKL_DISPATCH=0`` turns this off.
"""
import os
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


class Decision(NamedTuple):
    value: Optional[str]  # what MKL_DEBUG_CPU_TYPE should be set to, None: leave it
    reason: str


def choose_mkl_cpu_type(cpu: CpuInfo, environ) -> Decision:
    """What to do, from the CPU and the environment alone (no side effects, so it can be tested)."""
    if environ.get("GLOBALPOINTER_MKL_DISPATCH", "1") == "0":
        return Decision(None, "left to MKL (GLOBALPOINTER_MKL_DISPATCH=0)")
    if "MKL_DEBUG_CPU_TYPE" in environ:
        return Decision(None, f"MKL_DEBUG_CPU_TYPE={environ['MKL_DEBUG_CPU_TYPE']} as set by the user")
    if cpu.vendor == "GenuineIntel":
        return Decision(None, "Intel CPU: MKL picks its best path itself")
    if "avx2" not in cpu.flags or "fma" not in cpu.flags:
        return Decision(None, "no AVX2/FMA: MKL's generic path is the right one")
    return Decision("5", "MKL_DEBUG_CPU_TYPE=5: MKL's AVX2 kernels on a non-Intel CPU")


def configure_mkl(environ=os.environ, cpu: Optional[CpuInfo] = None) -> str:
    """Apply the decision to ``environ``; returns the line the runtime logs."""
    cpu = cpu or read_cpu_info()
    decision = choose_mkl_cpu_type(cpu, environ)
    if decision.value is not None:
        environ["MKL_DEBUG_CPU_TYPE"] = decision.value
    return f"CPU math: {cpu.describe()}: {decision.reason}"
