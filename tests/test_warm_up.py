"""warm_up() leaves nothing for the first user's first reply to pay.

Each check runs in a fresh process: what is measured is a process's first request.
The processes are forked from one interpreter that imported litellm once (through
``get_litellm``, as the warm-up does first), so each case pays only what follows the
import: the warm-up's own work, which is what these checks are about.
"""

from __future__ import annotations

import pytest

from tests._fresh import Child, forked

# Imported once, before the fork: every case starts from a configured litellm that has
# served nothing yet (its lazy first-request modules and tiktoken are still unloaded).
SETUP = """
import deputy_shiny
from deputy_shiny.models._litellm import get_litellm
get_litellm()
"""

FIRST_AND_SECOND = """
import asyncio, time
import deputy_shiny
{before}
deputy_shiny.warm_up()
from deputy_shiny import Agent
from deputy_shiny.testing import ScriptedModel

async def first_chunk() -> float:
    agent = Agent(ScriptedModel(["Hello there"]))
    started = time.perf_counter()
    async for _ in agent.stream_async("hi"):
        return time.perf_counter() - started
    raise AssertionError("no chunk")

print(asyncio.run(first_chunk()), asyncio.run(first_chunk()))
"""

# The offline request would reach an app's callbacks as a real completion: with one
# registered, the warm-up skips it (the first reply then pays).
CALLBACK = """
from deputy_shiny.models._litellm import get_litellm
seen = []
async def log(kwargs, response, start, end):
    seen.append(kwargs.get('model'))
get_litellm().success_callback = [log]
import atexit
atexit.register(lambda: print('callbacks', [m for m in seen if 'gpt-4o' in str(m)]))
"""

# After litellm's import, the first full collection is due at once: the warm-up runs
# it, so the next one waits until sessions made a quarter as many old objects.
COLLECTION = """
import gc, deputy_shiny
before = gc.get_stats()[2]['collections']
deputy_shiny.warm_up()
print(gc.get_stats()[2]['collections'] - before, gc.get_count()[2])
"""


@pytest.fixture(scope="module")
def children() -> dict[str, Child]:
    """Each case's child, in its own fresh process (run one at a time: the
    first case is timed)."""
    return forked(
        {
            "first_and_second": FIRST_AND_SECOND.replace("{before}", ""),
            "callback": FIRST_AND_SECOND.replace("{before}", CALLBACK),
            "collection": COLLECTION,
        },
        setup=SETUP,
    )


def test_the_first_reply_after_warm_up_costs_what_the_second_does(
    children: dict[str, Child],
) -> None:
    # Without the warm-up's offline request, litellm's first acompletion and first
    # token count load modules and the tiktoken vocabulary: 0.4-0.9 s here, against
    # about 0.01 s for the second reply. 10x the second's time plus 0.1 s is headroom
    # for a busy machine that a cold first request still exceeds.
    first, second = map(float, children["first_and_second"].printed().split())
    assert first <= 10 * second + 0.1, (first, second)


def test_an_apps_litellm_callback_never_sees_the_warm_up_request(
    children: dict[str, Child],
) -> None:
    assert children["callback"].printed().strip().splitlines()[-1] == "callbacks []"


def test_warm_up_takes_the_first_full_collection_itself(children: dict[str, Child]) -> None:
    full, pending = children["collection"].printed().split()
    assert int(full) >= 1 and int(pending) == 0
