"""The ``deputy`` console script in a real terminal (tmux), used as a person would.

One tmux server for the module, on a socket of its own, killed at the end. A shell in
a 120x40 window runs the console script exactly as pip installs it (a wrapper calling
``[project.scripts] deputy`` of pyproject.toml) on the offline demo model, which is
scripted and the same each time. Keys go in with ``send-keys``; the screen is read back
with ``capture-pane``, history included.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from deputy_shiny.sandbox import prepare_workspace

ROOT = Path(__file__).resolve().parent.parent
SOCKET = f"deputy-cli-test-{os.getpid()}"
# Each step waits at most this long: the command imports litellm (seconds on a busy
# machine), then the demo model streams its replies.
STEP_TIMEOUT = 120.0


def console_script(bin_dir: Path) -> Path:
    """Write ``deputy`` as pip would from ``[project.scripts]``: import the entry point, exit."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["deputy"].partition(":")
    path = bin_dir / "deputy"
    path.write_text(
        f"#!{sys.executable}\nimport sys\nfrom {module} import {function}\n"
        f"if __name__ == '__main__':\n    sys.exit({function}())\n"
    )
    path.chmod(0o755)
    return path


class Tmux:
    """One tmux window running a shell in ``workdir``."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=True, timeout=30
        )
        return done.stdout

    def type(self, text: str) -> None:
        """Type ``text`` and press Enter."""
        self.tmux("send-keys", "-t", "cli", "-l", text)
        self.tmux("send-keys", "-t", "cli", "Enter")

    def key(self, key: str) -> None:
        self.tmux("send-keys", "-t", "cli", key)

    def screen(self) -> str:
        """Everything the window showed, wrapped lines joined."""
        return self.tmux("capture-pane", "-p", "-J", "-t", "cli", "-S", "-")

    def wait_for(self, pattern: str, count: int = 1) -> str:
        """Wait until ``pattern`` (a regex) shows ``count`` times; the screen then."""
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            screen = self.screen()
            if len(re.findall(pattern, screen)) >= count:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} (x{count}) never showed; the screen:\n{screen}")
            time.sleep(0.1)

    def wait_for_prompt(self) -> None:
        """Wait until the CLI reads a task: the screen ends at an empty ``›`` prompt.

        Keys typed before that are the terminal's type-ahead: echoed at once, read once
        the prompt shows, without echoing their Enter. ``/exit`` typed that way leaves
        the shell's next line behind the prompt (``› exit=0``), which a CI run caught.
        """
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            screen = self.screen()
            lines = screen.rstrip().splitlines()
            if lines and lines[-1].strip() == "›":
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the prompt never showed; the screen:\n{screen}")
            time.sleep(0.1)


@pytest.fixture(scope="module")
def terminal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tmux]:
    base = tmp_path_factory.mktemp("deputy-cli")
    bin_dir, workdir = base / "bin", base / "work"
    bin_dir.mkdir()
    workdir.mkdir()
    console_script(bin_dir)
    (workdir / "welcome.md").write_text("# Welcome\n")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN")) and k not in ("DEPUTY_MODEL", "TMUX")
    }
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(ROOT),
        HOME=str(base),
        PS1="$ ",
    )
    window = ["-x", "120", "-y", "40", "-c", str(workdir), "bash --norc --noprofile"]
    subprocess.run(
        ["tmux", "-L", SOCKET, "-f", "/dev/null", "new-session", "-d", "-s", "cli", *window],
        env=env,
        check=True,
        timeout=30,
    )
    tmux = Tmux(workdir)
    socket = Path(tmux.tmux("display-message", "-p", "#{socket_path}").strip())
    try:
        yield tmux
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True, timeout=30)
        socket.unlink(missing_ok=True)  # the server leaves its socket file behind


def test_a_session_approves_a_write_saves_and_a_resumed_run_continues_it(terminal: Tmux) -> None:
    work = terminal.workdir
    terminal.type('deputy --save session.json; echo "exit=$?"')
    terminal.wait_for(
        r"Type a task, or /help for the commands\. Ctrl-C stops a run; /exit or Ctrl-D leaves\."
    )
    assert "deputy · deputy/demo · standard · " in terminal.screen()

    # Ctrl-C at the approval stops that run; the session goes on.
    terminal.type("write a note")
    terminal.wait_for(r"Run it\? \[y\]es, \[a\]lways, \[n\]o, \[s\]top the run:")
    terminal.key("C-c")
    terminal.wait_for(r"Stopped \(interrupted\)")
    assert not (work / "notes").exists()

    # Asked again, "y": the write runs and the demo reports it.
    terminal.type("write a note")
    terminal.wait_for(r"Approve write_file\?", count=2)
    terminal.type("y")
    screen = terminal.wait_for(r"The write happened\.")
    assert re.search(r"write_file done in \d+\.\ds", screen)
    assert "Wrote 174 bytes to notes/demo-note.md" in screen
    terminal.wait_for(r"\d+ requests · 1 tool call · [\d,]+ tokens .* · cost \$0\.00")
    assert (work / "notes" / "demo-note.md").read_text().startswith("# A note from the demo")
    saved = json.loads((work / "session.json").read_text())
    assert "notes/demo-note.md" in json.dumps(saved)

    terminal.wait_for_prompt()
    terminal.type("/exit")
    terminal.wait_for(r"(?m)^exit=0$")

    # The saved session continues: the demo's first-turn introduction does not come again.
    terminal.type(
        'deputy run "hello again" --resume session.json --save session.json; echo "exit=$?"'
    )
    screen = terminal.wait_for(r"(?m)^exit=0$", count=2)
    after = screen[screen.rindex('deputy run "hello again"') :]
    assert '"hello again"' in after.split("\n", 1)[1]  # the demo quotes the new message
    assert "Hi! I'm the offline demo model" not in after
    assert "hello again" in (work / "session.json").read_text()


def test_a_padded_command_is_shown_whole_before_it_can_be_approved(terminal: Tmux) -> None:
    """A prompt-injected command pads its harmless start so its tail falls past what the
    panel shows. Blank padding shows as a counted marker (the tail stays on screen);
    other padding cuts the call, and "y" is refused until "v" showed the rest."""
    work = terminal.workdir
    tail = "; echo TAIL-$((6*7))"
    (work / "blank.txt").write_text("run `echo HEAD-SHOWN" + " " * 4100 + tail + "`")
    (work / "long.txt").write_text("run `echo HEAD-SHOWN; : " + "x" * 4100 + tail + "`")
    if os.geteuid() == 0:  # a root server runs model code as the workspace's owner
        prepare_workspace(work)

    approve = r"Run it\? \[y\]es, \[a\]lways, \[n\]o, \[s\]top the run:"
    done = r"(?m)^exit=\d+$"
    seen = {p: len(re.findall(p, terminal.screen())) for p in (approve, done)}  # earlier tests'
    terminal.type('deputy run "$(cat blank.txt)"; echo "exit=$?"')
    screen = terminal.wait_for(approve, count=seen[approve] + 1)
    panel = screen[screen.rindex("Approve run_bash?") :]
    assert "4100" in panel and "blanks" in panel and "TAIL-$((6*7))" in panel
    terminal.type("n")
    terminal.wait_for(done, count=seen[done] + 1)
    assert "TAIL-42" not in terminal.screen()

    terminal.type('deputy run "$(cat long.txt)"; echo "exit=$?"')
    screen = terminal.wait_for(r"The call is cut: \[v\]iew the rest, \[n\]o, \[s\]top the run:")
    start = screen.rindex("Approve run_bash?")
    assert "HEAD-SHOWN" in screen[start:] and "TAIL-$((6*7))" not in screen[start:]
    terminal.type("y")  # approving what was never shown is refused
    terminal.wait_for(r"Not yet: see the whole call first \(type v\)\.")
    terminal.type("v")
    screen = terminal.wait_for(approve, count=seen[approve] + 2)
    rest = screen[screen.index("The rest of the run_bash call", start) :]
    assert "TAIL-$((6*7))" in rest
    terminal.type("y")
    screen = terminal.wait_for(done, count=seen[done] + 2)
    assert "TAIL-42" in screen[start:]  # what ran is what was shown


def _since(screen: str, marker: str) -> str:
    """What the screen shows from the last ``marker`` on."""
    return screen[screen.rindex(marker) :]


def test_markdown_slash_commands_and_options_in_a_terminal(terminal: Tmux) -> None:
    """Replies render as Markdown, escapes and links a model wrote stay inert, slash
    commands act on the session and never reach the model, and options take effect."""
    done = r"(?m)^exit=\d+$"
    menu = r"Things to try \(type one\):"
    ready = r"Type a task, or /help for the commands\."
    used = r"\d+ requests? · 0 tool calls"
    seen = {p: len(re.findall(p, terminal.screen())) for p in (done, menu, ready, used)}
    terminal.type('deputy; echo "exit=$?"')
    terminal.wait_for(ready, count=seen[ready] + 1)
    terminal.type("hello")
    terminal.wait_for(menu, count=seen[menu] + 1)
    screen = _since(terminal.wait_for(used, count=seen[used] + 1), "Hi! I'm the offline")
    screen = " ".join(screen.split())  # rich wraps paragraphs itself
    assert "• list files: I call list_files on your workspace." in screen  # rendered
    assert "**" not in screen and "`" not in screen
    assert "ask me something: I call ask_user and you answer at the prompt." in screen
    assert "this app" not in screen and "run deputy --model openai/gpt-4.1-mini" in screen

    # The demo quotes this message back: its text then holds escapes and a link.
    hostile = "\x1b[31mRED\x1b]8;;http://o.ex/\x1b\\ok\x1b]8;;\x1b\\ [md](http://md.ex/x)"
    terminal.tmux("send-keys", "-t", "cli", "-l", hostile)
    terminal.key("Enter")
    terminal.wait_for(used, count=seen[used] + 2)  # that reply has ended
    styled = terminal.tmux("capture-pane", "-p", "-e", "-J", "-t", "cli", "-S", "-")
    reply = _since(styled, "You wrote ")
    reply = reply[: reply.index("\n\n")]
    assert "\x1b]8" not in reply and "o.ex" not in reply  # no hyperlink, not even its text
    assert "\x1b[31m" not in reply  # the model's red never reached the terminal
    assert "md (" in re.sub(r"\x1b\[[0-9;]*m", "", reply)  # the link shows its address

    for line in ("/help", "/turns", "/bogus", "/clear", "/turns", "/cost"):
        terminal.type(line)
    screen = _since(terminal.wait_for(r"Total cost: \$0\.00"), "Commands\n  /help")
    assert "/compact [n]" in screen and "/save [path]" in screen
    assert "The conversation has 4 turns." in screen
    assert "Unknown command: /bogus. Type /help for the commands." in screen
    assert "Conversation cleared" in screen and "The conversation has 0 turns." in screen
    assert "You wrote" not in screen and "request" not in screen  # no command was a task
    terminal.wait_for_prompt()
    terminal.key("C-d")  # leaves, as /exit does
    terminal.wait_for(done, count=seen[done] + 1)

    ok = r"(?m)^exit=0$"
    ended = len(re.findall(ok, terminal.screen()))
    terminal.type('deputy run hello --no-color --tools minimal --no-ask; echo "exit=$?"')
    terminal.wait_for(ok, count=ended + 1)
    styled = terminal.tmux("capture-pane", "-p", "-e", "-J", "-t", "cli", "-S", "-")
    plain = _since(styled, "deputy run hello --no-color")
    plain = plain[plain.index("\n") : plain.index("exit=0")]
    assert "- **list files**: I call `list_files`" in plain  # written as is, no colour
    assert "\x1b[" not in plain
    assert "write a note" not in plain and "ask me something" not in plain

    failed = r"(?m)^exit=2$"
    ended = len(re.findall(failed, terminal.screen()))
    terminal.type('deputy run x --max-cost free; echo "exit=$?"')
    screen = terminal.wait_for(failed, count=ended + 1)
    assert "deputy: argument -c/--max-cost: 'free' is not an amount of US dollars above 0" in (
        screen
    )
