"""The output policy (files.py) where outputs are not regular files, and when a command is stopped
with SIGTERM (docs/RELIABILITY.md, attack 4, cases 9 and 10)."""
import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

from globalpointer.cli import evaluate_main, predict_main
from globalpointer.files import (ABANDONED_AFTER_SECONDS, TERMINATION, Terminated, atomic_write_text,
                                 directory_being_written, partial_directory, remove_abandoned_partials,
                                 stop_on_sigterm, swap_in_directory, termination_deferred)
from globalpointer.inference.file_prediction import predict_file
from helpers import FakeExtractor, ROOT, snapshot


def source(tmp_path, lines=3):
    path = tmp_path / "in.txt"
    path.write_text("".join(f"Paris {i}\n" for i in range(lines)), encoding="utf-8")
    return path


def test_a_fifo_gets_the_lines_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(open(fifo, encoding="utf-8").read()))
    reader.start()
    predict_file(FakeExtractor(), str(source(tmp_path)), str(fifo))
    reader.join(timeout=30)
    assert len(received[0].splitlines()) == 3 and '"Paris 0"' in received[0]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and sorted(os.listdir(tmp_path)) == ["in.txt", "out.fifo"]


def test_an_open_file_named_through_proc_is_written_not_replaced(tmp_path):
    read_end, write_end = os.pipe()
    target = f"/proc/self/fd/{write_end}"
    received = []
    reader = threading.Thread(target=lambda: received.append(os.fdopen(read_end, encoding="utf-8").read()))
    reader.start()
    predict_file(FakeExtractor(), str(source(tmp_path)), target)
    os.close(write_end)
    reader.join(timeout=30)
    assert len(received[0].splitlines()) == 3
    # /dev/stdout is such a link: whatever it is open on, the link stays a link
    assert os.path.islink("/dev/stdout")


def test_dev_null_stays_a_device(tmp_path):
    before = os.stat("/dev/null")
    atomic_write_text("/dev/null", "nothing\n")
    predict_file(FakeExtractor(), str(source(tmp_path)), "/dev/null")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino and after.st_rdev == before.st_rdev
    assert not [name for name in os.listdir("/dev") if name.startswith("null.partial-")]


@pytest.mark.slow
def test_predict_to_dev_stdout_reaches_standard_output(trained, tmp_path):
    text = source(tmp_path)
    command = [sys.executable, "-m", "globalpointer", "predict", "--model", str(trained / "run" / "best"),
               "--input", str(text), "--output", "/dev/stdout"]
    piped = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0 and len(piped.stdout.splitlines()) == 3, piped.stderr[-2000:]
    with open(tmp_path / "redirected.jsonl", "w") as out:  # standard output sent to a file by the shell
        assert subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.PIPE, timeout=300).returncode == 0
    assert len((tmp_path / "redirected.jsonl").read_text().splitlines()) == 3 and os.path.islink("/dev/stdout")


def started_writing(process, folder, infix, seconds=120):
    """Whether ``process`` wrote into its partial output (a file or folder whose name has ``infix``)
    within ``seconds``: it is then mid-way, with something to lose."""
    deadline = time.time() + seconds
    while time.time() < deadline and process.poll() is None:
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if infix in name and (os.listdir(path) if os.path.isdir(path) else os.path.getsize(path)):
                return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
def test_sigterm_in_predict_stops_and_leaves_no_partial_output(trained, tmp_path):
    text = tmp_path / "in.txt"
    lines = [line for line in open(trained / "dev.jsonl", encoding="utf-8")]
    text.write_text("".join(lines * 60), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    process = subprocess.Popen([sys.executable, "-m", "globalpointer", "predict", "--model",
                                str(trained / "run" / "best"), "--input", str(text), "--output", str(out),
                                "--lines-per-chunk", "16", "--backend", "dynamic"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert started_writing(process, tmp_path, "out.jsonl.partial-")
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143 and "Traceback" not in stderr, stderr[-2000:]
    # a scheduler's stop: no one reads where a partial file is, so none is left (Ctrl-C keeps it, and says where)
    assert "out.jsonl was not written, and its partial output was removed" in stderr
    assert os.listdir(tmp_path) == ["in.txt"]


@pytest.mark.slow
def test_sigterm_in_export_leaves_no_partial_directory(trained, tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "globalpointer", "export", "--model",
                                str(trained / "run" / "best"), "--output", str(tmp_path / "export"), "--onnx"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert started_writing(process, tmp_path, "export.partial-")
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143 and "stopped: terminated (SIGTERM)" in stderr, stderr[-2000:]
    assert os.listdir(tmp_path) == []


@pytest.fixture
def sigterm_raises():
    """SIGTERM handled as the commands handle it (``stop_on_sigterm``), for this test only: the handler
    and the process-wide flag it sets are put back after."""
    saved = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    stop_on_sigterm()
    yield
    signal.signal(signal.SIGTERM, saved)
    TERMINATION.clear()


def wait_for_the_handler():
    """Python runs a signal's handler between bytecodes: a few of them after ``os.kill``."""
    for _ in range(1000):
        time.sleep(0.001)


def test_sigterm_inside_a_deferred_block_is_raised_when_the_block_ends(sigterm_raises):
    ran = []
    with pytest.raises(Terminated):
        with termination_deferred():
            with termination_deferred():  # nested: raised at the outermost block's end only
                os.kill(os.getpid(), signal.SIGTERM)
                wait_for_the_handler()
                ran.append("inner")
            ran.append("outer")
        ran.append("after")
    assert ran == ["inner", "outer"]
    with termination_deferred():  # the signal was raised once, and does not come back
        ran.append("again")
    assert ran[-1] == "again"
    with pytest.raises(Terminated):  # outside a block it lands where it arrives
        os.kill(os.getpid(), signal.SIGTERM)
        wait_for_the_handler()
        ran.append("not reached")
    assert ran[-1] == "again"


def test_sigterm_in_paddles_program_building_stops_the_export_after_it(sigterm_raises, tmp_path, monkeypatch):
    """A SIGTERM raised from inside to_static unwinds through Paddle's C++ and crashes the process
    (SIGSEGV or SIGABRT, no cleanup): save_static lets the program finish, then stops."""
    import paddle

    from globalpointer.deploy.export import save_static

    built = []

    def to_static(model, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        wait_for_the_handler()
        built.append("program")
        return model

    monkeypatch.setattr(paddle.jit, "to_static", to_static)
    monkeypatch.setattr(paddle.jit, "save", lambda static, path: built.append("saved"))
    with pytest.raises(Terminated):
        save_static(paddle.nn.Linear(2, 2), str(tmp_path))
    assert built == ["program", "saved"]


def test_a_directory_being_written_is_locked_and_removed_unless_moved_into_place(tmp_path):
    """The block's partial directory is locked while it writes, gone after a failure (or SIGTERM, a
    KeyboardInterrupt), and the published directory survives the block's cleanup."""
    target = tmp_path / "out"

    def locked(path):
        probe = os.open(path, os.O_RDONLY)  # another open file description: flock tells them apart
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(probe)

    for stop in (ValueError, KeyboardInterrupt):
        with pytest.raises(stop):
            with directory_being_written(str(target)) as partial:
                open(os.path.join(partial, "weights"), "w").close()
                assert locked(partial)
                raise stop
        assert os.listdir(tmp_path) == []
    with directory_being_written(str(target)) as partial:
        open(os.path.join(partial, "weights"), "w").close()
        swap_in_directory(partial, str(target))
    assert os.listdir(tmp_path) == ["out"] and os.listdir(target) == ["weights"]


def test_only_partial_directories_killed_writers_left_are_removed(tmp_path):
    """A partial directory old and unlocked is a killed writer's; a locked one (a live writer) or a
    recent one (created, not yet locked), and everything not partial, stay."""
    target = str(tmp_path / "entry")
    killed, live, recent = (partial_directory(target) for _ in range(3))
    (tmp_path / "entry.partial-file").write_text("not a directory")
    (tmp_path / "old-entry").mkdir()
    long_ago = time.time() - ABANDONED_AFTER_SECONDS - 60
    for path in (killed, live, str(tmp_path / "entry.partial-file"), str(tmp_path / "old-entry")):
        os.utime(path, (long_ago, long_ago))
    writer = os.open(live, os.O_RDONLY)
    fcntl.flock(writer, fcntl.LOCK_EX)
    try:
        assert remove_abandoned_partials(str(tmp_path)) == [killed]
    finally:
        os.close(writer)
    assert sorted(os.listdir(tmp_path)) == sorted(["entry.partial-file", "old-entry", os.path.basename(live),
                                                   os.path.basename(recent)])


def test_several_processes_refuse_an_output_they_cannot_put_part_files_beside(tmp_path):
    from globalpointer.errors import UserError
    from globalpointer.inference.file_prediction import predict_file_share

    with pytest.raises(UserError, match="nor a device or pipe"):
        predict_file_share(FakeExtractor(), str(source(tmp_path)), "/dev/null", "auto", 16, 0, 2, lambda: None)
    assert not [name for name in os.listdir("/dev") if name.startswith("null.part-")]


def test_predict_from_a_file_named_like_its_old_temporary(trained, tmp_path):
    source = tmp_path / "work.jsonl.partial"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in ["张三在北京", "李四"]), encoding="utf-8")
    before = source.read_bytes()
    output = tmp_path / "work.jsonl"
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(source), "--output", str(output)]) == 0
    assert source.read_bytes() == before and len(output.read_text().splitlines()) == 2


def test_predict_refuses_the_same_file_for_output_and_html(trained, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("张三\n", encoding="utf-8")
    out = tmp_path / "out"
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(source), "--output", str(out),
                         "--html", str(out)]) == 2
    assert "name the same file" in capsys.readouterr().err and not out.exists()


def test_predict_refuses_an_output_inside_the_model(run_copy, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("张三\n", encoding="utf-8")
    before = snapshot(run_copy / "best")
    assert predict_main(["--model", str(run_copy / "best"), "--input", str(source),
                         "--output", str(run_copy / "best" / "config.yaml")]) == 2
    assert "lies inside the input" in capsys.readouterr().err and snapshot(run_copy / "best") == before


def test_lines_json_cannot_read_get_an_error_field(trained, tmp_path):
    source = tmp_path / "in.jsonl"
    lines = ['{"text": "张三在北京"}', '{"text": "abc\\ud800def"}', '{"text": "a", "n": ' + "1" * 5001 + "}",
             "[" * 100000 + "]" * 100000, '{"text": "ok", "meta": "\\udfff"}', '{"text": "李四"}']
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / "out.jsonl"
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(source), "--output", str(output)]) == 1
    raw = output.read_bytes()
    raw.decode("utf-8")  # valid UTF-8 throughout
    rows = [json.loads(line) for line in raw.decode("utf-8").splitlines()]
    assert len(rows) == 6 and [("error" in row) for row in rows] == [False, True, True, True, True, False]
    assert "lone surrogate" in rows[1]["error"] and "4300 digits" in rows[2]["error"] and "nested" in rows[3]["error"]


def test_predict_refuses_to_write_over_its_input(trained, tmp_path, capsys):
    texts = tmp_path / "a.txt"
    texts.write_text("张三在北京\n李四\n", encoding="utf-8")
    original = texts.read_bytes()
    os.link(texts, tmp_path / "hard.txt")
    for output in (texts, tmp_path / "." / "a.txt", tmp_path / "hard.txt"):
        assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(texts),
                             "--output", str(output)]) == 2
    assert "is the input" in capsys.readouterr().err and texts.read_bytes() == original


def test_outputs_that_are_directories_fail_before_any_work(trained, tmp_path, capsys):
    model = str(trained / "run" / "best")
    texts = tmp_path / "a.txt"
    texts.write_text("张三\n", encoding="utf-8")
    assert predict_main(["--model", model, "--input", str(texts), "--output", str(tmp_path)]) == 2
    assert evaluate_main(["--model", model, "--data", str(trained / "dev.jsonl"), "--output", str(tmp_path)]) == 2
    assert evaluate_main(["--model", model, "--data", str(trained / "dev.jsonl"),
                          "--output", str(texts / "report.json")]) == 2  # under a file
    assert capsys.readouterr().err.count("is a directory") == 2


def test_ctrl_c_in_predict_says_where_the_partial_output_is(tmp_path):
    class InterruptedExtractor(FakeExtractor):
        def extract(self, texts):
            if self.calls:
                raise KeyboardInterrupt
            return super().extract(texts)

    source = tmp_path / "in.txt"
    source.write_text("Paris\nLyon\nNice\n", encoding="utf-8")
    with pytest.raises(KeyboardInterrupt, match=r"out.jsonl was not written; the output lines of the first 2 "
                                                r"input lines are in .*out.jsonl.partial-"):
        predict_file(InterruptedExtractor(), str(source), str(tmp_path / "out.jsonl"), lines_per_chunk=2)
    [partial] = tmp_path.glob("out.jsonl.partial-*")
    assert len(partial.read_text().splitlines()) == 2


def test_reports_get_the_permissions_open_would_give(tmp_path):
    from globalpointer.files import atomic_write_text

    umask = os.umask(0o022)
    try:
        atomic_write_text(str(tmp_path / "report.html"), "x")
        assert (os.stat(tmp_path / "report.html").st_mode & 0o777) == 0o644
    finally:
        os.umask(umask)
