"""The commands' flags (each means one key, the same key in every command that has it) and how they stop."""
import importlib

import pytest

from globalpointer.cli import main
from globalpointer.config import override_key


@pytest.mark.parametrize("command, module, function", [
    ("serve", "globalpointer.deploy.serve", "run_service"),
    ("label-studio-backend", "globalpointer.deploy.label_studio_backend", "run_backend")])
def test_a_service_takes_rows_per_pass_and_no_batch_size(command, module, function, monkeypatch, tmp_path, capsys):
    """A service's forward passes are serve.rows_per_pass (requests take turns pass by pass); the
    --batch-size of evaluate and predict (inference.batch_size) would set nothing a service reads."""
    started = []
    monkeypatch.setattr(importlib.import_module(module), function, lambda *args: started.append(args))
    model = tmp_path / "best"
    monkeypatch.chdir(tmp_path)
    assert main([command, "--model", str(model), "--rows-per-pass", "4"]) == 0
    assert ("serve.rows_per_pass", 4) in started[0][1]
    assert not any(override_key(item) == "inference.batch_size" for item in started[0][1])
    with pytest.raises(SystemExit) as stopped:
        main([command, "--model", str(model), "--batch-size", "4"])
    assert stopped.value.code == 2 and "--batch-size" in capsys.readouterr().err


@pytest.mark.parametrize("fault, message", [(MemoryError(), "out of memory loading the model in a worker process"),
                                            (None, "error: checkpoint directory not found")])
def test_a_worker_that_cannot_load_says_why_in_one_line(fault, message, monkeypatch, tmp_path, capsys):
    """serve's worker processes stop the supervisor with one line, not a trace, whatever stops the load."""
    import json

    from uvicorn.config import STARTUP_FAILURE

    from globalpointer.deploy import serve
    from globalpointer.inference import pipeline

    if fault is not None:
        monkeypatch.setattr(pipeline, "load", lambda **_: (_ for _ in ()).throw(fault))
    monkeypatch.setenv(serve.WORKER_ARGS, json.dumps({"model": str(tmp_path / "missing"), "overrides": [],
                                                      "backend": None}))
    with pytest.raises(SystemExit) as stopped:
        serve.worker_app()
    err = capsys.readouterr().err
    assert stopped.value.code == STARTUP_FAILURE and message in err and "Traceback" not in err
