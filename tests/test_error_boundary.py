"""One error boundary for every command (cli.run_command): what users can fix is one line and exit 2,
never a traceback (docs/RELIABILITY.md, attack 4, case 15)."""
import errno
import os

import pytest

from globalpointer.cli import COMMANDS, main, run_command


@pytest.mark.parametrize("fault, message", [
    (MemoryError("(ResourceExhausted) Fail to alloc memory of 4398046511104 size, error code is 12.\n  [Hint: ...]"),
     "error: out of memory ((ResourceExhausted) Fail to alloc memory of 4398046511104 size, error code is 12.); "
     "predict or train fewer rows at a time"),
    (MemoryError(), "error: out of memory (no memory left)"),
    (NotADirectoryError(errno.ENOTDIR, "Not a directory", "runs/a-file/run"),
     "error: runs/a-file/run: Not a directory; a part of the path is a file, not a folder"),
    (OSError(errno.ENOSPC, "No space left on device", "out.jsonl"), "error: out.jsonl: No space left on device; free"),
])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_reports_resource_faults_in_one_line(command, fault, message, capsys):
    def failing(argv, prog):
        raise fault

    assert run_command(failing, [], command) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1 and "Traceback" not in err, err


def test_training_into_a_folder_below_a_file_is_one_line(tmp_path, capsys):
    from synthetic import tiny_config

    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    code = main(["train", "--config", tiny_config(tmp_path), "--set", f"output_dir={blocker / 'run'}"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and err.strip().splitlines()[-1].startswith("error:"), err[-2000:]
    assert blocker.read_text() == "mine"


HEADER = "step,epochs_done,train_loss,precision,recall,f1,f1_without_average,seconds,windows_per_second\n"
GOOD = "10,1,0.5,0.4,0.3,0.35,,12.0,30.1\n"


@pytest.mark.parametrize("content, message", [
    (HEADER + GOOD + "garbage\n", r"metrics.csv:3: step 'garbage' is not a whole number"),
    (HEADER + GOOD + "20,2,nan?,0.4,0.3,0.35,,12.0,30.1\n", r"metrics.csv:3: train_loss 'nan\?' is not a number"),
    (HEADER + "20,2,0.4,0.4,0.3,0.35,,12.0,30.1,extra\n", r"metrics.csv:2: more values than the header has columns"),
    (HEADER, r"metrics.csv has no evaluations yet"),
    (b"\xff\xfe" + HEADER.encode(), r"metrics.csv: not UTF-8 text"),
])
def test_plot_reads_metrics_as_resume_does(tmp_path, capsys, content, message):
    import re

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").write_bytes(content if isinstance(content, bytes) else content.encode())
    assert main(["plot", str(run)]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and err.count("\n") == 1, err
    assert not os.path.exists(run / "metrics.png")


def test_plot_draws_a_good_file(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").write_text(HEADER + GOOD + "20,2,0.3,0.5,0.4,0.45,,24.0,30.5\n")
    assert main(["plot", str(run)]) == 0
    assert (run / "metrics.png").read_bytes().startswith(b"\x89PNG")
