"""The README and docs/: short enough to read, starting with the two commands CI runs,
links that resolve, and command examples that match what the commands print today.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO

README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
SETUP = "python -m pip install -e . && tiercast run --dry-run"
TESTS = "bash .ci/test.sh"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@functools.cache
def _regenerate() -> ModuleType:
    """docs/regenerate.py as a module (docs/ is no package)."""
    spec = importlib.util.spec_from_file_location("regenerate", REPO / "docs" / "regenerate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["regenerate"] = module
    spec.loader.exec_module(module)
    return module


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a page's headings (outside code blocks)."""
    anchors: set[str] = set()
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.*)", line)):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            anchors.add(slug)
    return anchors


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines; move detail into docs/"


def test_readme_starts_with_the_setup_and_test_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# "), "README.md starts with its title"
    fence = lines.index("```bash")
    summary = [line for line in lines[1:fence] if line.strip()]
    assert 1 <= len(summary) <= 3, f"a 1-3 line summary before the commands, got {summary}"
    assert not any(line.startswith("#") for line in summary), summary
    block = lines[fence + 1 : lines.index("```", fence + 1)]
    commands = [line for line in block if line.strip() and not line.startswith("#")]
    # CI runs the README's test command: both lines exactly as written.
    assert commands == [SETUP, TESTS], commands


def test_every_docs_link_of_the_readme_resolves() -> None:
    targets = [t for t in LINK.findall(README.read_text(encoding="utf-8")) if "docs/" in t]
    assert targets, "README.md links the docs pages"
    for target in targets:
        path = target.split("#")[0]
        assert (REPO / path).is_file(), f"README.md links {target}, which is not a file"
    linked = {t.split("#")[0] for t in targets}
    unlinked = {f"docs/{p.name}" for p in DOCS} - linked
    assert not unlinked, f"docs pages the README does not link: {sorted(unlinked)}"


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_and_anchors_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name} links {target}: no such file"
        if anchor and file.suffix == ".md":
            assert anchor in _anchors(file.read_text(encoding="utf-8")), (
                f"{page.name} links {target}: no heading with that anchor in {file.name}"
            )


def test_testing_page_keeps_the_test_tiers_heading() -> None:
    text = (REPO / "docs" / "testing.md").read_text(encoding="utf-8")
    assert "\n## Test tiers\n" in text


def test_regenerate_replaces_only_the_blocks_and_reports_stale_ones() -> None:
    regenerate = _regenerate()
    text = (
        "intro\n<!-- example: tiercast --version -->\nold\n<!-- /example -->\n"
        "middle\n<!-- example: tiercast plan -o json -->\n```text\nsame\n```\n<!-- /example -->\n"
    )
    outputs = {"--version": "tiercast 9.9\n", "plan -o json": "same\n"}
    new, stale = regenerate.refresh(text, outputs.__getitem__)
    assert [block.command for block, _ in stale] == ["tiercast --version"]
    assert new == (
        "intro\n<!-- example: tiercast --version -->\n```text\ntiercast 9.9\n```\n"
        "<!-- /example -->\nmiddle\n<!-- example: tiercast plan -o json -->\n```text\nsame\n"
        "```\n<!-- /example -->\n"
    )
    assert regenerate.refresh(new, outputs.__getitem__) == (new, [])
    # Output holding a fence gets a longer one; a marker without its end is an error.
    assert regenerate.fenced("a\n```\nb") == "````text\na\n```\nb\n````\n"
    with pytest.raises(regenerate.ExampleError, match="no <!-- /example -->"):
        regenerate.find_blocks("<!-- example: tiercast --help -->\nno end\n")


def test_regenerate_check_names_the_stale_block_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    regenerate = _regenerate()
    page = tmp_path / "page.md"
    page.write_text("<!-- example: tiercast --version -->\n<!-- /example -->\n")
    before = page.read_text()
    assert regenerate.main(["--check", str(page)], run=lambda args: "tiercast 9.9\n") == 1
    assert "stale:" in capsys.readouterr().out and page.read_text() == before
    assert regenerate.main([str(page)], run=lambda args: "tiercast 9.9\n") == 0
    assert "tiercast 9.9" in page.read_text()
    assert regenerate.main(["--check", str(page)], run=lambda args: "tiercast 9.9\n") == 0


@pytest.mark.slow
def test_examples_match_what_the_commands_print() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "docs" / "regenerate.py"), "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, (
        "stale command examples (refresh with `python docs/regenerate.py`):\n"
        + done.stdout
        + done.stderr
    )
