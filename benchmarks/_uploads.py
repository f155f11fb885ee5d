"""What an attachment costs: a 10 MB PDF from the websocket message to the model's turn.

Measured on the server's path, in process (no browser): the websocket message as text
(the PDF base64-encoded in shinychat's input value, as the browser sends it) is parsed,
shinychat's input handler validates it, the kit checks the file by its bytes, saves it
under the workspace's ``uploads/`` and builds the user turn, and the agent's run starts:
the clock stops when the model (a ``FunctionModel`` through litellm) gets the request.
The baseline is the same message without the attachment, in the same run.

``benchmarks/conversations.py`` prints :func:`upload_line` as one of its last lines; run
alone, this module prints both lines::

    python benchmarks/_uploads.py [--iterations 5] [--megabytes 10]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from deputy_shiny import Agent, warm_up
from deputy_shiny.shiny._attachments import AttachmentPolicy, SessionUploads, register_policy
from deputy_shiny.testing import FunctionModel

CHAT_ID = "bench-uploads-chat"
INPUT_ID = "bench-uploads-chat_user_input:shinychat.userInput"


def pdf_bytes(size: int) -> bytes:
    """A PDF-shaped file of ``size`` bytes whose body does not compress (as a scan's)."""
    head, tail = b"%PDF-1.7\n", b"\n%%EOF\n"
    return head + os.urandom(size - len(head) - len(tail)) + tail


def websocket_message(text: str, files: list[tuple[str, str, bytes]]) -> str:
    """The Shiny ``update`` message the browser sends for a chat submission."""
    attachments = [
        {
            "name": name,
            "mime": mime,
            "size": len(data),
            "data_url": f"data:{mime};base64,{base64.b64encode(data).decode()}",
        }
        for name, mime, data in files
    ]
    value = {"text": text, "attachments": attachments}
    return json.dumps({"method": "update", "data": {INPUT_ID: value}})


async def _to_model(message: str, workspace: Path) -> float:
    """Seconds from the raw message to the model's request (the run then finishes)."""
    from shinychat._attachments import Attachment, validate_attachments

    reached: list[float] = []

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        reached.append(time.perf_counter())
        return "Read."

    agent = Agent(FunctionModel(model), working_dir=workspace)
    uploads = SessionUploads(CHAT_ID, workspace)
    start = time.perf_counter()
    value = json.loads(message)["data"][INPUT_ID]
    attachments = [Attachment.model_validate(a) for a in value["attachments"]]
    validate_attachments(attachments)  # what shinychat's input handler does
    task = await uploads.turn(agent, value["text"], attachments) if attachments else value["text"]
    async for _event in agent.run(task):
        pass
    await agent.aclose()
    return reached[0] - start


async def upload_to_turn(iterations: int = 5, megabytes: int = 10) -> tuple[float, float]:
    """Median milliseconds (the upload, the same message without it) over ``iterations``
    submissions, each in a fresh workspace."""
    await asyncio.to_thread(warm_up)
    cap = megabytes * 1_000_000 + 1
    register_policy(CHAT_ID, AttachmentPolicy(max_file_bytes=cap, max_message_bytes=cap))
    pdf = pdf_bytes(megabytes * 1_000_000)
    with_pdf = websocket_message("Summarize the report", [("report.pdf", "application/pdf", pdf)])
    without = websocket_message("Summarize the report", [])
    timings: dict[str, list[float]] = {"upload": [], "baseline": []}
    root = Path(tempfile.mkdtemp(prefix="deputy-bench-uploads-"))
    try:
        await _to_model(without, root)  # the first run of the process pays its imports
        for index in range(iterations):
            for label, message in (("upload", with_pdf), ("baseline", without)):
                workspace = root / f"{label}-{index}"
                workspace.mkdir()
                timings[label].append(await _to_model(message, workspace))
                shutil.rmtree(workspace)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return (
        statistics.median(timings["upload"]) * 1000,
        statistics.median(timings["baseline"]) * 1000,
    )


def upload_line(upload_ms: float, megabytes: int = 10) -> str:
    """The benchmark's line, as ``benchmarks/conversations.py`` prints it."""
    return f"upload of a {megabytes} MB PDF to the model's turn: {upload_ms:.0f} ms"


async def main(iterations: int = 5, megabytes: int = 10) -> float:
    """Print the baseline, then the upload's line last; return the upload's ms."""
    upload_ms, baseline_ms = await upload_to_turn(iterations, megabytes)
    print(f"the same message without the attachment, to the model's turn: {baseline_ms:.0f} ms")
    print(upload_line(upload_ms, megabytes))
    return upload_ms


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--megabytes", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.iterations, args.megabytes))
