"""Turn-taking by forward pass: the one thread that runs a service's model, shared fairly between the
requests of both HTTP services (``serve`` and the Label Studio backend)."""
import asyncio
import collections
import contextlib
import logging
import threading
import time
from typing import Callable, Deque, Generator, List, NamedTuple, Optional, Sequence

log = logging.getLogger("globalpointer")


class ServiceClosing(Exception):
    """The service stopped before this request's turn came (SIGTERM past serve.shutdown_timeout_s)."""


class Pending(NamedTuple):
    """A request waiting for its entities: its texts, their characters, and where to answer."""
    texts: List[str]
    chars: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future


class Job:
    """Requests predicted together, one forward pass per step."""

    def __init__(self, requests: List[Pending], steps: Generator):
        self.requests = requests
        self.steps = steps

    @property
    def abandoned(self) -> bool:
        """Every client of the job went away: its remaining passes would be answered to no one."""
        return all(request.future.cancelled() for request in self.requests)


# A job with this many forward passes left runs them at once: the batch of small requests gathered
# while a long job ran would otherwise take turns with it pass by pass (16 one-text clients fill two
# passes of 8 rows: they would wait for two passes of the long job, not one).
SHORT_JOB_PASSES = 3


class MicroBatcher:
    """Requests from many coroutines -> few forward passes on one thread, shared fairly.

    Waiting requests are gathered into a job of at most ``batch_texts`` texts and about one pass of
    characters (``pass_chars``; a larger request is a job of its own), waiting up to ``wait_ms`` for
    company while nothing else runs.  Jobs take turns one forward pass at a time (a job with at most
    ``SHORT_JOB_PASSES`` left finishes them at once), so a small request waits for at most one pass of
    a large one, not for all of it.  A job whose clients all left is
    dropped between passes; ``close`` stops between passes and fails what has not run.  Both services
    predict through it (``serve``, ``label_studio_backend``)."""

    def __init__(self, predict_steps: Callable[[List[str]], Generator], batch_texts: int, wait_ms: float,
                 pass_chars: int = 2048, lock: Optional[threading.Lock] = None):
        self.predict_steps = predict_steps
        self.lock = lock or threading.Lock()  # held for each pass: whoever else uses the model takes it too
        self.batch_texts = batch_texts
        self.pass_chars = pass_chars
        self.wait = wait_ms / 1000
        self.pending: Deque[Pending] = collections.deque()
        self.changed = threading.Condition()
        self.closing = False
        self.jobs = self.texts = self.passes = 0  # jobs and texts predicted, forward passes: how much sharing happened
        self.dropped = 0  # jobs whose clients all left before their last pass
        self.last_texts = batch_texts  # texts in the last job: how many to wait for in the next
        self.thread = threading.Thread(target=self._work, name="micro-batcher", daemon=True)
        self.thread.start()

    async def submit(self, texts: Sequence[str]) -> List[List[dict]]:
        """The entities of ``texts``; cancelling the call (the client left) drops its work.  After
        ``close``, ServiceClosing (nothing would answer it)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self.changed:
            if self.closing:
                raise ServiceClosing("the service is shutting down; send the request again")
            self.pending.append(Pending(list(texts), sum(map(len, texts)), loop, future))
            self.changed.notify()
        return await future

    @classmethod
    def for_service(cls, predict_steps: Callable[[List[str]], Generator], limits, window_size: int,
                    lock: Optional[threading.Lock] = None) -> "MicroBatcher":
        """The batcher of an HTTP service with the ``serve`` settings ``limits``: jobs of at most
        ``serve.batch_texts`` texts and about one forward pass (``serve.rows_per_pass`` windows of
        ``window_size`` tokens) of characters."""
        return cls(predict_steps, limits.batch_texts, limits.batch_wait_ms,
                   pass_chars=limits.rows_per_pass * window_size, lock=lock)

    def close(self, timeout: Optional[float] = None) -> None:
        with self.changed:
            self.closing = True
            self.changed.notify()
        self.thread.join(timeout)

    def shut_down(self, timeout: float) -> None:
        """``close`` when its service stops, and say what it did."""
        self.close(timeout)
        log.info("served %d texts in %d jobs of %d forward passes; dropped %d job(s) whose clients left",
                 self.texts, self.jobs, self.passes, self.dropped)

    def _gather(self, idle: bool) -> List[Pending]:
        """Called holding ``changed`` with a request pending: the first request, then those behind it
        that fit; only when ``idle``, and while it has fewer texts than the last job had, it waits up
        to ``wait_ms`` for more: clients answered together come back together, and one that is alone
        is not kept waiting for company twice."""
        batch = [self.pending.popleft()]
        count, chars = len(batch[0].texts), batch[0].chars
        deadline = time.monotonic() + self.wait
        while chars < self.pass_chars and count < self.batch_texts and not self.closing:
            if self.pending:
                following = self.pending[0]
                if chars + following.chars > self.pass_chars or count + len(following.texts) > self.batch_texts:
                    break
                batch.append(self.pending.popleft())
                count, chars = count + len(following.texts), chars + following.chars
                continue
            left = deadline - time.monotonic()
            if not idle or count >= self.last_texts or left <= 0:
                break
            self.changed.wait(left)
        self.last_texts = count
        return batch

    def _work(self) -> None:
        jobs: Deque[Job] = collections.deque()
        stepped: Optional[Job] = None  # the job that ran the last pass: it queues behind any newcomer
        while True:
            with self.changed:
                while not self.pending and not jobs and stepped is None and not self.closing:
                    self.changed.wait()
                if self.closing:
                    break
                while self.pending:  # every request waiting joins the turns now
                    batch = self._gather(idle=not jobs and stepped is None)
                    jobs.append(Job(batch, self.predict_steps([t for r in batch for t in r.texts])))
            if stepped is not None:
                jobs.append(stepped)
                stepped = None
            job = jobs.popleft()
            if job.abandoned:
                job.steps.close()
                self.dropped += 1
                continue
            try:
                with self.lock:
                    left = next(job.steps)
                self.passes += 1
                if left is not None and left <= SHORT_JOB_PASSES:
                    jobs.appendleft(job)  # nearly done: finish it before the next turn of a long job
                else:
                    stepped = job
            except StopIteration as done:
                self.jobs += 1
                self.texts += sum(len(r.texts) for r in job.requests)
                self._answer(job, done.value, None)
            except Exception as failure:  # answered as a 500 to the requests of this job, the service goes on
                log.exception("prediction failed for a job of %d texts", sum(len(r.texts) for r in job.requests))
                self._answer(job, [], failure)
        with self.changed:
            stranded = [*jobs, *([stepped] if stepped else []), *(Job([r], iter(())) for r in self.pending)]
            self.pending.clear()
        for job in stranded:
            self._answer(job, [], ServiceClosing("the service is shutting down; send the request again"))

    @staticmethod
    def _answer(job: Job, results: list, error: Optional[BaseException]) -> None:
        offset = 0
        for request in job.requests:
            part = results[offset:offset + len(request.texts)]
            offset += len(request.texts)
            with contextlib.suppress(RuntimeError):  # the event loop closed: nobody waits for the answer
                request.loop.call_soon_threadsafe(_settle, request.future, part, error)


def _settle(future: asyncio.Future, result, error: Optional[BaseException]) -> None:
    if future.cancelled():  # the client went away
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
