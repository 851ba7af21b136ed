import atexit
import os
import shutil
import tempfile

from helpers import ROOT

# programs compiled from the tests' checkpoints stay out of the user's cache (subprocesses inherit it)
os.environ["GLOBALPOINTER_CACHE"] = tempfile.mkdtemp(prefix="globalpointer-test-cache-")
# a few hundred MB a session: leaving it behind fills the disk of a machine that runs the suite often
atexit.register(shutil.rmtree, os.environ["GLOBALPOINTER_CACHE"], ignore_errors=True)
# Paddle's OpenMP threads (Intel's libiomp5) wait for work by spinning 200 ms after each parallel region: with
# two test workers, each process's threads spin on the core the other needs (the quickstart's first epoch
# beside a busy core, measured in turns: 148 and 146 CPU-seconds spinning, 99 and 95 without; 121 and 119 s of
# wall clock against 100 and 95); which thread computes what, and so every result, is the same
os.environ.setdefault("KMP_BLOCKTIME", "0")
# the folder holding the public sets (DIR/<set>/): $GLOBALPOINTER_DATA, else ../shared/data
SHARED_DATA = os.environ.get("GLOBALPOINTER_DATA") or os.path.join(os.path.dirname(ROOT), "shared", "data")

import contextlib
import fcntl
from typing import Callable

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


def session_root(tmp_path_factory):
    """A folder every process of this test session shares: the session's own temporary folder, or with
    pytest-xdist (``-n 2``) the one that holds each worker's."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory, name: str, build: Callable[[object], None]):
    """``session_root``/``name``, made by ``build(folder)`` once per test session: the first process to
    ask builds it under a lock, the others (xdist workers) wait and read it.  A build that failed is
    tried again by the next to ask, which fails the same way, each test saying so."""
    import pathlib

    folder = pathlib.Path(session_root(tmp_path_factory)) / name
    done = folder.with_name(name + ".built")
    with open(folder.with_name(name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                if folder.exists():
                    shutil.rmtree(folder)
                folder.mkdir()
                build(folder)
                done.touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return folder


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """A tiny model trained once per test session on the synthetic task (tests/synthetic.py); its directory."""
    from globalpointer.cli import train_main
    from synthetic import tiny_config

    def build(folder):
        assert train_main(["--config", tiny_config(folder)]) == 0

    return built_once(tmp_path_factory, "e2e", build)


@pytest.fixture(scope="session")
def relation_run(tmp_path_factory):
    """A tiny relation model trained once per test session on synthetic.relation_lines, its minimum scores
    fitted on its dev file (train.calibrate shared); the folder holding it (run/best), its data files and
    ``unfitted``, the same model without thresholds.json."""
    from globalpointer.cli import train_main
    from synthetic import relation_config

    def build(folder):
        assert train_main(["--config", relation_config(folder, test_lines=40)]) == 0
        shutil.copytree(folder / "run" / "best", folder / "unfitted")
        with contextlib.suppress(FileNotFoundError):
            (folder / "unfitted" / "thresholds.json").unlink()

    return built_once(tmp_path_factory, "relations", build)


@pytest.fixture(scope="session")
def event_run(tmp_path_factory):
    """A tiny event model trained once per test session on synthetic.event_lines, its minimum scores
    fitted on its dev file (train.calibrate shared); the folder holding it (run/best), its data files and
    ``unfitted``, the same model without thresholds.json."""
    from globalpointer.cli import train_main
    from synthetic import event_config

    def build(folder):
        assert train_main(["--config", event_config(folder)]) == 0
        shutil.copytree(folder / "run" / "best", folder / "unfitted")
        (folder / "unfitted" / "thresholds.json").unlink()

    return built_once(tmp_path_factory, "events", build)


@pytest.fixture(scope="session")
def quickstart_first_epoch(tmp_path_factory):
    """The README's quickstart trained for one epoch (train.epochs=1), once per test session: the folder
    holding its run (run/best).  What the builds must agree on (test_gpu_build.py) and what INT8 on a CPU
    without VNNI is checked on (test_int8_without_vnni.py); the whole quickstart trains in test_package.py."""
    from globalpointer.cli import train_main

    def build(folder):
        assert train_main(["--config", os.path.join(ROOT, "configs", "quickstart.yaml"), "--set", "train.epochs=1",
                           "--set", "train.min_steps=0", "--set", f"output_dir={folder / 'run'}"]) == 0

    return built_once(tmp_path_factory, "quickstart-first-epoch", build)


# The longest files first (docs/performance.md#the-test-suite): with pytest-xdist (-n 2 --dist loadfile
# --no-loadscope-reorder, as .ci/run runs the suite; xdist otherwise puts the files with most tests first)
# each worker starts on one at once and the other files fill in beside them, so that neither is left to run
# alone at the end
LONGEST_FIRST = ("test_package.py", "test_int8_without_vnni.py")


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: LONGEST_FIRST.index(item.path.name) if item.path.name in LONGEST_FIRST
               else len(LONGEST_FIRST))
