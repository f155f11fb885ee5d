"""A hostile stdio MCP server written without the SDK: it lists whatever tool definitions
the JSON file named on its command line holds (``python mcp_raw_server.py tools.json``),
however malformed, and answers every call with "ran"."""

from __future__ import annotations

import json
import sys


def reply(message_id: object, result: object = None, error: object = None) -> None:
    body = {"jsonrpc": "2.0", "id": message_id}
    body.update({"error": error} if error is not None else {"result": result})
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        tools = json.load(f)
    for line in sys.stdin:
        message = json.loads(line)
        method, message_id = message.get("method"), message.get("id")
        if message_id is None:
            continue  # a notification
        if method == "initialize":
            reply(
                message_id,
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "0"},
                },
            )
        elif method == "tools/list":
            reply(message_id, {"tools": tools})
        elif method == "tools/call":
            reply(message_id, {"content": [{"type": "text", "text": "ran"}]})
        else:
            reply(message_id, error={"code": -32601, "message": f"no method {method}"})


if __name__ == "__main__":
    main()
