"""deputy_shiny._util.timeouts: a timeout that does not keep its caller's context alive."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import weakref

import pytest

from deputy_shiny._util.timeouts import timeout


class _Owner:
    """Stands for a browser session held in a context variable (as Shiny does)."""


_owner: contextvars.ContextVar[_Owner] = contextvars.ContextVar("owner")


async def test_an_ended_timeout_leaves_nothing_of_the_callers_context_on_the_loop() -> None:
    owner = _Owner()
    ref = weakref.ref(owner)

    async def wait_briefly(held: _Owner) -> None:
        _owner.set(held)
        async with timeout(600):  # cancelled long before it is due
            await asyncio.sleep(0)

    # A server always has some timer due earlier; a cancelled timer leaves the loop's
    # heap only when it reaches the head (or when most of the heap is cancelled).
    earlier = asyncio.get_running_loop().call_later(300, lambda: None)
    try:
        await asyncio.create_task(wait_briefly(owner))
        assert ref() is owner
        del owner
        await asyncio.sleep(0)  # the finished task itself lives until the loop's next turn
        gc.collect()
        assert ref() is None
    finally:
        earlier.cancel()


async def test_it_still_times_out_and_only_the_waiting_task_is_cancelled() -> None:
    async def stuck() -> str:
        async with timeout(0.01):
            await asyncio.sleep(10)
        return "finished"

    with pytest.raises(TimeoutError):
        await stuck()
    async with timeout(None):
        await asyncio.sleep(0)
    assert asyncio.current_task() is not None
    assert not asyncio.current_task().cancelling()  # type: ignore[union-attr]
