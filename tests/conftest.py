import os
import tempfile

from helpers import ROOT

# programs compiled from the tests' checkpoints stay out of the user's cache (subprocesses inherit it)
os.environ["GLOBALPOINTER_CACHE"] = tempfile.mkdtemp(prefix="globalpointer-test-cache-")
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")

import pytest


@pytest.fixture
def shared_data():
    if not os.path.isdir(SHARED_DATA):
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


@pytest.fixture
def run_copy(trained, tmp_path):
    """A copy of the trained run directory (best/, last/, metrics, reports) that a test may damage."""
    import shutil

    target = tmp_path / "run"
    shutil.copytree(trained / "run", target)
    return target


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """A tiny model trained once on the synthetic task (tests/synthetic.py); its directory."""
    from globalpointer.cli import train_main
    from synthetic import tiny_config

    tmp_path = tmp_path_factory.mktemp("e2e")
    assert train_main(["--config", tiny_config(tmp_path)]) == 0
    return tmp_path

