"""One error boundary for every command (cli.run_command): what users can fix is one line and exit 2,
never a traceback (docs/RELIABILITY.md, attack 4, case 15)."""
import errno
import os
import resource
import subprocess
import sys

import pytest

from globalpointer.cli import COMMANDS, main, predict_main, run_command
from conftest import ROOT
from synthetic import tiny_config


@pytest.mark.parametrize("fault, message", [
    (MemoryError("(ResourceExhausted) Fail to alloc memory of 4398046511104 size, error code is 12.\n  [Hint: ...]"),
     "error: out of memory ((ResourceExhausted) Fail to alloc memory of 4398046511104 size, error code is 12.); "),
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


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_out_of_memory_says_what_to_lower_for_that_command(command, capsys):
    """The line advised lowering --batch-size for commands that have none (data fetch of a zip bomb)."""
    from globalpointer.cli import MEMORY_ADVICE

    def failing(argv, prog):
        raise MemoryError()

    for prog in (f"globalpointer {command}", f"{command}.py"):
        assert run_command(failing, [], prog) == 2
        err = capsys.readouterr().err
        assert err == f"error: out of memory (no memory left); {MEMORY_ADVICE.get(command, 'run it on a machine with more memory')}\n"
    assert ("--batch-size" in MEMORY_ADVICE.get(command, "")) == (command in ("evaluate", "predict", "calibrate"))


def test_training_into_a_folder_below_a_file_is_one_line(tmp_path, capsys):
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


def run_limited(args, tmp_path, file_size_limit):
    """A command in a child process whose files may not grow past ``file_size_limit`` bytes (ulimit -f)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, preexec_fn=limit, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["predict", "export"])
def test_a_full_disk_is_one_line(trained, tmp_path, command):
    model = str(trained / "run" / "best")
    if command == "predict":
        (tmp_path / "in.txt").write_text("张三在北京大学读书\n" * 3000, encoding="utf-8")
        args = [os.path.join(ROOT, "predict.py"), "--model", model, "--input", "in.txt", "--output", "out.jsonl"]
    else:
        args = ["-m", "globalpointer", "export", "--model", model, "--output", "export"]
    done = run_limited(args, tmp_path, 20_000)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "File too large; free space" in done.stderr
    assert not os.path.exists(tmp_path / "out.jsonl") and not os.path.exists(tmp_path / "export")
    assert [name for name in os.listdir(tmp_path) if "partial" in name and command == "export"] == []


def test_a_read_only_location_is_one_line(trained, tmp_path, monkeypatch, capsys):
    import errno

    def read_only(*args):
        raise OSError(errno.EROFS, "Read-only file system", args[-1])

    monkeypatch.setattr(os, "replace", read_only)
    (tmp_path / "in.txt").write_text("张三\n", encoding="utf-8")
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(tmp_path / "in.txt"),
                         "--output", str(tmp_path / "out.jsonl")]) == 2
    assert "Read-only file system; choose a location that can be written" in capsys.readouterr().err


def test_predict_refuses_a_file_in_another_encoding_in_one_line(trained, tmp_path, capsys):
    source = tmp_path / "pool.txt"
    source.write_bytes("Beijing\n".encode() + "李四去了广州\n".encode("gbk"))
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(source),
                         "--output", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {source}:2: not UTF-8 at byte 0 of the line: the file must be UTF-8; convert it "
                   f"(iconv -f GBK -t UTF-8, or from the encoding it is in)"], err
    assert not (tmp_path / "out.jsonl").exists()
