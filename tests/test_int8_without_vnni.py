"""INT8 on an x86 CPU whose integer kernels sum products in saturating 16-bit lanes: AVX2 without VNNI,
where the earlier full-range weights lost 47 F1 points.  The shipped scheme (``export.INT8_SCHEME``) must
keep the model's float32 dev F1 within 1 point there.  A host of that kind checks it on itself, in
test_package.py (the README quickstart's ``export --quantize int8 --verify``, the kernels it records those of
this host), and skips this file; a host with VNNI checks it here, under QEMU's user mode as AMD's EPYC-Rome,
whose CPUID makes ONNX Runtime take the AVX2 kernels (about 8 minutes of one core: emulation is 1,000 times
slower than the host).  The model is the README's quickstart trained for one epoch
(``quickstart_first_epoch``): the same encoder, head and quantization as the quickstart's, trained while
test_package.py trains the whole quickstart."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from globalpointer.cpu_math import int8_kernels
from helpers import ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(int8_kernels() == "avx2", reason="this host is an AVX2 CPU without VNNI: "
                                 "test_package.py's INT8 --verify checks it on the host")]


def test_int8_keeps_float32s_f1_on_an_avx2_cpu_without_vnni(quickstart_first_epoch):
    from int8_cpus import SCHEMES
    from globalpointer.deploy.export import INT8_SCHEME

    if shutil.which("qemu-x86_64") is None:
        pytest.skip("qemu-x86_64 (Debian's qemu-user) is not installed: INT8 on an AVX2 CPU without VNNI not checked")
    [shipped] = [name for name, (backend, scheme) in SCHEMES.items() if scheme == INT8_SCHEME]
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "int8_cpus.py"), "--model",
                           str(quickstart_first_epoch / "run" / "best"), "--data",
                           os.path.join(ROOT, "data", "cluener-sample", "dev.json"), "--schemes", shipped,
                           "--repeats", "1", "--emulate", "EPYC-Rome"], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    checked = rows[-1]
    assert checked["host"] == "qemu-x86_64 -cpu EPYC-Rome", rows
    assert abs(checked["f1"] - rows[0]["float32_f1"]) <= 1.0 and rows[0]["float32_f1"] > 30, rows
