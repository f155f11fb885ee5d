"""tests/_nginx.py routes by the ``route`` cookie and keeps the browser's Host; the deploy
page's nginx config is valid nginx and proxies the way the two-process browser test does."""

from __future__ import annotations

import http.server
import re
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._nginx import UPSTREAM_HEADER, nginx_binary, nginx_config, start_nginx

DEPLOY_PAGE = Path(__file__).resolve().parent.parent / "docs" / "deploy.md"


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, int]]:
    """Two HTTP servers; each answers ``<its name> <the Host header it got>``."""
    servers = []
    for name in ("a", "b"):

        class Handler(http.server.BaseHTTPRequestHandler):
            label = name

            def do_GET(self) -> None:
                body = f"{self.label} {self.headers['Host']}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    try:
        yield {"a": servers[0].server_address[1], "b": servers[1].server_address[1]}
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def get(url: str, cookie: str | None) -> tuple[str, str]:
    request = urllib.request.Request(url)
    if cookie is not None:
        request.add_header("Cookie", cookie)
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode(), response.headers[UPSTREAM_HEADER]


def test_the_route_cookie_picks_the_process_and_the_host_keeps_its_port(
    upstreams: dict[str, int],
) -> None:
    proxy = start_nginx(upstreams)
    try:
        host = f"127.0.0.1:{proxy.port}"
        assert get(proxy.url + "/", None) == (f"a {host}", "a")  # no cookie: the first
        assert get(proxy.url + "/", "route=b") == (f"b {host}", "b")
        assert get(proxy.url + "/x", "other=1; route=a") == (f"a {host}", "a")
        assert get(proxy.url + "/", "route=nobody") == (f"a {host}", "a")
        # Everything it writes stays in its own directory.
        assert proxy.access_log()[:2] == ["a 200 GET /", "b 200 GET /"]
        directory = proxy.directory
    finally:
        proxy.stop()
    assert proxy.process.returncode is not None and not directory.exists()


def documented_nginx_block() -> str:
    blocks = re.findall(r"```nginx\n(.*?)```", DEPLOY_PAGE.read_text(), re.DOTALL)
    assert len(blocks) == 1, "the deploy page shows one nginx config"
    return str(blocks[0])


def test_the_documented_nginx_config_is_valid_and_proxies_as_the_test_does(tmp_path: Path) -> None:
    block = documented_nginx_block()
    # The deploy page's lines are the test config's: the same proxying, header by header.
    ours = nginx_config(tmp_path, 8000, {"a": 8001, "b": 8002})
    for line in block.splitlines():
        directive = line.split("#")[0].strip()
        if directive.startswith(("proxy_", "map $http_upgrade")):
            assert directive in ours, directive
    # And it is valid nginx, as an http block's content (nginx -t, no system config).
    temp = "\n".join(f"{kind}_temp_path {tmp_path / kind};" for kind in ("client_body", "proxy"))
    wrapped = (
        f"pid {tmp_path / 'nginx.pid'};\nerror_log {tmp_path / 'error.log'};\n"
        f"events {{}}\nhttp {{\naccess_log off;\n{temp}\n"
        + block.replace("listen 80;", "listen 127.0.0.1:8000;")
        + "}\n"
    )
    (tmp_path / "nginx.conf").write_text(wrapped)
    command = [nginx_binary(), "-t", "-p", f"{tmp_path}/", "-c", str(tmp_path / "nginx.conf")]
    checked = subprocess.run(
        [*command, "-e", str(tmp_path / "error.log")], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr
