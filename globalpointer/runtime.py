"""Where the math runs: device choice, CPU threads, data-parallel rank, seeds.  Paddle is imported
where it is used, so that ``launch_position`` costs no import of it (the command line asks it)."""
import logging
import os
import random
from typing import NamedTuple, Tuple

import numpy as np

from . import cpu_math
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


# The machine code PyPI's paddlepaddle-gpu 2.6.2 ships (CUDA 11.8), and no PTX: measured, 665 of the
# 673 kernel bundles of its libphi.so fail to load on an H200 (9.0) with CUDA error 209
BUILD_ARCHITECTURES = {"2.6.2": ((6, 1), (7, 0), (7, 5), (8, 0), (8, 6))}
FITTING_INSTALL = ("Paddle 3.3 built for this GPU from Paddle's own index: pip install -r requirements-gpu.txt "
                   "--extra-index-url https://www.paddlepaddle.org.cn/packages/stable/cu126/ (docs/training.md, GPU)")


def runs_on(capability: Tuple[int, int], architectures) -> bool:
    """Whether machine code for one of ``architectures`` runs on a GPU of ``capability``: CUDA runs
    code built for X.y on X.z with z >= y, never across majors."""
    return any(major == capability[0] and minor <= capability[1] for major, minor in architectures)


def gpu_mismatch(name: str, capability: Tuple[int, int], paddle_version: str) -> str:
    """Why the installed Paddle cannot drive this GPU, in one line naming the GPU, its compute
    capability and the install that fits it; "" when nothing says it cannot."""
    architectures = BUILD_ARCHITECTURES.get(paddle_version)
    if architectures is None or runs_on(capability, architectures):
        return ""
    built = ", ".join(f"{major}.{minor}" for major, minor in architectures)
    return (f"{name} (compute capability {capability[0]}.{capability[1]}): Paddle {paddle_version} has kernels for "
            f"compute capabilities {built} only, so it fails at its first operation on this GPU; install "
            f"{FITTING_INSTALL}")


def check_gpu(index: int) -> None:
    """Before any work on GPU ``index``: the build's kernels fit it (``gpu_mismatch``), and a tiny
    operation runs there; else a ConfigError in one line."""
    import paddle

    name = paddle.device.cuda.get_device_name(index)
    capability = tuple(paddle.device.cuda.get_device_capability(index))
    problem = gpu_mismatch(name, capability, paddle.__version__)
    if problem:
        raise ConfigError(problem)
    try:
        (paddle.ones([2], dtype="float32") * 2).numpy()
    except Exception as error:  # CUDA's "no kernel image is available" and its kin, deep inside Paddle
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        detail = lines[-1] if lines else repr(error)
        raise ConfigError(f"{name} (compute capability {capability[0]}.{capability[1]}): Paddle "
                          f"{paddle.__version__} cannot run on it ({detail}); install {FITTING_INSTALL}") from None


def setup_runtime(device: str, cpu_threads: int = 0) -> Runtime:
    import paddle

    rank, world_size = launch_position()
    local_rank = int(os.environ.get("PADDLE_LOCAL_RANK", os.environ.get("FLAGS_selected_gpus", "0")) or 0)
    chosen = choose_device(device, local_rank)
    paddle.set_device(chosen)
    if chosen != "cpu":
        check_gpu(int(chosen.split(":")[1]))
    if chosen == "cpu":
        # `import paddle` pins OMP_NUM_THREADS to 1 when it is unset: one core of two would idle.
        threads = cpu_thread_count(cpu_threads, world_size)
        paddle.base.core.set_num_threads(threads)
        build = (" (Paddle's GPU build; no GPU is visible)" if device == "auto" and paddle.is_compiled_with_cuda()
                 else "")
        log.info("%s; %d thread(s); %s%s", cpu_math.CHOSEN, threads, cpu_math.flush_denormals(), build)
    if world_size > 1:
        paddle.distributed.init_parallel_env()
    return Runtime(chosen, rank, world_size)


def seed_everything(seed: int) -> None:
    import paddle

    random.seed(seed)
    np.random.seed(seed)
    paddle.seed(seed)
