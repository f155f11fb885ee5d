"""A small shell lexer, not a shell (for ``hook_block_dangerous_bash``'s check).

:func:`lex` finds the simple commands of a script (split at ; & && || | newlines),
their words after quote removal, their redirections, and the code nested in $( ),
backticks, <( ), >( ), ( ) groups, which the caller checks recursively. Text inside
quotes is data: a :class:`Script`'s skeleton blanks it out and records whether every
quote closed. :func:`program` and :func:`strip_prefixes` read a command's words: the
program it runs, past sudo/env/command/... prefixes and assignments.

Examples:
    >>> from deputy_shiny._util.shell_lex import lex, program, strip_prefixes
    >>> [c.words for c in lex("echo 'a b' && sudo rm -rf $(pwd)").commands]
    [['echo', 'a b'], ['sudo', 'rm', '-rf', '$(pwd)']]
    >>> program("/usr/bin/rm"), strip_prefixes(["sudo", "-u", "root", "rm", "-rf", "/"])[0]
    ('rm', ['rm', '-rf', '/'])
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

_BRACE_LIST = re.compile(r"\{[^{}\s]*,[^{}\s]*\}")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_KEYWORDS = frozenset(
    {"!", "{", "}", "(", ")", "if", "then", "else", "elif", "fi", "do", "done", "while",
     "until", "function", "time", "command", "builtin", "exec", "nohup", "setsid",
     "busybox", "noglob", "coproc", "unbuffer"}
)  # fmt: skip
_PREFIX_OPTIONS_WITH_VALUE: dict[str, frozenset[str]] = {
    "sudo": frozenset(
        {"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R", "--user", "--group",
         "--host", "--prompt", "--close-from", "--chdir", "--role", "--type", "--other-user",
         "--command-timeout", "--chroot"}
    ),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "--unset", "--chdir"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "xargs": frozenset(
        {"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter",
         "--max-args", "--max-procs", "--max-chars", "--max-lines", "--replace", "--eof"}
    ),
    "exec": frozenset({"-a"}),
    "strace": frozenset({"-o", "-e", "-p", "-s", "-u", "-P", "-E"}),
    "chroot": frozenset({"--userspec", "--groups"}),
    "taskset": frozenset(),
    "chrt": frozenset(),
}  # fmt: skip
_PREFIX_POSITIONALS = {"timeout": 1, "chroot": 1, "taskset": 1, "chrt": 1}


@dataclass
class Command:
    words: list[str] = field(default_factory=list)
    redirects: list[tuple[str, str]] = field(default_factory=list)
    nested: list[str] = field(default_factory=list)
    group: str | None = None  # the body of a ( ... ) subshell at command position
    pipes_into_next: bool = False


@dataclass
class Script:
    commands: list[Command]
    skeleton: str  # the text with quoted data blanked out
    balanced: bool


# Finds where nested code opened before ``start`` closes: (inner text, end, balanced).
_Closer = Callable[[str, int], tuple[str, int, bool]]


def _balanced(text: str, start: int) -> tuple[str, int, bool]:
    """The text from ``start`` up to the ``)`` closing an already opened ``(``."""
    depth, i, n = 1, start, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            j = text.find("'", i + 1)
            if j < 0:
                return text[start:], n, False
            i = j + 1
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                return text[start:], n, False
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return text[start:i], i + 1, True
        i += 1
    return text[start:], n, False


def _backtick(text: str, start: int) -> tuple[str, int, bool]:
    """The text from ``start`` up to the closing backtick (start is after the opening one)."""
    i, n = start, len(text)
    while i < n:
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "`":
            return text[start:i], i + 1, True
        i += 1
    return text[start:], n, False


class _Lexer:
    """One left-to-right pass over a script, building its commands and skeleton.

    The state a shell lexer needs (the command being built, the word being built, a
    pending redirection operator, the position) lives on the instance, and each kind
    of token has one method; :meth:`_step` picks it from the next one or two
    characters. The order of :meth:`_step`'s tests matters: ``<(`` before the other
    redirections, ``&`` not followed by ``>`` before them too.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.i = 0
        self.commands: list[Command] = []
        self.skeleton: list[str] = []
        self.balanced = True
        self.cur = Command()
        self.word: list[str] | None = None
        self.redirect: str | None = None

    def run(self) -> Script:
        while self.i < self.n:
            nxt = self.text[self.i + 1] if self.i + 1 < self.n else ""
            self._step(self.text[self.i], nxt)
        self._end_command(False)
        return Script(self.commands, "".join(self.skeleton), self.balanced)

    def _step(self, c: str, nxt: str) -> None:
        """Consume the token that starts at ``self.i`` with ``c`` (``nxt`` follows it)."""
        if c in " \t\r\f\v":
            self._end_word()
            self._emit(c, 1)
        elif c in "\n;":
            self._end_command(False)
            self._emit(c, 1)
        elif c == "&" and nxt != ">":
            self._end_command(False)
            self._emit("&&" if nxt == "&" else "&", 2 if nxt == "&" else 1)
        elif c == "|":
            self._end_command(nxt not in "|")
            op = c + nxt if nxt in "|&" else c
            self._emit(op, len(op))
        elif c in "<>" and nxt == "(":
            self._substitution(_balanced, self.i + 2, c + "(_)")
        elif c in "<>&":
            self._redirection()
        elif c == "'":
            self._single_quoted()
        elif c == "$" and nxt == "'":
            self._ansi_c_quoted()
        elif c == '"':
            self._double_quoted()
        elif c == "\\":
            self._escape(nxt)
        elif c == "$" and nxt == "(":
            self._substitution(_balanced, self.i + 2, "$(_)")
        elif c == "`":
            self._substitution(_backtick, self.i + 1, "`_`")
        elif c == "(":
            self._parenthesis()
        elif c == ")":
            self._end_word()
            self._emit(c, 1)
        elif c == "#" and self.word is None:  # a comment, up to the newline
            j = self.text.find("\n", self.i)
            self.i = self.n if j < 0 else j
        else:
            self._add(c)
            self._emit(c, 1)

    # ----------------------------------------------------------------- building blocks

    def _emit(self, shape: str, width: int) -> None:
        """Record ``shape`` in the skeleton and move past ``width`` characters."""
        self.skeleton.append(shape)
        self.i += width

    def _add(self, part: str) -> None:
        if self.word is None:
            self.word = []
        self.word.append(part)

    def _end_word(self) -> None:
        if self.word is None:
            return
        value, self.word = "".join(self.word), None
        if self.redirect is not None:
            self.cur.redirects.append((self.redirect, value))
            self.redirect = None
        else:
            self.cur.words.append(value)

    def _end_command(self, pipe: bool) -> None:
        self._end_word()
        if self.redirect is not None:
            self.cur.redirects.append((self.redirect, ""))
            self.redirect = None
        if self.cur.words or self.cur.redirects or self.cur.nested:
            self.cur.pipes_into_next = pipe
            self.commands.append(self.cur)
        self.cur = Command()

    def _nested(self, find: _Closer, start: int) -> tuple[str, int]:
        """Record the code that ``find`` delimits from ``start`` as nested; its end."""
        inner, end, ok = find(self.text, start)
        self.balanced = self.balanced and ok
        self.cur.nested.append(inner)
        return inner, end

    # ----------------------------------------------------------------- tokens

    def _substitution(self, find: _Closer, start: int, shape: str) -> None:
        """``$( )``, backticks, ``<( )`` or ``>( )`` outside quotes: part of a word."""
        _, end = self._nested(find, start)
        self._add(self.text[self.i : end])
        self._emit(shape, end - self.i)

    def _redirection(self) -> None:
        text, i, n = self.text, self.i, self.n
        if self.word is not None and "".join(self.word).isdigit():
            self.word = None  # a file descriptor number, as in 2>
        else:
            self._end_word()
        j = i
        while j < n and j - i < 3 and text[j] in "<>&|-" and not (text[j] == "-" and j == i):
            j += 1
        self.redirect = text[i:j]
        self._emit(self.redirect, j - i)

    def _single_quoted(self) -> None:
        j = self.text.find("'", self.i + 1)
        if j < 0:
            self.balanced, j = False, self.n
        self._add(self.text[self.i + 1 : j])
        self._emit("''", j + 1 - self.i)

    def _ansi_c_quoted(self) -> None:
        """``$'...'``: backslash escapes keep the escaped character."""
        text, n = self.text, self.n
        j, part = self.i + 2, []
        while j < n and text[j] != "'":
            if text[j] == "\\" and j + 1 < n:
                part.append(text[j + 1])
                j += 2
            else:
                part.append(text[j])
                j += 1
        self.balanced = self.balanced and j < n
        self._add("".join(part))
        self._emit("''", j + 1 - self.i)

    def _double_quoted(self) -> None:
        """``"..."``: data, except the ``$( )`` and backticks inside, which run."""
        text, n = self.text, self.n
        j, part = self.i + 1, []
        while j < n and text[j] != '"':
            ch = text[j]
            if ch == "\\" and j + 1 < n:
                part.append(text[j + 1] if text[j + 1] in '"\\$`\n' else text[j : j + 2])
                j += 2
            elif ch == "$" and text.startswith("$(", j):
                _, end = self._nested(_balanced, j + 2)
                part.append(text[j:end])
                j = end
            elif ch == "`":
                _, end = self._nested(_backtick, j + 1)
                part.append(text[j:end])
                j = end
            else:
                part.append(ch)
                j += 1
        self.balanced = self.balanced and j < n
        self._add("".join(part))
        self._emit('""', j + 1 - self.i)

    def _escape(self, nxt: str) -> None:
        if nxt == "\n":  # a line continuation
            self.i += 2
        else:
            self._add(nxt)
            self._emit(self.text[self.i : self.i + 2], 2)

    def _parenthesis(self) -> None:
        inner, end, ok = _balanced(self.text, self.i + 1)
        self.balanced = self.balanced and ok
        if not inner.strip():  # name() of a function definition: the body is a command
            self._end_command(False)
            self.skeleton.append("()")
        elif self.word is not None:  # arr=( ... ) and the like
            self._add(self.text[self.i : end])
            self.cur.nested.append(inner)
            self.skeleton.append("(_)")
        else:  # a ( ... ) subshell
            self.cur.nested.append(inner)
            if not self.cur.words:
                self.cur.group = inner
            self.skeleton.append("(_)")
        self.i = end


def lex(text: str) -> Script:
    return _Lexer(text).run()


def program(word: str) -> str:
    """The program a command word names: ``/usr/bin/rm`` and ``\\rm`` are ``rm``."""
    w = word.strip()
    if w.startswith(("$(", "`")):  # $(which rm) -> rm
        inner = w.strip("$()` ").split()
        w = inner[-1] if inner else w
    w = w.lstrip("\\")
    if w not in ("/", "."):
        w = w.rstrip("/").rsplit("/", 1)[-1]
    return w.lower()


def strip_prefixes(words: list[str]) -> tuple[list[str], list[str]]:
    """Drop sudo/env/command/... prefixes and assignments; also return `env -S` strings."""
    payloads: list[str] = []
    words = list(words)
    changed = True
    while words and changed:
        changed = False
        first = words[0]
        if _BRACE_LIST.fullmatch(first):  # {rm,-rf,/} expands to rm -rf /
            words = first[1:-1].split(",") + words[1:]
            changed = True
            continue
        prog = program(first)
        if _ASSIGNMENT.match(first) or first in _KEYWORDS or prog in _KEYWORDS:
            words.pop(0)
            changed = True
            # the options of command/exec/time/... (`command -v`, `exec -a name`)
            while words and words[0].startswith("-") and words[0] != "-":
                if prog == "exec" and words[0] == "-a" and len(words) > 1:
                    words.pop(0)
                words.pop(0)
            continue
        if prog not in _PREFIX_OPTIONS_WITH_VALUE:
            break
        with_value = _PREFIX_OPTIONS_WITH_VALUE[prog]
        words.pop(0)
        changed = True
        while words:
            w = words[0]
            if w == "--":
                words.pop(0)
                break
            if prog == "env" and w in ("-S", "--split-string"):
                words.pop(0)
                if words:
                    payloads.append(words.pop(0))
                continue
            if prog == "env" and w.startswith(("-S", "--split-string=")):
                payloads.append(words.pop(0).split("=", 1)[1] if w.startswith("--") else w[2:])
                continue
            if prog == "env" and _ASSIGNMENT.match(w):
                words.pop(0)
                continue
            if not w.startswith("-") or w == "-":
                break
            words.pop(0)
            if w in with_value and words:
                words.pop(0)
        for _ in range(_PREFIX_POSITIONALS.get(prog, 0)):
            if words:
                words.pop(0)
    return words, payloads
