"""deputy_shiny._util.safe_fs: opening beneath a root, no symlink followed at any component,
through openat2 and through the fallback walk (forced), plus confine's OSError guard."""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny._paths import confine
from deputy_shiny._util import safe_fs as _safe_fs
from deputy_shiny.errors import PathDenied


@pytest.fixture(params=["openat2", "walk"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each test runs once with the kernel's openat2 and once with the component walk,
    and checks that the path it asked for is the one that ran."""
    used: dict[str, int] = {"openat2": 0, "walk": 0}
    real_openat2, real_walk = _safe_fs._openat2, _safe_fs._walk_open

    def spy_openat2(*args: Any) -> int | None:
        used["openat2"] += 1
        return real_openat2(*args)

    def spy_walk(*args: Any) -> int:
        used["walk"] += 1
        return real_walk(*args)

    monkeypatch.setattr(_safe_fs, "_openat2", spy_openat2)
    monkeypatch.setattr(_safe_fs, "_walk_open", spy_walk)
    if request.param == "walk":
        monkeypatch.setattr(_safe_fs, "_openat2_usable", False)
    else:
        # This project runs on Linux >= 5.6: openat2 must really be in use there.
        assert _safe_fs.openat2_available()
    yield request.param
    other = "walk" if request.param == "openat2" else "openat2"
    assert used[request.param] > 0 or used[other] == 0
    assert used[other] == 0, f"{other} ran in the {request.param} test"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """tmp/root (the root, with sub/ and a.txt) and tmp/outside (secret.txt, empty/)."""
    base = tmp_path / "root"
    (base / "sub").mkdir(parents=True)
    (base / "a.txt").write_text("inside")
    (base / "sub" / "b.txt").write_text("inside b")
    (tmp_path / "outside" / "empty").mkdir(parents=True)
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    os.symlink(tmp_path / "outside", base / "out")  # a directory link leading out
    os.symlink(tmp_path / "outside" / "secret.txt", base / "secret_link")
    os.symlink(base / "sub", base / "in_dir")  # links inside are refused too
    os.symlink(base / "a.txt", base / "in_file")
    return base.resolve()


def _denied(exc: pytest.ExceptionInfo[PathDenied], rule: str = "symlink") -> str:
    assert exc.value.rule == rule
    return str(exc.value)


def test_reads_a_file_beneath_the_root(mode: str, root: Path) -> None:
    assert _safe_fs.read_bytes(root, "sub/b.txt") == b"inside b"
    fd, info = _safe_fs.open_regular(str(root), "a.txt")
    try:
        assert stat.S_ISREG(info.st_mode) and os.read(fd, 100) == b"inside"
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    "rel", ["out/secret.txt", "secret_link", "in_dir/b.txt", "in_file", "out/empty/x"]
)
def test_no_symlink_is_followed_at_any_component(mode: str, root: Path, rel: str) -> None:
    with pytest.raises(PathDenied) as info:
        _safe_fs.read_bytes(root, rel)
    assert "symbolic link" in _denied(info)


def test_plain_relative_paths_only(mode: str, root: Path) -> None:
    with pytest.raises(PathDenied) as info:
        _safe_fs.read_bytes(root, "sub/../a.txt")
    _denied(info, "traversal")
    with pytest.raises(PathDenied) as info:
        _safe_fs.read_bytes(root, "/etc/hostname")
    _denied(info, "invalid")


def test_missing_directory_and_not_regular(mode: str, root: Path) -> None:
    with pytest.raises(FileNotFoundError):
        _safe_fs.read_bytes(root, "nope/x.txt")
    with pytest.raises(NotADirectoryError):
        _safe_fs.read_bytes(root, "a.txt/x")
    with pytest.raises(IsADirectoryError):
        _safe_fs.open_regular(root, "sub")
    os.mkfifo(root / "pipe")
    with pytest.raises(OSError, match="Not a regular file"):  # and no hang on the FIFO
        _safe_fs.open_regular(root, "pipe")


def test_replace_file_is_atomic_and_keeps_the_mode(mode: str, root: Path) -> None:
    os.chmod(root / "a.txt", 0o640)
    _safe_fs.replace_file(root, "a.txt", b"new")
    assert (root / "a.txt").read_bytes() == b"new"
    assert stat.S_IMODE((root / "a.txt").stat().st_mode) == 0o640
    _safe_fs.replace_file(root, "sub/c.txt", b"c", mode=0o600)
    assert stat.S_IMODE((root / "sub" / "c.txt").stat().st_mode) == 0o600
    assert sorted(p.name for p in (root / "sub").iterdir()) == ["b.txt", "c.txt"]  # no temp


def test_writes_never_go_through_a_link(mode: str, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    before = sorted(str(p) for p in outside.rglob("*"))
    for write in (
        lambda: _safe_fs.replace_file(root, "out/empty/x.txt", b"x"),
        lambda: _safe_fs.replace_file(root, "secret_link", b"x"),
        lambda: _safe_fs.append_file(root, "out/empty/x.txt", b"x"),
        lambda: _safe_fs.append_file(root, "secret_link", b"x"),
        lambda: _safe_fs.make_dirs(root, "out/empty/new"),
        lambda: _safe_fs.unlink(root, "out/secret.txt"),
        lambda: _safe_fs.rmdir(root, "out/empty"),
    ):
        with pytest.raises(PathDenied) as info:
            write()
        _denied(info)
    assert sorted(str(p) for p in outside.rglob("*")) == before
    assert (outside / "secret.txt").read_text() == "secret"
    assert (root / "secret_link").is_symlink()


def test_append_make_dirs_lstat_unlink_rmdir(mode: str, root: Path) -> None:
    _safe_fs.append_file(root, "sub/log.txt", b"one\n")
    _safe_fs.append_file(root, "sub/log.txt", b"two\n")
    assert (root / "sub" / "log.txt").read_bytes() == b"one\ntwo\n"
    assert _safe_fs.make_dirs(root, "sub/x/y") == ["sub/x", "sub/x/y"]
    assert _safe_fs.make_dirs(root, "sub/x/y") == []
    with pytest.raises(NotADirectoryError):
        _safe_fs.make_dirs(root, "a.txt/z")
    link = _safe_fs.lstat(root, "in_file")
    assert link is not None and stat.S_ISLNK(link.st_mode)
    assert _safe_fs.lstat(root, "nope") is None and _safe_fs.lstat(root, "nope/deeper") is None
    assert _safe_fs.rmdir(root, "sub/x/y") and not _safe_fs.rmdir(root, "sub/x/y")
    assert _safe_fs.unlink(root, "sub/log.txt") and not _safe_fs.unlink(root, "sub/log.txt")
    assert _safe_fs.unlink(root, "in_file") and (root / "a.txt").exists()  # the link only


def test_walk_never_enters_a_link(mode: str, root: Path) -> None:
    fd = _safe_fs.open_dir(root)
    try:
        seen = {"/".join(e.parts): (e.is_dir, e.is_link) for e in _safe_fs.walk(fd, lambda p: True)}
    finally:
        os.close(fd)
    assert seen["out"] == (False, True) and seen["in_dir"] == (False, True)
    assert "out/secret.txt" not in seen and "in_dir/b.txt" not in seen
    assert seen["sub/b.txt"] == (False, False)


def test_walk_skips_a_directory_swapped_for_a_link_after_listing(
    mode: str, root: Path, tmp_path: Path
) -> None:
    """The walk lists sub/ as a directory; just before it enters, sub/ becomes a link out."""
    (tmp_path / "stash").mkdir()

    def descend(parts: tuple[str, ...]) -> bool:
        if parts == ("sub",):
            os.rename(root / "sub", tmp_path / "stash" / "sub")
            os.symlink(tmp_path / "outside", root / "sub")
        return True

    fd = _safe_fs.open_dir(root)
    opened: list[bytes] = []
    try:
        walk = _safe_fs.walk(fd, descend)
        for entry in walk:
            if not entry.is_dir and not entry.is_link:
                try:
                    rfd, _ = entry.open_regular()
                except (OSError, PathDenied):
                    continue
                with os.fdopen(rfd, "rb") as fh:
                    opened.append(fh.read())
            seen = "/".join(entry.parts)
            assert not seen.startswith("sub/"), seen
    finally:
        os.close(fd)
    assert b"secret" not in opened and b"inside" in opened


def test_a_file_swapped_for_a_link_in_a_walk_is_not_read(mode: str, root: Path) -> None:
    fd = _safe_fs.open_dir(root)
    try:
        for entry in _safe_fs.walk(fd, lambda p: False):
            if entry.name == "a.txt":
                os.unlink(root / "a.txt")
                os.symlink(root.parent / "outside" / "secret.txt", root / "a.txt")
                with pytest.raises(PathDenied):
                    entry.open_regular()
    finally:
        os.close(fd)


# ------------------------------------------------------------------ the kernel's answers


def _fake_syscall(err: int) -> Any:
    calls: list[int] = []

    def fake(*args: Any) -> int:
        calls.append(err)
        ctypes.set_errno(err)
        return -1

    fake.calls = calls  # type: ignore[attr-defined]
    return fake


def test_enosys_turns_openat2_off_and_the_walk_answers(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_syscall(errno.ENOSYS)
    monkeypatch.setattr(_safe_fs, "_syscall", fake)
    monkeypatch.setattr(_safe_fs, "_openat2_usable", True)
    assert _safe_fs.read_bytes(root, "sub/b.txt") == b"inside b"
    assert not _safe_fs.openat2_available() and fake.calls == [errno.ENOSYS]
    with pytest.raises(PathDenied):  # the walk refuses links as well
        _safe_fs.read_bytes(root, "out/secret.txt")
    assert fake.calls == [errno.ENOSYS]  # never asked again


@pytest.mark.parametrize("err", [errno.EAGAIN, errno.EPERM, errno.E2BIG])
def test_a_refusing_kernel_falls_back_to_the_walk(
    root: Path, monkeypatch: pytest.MonkeyPatch, err: int
) -> None:
    monkeypatch.setattr(_safe_fs, "_syscall", _fake_syscall(err))
    monkeypatch.setattr(_safe_fs, "_openat2_usable", True)
    assert _safe_fs.read_bytes(root, "sub/b.txt") == b"inside b"
    with pytest.raises(PathDenied):
        _safe_fs.read_bytes(root, "in_dir/b.txt")


def test_the_kernel_refusing_a_way_out_is_outside(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_safe_fs, "_syscall", _fake_syscall(errno.EXDEV))
    monkeypatch.setattr(_safe_fs, "_openat2_usable", True)
    with pytest.raises(PathDenied) as info:
        _safe_fs.read_bytes(root, "a.txt")
    _denied(info, "outside")


# ------------------------------------------------------------------ confine never raises OSError


def test_confine_with_a_component_flipping_is_denied_not_crashed(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lstat said "link", then readlink found none: the swap race, caught as a denial."""

    def flipped(path: Any, *args: Any, **kwargs: Any) -> str:
        raise OSError(errno.EINVAL, "Invalid argument", str(path))

    monkeypatch.setattr(os, "readlink", flipped)
    with pytest.raises(PathDenied) as info:
        confine("in_dir/b.txt", root, [root])
    assert "changed while it was being checked" in _denied(info, "symlink")


def test_confine_with_an_unreadable_component_is_invalid(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(path: Any, *args: Any, **kwargs: Any) -> str:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(os, "readlink", refused)
    with pytest.raises(PathDenied) as info:
        confine("in_file", root, [root])
    assert "Permission denied" in _denied(info, "invalid")


@pytest.mark.parametrize("err", [errno.EACCES, errno.EINVAL, errno.ENAMETOOLONG])
def test_confine_with_lstat_failing_never_raises_oserror(
    root: Path, monkeypatch: pytest.MonkeyPatch, err: int
) -> None:
    real_lstat = os.lstat

    def failing(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if "in_dir" in os.fspath(path):
            raise OSError(err, os.strerror(err), str(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", failing)
    outcome: Path | PathDenied
    try:
        outcome = confine("in_dir/b.txt", root, [root])
    except PathDenied as exc:
        outcome = exc
    if isinstance(outcome, PathDenied):
        assert outcome.rule in ("symlink", "invalid")
    else:
        assert outcome.is_relative_to(root)
