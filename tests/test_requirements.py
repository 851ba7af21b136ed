import os
from conftest import ROOT



def pins(name):
    lines = open(os.path.join(ROOT, name)).read().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def test_gpu_requirements_follow_the_cpu_ones():
    cpu, gpu = pins("requirements.txt"), pins("requirements-gpu.txt")
    assert [p.replace("paddlepaddle==", "paddlepaddle-gpu==") for p in cpu] == gpu


def test_pypis_gpu_build_requirements_follow_the_cpu_ones():
    """A ready file for PyPI's paddlepaddle-gpu 2.6.2 (what .ci/run installs), in step with requirements.txt."""
    cpu, gpu = pins("requirements.txt"), pins("requirements-gpu-pypi.txt")
    assert [p if not p.startswith("paddlepaddle==") else "paddlepaddle-gpu==2.6.2" for p in cpu] == gpu


def test_every_requirement_is_pinned():
    for name in ("requirements.txt", "requirements-gpu.txt", "requirements-gpu-pypi.txt", "requirements-models.txt", "requirements-engines.txt",
                 "requirements-openvino.txt"):
        assert all("==" in p for p in pins(name)), name


def test_the_optional_pins_are_inside_the_package_extras():
    import tomllib

    from packaging.requirements import Requirement

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        extras = tomllib.load(handle)["project"]["optional-dependencies"]
    for name, extra in (("requirements-engines.txt", ("ray", "spark")), ("requirements-openvino.txt", ("openvino",))):
        ranges = {req.name: req.specifier for group in extra for req in map(Requirement, extras[group])}
        for pin in map(Requirement, pins(name)):
            assert pin.name in ranges, (name, str(pin))
            assert ranges[pin.name].contains(next(iter(pin.specifier)).version), (name, str(pin))
