"""The reference app's workspace component: seeding a new workspace never follows a link
the model left there (a host process writing where the model chose)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from components.workspace import WELCOME, seed_workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


def test_a_new_workspace_gets_the_welcome_file(workspace: Path) -> None:
    seed_workspace(workspace)
    assert (workspace / "welcome.md").read_text(encoding="utf-8") == WELCOME
    (workspace / "welcome.md").write_text("the user's own")
    seed_workspace(workspace)  # an existing file stays as it is
    assert (workspace / "welcome.md").read_text() == "the user's own"


def test_a_dangling_symlink_named_like_the_seed_creates_nothing_outside(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "welcome.md").symlink_to(outside / "planted.sh")
    seed_workspace(workspace)
    assert list(outside.iterdir()) == []
    assert os.readlink(workspace / "welcome.md") == str(outside / "planted.sh")


def test_a_symlink_to_a_file_outside_leaves_it_alone(workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "bashrc"
    target.write_text("original")
    (workspace / "welcome.md").symlink_to(target)
    seed_workspace(workspace)
    assert target.read_text() == "original"


def test_an_entry_of_another_kind_is_skipped(workspace: Path) -> None:
    (workspace / "welcome.md").mkdir()
    seed_workspace(workspace)
    assert (workspace / "welcome.md").is_dir()
    os.mkfifo(workspace / "fifo")  # a seed never opens what is there (a FIFO would hang)
    (workspace / "welcome.md").rmdir()
    os.rename(workspace / "fifo", workspace / "welcome.md")
    seed_workspace(workspace)
    assert not (workspace / "welcome.md").is_file()


def test_a_workspace_that_is_itself_a_symlink_is_refused(workspace: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(workspace)
    with pytest.raises(OSError, match="symlink"):
        seed_workspace(link)
    assert list(workspace.iterdir()) == []
