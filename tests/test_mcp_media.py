"""MCP image and audio content (#37, deputy's "plots retain ellmer image content"): a real
stdio server's image reaches a model that takes images as an image, its sound a model
that takes audio as input audio, others read a note; what a hostile server sends as an
image is refused with a note; the chat's tool card shows the image from its own bytes."""

from __future__ import annotations

import base64
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import (
    Agent,
    AgentResult,
    ContentAudio,
    ContentImage,
    ContentToolResult,
    Tool,
    Turn,
    tools_mcp,
)
from deputy_shiny._engine.compaction import _turn_tokens
from deputy_shiny.models import ChatModel, supports_audio, supports_images
from deputy_shiny.shiny._render import tool_result_block
from deputy_shiny.testing import FunctionModel, ScriptedReply, ScriptedToolCall

from .helpers import card_result

SERVER = Path(__file__).resolve().with_name("mcp_media_server.py")
PNG_2X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAAEElEQVR4nGP4z8DAwMDAAAAH/gH/"
    "AXW9LgAAAABJRU5ErkJggg=="
)


@pytest.fixture(scope="module")
def media_tools() -> Iterator[list[Tool]]:
    """The media server's tools over one stdio connection for the module."""
    config = {"mcpServers": {"media": {"command": sys.executable, "args": [str(SERVER)]}}}
    tools = tools_mcp(config, timeout=30)
    yield tools
    del tools  # the connection closes with its tools


class Recorder:
    """A model that calls ``tool`` once, then answers; it keeps every request's messages."""

    def __init__(self, tool: str, **takes: bool) -> None:
        self.tool = tool
        self.seen: list[list[dict[str, Any]]] = []
        self.model = FunctionModel(self.reply, **takes)

    def reply(self, messages: list[dict[str, Any]], tools: Any) -> Any:
        self.seen.append(messages)
        if any(m["role"] == "tool" for m in messages):
            return "Seen."
        return ScriptedReply(tool_calls=[ScriptedToolCall(self.tool, {}, id="c1")])

    def after_tool(self) -> list[dict[str, Any]]:
        """The messages after the tool message (what came with the result)."""
        last = self.seen[-1]
        at = next(i for i, m in enumerate(last) if m["role"] == "tool")
        return last[at:]


def run(recorder: Recorder, tools: list[Tool], tmp_path: Path) -> AgentResult:
    agent = Agent(recorder.model, tools=tools, working_dir=tmp_path)
    result = agent.run_sync("go")
    assert result.stop_reason == "complete", result.stop_message
    return result


def test_an_mcp_image_reaches_a_model_that_takes_images_as_an_image(
    media_tools: list[Tool], tmp_path: Path
) -> None:
    recorder = Recorder("plot")
    result = run(recorder, media_tools, tmp_path)
    tool_message, images = recorder.after_tool()
    size = len(base64.b64decode(PNG_2X1))
    assert tool_message["content"] == f"the sales plot\n\n[image 1: image/png, {size:,} bytes]"
    assert images["role"] == "user"
    assert images["content"] == [
        {"type": "text", "text": "The image(s) the plot call (c1) returned:"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_2X1}"}},
    ]
    (returned,) = result.tool_results()
    assert returned.images == [ContentImage(data=PNG_2X1, media_type="image/png")]


def test_mcp_audio_reaches_a_model_that_takes_audio_as_input_audio(
    media_tools: list[Tool], tmp_path: Path
) -> None:
    recorder = Recorder("sound")
    result = run(recorder, media_tools, tmp_path)
    tool_message, audio = recorder.after_tool()
    assert tool_message["content"].startswith("a beep\n\n[audio 1: audio/wav, ")
    text, clip = audio["content"]
    assert text == {"type": "text", "text": "The audio the sound call (c1) returned:"}
    assert clip["type"] == "input_audio" and clip["input_audio"]["format"] == "wav"
    assert base64.b64decode(clip["input_audio"]["data"]).startswith(b"RIFF")
    (returned,) = result.tool_results()
    assert [a.media_type for a in returned.audio] == ["audio/wav"]
    assert returned.audio[0].data == clip["input_audio"]["data"]


def test_a_model_without_vision_or_audio_reads_a_note(
    media_tools: list[Tool], tmp_path: Path
) -> None:
    # litellm says which real models take what; a test model says so when it is made.
    assert supports_images(ChatModel(model="openai/gpt-4o-mini"))
    assert not supports_images(ChatModel(model="openai/gpt-3.5-turbo"))
    assert supports_audio(ChatModel(model="gemini/gemini-2.5-flash"))
    assert not supports_audio(ChatModel(model="openai/gpt-4o-mini"))
    blind = Recorder("plot", vision=False)
    assert not supports_images(blind.model.as_chat_model())
    assert supports_audio(blind.model.as_chat_model())
    run(blind, media_tools, tmp_path)
    _, note = blind.after_tool()
    assert "image_url" not in json.dumps(blind.seen[-1])
    assert note["content"] == [
        {
            "type": "text",
            "text": "[The plot call (c1) returned 1 image(s); this model takes no images, "
            "so they were not sent.]",
        }
    ]
    deaf = Recorder("sound", audio_input=False)
    run(deaf, media_tools, tmp_path)
    _, note = deaf.after_tool()
    assert "input_audio" not in json.dumps(deaf.seen[-1])
    assert "returned 1 audio clip(s); this model takes no audio" in note["content"][0]["text"]


def test_what_a_hostile_server_sends_as_media_is_refused_with_a_note(
    media_tools: list[Tool], tmp_path: Path
) -> None:
    recorder = Recorder("hostile")
    result = run(recorder, media_tools, tmp_path)
    sent = json.dumps(recorder.seen[-1])
    assert "image_url" not in sent and "input_audio" not in sent  # nothing went as media
    (returned,) = result.tool_results()
    assert returned.images == [] and returned.audio == []
    lines = returned.output.split("\n\n")
    assert lines[1:] == [
        "[image refused: declared image/svg+xml, but the data is not a PNG, JPEG, GIF or "
        "WebP image]",
        "[image refused: declared image/png, but the data is not a PNG, JPEG, GIF or WebP image]",
        "[image refused: declared image/jpeg, but the data is image/png]",
        "[audio refused: declared audio/wav, but the data is not WAV or MP3 audio]",
    ]
    huge = run(Recorder("huge"), media_tools, tmp_path).tool_results()[0]
    assert huge.images == []
    assert "over the 5,242,880-byte limit, not sent" in huge.output


async def test_the_tool_card_shows_an_mcp_image_from_its_own_bytes(
    media_tools: list[Tool], tmp_path: Path
) -> None:
    agent = Agent(Recorder("plot").model, tools=media_tools, working_dir=tmp_path)
    value_type, (text, image) = await card_result(agent)
    assert value_type == "content_extra"
    assert image == {"type": "image", "src": f"data:image/png;base64,{PNG_2X1}"}
    assert text == {"type": "text", "value": text["value"], "value_type": "code"}


def test_the_card_checks_an_image_again_by_its_bytes() -> None:
    # A result read back from elsewhere (a transcript, an app's own stream) may claim
    # anything: the card shows only what the bytes say is an image, typed by the bytes.
    svg = base64.b64encode(b"<svg onload='alert(1)'/>").decode()
    claims = [
        ContentImage(data=svg, media_type="image/png"),
        ContentImage(url="https://attacker.example/x.png"),
        ContentImage(data=PNG_2X1 + '"><script>', media_type="image/png"),
        ContentImage(data=PNG_2X1, media_type="text/html"),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        block: Any = tool_result_block("c1", "plot", "out", is_error=False, images=claims).blocks
    _, shown = json.loads(block[0]["value"])
    assert shown == {"type": "image", "src": f"data:image/png;base64,{PNG_2X1}"}
    alone: Any = tool_result_block("c1", "plot", "out", is_error=False, images=claims[:3]).blocks
    assert alone[0]["value_type"] == "code"


def test_a_returned_sound_counts_as_its_note_in_the_context_budget() -> None:
    # As an image does: its base64 is not text the model reads (a 1 MB clip is not
    # 350,000 tokens that would set off compaction).
    wav = b"RIFF\0\0\0\0WAVEfmt " + b"\0" * 1_000_000
    clip = ContentAudio(data=base64.b64encode(wav).decode(), media_type="audio/wav")
    result = ContentToolResult(call_id="c1", name="sound", output="a beep", audio=[clip])
    assert _turn_tokens(Turn(role="user", contents=[result])) < 200
