"""Where the math runs: device choice, CPU threads, data-parallel rank, seeds.  Paddle is imported
where it is used, so that ``launch_position`` costs no import of it (the command line asks it)."""
import logging
import os
import random
from typing import NamedTuple, Tuple

import numpy as np

from . import mathlib
from .errors import ConfigError

log = logging.getLogger(__name__)


class Runtime(NamedTuple):
    device: str  # "cpu" or "gpu:N"
    rank: int
    world_size: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("gpu")


def launch_position() -> Tuple[int, int]:
    """(rank, number of processes) of this process in a ``paddle.distributed.launch``; (0, 1) outside one."""
    return int(os.environ.get("PADDLE_TRAINER_ID", "0")), int(os.environ.get("PADDLE_TRAINERS_NUM", "1"))


def gpu_available() -> bool:
    import paddle

    return paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0


def choose_device(choice: str, local_rank: int = 0, has_gpu: bool = None) -> str:
    """``auto``: the GPU when Paddle has CUDA and one is visible, else the CPU; ``gpu``/``cpu`` force it."""
    has_gpu = gpu_available() if has_gpu is None else has_gpu
    if choice == "cpu" or (choice == "auto" and not has_gpu):
        return "cpu"
    if not has_gpu:
        raise ConfigError("device: gpu, but this Paddle build has no CUDA or no GPU is visible; "
                          "use device: auto or cpu, or install the GPU build (requirements-gpu.txt)")
    return f"gpu:{local_rank}"


def cpu_thread_count(requested: int, world_size: int) -> int:
    """All cores shared evenly between the processes when ``requested`` is 0."""
    if requested > 0:
        return requested
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, world_size))


def setup_runtime(device: str, cpu_threads: int = 0) -> Runtime:
    import paddle

    rank, world_size = launch_position()
    local_rank = int(os.environ.get("PADDLE_LOCAL_RANK", os.environ.get("FLAGS_selected_gpus", "0")) or 0)
    chosen = choose_device(device, local_rank)
    paddle.set_device(chosen)
    if chosen == "cpu":
        # `import paddle` pins OMP_NUM_THREADS to 1 when it is unset: one core of two would idle.
        threads = cpu_thread_count(cpu_threads, world_size)
        paddle.base.core.set_num_threads(threads)
        log.info("%s; %d thread(s); %s", mathlib.CHOSEN, threads, mathlib.flush_denormals())
    if world_size > 1:
        paddle.distributed.init_parallel_env()
    return Runtime(chosen, rank, world_size)


def seed_everything(seed: int) -> None:
    import paddle

    random.seed(seed)
    np.random.seed(seed)
    paddle.seed(seed)
