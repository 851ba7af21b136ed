"""deploy/batcher.py: requests take turns by forward pass, share passes, and a client that leaves
takes its work with it (docs/RELIABILITY.md, case 12)."""
import asyncio
import time

import pytest

from globalpointer.deploy.batcher import MicroBatcher


def batcher_of_passes(passes: int, seconds: float):
    """A MicroBatcher over fake forward passes: a request whose first text is "big" takes ``passes``
    passes of ``seconds``, any other two; ``log`` names the request of every pass run."""
    log = []

    def predict_steps(texts):
        count = passes if texts[0] == "big" else 2
        for done in range(1, count + 1):
            time.sleep(seconds)
            log.append(texts[0])
            yield count - done
        return [[] for _ in texts]

    return MicroBatcher(predict_steps, batch_texts=128, wait_ms=5, pass_chars=100), log


async def until(condition, timeout=30.0):
    """Wait, without blocking the event loop, for ``condition()`` to hold."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true"
        await asyncio.sleep(0.005)


def test_a_small_request_waits_for_one_pass_of_a_large_one_not_all_of_it():
    batcher, log = batcher_of_passes(50, 0.02)

    async def scenario():
        big = asyncio.ensure_future(batcher.submit(["big"]))
        await until(lambda: len(log) >= 2)  # the large request is running
        passes_before = len(log)
        await batcher.submit(["small"])
        return passes_before, big.done(), await big

    passes_before, big_done, _ = asyncio.run(scenario())
    batcher.close()
    assert not big_done and log.index("small") <= passes_before + 1  # the pass under way, then its own
    assert log[log.index("small") + 1] == "small"  # its last pass follows at once (SHORT_JOB_PASSES)
    assert log.count("big") == 50


def test_work_for_a_client_that_left_is_dropped_and_close_stops_between_passes():
    from globalpointer.deploy.batcher import ServiceClosing

    batcher, log = batcher_of_passes(1000, 0.01)

    async def leave_early():
        big = asyncio.ensure_future(batcher.submit(["big"]))
        await until(lambda: len(log) >= 2)  # the large request is running
        passes = len(log)
        big.cancel()  # what the endpoint does when the client disconnects
        await until(lambda: batcher.dropped)  # before its next pass
        dropped_at = len(log)
        await asyncio.sleep(0.2)
        return passes, dropped_at

    passes, dropped_at = asyncio.run(leave_early())
    # at most the pass under way when it was read and the one under way at the cancellation; none after
    assert batcher.dropped == 1 and dropped_at <= passes + 2 and len(log) == dropped_at

    closed_at = []

    def close():
        closed_at.append(len(log))  # counted as close is called: the executor's thread may start late
        batcher.close()

    async def closing():
        before = len(log)
        big = asyncio.ensure_future(batcher.submit(["big"]))
        await until(lambda: len(log) >= before + 2)  # the large request is running
        await asyncio.get_running_loop().run_in_executor(None, close)
        with pytest.raises(ServiceClosing):
            await big
        with pytest.raises(ServiceClosing):  # a request that comes after: answered, not left waiting
            await asyncio.wait_for(batcher.submit(["late"]), 5)

    asyncio.run(closing())
    assert len(log) <= closed_at[0] + 1 and not batcher.thread.is_alive()  # at most the pass under way
    assert "late" not in log


def test_micro_batcher_gathers_requests_into_few_calls():
    calls = []

    def predict_steps(texts):
        calls.append(list(texts))
        yield
        return [[{"n": len(t)}] for t in texts]

    batcher = MicroBatcher(predict_steps, batch_texts=6, wait_ms=200)

    async def many():
        return await asyncio.gather(*(batcher.submit(["x" * i, "y"]) for i in range(1, 6)))

    results = asyncio.run(many())
    batcher.close()
    assert results == [[[{"n": i}], [{"n": 1}]] for i in range(1, 6)]
    assert [len(c) for c in calls] == [6, 4]  # 3 requests fill a batch of 6; the other 2 share the next
