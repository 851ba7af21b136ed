import atexit
import os
import shutil
import tempfile

from helpers import ROOT

# programs compiled from the tests' checkpoints stay out of the user's cache (subprocesses inherit it)
os.environ["GLOBALPOINTER_CACHE"] = tempfile.mkdtemp(prefix="globalpointer-test-cache-")
# a few hundred MB a session: leaving it behind fills the disk of a machine that runs the suite often
atexit.register(shutil.rmtree, os.environ["GLOBALPOINTER_CACHE"], ignore_errors=True)
# the folder holding the public sets (DIR/<set>/): $GLOBALPOINTER_DATA, else ../shared/data
SHARED_DATA = os.environ.get("GLOBALPOINTER_DATA") or os.path.join(os.path.dirname(ROOT), "shared", "data")

import pytest


@pytest.fixture
def shared_data():
    """A function: the folder of the public sets, each set it is asked for checked complete first (a
    partial copy skips the test, saying what is missing, rather than failing it)."""
    from globalpointer.data.public_sets import incomplete

    def sets(*wanted: str) -> str:
        """``wanted``: sets ("msra") or a set's files ("cmeee/CMeEE_dev.json")."""
        problems = [problem for item in wanted
                    for problem in incomplete(SHARED_DATA, item.split("/")[0], item.split("/")[1:])]
        if problems:
            pytest.skip(f"the public sets in {SHARED_DATA} ($GLOBALPOINTER_DATA) are incomplete: {'; '.join(problems)}")
        return SHARED_DATA

    return sets


@pytest.fixture
def checkpoint_copy(trained, tmp_path):
    """A copy of the trained run's best/ that a test may damage, recorded as a model of an earlier
    version (no sizes in checkpoint.json), so that the damage reaches the reader it is aimed at."""
    import shutil

    from helpers import unrecorded

    target = tmp_path / "best"
    shutil.copytree(trained / "run" / "best", target)
    return unrecorded(target)


@pytest.fixture
def run_copy(trained, tmp_path):
    """A copy of the trained run directory (best/, last/, metrics, reports) that a test may damage, its
    checkpoints recorded as of an earlier version (``checkpoint_copy``)."""
    import shutil

    from helpers import unrecorded

    target = tmp_path / "run"
    shutil.copytree(trained / "run", target)
    unrecorded(target / "best")
    unrecorded(target / "last")
    return target


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """A tiny model trained once on the synthetic task (tests/synthetic.py); its directory."""
    from globalpointer.cli import train_main
    from synthetic import tiny_config

    tmp_path = tmp_path_factory.mktemp("e2e")
    assert train_main(["--config", tiny_config(tmp_path)]) == 0
    return tmp_path


@pytest.fixture(scope="session")
def relation_run(tmp_path_factory):
    """A tiny relation model trained once on synthetic.relation_lines; the folder holding it (run/best) and
    its data files."""
    from globalpointer.cli import train_main
    from synthetic import relation_config

    tmp = tmp_path_factory.mktemp("relations")
    assert train_main(["--config", relation_config(tmp, test_lines=40)]) == 0
    return tmp
