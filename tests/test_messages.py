"""Turns and their one conversion to and from OpenAI-format messages."""

from __future__ import annotations

from deputy_shiny.messages import (
    ContentImage,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    Turn,
    drop_thinking,
    from_openai_messages,
    to_openai_messages,
    user_turn,
)

CONVERSATION = [
    user_turn("Read a.txt", ContentImage(data="aGk=", media_type="image/png")),
    Turn(
        role="assistant",
        contents=[
            ContentThinking(thinking="I should read it", signature="sig-1"),
            ContentText(text="Reading."),
            ContentToolRequest(id="c1", name="read_file", arguments={"path": "a.txt"}),
            ContentToolRequest(id="c2", name="read_file", arguments={}, raw_arguments='{"path": '),
        ],
    ),
    Turn(
        role="user",
        contents=[
            ContentToolResult(call_id="c1", name="read_file", output="hello"),
            ContentToolResult(call_id="c2", name="read_file", output="bad JSON", is_error=True),
        ],
    ),
    Turn(role="assistant", contents=[ContentText(text="It says hello.")]),
]


def test_to_openai_messages() -> None:
    messages = to_openai_messages("Be brief.", CONVERSATION)
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,aGk="},
    }
    assistant = messages[2]
    assert assistant["content"] == "Reading."
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == [
        '{"path": "a.txt"}',
        '{"path": ',
    ]
    assert assistant["thinking_blocks"] == [
        {"type": "thinking", "thinking": "I should read it", "signature": "sig-1"}
    ]
    assert messages[3] == {"role": "tool", "tool_call_id": "c1", "content": "hello"}
    assert messages[4]["tool_call_id"] == "c2"
    assert messages[5] == {"role": "assistant", "content": "It says hello."}


def test_round_trip_through_openai_format() -> None:
    system, turns = from_openai_messages(to_openai_messages("Be brief.", CONVERSATION))
    assert system == "Be brief."
    # is_error is not part of the wire format; everything else survives.
    expected = [
        t.model_copy(
            update={
                "contents": [
                    c.model_copy(update={"is_error": False})
                    if isinstance(c, ContentToolResult)
                    else c
                    for c in t.contents
                ]
            }
        )
        for t in CONVERSATION
    ]
    assert turns == expected


def test_round_trip_through_json() -> None:
    for turn in CONVERSATION:
        assert Turn.model_validate_json(turn.model_dump_json()) == turn


def test_drop_thinking() -> None:
    dropped = drop_thinking(CONVERSATION)
    assert not any(isinstance(c, ContentThinking) for t in dropped for c in t.contents)
    assert dropped[0] is CONVERSATION[0]  # untouched turns are not copied


def test_turn_helpers() -> None:
    assistant = CONVERSATION[1]
    assert assistant.text == "Reading."
    assert [r.id for r in assistant.tool_requests] == ["c1", "c2"]
    assert CONVERSATION[2].tool_results[1].is_error
    assert ContentToolRequest(id="x", name="n", raw_arguments="oops").arguments_json() == "oops"
