"""Recognising shell commands that could wreck the machine (for ``hook_block_dangerous_bash``).

A guard rail, not a sandbox: :func:`dangerous_bash_reason` reads a ``bash -c`` script
with a small lexer and names the danger of the first command that would delete the
root or home directory, format or overwrite a disk, fork-bomb, pipe a download into a
shell, open up permissions on ``/``, or power the machine off. It does not parse code
in other languages (``python -c "os.system(...)"``).

Examples:
    >>> dangerous_bash_reason("ls -la /")
    >>> dangerous_bash_reason("sudo rm -rf /")
    'recursively deletes the root directory /'
"""

from __future__ import annotations

import re

from ._util.shell_lex import Command as _Command
from ._util.shell_lex import lex as _lex
from ._util.shell_lex import program as _program
from ._util.shell_lex import strip_prefixes as _strip_prefixes

# =========================================================================== dangerous bash
#
# The script is read with the small shell lexer of _util/shell_lex.py, not a shell: it
# finds the simple commands of a script (split at ; & && || | newlines), their words
# after quote removal, their redirections, and the code nested in $( ), backticks,
# <( ), >( ), ( ) groups; that code and `sh -c` strings are checked recursively.
# Text inside quotes is data unless a shell runs it (so `echo "rm -rf /"` passes
# and `bash -c "rm -rf /"` does not). When the input has an unbalanced quote, it is
# also checked once more with every quote character removed, so a stray quote cannot
# hide a command.

_MAX_DEPTH = 12
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh"})
_INTERPRETERS = frozenset(
    {"python", "python2", "python3", "perl", "ruby", "node", "php", "pwsh", "lua"}
)
_DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh"})
_CODE_RUNNERS = _SHELLS | _INTERPRETERS | {"eval", "source", "."}
_POWER = frozenset({"shutdown", "reboot", "halt", "poweroff"})
_SYSTEMCTL_POWER = frozenset({"poweroff", "reboot", "halt", "kexec", "soft-reboot"})
_SYSTEM_DIRS = frozenset(
    {
        "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "opt",
        "proc", "root", "sbin", "srv", "sys", "usr", "var", "snap",
        "users", "system", "library", "applications", "private", "volumes",
    }
)  # fmt: skip
_DISK = re.compile(
    r"^/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|rdisk\d|md\d|dm-\d"
    r"|nbd\d|mapper/|root$)",
    re.IGNORECASE,
)
# The kernel's knobs: sysctl files, /sys, and the trigger files under /proc.
_KERNEL_KNOB = re.compile(r"^/+(?:proc/+sys|sys|proc/+sysrq-trigger)(?:/|$)", re.IGNORECASE)


def _protected(path: str) -> str | None:
    """Describe ``path`` if deleting or moving it would wreck the system or a home."""
    p = path.strip()
    if not p:
        return None
    home = re.match(r"^(?:\$HOME|\$\{HOME\}|~[A-Za-z0-9_.-]*)(?=/|$)", p)
    if home:
        rest, is_home = p[home.end() :], True
    elif p.startswith("/"):
        rest, is_home = p, False
    else:
        return None
    parts: list[str] = []
    for part in rest.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    while parts and parts[-1] in ("*", ".*", "**"):
        parts.pop()
    if is_home:
        return "your home directory" if not parts else None
    if not parts:
        return "the root directory /"
    top = parts[0].lower()
    if len(parts) == 1 and top in _SYSTEM_DIRS:
        return f"the system directory /{parts[0]}"
    if len(parts) == 2 and top in ("home", "users"):
        return f"the home directory /{parts[0]}/{parts[1]}"
    if len(parts) == 2 and top == "usr":
        return f"the system directory /usr/{parts[1]}"
    return None


def _split_options(args: list[str]) -> tuple[list[str], list[str]]:
    """Split args into options and operands (everything after ``--`` is an operand)."""
    options, operands = [], []
    for k, a in enumerate(args):
        if a == "--":
            operands.extend(args[k + 1 :])
            break
        if a.startswith("-") and a != "-":
            options.append(a)
        else:
            operands.append(a)
    return options, operands


def _long_option(option: str, name: str) -> bool:
    """True if ``option`` is ``--name`` or a GNU abbreviation of it (``--recur``)."""
    given = option[2:].split("=", 1)[0]
    return option.startswith("--") and len(given) >= 2 and name.startswith(given)


def _check_rm(args: list[str]) -> str | None:
    options, operands = _split_options(args)
    recursive = any(
        _long_option(o, "recursive") or (not o.startswith("--") and ("r" in o or "R" in o))
        for o in options
    )
    force = any(_long_option(o, "force") or (not o.startswith("--") and "f" in o) for o in options)
    if any(_long_option(o, "no-preserve-root") for o in options):
        return "deletes with --no-preserve-root, which lets rm delete the root directory"
    if not (recursive or force):
        return None
    for target in operands:
        where = _protected(target)
        if where:
            return f"recursively deletes {where}" if recursive else f"force-deletes {where}"
        if recursive:
            var = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?/\**", target)
            if var and var.group(1) != "HOME":
                return (
                    f"recursively deletes '{target}', which is the root directory when "
                    f'${var.group(1)} is empty or unset (use "${{{var.group(1)}:?}}/")'
                )
    return None


def _world_writable(mode: str) -> bool:
    if re.fullmatch(r"0*[0-7]{0,3}[2367]", mode):
        return True
    return any(
        re.fullmatch(r"[ugoa]*[ao][ugoa]*[+=][rwxXst]*w[rwxXst]*|[+=][rwxXst]*w[rwxXst]*", clause)
        for clause in mode.split(",")
    )


def _check_chmod(prog: str, args: list[str]) -> str | None:
    recursive = False
    operands: list[str] = []
    for a in args:
        if a == "--recursive" or _long_option(a, "recursive"):
            recursive = True
        elif a.startswith("--"):
            continue
        elif a.startswith("-") and "R" in a:
            recursive = True
        elif prog == "chmod" and re.fullmatch(r"-[rwxXst]+", a) and not operands:
            operands.append(a)  # a mode such as -x
        elif not a.startswith("-"):
            operands.append(a)
    if len(operands) < 2:
        return None
    mode, targets = operands[0], operands[1:]
    what = "permissions" if prog == "chmod" else "ownership"
    for target in targets:
        where = _protected(target)
        if where and recursive:
            return f"recursively changes the {what} of {where}"
        if where and prog == "chmod" and _world_writable(mode):
            return f"makes {where} writable by everyone"
    return None


def _check_mv(args: list[str]) -> str | None:
    operands = _split_options(args)[1]
    target_dir = None
    for k, o in enumerate(args):
        if o == "-t" and k + 1 < len(args):
            target_dir = args[k + 1]
        elif o.startswith("--target-directory="):
            target_dir = o.split("=", 1)[1]
    if target_dir is not None:
        sources = [a for a in operands if a != target_dir]
    else:
        sources = operands[:-1] if len(operands) > 1 else operands
    for source in sources:
        where = _protected(source)
        if where:
            return f"moves {where} away"
    if target_dir is None and len(operands) > 1 and operands[-1] == "/dev/null":
        return "moves a file onto /dev/null, which breaks /dev/null for every program"
    return None


def _check_find(args: list[str]) -> str | None:
    paths = []
    for k, a in enumerate(args):
        if a.startswith(("-", "(", "!")):
            expression = args[k:]
            break
        paths.append(a)
    else:
        expression = []
    where = next((w for w in map(_protected, paths) if w), None)
    if where is None:
        return None
    if "-delete" in expression:
        return f"deletes everything under {where} (find -delete)"
    for k, a in enumerate(expression):
        deleter = k + 1 < len(expression) and _program(expression[k + 1]) in ("rm", "shred")
        if a in ("-exec", "-execdir", "-ok", "-okdir") and deleter:
            return f"deletes everything under {where} (find -exec rm)"
    return None


def _check_kill(args: list[str]) -> str | None:
    if "--" in args:
        pids = args[args.index("--") + 1 :]
    else:
        pids = [a for k, a in enumerate(args) if k > 0 or not a.startswith("-")]
    if "-1" in pids:
        return "kills every process you can signal (kill -1)"
    return None


_SSH_OPTIONS_WITH_VALUE = frozenset("BbcDEeFIiJLlmOopQRSWw")


def _ssh_command(args: list[str]) -> str:
    """The remote command of ``ssh [options] destination command...``."""
    k = 0
    while k < len(args) and args[k].startswith("-") and args[k] != "--":
        option = args[k]
        k += 2 if len(option) == 2 and option[1] in _SSH_OPTIONS_WITH_VALUE else 1
    if k < len(args) and args[k] == "--":
        k += 1
    return " ".join(args[k + 1 :])


def _shell_payloads(prog: str, args: list[str]) -> list[str]:
    """The code strings a shell is told to run: ``bash -c CODE``, ``su -c CODE``."""
    out = []
    for k, a in enumerate(args):
        if a.startswith("--command="):
            out.append(a.split("=", 1)[1])
        elif a == "--command" and k + 1 < len(args):
            out.append(args[k + 1])
        elif a.startswith("-") and not a.startswith("--") and "c" in a[1:]:
            rest = [b for b in args[k + 1 :] if not b.startswith("-")]
            if rest:
                out.append(rest[0])
        elif not a.startswith("-") and prog != "su":
            break  # bash script.sh args...: the rest are the script's arguments
    return out


def _reads_code_from_stdin(words: list[str]) -> bool:
    """True if the command (prefixes stripped) runs the program text piped into it."""
    if not words:
        return False
    prog, args = _program(words[0]), words[1:]
    if prog in _SHELLS:
        return True
    if prog in _INTERPRETERS:
        # `python3`, `python3 -u` and `python3 -` read the program from stdin;
        # `python3 -m json.tool`, `perl -e CODE` and `node script.js` do not.
        for a in args:
            if a == "-":
                return True
            if a in ("-c", "-m", "-e", "-E", "-r") or not a.startswith("-"):
                return False
        return True
    return False


def _downloads(command: _Command, depth: int) -> bool:
    """True if the command fetches something from the network (itself or nested code)."""
    words, _ = _strip_prefixes(command.words)
    if words and _program(words[0]) in _DOWNLOADERS:
        return True
    return depth < _MAX_DEPTH and any(
        _mentions_download(code, depth + 1) for code in command.nested
    )


def _mentions_download(code: str, depth: int) -> bool:
    return any(_downloads(c, depth) for c in _lex(code).commands)


_NAME = r"([^\s;&|(){}<>'\"`$]+)"
_FUNCTIONS = (
    re.compile(r"(?<![^\s;&|(){}])(?:function\s+)?" + _NAME + r"\s*\(\s*\)\s*\{([^}]*)\}"),
    re.compile(r"(?<![^\s;&|(){}])function\s+" + _NAME + r"\s*\{([^}]*)\}"),
)


def _fork_bomb(skeleton: str) -> bool:
    """A function whose body calls itself twice with a ``&``: ``:(){ :|:& };:``."""
    if "{" not in skeleton:
        return False
    for m in (m for pattern in _FUNCTIONS for m in pattern.finditer(skeleton)):
        name, body = m.group(1), m.group(2)
        calls = re.findall(rf"(?<![^\s;&|(){{}}]){re.escape(name)}(?![^\s;&|(){{}}])", body)
        if len(calls) >= 2 and "&" in body.replace("&&", ""):
            return True
    return False


def _check_command(command: _Command, depth: int) -> str | None:
    for op, target in command.redirects:
        if ">" in op and _DISK.match(target):
            return f"writes directly to the disk device {target}"
        if ">" in op and _KERNEL_KNOB.match(target):
            return f"writes to the kernel setting {target}"
    words, payloads = _strip_prefixes(command.words)
    for payload in payloads:
        reason = _check(payload, depth + 1)
        if reason:
            return reason
    if not words:
        return None
    prog, args = _program(words[0]), words[1:]
    if prog == "rm":
        return _check_rm(args)
    if prog.startswith("mkfs") or prog == "mke2fs":
        return f"formats a filesystem ({prog}), destroying what the device holds"
    if prog == "sysctl":
        return _check_sysctl(args)
    if prog in ("tee", "cp", "dd", "install", "truncate"):
        knob = next(
            (a.removeprefix("of=") for a in args if _KERNEL_KNOB.match(a.removeprefix("of="))),
            None,
        )
        if knob:
            return f"writes to the kernel setting {knob} ({prog})"
    if prog in ("wipefs", "blkdiscard", "mkswap", "shred", "sgdisk", "tee", "cp"):
        candidates = _split_options(args)[1][-1:] if prog == "cp" else args
        disk = next((a for a in candidates if _DISK.match(a)), None)
        if disk:
            return f"overwrites the disk device {disk} ({prog})"
        return None
    if prog == "dd":
        target = next((a[3:] for a in args if a.lower().startswith("of=")), "")
        if _DISK.match(target):
            return f"writes raw data to the disk device {target} (dd)"
        return None
    if prog in ("chmod", "chown", "chgrp"):
        return _check_chmod(prog, args)
    if prog == "mv":
        return _check_mv(args)
    if prog == "find":
        return _check_find(args)
    if prog in _POWER:
        return f"shuts down or restarts the machine ({prog})"
    if prog in ("init", "telinit"):
        level = next((a for a in args if a in ("0", "6")), None)
        return f"shuts down or restarts the machine ({prog} {level})" if level else None
    if prog == "systemctl":
        power = next((a for a in args if a.removesuffix(".target") in _SYSTEMCTL_POWER), None)
        if power:
            return f"shuts down or restarts the machine (systemctl {power})"
        return None
    if prog == "kill":
        return _check_kill(args)
    if prog == "ssh":  # the remote command runs on another machine, but still runs
        remote = _ssh_command(args)
        return _check(remote, depth + 1) if remote else None
    if prog in _CODE_RUNNERS or prog == "su":
        if prog in _SHELLS or prog == "su":
            for code in _shell_payloads(prog, args):
                reason = _check(code, depth + 1)
                if reason:
                    return reason
            for op, target in command.redirects:
                if op == "<<<":
                    reason = _check(target, depth + 1)
                    if reason:
                        return reason
        if prog == "eval":
            reason = _check(" ".join(args), depth + 1)
            if reason:
                return reason
        if depth < _MAX_DEPTH and any(_mentions_download(c, depth + 1) for c in command.nested):
            return f"runs a script downloaded from the network ({prog})"
    return None


def _check_sysctl(args: list[str]) -> str | None:
    """``sysctl -w``, ``sysctl key=value`` and ``sysctl -p`` change the kernel's settings."""
    for arg in args:
        if arg in ("-w", "--write", "-p", "--load", "--system") or arg.startswith(
            ("--load=", "-p")
        ):
            return "changes kernel settings (sysctl)"
        if not arg.startswith("-") and "=" in arg:
            return f"changes the kernel setting {arg.split('=', 1)[0]} (sysctl)"
    return None


def _check_pipelines(commands: list[_Command], depth: int) -> str | None:
    """A download piped (through any number of commands) into a shell or interpreter."""
    downloading = False
    for command in commands:
        words, _ = _strip_prefixes(command.words)
        if downloading:
            runs_stdin = _reads_code_from_stdin(words)
            if not runs_stdin and command.group is not None:
                inner = _lex(command.group).commands
                runs_stdin = bool(inner) and _reads_code_from_stdin(
                    _strip_prefixes(inner[0].words)[0]
                )
            if runs_stdin:
                name = _program(words[0]) if words else "a subshell"
                return f"pipes a download into {name}, running code from the network unseen"
        downloading = (downloading or _downloads(command, depth)) and command.pipes_into_next
    return None


def _check(text: str, depth: int = 0, *, unquoted: bool = False) -> str | None:
    if depth > _MAX_DEPTH:
        return "nests commands too deeply to check"
    script = _lex(text)
    if _fork_bomb(script.skeleton):
        return "defines a fork bomb, which starts processes until the machine stops responding"
    for command in script.commands:
        reason = _check_command(command, depth)
        if reason:
            return reason
    reason = _check_pipelines(script.commands, depth)
    if reason:
        return reason
    for command in script.commands:
        for code in command.nested:
            reason = _check(code, depth + 1, unquoted=unquoted)
            if reason:
                return reason
    if not script.balanced and not unquoted:
        # An unbalanced quote or parenthesis: check again with no quoting at all, so
        # text after a stray quote is seen as commands.
        return _check(re.sub(r"[\"'`]", " ", text), depth + 1, unquoted=True)
    return None


def dangerous_bash_reason(command: str) -> str | None:
    """Why a shell command is too dangerous to run, or None if no known danger was found.

    Looks for: recursive or forced deletes of ``/``, system directories and home
    directories; ``mkfs``; raw writes to disk devices (``dd of=/dev/sda``,
    ``> /dev/sda``); fork bombs; downloads piped into a shell or interpreter
    (``curl ... | sh``, ``bash <(curl ...)``, ``sh -c "$(curl ...)"``); recursive
    ``chmod``/``chown`` of system paths or making them world-writable; ``shutdown``,
    ``reboot``, ``halt``, ``poweroff``, ``init 0/6``, ``systemctl poweroff``; writes
    to the kernel's settings (``> /proc/sys/...``, ``tee /sys/...``, ``sysctl -w``);
    moving ``/`` or a home away; ``kill -9 -1``. It sees through ``sudo``, ``env``,
    ``command``, absolute binary paths, quoting, chaining (``;``, ``&&``, ``||``,
    ``|``, newlines), ``$( )``, backticks and ``bash -c "..."``.

    Quoted text given to a program that does not run it is data: ``echo "rm -rf /"``
    passes. An unbalanced quote is checked as if every quote were absent. This is a
    guard rail against accidents, not a sandbox: a determined script can hide a
    command from any static check.

    Examples:
        >>> dangerous_bash_reason("sudo rm -rf /")
        'recursively deletes the root directory /'
        >>> dangerous_bash_reason("rm -rf ./build") is None
        True
    """
    if not isinstance(command, str):
        return None
    return _check(command)
