"""What every capacity app streams (benchmarks/capacity.py sets it through the environment).

A reply is ``CAPACITY_CHUNKS`` chunks (default 200), ``CAPACITY_INTERVAL`` seconds apart
(default 0.02: 50 chunks a second), each 7 characters and all different (litellm aborts
a stream after 100 identical chunks). A prompt containing "warm" gets a 5-chunk reply:
the benchmark sends one per fresh server so first-request costs are paid before it
measures. ``CAPACITY_BASE_URL`` (wire mode) is the fake OpenAI server's ``.../v1``.
"""

from __future__ import annotations

import os

CHUNKS = int(os.environ.get("CAPACITY_CHUNKS", "200"))
INTERVAL = float(os.environ.get("CAPACITY_INTERVAL", "0.02"))
BASE_URL = os.environ.get("CAPACITY_BASE_URL", "")
WARM_CHUNKS = 5
MODEL_NAME = "fake-model"


def chunk_count(prompt: str) -> int:
    """How many chunks the reply to ``prompt`` has."""
    return WARM_CHUNKS if "warm" in prompt else CHUNKS


def chunks(n: int) -> list[str]:
    """The ``n`` chunks of a reply: ``"w00000 "``, ``"w00001 "``, ..."""
    return [f"w{i:05d} " for i in range(n)]
