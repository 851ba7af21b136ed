"""The one error boundary of every command (``run_command``): what a user can fix is one line and exit 2,
Ctrl-C and SIGTERM stop cleanly, a full disk or too little memory says what to do."""
import errno
import logging
import os
import signal
import sys
from typing import List, Optional

from ..errors import UserError, memory_detail, setup_logging
from ..files import TERMINATION, Terminated, stop_on_sigterm
from ..runtime import launch_position


# A full disk, a file-size limit, a read-only or forbidden location, a file where a folder should be: the
# user's to fix, not a bug; each with what fixes it
SPACE = "free space, or choose another location"


FILE_SYSTEM_FAULTS = {errno.ENOSPC: SPACE, errno.EDQUOT: SPACE, errno.EFBIG: SPACE,
                      errno.EROFS: "choose a location that can be written", errno.EACCES: "choose a location "
                      "that can be written", errno.EPERM: "choose a location that can be written",
                      errno.ENOTDIR: "a part of the path is a file, not a folder: choose another path",
                      errno.EISDIR: "name a file, not a folder"}


# What to lower when a command runs out of memory: its own settings, not another command's
PREDICTION_MEMORY = ("predict fewer rows a forward pass (--batch-size, inference.batch_size) or shorter windows "
                     "(--set data.max_length=...), or run it on a machine with more memory")


MEMORY_ADVICE = {
    "train": "train fewer windows a step (train.batch_size; train.grad_accum_steps keeps the step's size) or shorter "
             "windows (data.max_length), or run it on a machine with more memory",
    "evaluate": PREDICTION_MEMORY, "predict": PREDICTION_MEMORY, "calibrate": PREDICTION_MEMORY,
    "serve": "run fewer worker processes (--workers, serve.workers: each holds the model) or fewer rows a forward pass "
             "(--rows-per-pass, serve.rows_per_pass), or on a machine with more memory",
    "label-studio-backend": "serve fewer rows a forward pass (--rows-per-pass, serve.rows_per_pass); a round trains "
                            "in this process too: lower train.batch_size in --base-config",
    "export": "export on a machine with more memory (the checkpoint is loaded and traced whole; INT8 quantizes it "
              "in memory)",
    "convert": "a file is read whole: split it into parts and convert each",
    "data": "the set's archive is read whole: download it with a browser and pass it with --from on a machine with "
            "more memory",
}


def run_command(main, argv: Optional[List[str]], prog: str) -> int:
    """The one error boundary of every command: a UserError is one line and exit 2, Ctrl-C exit 130.
    A process of a data-parallel launch ends here (``end_data_parallel_process``)."""
    code = _run(main, argv, prog)
    if launch_position()[1] > 1:
        end_data_parallel_process(code)
    return code


def end_data_parallel_process(code: int) -> None:
    """Exit without tearing down Paddle's communication objects: torn down at interpreter exit, once
    the other processes have gone, they abort a process whose work is done now and then (SIGABRT:
    1 run in 8 of a 2-process training on CPU), and the launcher then reports the run as failed.
    Every file is closed by now; only the standard streams and the log need flushing."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run(main, argv: Optional[List[str]], prog: str) -> int:
    setup_logging()
    stop_on_sigterm()
    try:
        return main(argv, prog)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as error:
        # a SIGTERM that Paddle's to_static re-raised with its own trace in the message: the plain words
        if TERMINATION.is_set() and (not isinstance(error, Terminated) or "\n" in str(error)):
            error = Terminated("terminated (SIGTERM)")
        print(f"stopped: {error}" if str(error) else "stopped", file=sys.stderr)
        return 128 + signal.SIGTERM if isinstance(error, Terminated) else 130
    except OSError as error:
        if error.errno not in FILE_SYSTEM_FAULTS:
            raise
        where = f"{error.filename}: " if error.filename else ""
        print(f"error: {where}{error.strerror or error}; {FILE_SYSTEM_FAULTS[error.errno]}, and run again (no "
              f"finished file was replaced by a part of one)", file=sys.stderr)
        return 2
    except MemoryError as error:  # Python's, and Paddle's ResourceExhausted (a MemoryError too)
        advice = MEMORY_ADVICE.get(prog.split()[-1].removesuffix(".py"), "run it on a machine with more memory")
        print(f"error: out of memory ({memory_detail(error)}); {advice}", file=sys.stderr)
        return 2
    except Exception:
        if not TERMINATION.is_set():  # SIGTERM turned into another error inside Paddle's C++ code
            raise
        print("stopped: terminated (SIGTERM)", file=sys.stderr)
        return 128 + signal.SIGTERM
