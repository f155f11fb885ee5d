"""The deploy files agree with pyproject.toml: requirements.txt pins each runtime
dependency inside its range and nothing else, litellm's range leaves out the compromised
releases, the extras' versions are pinned for CI, and the deploy page's two
rsconnect commands bundle the same files. Fast: no network, no subprocess."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
# The documentation page that shows the deploy commands (run here as written).
DEPLOY_PAGE = ROOT / "docs" / "deploy.md"
COMPROMISED_LITELLM = ("1.82.7", "1.82.8", "1.107.0")


def project() -> dict[str, object]:
    """``[project]`` of pyproject.toml."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return dict(data["project"])


def requirement_lines(text: str) -> list[Requirement]:
    """The requirements of a requirements.txt (comments and blank lines skipped)."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [Requirement(line) for line in lines if line]


def exact_pin(requirement: Requirement) -> Version:
    """The one version ``requirement`` pins with ``==`` (it must pin exactly one)."""
    specifiers = list(requirement.specifier)
    assert len(specifiers) == 1 and specifiers[0].operator == "==", (
        f"{requirement} is not an exact pin"
    )
    return Version(specifiers[0].version)


def pins_problems(ranges: list[Requirement], pins: list[Requirement]) -> list[str]:
    """What is wrong with ``pins`` as the tested versions of ``ranges``: a range with
    no pin, a pin outside its range or with another marker, or a pin with no range."""
    problems = []
    by_name = {canonicalize_name(p.name): p for p in pins}
    if len(by_name) != len(pins):
        problems.append("a package is pinned twice")
    for wanted in ranges:
        pin = by_name.pop(canonicalize_name(wanted.name), None)
        if pin is None:
            problems.append(f"{wanted.name}: not pinned")
            continue
        if wanted.specifier.contains(exact_pin(pin), prereleases=True) is False:
            problems.append(f"{wanted.name}: {pin.specifier} is outside {wanted.specifier}")
        if str(pin.marker or "") != str(wanted.marker or ""):
            problems.append(f"{wanted.name}: marker {pin.marker} is not {wanted.marker}")
    problems.extend(f"{name}: pinned but not a dependency" for name in sorted(by_name))
    return problems


def runtime_ranges() -> list[Requirement]:
    dependencies = project()["dependencies"]
    assert isinstance(dependencies, list)
    return [Requirement(r) for r in dependencies]


def extras() -> dict[str, list[Requirement]]:
    table = project()["optional-dependencies"]
    assert isinstance(table, dict)
    return {name: [Requirement(r) for r in reqs] for name, reqs in table.items()}


def test_requirements_txt_pins_every_runtime_dependency_inside_its_range() -> None:
    pins = requirement_lines((ROOT / "requirements.txt").read_text())
    assert pins_problems(runtime_ranges(), pins) == []
    for pin in pins:
        exact_pin(pin)


def test_runtime_dependencies_are_ranges_not_pins() -> None:
    # A library pinned exactly cannot be installed beside anything else.
    for requirement in runtime_ranges():
        operators = {s.operator for s in requirement.specifier}
        assert "==" not in operators and ">=" in operators, requirement


def test_litellm_range_excludes_the_compromised_releases() -> None:
    (litellm,) = [r for r in runtime_ranges() if r.name == "litellm"]
    for bad in COMPROMISED_LITELLM:
        assert not litellm.specifier.contains(bad), bad
        # By name too, so lowering the floor can never let one back in.
        assert f"!={bad}" in {str(s) for s in litellm.specifier}, bad
    pinned = requirement_lines((ROOT / "requirements.txt").read_text())
    (tested,) = [exact_pin(r) for r in pinned if r.name == "litellm"]
    assert str(tested) not in COMPROMISED_LITELLM


def test_the_optional_extras_are_ranges_that_the_test_extra_pins() -> None:
    table = extras()
    ranges = [r for name in ("docs-tools", "web", "otel", "cli") for r in table[name]]
    assert ranges and all("==" not in {s.operator for s in r.specifier} for r in ranges)
    test_pins = {canonicalize_name(r.name): r for r in table["test"]}
    for wanted in ranges:
        pin = test_pins[canonicalize_name(wanted.name)]
        assert wanted.specifier.contains(exact_pin(pin)), (wanted, pin)
        assert pin.extras == wanted.extras, (wanted, pin)
    for tool in table["test"]:
        exact_pin(tool)  # the tools stay pinned exactly: CI is reproducible


def test_the_docs_extra_pins_the_site_as_the_test_extra_builds_it() -> None:
    table = extras()
    docs = {str(canonicalize_name(r.name)): exact_pin(r) for r in table["docs"]}
    test_pins = {str(canonicalize_name(r.name)): exact_pin(r) for r in table["test"]}
    shared = {"mkdocs", "mkdocs-material", "mkdocstrings", "mkdocstrings-python"}
    assert shared <= set(docs) and {name: docs[name] for name in shared} == {
        name: test_pins[name] for name in shared
    }
    assert {"griffelib", "mkdocs-autorefs", "pymdown-extensions"} <= set(docs)  # transitive


def test_a_pin_out_of_step_with_pyproject_is_caught() -> None:
    ranges = [Requirement("shiny>=1.8.0,<2"), Requirement("regex>=2026.11.19")]
    assert (
        pins_problems(ranges, [Requirement("shiny==1.8.0"), Requirement("regex==2026.11.19")]) == []
    )
    assert pins_problems(
        ranges,
        [Requirement("shiny==2.0.0"), Requirement("httpx==0.28.1")],
    ) == [
        "shiny: ==2.0.0 is outside <2,>=1.8.0",
        "regex: not pinned",
        "httpx: pinned but not a dependency",
    ]
    with pytest.raises(AssertionError, match="not an exact pin"):
        exact_pin(Requirement("shiny>=1.8.0"))


def test_scripts_install_with_requirements_txt_as_a_constraint() -> None:
    for script in ("scripts/test", "scripts/run-app"):
        installs = [
            line for line in (ROOT / script).read_text().splitlines() if "pip install" in line
        ]
        package_installs = [line for line in installs if " -e " in line]
        assert package_installs, script
        assert all("-c requirements.txt" in line for line in package_installs), script


def test_python_version_file_matches_requires_python() -> None:
    version = (ROOT / ".python-version").read_text().strip()
    assert version == "3.11"
    assert SpecifierSet(str(project()["requires-python"])).contains(f"{version}.0")


def deploy_command(prefix: str) -> list[str]:
    """The deploy page's shell command starting with ``prefix`` (continuation lines joined)."""
    blocks = re.findall(r"```bash\n(.*?)```", DEPLOY_PAGE.read_text(), re.DOTALL)
    commands = [c for block in blocks for c in block.replace("\\\n", " ").splitlines()]
    found = [shlex.split(c) for c in commands if c.startswith(prefix)]
    assert len(found) == 1, f"the deploy page has {len(found)} commands starting {prefix!r}"
    return found[0]


def excludes(argv: list[str]) -> list[str]:
    """The ``-x``/``--exclude`` values of an rsconnect command line."""
    return [argv[i + 1] for i, arg in enumerate(argv) if arg in ("-x", "--exclude")]


def test_the_deploy_and_manifest_commands_exclude_the_same_files() -> None:
    deploy = deploy_command("rsconnect deploy shiny .")
    manifest = deploy_command("rsconnect write-manifest shiny .")
    assert excludes(deploy) and excludes(deploy) == excludes(manifest)
    assert {"tests", "benchmarks", "scripts", ".ci"} <= set(excludes(deploy))
    # The tested rsconnect-python is the one the deploy page installs.
    (install,) = [r for r in extras()["test"] if r.name == "rsconnect-python"]
    assert deploy_command("pip install rsconnect-python") == ["pip", "install", str(install)]


def test_requirements_txt_works_as_a_constraints_file() -> None:
    """scripts/test installs with ``-c requirements.txt``, and pip refuses a constraint
    that names extras ("Constraints cannot have extras")."""
    pins = requirement_lines((ROOT / "requirements.txt").read_text())
    assert [str(pin) for pin in pins if pin.extras] == []
