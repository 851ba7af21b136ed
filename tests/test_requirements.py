import os
from conftest import ROOT



def pins(name):
    lines = open(os.path.join(ROOT, name)).read().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def test_gpu_requirements_follow_the_cpu_ones():
    cpu, gpu = pins("requirements.txt"), pins("requirements-gpu.txt")
    assert [p.replace("paddlepaddle==", "paddlepaddle-gpu==") for p in cpu] == gpu


def test_every_requirement_is_pinned():
    for name in ("requirements.txt", "requirements-gpu.txt", "requirements-models.txt"):
        assert all("==" in p for p in pins(name)), name
