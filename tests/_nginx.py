"""nginx in front of several app processes, on one loopback origin, for tests and benchmarks.

:func:`start_nginx` writes a config into a temp dir of its own (the system's
``/etc/nginx`` is never read: its pid file, logs and temp paths are all in that dir),
and runs Debian's ``nginx`` as a single process (``daemon off``, ``master_process off``)
as the current user, on a free loopback port. It proxies HTTP and websockets (the
``Upgrade``/``Connection`` headers, and the browser's ``Host`` with its port, which the
kit's ``Origin`` check compares the page with) to the upstream process that the
``route`` cookie names (``map $cookie_route``): the caller sets the cookie, so a test
picks the process a page and its websocket reach, the way a sticky load balancer keeps
a browser on one. Without the cookie, the first upstream serves. Every response says
which upstream served it in ``X-Deputy-Upstream``.

The process gets SIGTERM at :meth:`Nginx.stop`, or when the process that started it dies
(``setpriv --pdeathsig``). A missing nginx raises :class:`NginxMissingError` saying how
to install it (``scripts/test`` does).

Example (not run here: it needs nginx and upstreams)::

    proxy = start_nginx({"a": 8001, "b": 8002})
    try:
        page.context.add_cookies([{"name": "route", "value": "b", "url": proxy.url}])
    finally:
        proxy.stop()
"""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROUTE_COOKIE = "route"
"""The cookie whose value names the upstream a request goes to."""
UPSTREAM_HEADER = "X-Deputy-Upstream"
"""The response header naming the upstream that served it."""

_NAME = re.compile(r"[a-z][a-z0-9_]*")


class NginxMissingError(RuntimeError):
    """nginx is not installed."""


def nginx_binary() -> str:
    """The nginx executable (``/usr/sbin`` is often not on a user's PATH)."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise NginxMissingError(
            "nginx is not installed, and the multi-process tests put it in front of the "
            "app processes: apt-get install nginx (scripts/test installs it)."
        )
    return found


@dataclass
class Nginx:
    """A running nginx: its origin, its process and its directory."""

    port: int
    process: subprocess.Popen[bytes]
    directory: Path

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the one origin every upstream is served on."""
        return f"http://127.0.0.1:{self.port}"

    def error_log(self) -> str:
        """What nginx logged (errors and warnings)."""
        path = self.directory / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def access_log(self) -> list[str]:
        """One line per finished request: ``<upstream name> <status> <method> <uri>``
        (a websocket's line is written when it closes)."""
        path = self.directory / "access.log"
        return path.read_text(errors="replace").splitlines() if path.exists() else []

    def stop(self) -> None:
        """Stop nginx (SIGTERM, then SIGKILL) and remove its directory; safe twice."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


def nginx_config(directory: Path, port: int, upstreams: Mapping[str, int]) -> str:
    """The whole config: a single process, everything under ``directory``, the ``route``
    cookie picking one of ``upstreams`` (name -> loopback port; the first is the default)."""
    names = list(upstreams)
    if not names or not all(_NAME.fullmatch(name) for name in names):
        raise ValueError(f"upstream names must be lower-case identifiers: {names}")
    routes = "\n".join(f"        {name} {name};" for name in names)
    groups = "\n".join(
        f"    upstream {name} {{ server 127.0.0.1:{upstreams[name]}; }}" for name in names
    )
    temp = "\n".join(
        f"    {kind}_temp_path {directory / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""\
daemon off;
master_process off;
pid {directory / "nginx.pid"};
error_log {directory / "error.log"} warn;
worker_rlimit_nofile 16384;
events {{ worker_connections 8192; }}
http {{
    log_format routed '$deputy_upstream $status $request_method $request_uri';
    access_log {directory / "access.log"} routed;
{temp}
    map $cookie_{ROUTE_COOKIE} $deputy_upstream {{
        default {names[0]};
{routes}
    }}
    # A websocket's handshake is an HTTP/1.1 request with "Upgrade: websocket": the
    # proxy passes both hop-by-hop headers on, or the app never sees a websocket.
    map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
{groups}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://$deputy_upstream;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            # $http_host, not $host: the browser's Host with its port, which the
            # page's Origin carries too (the kit refuses a websocket whose Origin
            # is not the app's own).
            proxy_set_header Host $http_host;
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
            proxy_buffering off;
            add_header {UPSTREAM_HEADER} $deputy_upstream always;
        }}
    }}
}}
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def start_nginx(upstreams: Mapping[str, int], *, within: float = 15.0) -> Nginx:
    """Start nginx in front of ``upstreams`` (name -> port on 127.0.0.1) and wait until it
    accepts connections (see the module).

    Raises:
        NginxMissingError: nginx is not installed.
        RuntimeError: it did not start (its error log is in the message).
    """
    binary = nginx_binary()
    # The parent's death stops it too (a test process killed mid-run leaves no nginx).
    prefix = ["setpriv", "--pdeathsig=TERM", "--"] if shutil.which("setpriv") else []
    text = ""
    for _attempt in range(5):  # a port taken between the probe and the bind: another
        directory = Path(tempfile.mkdtemp(prefix="deputy-nginx-"))
        port = _free_port()
        config = directory / "nginx.conf"
        config.write_text(nginx_config(directory, port, upstreams))
        # -e: the error log before the config is read (Debian's default is stderr).
        command = [*prefix, binary, "-p", f"{directory}/", "-c", str(config)]
        command += ["-e", str(directory / "error.log")]
        with (directory / "stderr.log").open("wb") as stderr:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, cwd=directory
            )
        server = Nginx(port, process, directory)
        deadline = time.monotonic() + within
        while process.poll() is None and time.monotonic() < deadline:
            if _answers(port):
                return server
            time.sleep(0.05)
        text = server.error_log() + (directory / "stderr.log").read_text(errors="replace")
        server.stop()
        if "Address already in use" not in text:
            break
    raise RuntimeError(f"nginx did not start:\n{text[-3000:]}")
