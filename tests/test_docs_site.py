"""The documentation site builds (mkdocs, strict), from the docstrings and ``docs/``.

``mkdocs build --strict`` fails on a reference to an object that does not exist and on
a broken link between pages. The test also checks that the reference holds the API a
reader looks up first, and runs every page's Python examples, in order, offline (as
``test_readme.py`` does for the README).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    # Not --quiet: it hides the warnings from strict mode too, which then passes a site
    # that `mkdocs build --strict` aborts.
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    return out


@pytest.mark.parametrize(
    ("page", "anchors"),
    [
        (
            "reference/shiny",
            ["deputy_shiny.shiny.agent_chat_server", "deputy_shiny.shiny.AgentChatHandle"],
        ),
        (
            "reference/shiny",
            [
                "deputy_shiny.shiny.playwright.AgentChat",
                "deputy_shiny.shiny.playwright.ApprovalModal",
            ],
        ),
        (
            "reference/agent",
            ["deputy_shiny.Agent.run", "deputy_shiny.Agent.run_async", "deputy_shiny.AgentResult"],
        ),
        ("reference/models", ["deputy_shiny.models.ChatModel"]),
        (
            "reference/testing",
            ["deputy_shiny.testing.FunctionModel", "deputy_shiny.testing.ScriptedModel"],
        ),
        ("reference/permissions", ["deputy_shiny.permissions.Permissions"]),
    ],
)
def test_the_reference_documents_the_api(site: Path, page: str, anchors: list[str]) -> None:
    html = (site / page / "index.html").read_text()
    for anchor in anchors:
        assert f'id="{anchor}"' in html, anchor


def test_docstring_examples_render_as_code_not_as_quotes(site: Path) -> None:
    """An "Examples:" section is a doctest block (code); "Example:" was read as prose, so
    its ``>>>`` lines rendered as nested block quotes."""
    html = (site / "reference" / "usage" / "index.html").read_text()
    assert "<blockquote>" not in html
    assert re.search(r'<div class="highlight"><pre>.*?&gt;&gt;&gt;', html, re.S)


def test_every_page_is_built(site: Path) -> None:
    pages = sorted(p.relative_to(DOCS).with_suffix("") for p in DOCS.rglob("*.md"))
    assert pages
    for page in pages:
        built = site / ("index.html" if page.name == "index" else page / "index.html")
        assert built.is_file(), page


def _nav_pages() -> list[str]:
    """The pages in the site's order (mkdocs.yml's nav)."""
    return re.findall(r":\s*(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.MULTILINE)


def test_every_page_is_in_the_nav() -> None:
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(_nav_pages()) == pages


def test_the_pages_examples_run_in_order() -> None:
    """As a reader goes through the guide: one namespace, page after page."""
    namespace: dict[str, object] = {"__name__": "docs"}
    ran = 0
    for page in _nav_pages():
        for block in re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), re.DOTALL):
            exec(compile(block, str(DOCS / page), "exec"), namespace)
            ran += 1
    assert ran >= 20
