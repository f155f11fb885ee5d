"""warm_up() leaves nothing for the first user's first reply to pay.

Each check runs in a fresh interpreter: what is measured is a process's first request.
"""

from __future__ import annotations

import subprocess
import sys

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


def python(code: str) -> str:
    """What ``code`` prints in a fresh interpreter (it must succeed)."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def first_and_second(before: str = "") -> tuple[float, float]:
    first, second = python(FIRST_AND_SECOND.replace("{before}", before)).split()
    return float(first), float(second)


def test_the_first_reply_after_warm_up_costs_what_the_second_does() -> None:
    # Without the warm-up's offline request, litellm's first acompletion and first
    # token count load modules and the tiktoken vocabulary: 0.4-0.9 s here, against
    # about 0.01 s for the second reply. 10x the second's time plus 0.1 s is headroom
    # for a busy machine that a cold first request still exceeds.
    first, second = first_and_second()
    assert first <= 10 * second + 0.1, (first, second)


def test_an_apps_litellm_callback_never_sees_the_warm_up_request() -> None:
    # The offline request would reach an app's callbacks as a real completion: with one
    # registered, the warm-up skips it (the first reply then pays).
    before = (
        "from deputy_shiny.models._litellm import get_litellm\n"
        "seen = []\n"
        "async def log(kwargs, response, start, end):\n"
        "    seen.append(kwargs.get('model'))\n"
        "get_litellm().success_callback = [log]\n"
        "import atexit\n"
        "atexit.register(lambda: print('callbacks', [m for m in seen if 'gpt-4o' in str(m)]))\n"
    )
    printed = python(FIRST_AND_SECOND.replace("{before}", before))
    assert printed.strip().splitlines()[-1] == "callbacks []"


def test_warm_up_takes_the_first_full_collection_itself() -> None:
    # After litellm's import, the first full collection is due at once: the warm-up runs
    # it, so the next one waits until sessions made a quarter as many old objects.
    code = (
        "import gc, deputy_shiny\n"
        "from deputy_shiny.models._litellm import get_litellm\n"
        "get_litellm()\n"
        "before = gc.get_stats()[2]['collections']\n"
        "deputy_shiny.warm_up()\n"
        "print(gc.get_stats()[2]['collections'] - before, gc.get_count()[2])\n"
    )
    full, pending = python(code).split()
    assert int(full) >= 1 and int(pending) == 0
