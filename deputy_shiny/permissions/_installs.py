"""Recognising package installs in model-written code (for ``Permissions.install_packages``).

deputy denies its ``install_package`` tool unless ``install_packages`` is on; here the
code tools are the ones that install, so :func:`install_in_call` reads a ``run_bash``
command or ``run_python`` code and names the first installer it runs (``pip install``,
``uv pip install``, ``npm install``, ``apt-get install``, ...). A best-effort check,
not a boundary: code can always assemble a command no static reading sees
(``getattr(os, "sys" + "tem")``), and the sandbox (no network by default) is what
actually confines it. What it reads:

* bash, with the shell lexer of :mod:`deputy_shiny._util.shell_lex`: every simple
  command past ``sudo``/``env``/... prefixes, code nested in ``$( )``, backticks and
  ``( )`` groups, ``bash -c "..."`` strings, and ``python -c "..."`` code;
* Python, with :mod:`ast`: ``os.system``/``os.popen``/``subprocess.*`` calls (also
  imported under another name) whose command is a string, f-string or list literal, or
  a variable assigned one; ``pip.main([...])``; and ``python -m pip install`` lists
  built with ``sys.executable``.

Examples:
    >>> install_in_bash("cd app && sudo pip3 install -U requests")
    'pip3 install'
    >>> install_in_bash("echo 'pip install x'") is None
    True
    >>> install_in_python("import subprocess\\nsubprocess.run(['npm', 'i', 'left-pad'])")
    'npm i'
"""

from __future__ import annotations

import ast
import re
from typing import Any

from .._dangerous_bash import _SHELLS, _shell_payloads
from .._util.shell_lex import lex, program, strip_prefixes

__all__ = ["install_in_bash", "install_in_call", "install_in_python"]

_MAX_DEPTH = 8
_UNKNOWN = "\x00"  # a word the reader cannot know (a variable, a call)
_TOO_DEEP = "commands nested too deeply to check"

# program -> the subcommands that install packages (the first word that is not an option)
_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "pip": frozenset({"install"}),
    "pipx": frozenset({"install", "inject", "upgrade", "reinstall"}),
    "npm": frozenset({"install", "i", "add", "ci", "isntall", "in", "ins", "inst", "insta"}),
    "pnpm": frozenset({"install", "i", "add"}),
    "yarn": frozenset({"add", "install"}),
    "bun": frozenset({"add", "install", "i"}),
    "apt": frozenset({"install", "reinstall"}),
    "apt-get": frozenset({"install", "reinstall", "build-dep"}),
    "aptitude": frozenset({"install", "reinstall"}),
    "dnf": frozenset({"install", "reinstall"}),
    "yum": frozenset({"install", "reinstall"}),
    "zypper": frozenset({"install", "in"}),
    "apk": frozenset({"add"}),
    "brew": frozenset({"install", "reinstall"}),
    "conda": frozenset({"install", "create"}),
    "mamba": frozenset({"install", "create"}),
    "micromamba": frozenset({"install", "create"}),
    "gem": frozenset({"install"}),
    "cargo": frozenset({"install"}),
    "go": frozenset({"install", "get"}),
    "poetry": frozenset({"add", "install"}),
    "pipenv": frozenset({"install"}),
    "easy_install": frozenset(),  # installs whatever its arguments are
    "dpkg": frozenset(),  # `dpkg -i`: checked below
}
# uv's installing subcommands: `uv pip install|sync`, `uv add`, `uv sync`, `uv tool install`
_UV = {"pip": frozenset({"install", "sync"}), "tool": frozenset({"install"})}
_UV_DIRECT = frozenset({"add", "sync"})
# options of the package managers that take a value (so the value is not the subcommand)
_OPTIONS_WITH_VALUE = frozenset(
    {"-o", "-t", "-c", "--option", "--target-release", "--config-file", "-C", "--prefix",
     "--cwd", "--dir", "--directory", "--project", "-r", "--requirement", "--index-url", "-i",
     "--python", "-p", "--name", "-n", "--channel", "--workspace", "-w", "--filter", "-F"}
)  # fmt: skip
_PIP = re.compile(r"^pip\d*(?:\.\d+)*$")
_PYTHON = re.compile(r"^(?:python|pypy)\d*(?:\.\d+)*$")
_R_INSTALL = re.compile(r"install\.packages\s*\(|(?:remotes|devtools|pak)::\w*install|pak::pkg")


def _subcommand(args: list[str]) -> str | None:
    """The first argument that is not an option (nor an option's value)."""
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "--":
            return None
        if a.startswith("-") and a != "-":
            skip = a in _OPTIONS_WITH_VALUE
            continue
        return a
    return None


def _installer(words: list[str]) -> str | None:
    """``"<program> <subcommand>"`` when these command words (prefixes stripped) install."""
    if not words:
        return None
    prog, args = program(words[0]), words[1:]
    if _PIP.match(prog):
        prog = "pip"
    if _PYTHON.match(prog) or prog == "py":
        # python -m pip install ... / python3 -m uv pip install ...
        for k, a in enumerate(args):
            if a == "-m" and k + 1 < len(args):
                return _installer(args[k + 1 :])
            if a.startswith("-m") and len(a) > 2:
                return _installer([a[2:], *args[k + 1 :]])
            if not a.startswith("-"):
                return None
        return None
    if prog in ("r", "rscript"):
        code = " ".join(args)
        return f"{words[0]} install.packages" if _R_INSTALL.search(code) else None
    if prog == "uv":
        sub = _subcommand(args)
        if sub in _UV_DIRECT:
            return f"uv {sub}"
        if sub in _UV:
            rest = args[args.index(sub) + 1 :]
            inner = _subcommand(rest)
            if inner in _UV[sub]:
                return f"uv {sub} {inner}"
        return None
    if prog == "dpkg":
        hit = any(a == "--install" or re.fullmatch(r"-[a-zA-Z]*i[a-zA-Z]*", a) for a in args)
        return "dpkg -i" if hit else None
    if prog == "easy_install":
        return "easy_install"
    subcommands = _SUBCOMMANDS.get(prog)
    if subcommands is None:
        return None
    sub = _subcommand(args)
    if sub in subcommands:
        return f"{program(words[0])} {sub}"
    if prog == "yarn" and sub is None:  # a bare `yarn` installs the project's dependencies
        return "yarn"
    return None


def install_in_bash(command: str, depth: int = 0) -> str | None:
    """The installer a shell command runs (``"pip install"``), or None if none is seen.

    Examples:
        >>> install_in_bash('bash -c "python3 -m pip install numpy"')
        'pip install'
        >>> install_in_bash("pip list && npm test") is None
        True
    """
    if not isinstance(command, str):
        return None
    if depth > _MAX_DEPTH:
        return _TOO_DEEP  # fail closed: an install could hide below what is read
    script = lex(command)
    for cmd in script.commands:
        words, payloads = strip_prefixes(cmd.words)
        for code in [*payloads, *cmd.nested, *([cmd.group] if cmd.group else [])]:
            found = install_in_bash(code, depth + 1)
            if found:
                return found
        found = _installer(words)
        if found:
            return found
        if not words:
            continue
        prog, args = program(words[0]), words[1:]
        if prog in _SHELLS or prog == "su":
            for code in _shell_payloads(prog, args):
                found = install_in_bash(code, depth + 1)
                if found:
                    return found
        if _PYTHON.match(prog) and "-c" in args[:-1]:
            found = install_in_python(args[args.index("-c") + 1], depth + 1)
            if found:
                return found
    if not script.balanced and depth == 0:
        # An unbalanced quote: read it once more with no quoting, so a stray quote
        # cannot hide a command (as hook_block_dangerous_bash does).
        return install_in_bash(re.sub(r"[\"'`]", " ", command), depth + 1)
    return None


# --------------------------------------------------------------------------- Python

# calls that run a shell command string
_SHELL_CALLS = frozenset({"system", "popen", "getoutput", "getstatusoutput"})
# calls whose first argument is a program with its arguments (or a string with shell=True)
_PROCESS_CALLS = frozenset(
    {"run", "call", "check_call", "check_output", "Popen", "create_subprocess_shell"}
)
_EXEC_CALLS = re.compile(r"^(?:exec|spawn)[lv]p?e?$")


def _literal(node: ast.AST, names: dict[str, ast.AST], depth: int = 0) -> Any:
    """A str, or a list of words, when the expression is one a reader can know."""
    if depth > 4:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else _UNKNOWN
            for v in node.values
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left, names, depth + 1), _literal(node.right, names, depth + 1)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        if isinstance(left, list) and isinstance(right, list):
            return left + right
        return None
    if isinstance(node, ast.List | ast.Tuple):
        words: list[str] = []
        for item in node.elts:
            value = _literal(item, names, depth + 1)
            if isinstance(item, ast.Starred):
                value = _literal(item.value, names, depth + 1)
                words.extend(value if isinstance(value, list) else [_UNKNOWN])
                continue
            if isinstance(value, str):
                words.append(value)
            elif _dotted(item) in ("sys.executable", "executable"):
                words.append("python")
            else:
                words.append(_UNKNOWN)
        return words
    if isinstance(node, ast.Name) and node.id in names:
        return _literal(names[node.id], {}, depth + 1)
    return None


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _call_name(call: ast.Call, aliases: dict[str, str]) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return aliases.get(func.id, func.id)
    return ""


def _from_command(value: Any, depth: int) -> str | None:
    if isinstance(value, str):
        return install_in_bash(value, depth + 1)
    if isinstance(value, list):
        return _installer([w for w in value if isinstance(w, str)])
    return None


def _check_call(
    call: ast.Call, names: dict[str, ast.AST], aliases: dict[str, str], depth: int
) -> str | None:
    name = _call_name(call, aliases)
    args = call.args
    if name in _SHELL_CALLS or name in _PROCESS_CALLS:
        if args:
            return _from_command(_literal(args[0], names), depth)
        for kw in call.keywords:
            if kw.arg == "args":
                return _from_command(_literal(kw.value, names), depth)
        return None
    if name == "create_subprocess_exec" or _EXEC_CALLS.match(name):
        if name.startswith(("execv", "spawnv")):
            # execv(path, [argv0, ...]), spawnv(mode, path, [argv0, ...])
            listed = _literal(args[-1], names) if args else None
            return _from_command(listed, depth) if isinstance(listed, list) else None
        words = [_literal(a, names) for a in args]
        flat = [w if isinstance(w, str) else _UNKNOWN for w in words]
        if name.startswith("spawn"):
            flat = flat[1:]  # spawnl(mode, path, arg0, ...)
        if name != "create_subprocess_exec":
            flat = flat[:1] + flat[2:]  # execlp(file, arg0, ...): arg0 repeats the program
        return _installer(flat)
    if name == "main" and _dotted(call.func).startswith("pip") and args:
        listed = _literal(args[0], names)
        if isinstance(listed, list):
            return _installer(["pip", *[w for w in listed if isinstance(w, str)]])
    if name == "run_module" and args and _literal(args[0], names) == "pip":
        return "pip (runpy)"
    return None


def install_in_python(code: str, depth: int = 0) -> str | None:
    """The installer Python code runs through a shell or a subprocess, or None.

    Code that does not parse runs nothing, so it is not an install.

    Examples:
        >>> install_in_python("import os; os.system('apt-get install -y jq')")
        'apt-get install'
        >>> install_in_python("import sys, subprocess\\n"
        ...     "subprocess.check_call([sys.executable, '-m', 'pip', 'install', 'rich'])")
        'pip install'
        >>> install_in_python("print('pip install x')") is None
        True
    """
    if not isinstance(code, str):
        return None
    if depth > _MAX_DEPTH:
        return _TOO_DEEP
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # Python cannot compile it either, so it runs nothing
    aliases: dict[str, str] = {}
    names: dict[str, ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                names[target.id] = node.value
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            found = _check_call(node, names, aliases, depth)
            if found:
                return found
    return None


def install_in_call(tool_name: str, arguments: dict[str, Any]) -> str | None:
    """The installer a built-in code tool's call would run, or None.

    Examples:
        >>> install_in_call("run_bash", {"command": "uv pip install polars"})
        'uv pip install'
        >>> install_in_call("run_python", {"code": "1 + 1"}) is None
        True
    """
    if tool_name == "run_bash":
        return install_in_bash(arguments.get("command", ""))
    if tool_name == "run_python":
        return install_in_python(arguments.get("code", ""))
    return None
