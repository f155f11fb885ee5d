"""The documentation's layout page is the map of the package: it names every module and
folder there is, and nothing that is gone.

A module is named by its file name (``_chat_session.py``) or, in the ``_util/`` line,
by its stem (``safe_fs``); a folder by ``name/``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "deputy_shiny"


LAYOUT_PAGE = ROOT / "docs" / "layout.md"


def layout_section(page: str) -> str:
    """The code block under ``# Layout``."""
    match = re.search(r"^# Layout\n\n```\n(.*?)^```\n", page, re.M | re.S)
    assert match, "the page has no '# Layout' section with a code block"
    return match.group(1)


def unnamed(layout: str, package: Path) -> list[str]:
    """Modules and folders of ``package`` the layout does not name."""
    words = set(re.findall(r"[\w.]+/?", layout))
    missing = []
    for path in sorted(package.rglob("*")):
        if "__pycache__" in path.parts or path.name == "__init__.py":
            continue
        relative = path.relative_to(package).as_posix()
        if path.is_dir():
            if f"{path.name}/" not in words:
                missing.append(relative + "/")
        elif path.suffix == ".py" and not ({path.name, path.stem} & words):
            missing.append(relative)
    return missing


def stale(layout: str, root: Path) -> list[str]:
    """``*.py`` names in the layout that no file of the tree has."""
    present = {p.name for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    return sorted({n for n in re.findall(r"\b[\w]+\.py\b", layout) if n not in present})


def test_the_layout_names_every_module_and_folder() -> None:
    layout = layout_section(LAYOUT_PAGE.read_text())
    assert unnamed(layout, PACKAGE) == []


def test_the_layout_names_nothing_that_is_gone() -> None:
    layout = layout_section(LAYOUT_PAGE.read_text())
    assert stale(layout, ROOT) == []


@pytest.fixture
def package(tmp_path: Path) -> Path:
    for name in ("pkg/__init__.py", "pkg/a.py", "pkg/sub/__init__.py", "pkg/sub/_b.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    return tmp_path


def test_a_new_module_or_folder_left_off_the_map_is_caught(package: Path) -> None:
    layout = "pkg/\n  a.py  the a\n  sub/  _b.py\n"
    assert unnamed(layout, package / "pkg") == []
    (package / "pkg" / "c.py").write_text("")
    (package / "pkg" / "new").mkdir()
    (package / "pkg" / "new" / "d.py").write_text("")
    assert unnamed(layout, package / "pkg") == ["c.py", "new/", "new/d.py"]


def test_a_removed_module_still_on_the_map_is_caught(package: Path) -> None:
    assert stale("a.py, _b.py", package) == []
    assert stale("a.py, gone.py", package) == ["gone.py"]


def test_the_section_must_exist() -> None:
    with pytest.raises(AssertionError, match="no '# Layout'"):
        layout_section("# A page\n\nNo layout here.\n")
