"""Refresh the command examples in README.md and docs/*.md from the commands themselves.

An example is a block between two HTML comments, invisible on the rendered page::

    <!-- example: tiercast run --dry-run -->
    ```text
    ...what the command printed on stdout...
    ```
    <!-- /example -->

For each block this script runs ``tiercast ARGS`` in a fresh temporary working folder, with
a fresh temporary home folder (so nothing is written into the checkout or the user's state
directory: plan files, run records and the model store go to ``~/.local/state/tiercast``
there and are deleted) and replaces the block's content with a fenced code block of the command's
stdout. The temporary folder holds a copy of the checkout's ``data/`` and ``deploy/`` and,
beside it, ``shared`` pointing at the checkout's ``../shared``, so an example may name
``data/example-config.yaml`` or ``../shared/data/traces/...`` as the rest of the docs do.
The environment is fixed (``COLUMNS=100``, no progress bars, no ``$TIERCAST_CONFIG``) so
the output depends only on the code and the inputs. Put only commands whose output does
not depend on the wall clock or on timing in such a block.

Usage::

    python docs/regenerate.py            # rewrite every stale block
    python docs/regenerate.py --check    # list the stale blocks, exit 1 if there are any
    python docs/regenerate.py docs/forecasting.md   # only these files
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
"""The checkout this script belongs to."""

OPEN = re.compile(r"^<!-- example: tiercast(?P<args>(?: [^\n]*?)?) -->[ \t]*$", re.MULTILINE)
CLOSE = "<!-- /example -->"
COPIED = ("data", "deploy")
"""Folders of the checkout copied into each example's working folder."""
TIMEOUT_S = 600

Runner = Callable[[str], str]
"""Runs ``tiercast ARGS`` (ARGS as written in the marker) and returns its stdout."""


class ExampleError(Exception):
    """A marker without its end, or a command that failed."""


@dataclass(frozen=True)
class Block:
    """One example block of a file: its command and where its content lies."""

    args: str
    line: int
    start: int
    end: int

    @property
    def command(self) -> str:
        return f"tiercast {self.args}".rstrip()


def find_blocks(text: str) -> list[Block]:
    """Every example block of ``text``, in order; content is ``text[start:end]``."""
    blocks = []
    for match in OPEN.finditer(text):
        start = match.end() + 1 if text[match.end() : match.end() + 1] == "\n" else match.end()
        end = text.find(CLOSE, start)
        if end < 0:
            line = text.count("\n", 0, match.start()) + 1
            raise ExampleError(f"line {line}: {match.group(0)} has no {CLOSE}")
        following = OPEN.search(text, start)
        if following is not None and following.start() < end:
            line = text.count("\n", 0, match.start()) + 1
            raise ExampleError(f"line {line}: {match.group(0)} has no {CLOSE} before the next")
        line = text.count("\n", 0, match.start()) + 1
        blocks.append(Block(match.group("args").strip(), line, start, end))
    return blocks


def fenced(stdout: str) -> str:
    """``stdout`` as a fenced ``text`` code block, with a fence longer than any inside."""
    body = stdout if stdout.endswith("\n") or not stdout else stdout + "\n"
    longest = max((len(m) for m in re.findall(r"`{3,}", body)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{body}{fence}\n"


def refresh(text: str, run: Runner) -> tuple[str, list[tuple[Block, str]]]:
    """``text`` with every block's content replaced by its command's output.

    Returns the new text and the blocks whose content changed, each with the new content.
    """
    blocks = find_blocks(text)
    stale: list[tuple[Block, str]] = []
    pieces: list[str] = []
    position = 0
    for block in blocks:
        content = fenced(run(block.args))
        if text[block.start : block.end] != content:
            stale.append((block, content))
        pieces += [text[position : block.start], content]
        position = block.end
    pieces.append(text[position:])
    return "".join(pieces), stale


def _environment() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "TIERCAST_CONFIG",
            "TIERCAST_LOG_FORMAT",
            "KUBECONFIG",
            "TIERCAST_STATE_DIR",
            "XDG_STATE_HOME",
            "KUBERNETES_SERVICE_HOST",
        )
    }
    # Each example gets a home of its own (run_in_scratch); caches stay where they are, so
    # matplotlib does not rebuild its font cache for every example.
    env.setdefault("XDG_CACHE_HOME", str(Path.home() / ".cache"))
    env.update(
        COLUMNS="100",
        LINES="50",
        TIERCAST_NO_PROGRESS="1",
        TERM="dumb",
        TZ="UTC",
        PYTHONHASHSEED="0",
    )
    return env


def _tiercast() -> list[str]:
    found = shutil.which("tiercast")
    return [found] if found else [sys.executable, "-m", "scaler.cli"]


def run_in_scratch(args: str) -> str:
    """Run ``tiercast ARGS`` in a fresh temporary working folder; return its stdout."""
    with tempfile.TemporaryDirectory(prefix="tiercast-example-") as scratch:
        root = Path(scratch)
        work = root / "work"
        work.mkdir()
        for name in COPIED:
            if (REPO / name).is_dir():
                shutil.copytree(REPO / name, work / name)
        shared = REPO.parent / "shared"
        if shared.is_dir():
            (root / "shared").symlink_to(shared, target_is_directory=True)
        try:
            done = subprocess.run(
                [*_tiercast(), *shlex.split(args)],
                cwd=work,
                env={**_environment(), "HOME": str(root / "home")},
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise ExampleError(f"tiercast {args}: no answer within {TIMEOUT_S} s") from e
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise ExampleError(f"tiercast {args}: exit status {done.returncode}: {tail}")
    return done.stdout


def default_files() -> list[Path]:
    """README.md and every docs/*.md of the checkout."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _short_diff(old: str, new: str, limit: int = 12) -> str:
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
    changed = [line for line in list(diff)[2:] if not line.startswith("@@")]
    shown = changed[:limit]
    more = len(changed) - len(shown)
    return "\n".join(f"      {line[:160]}" for line in shown) + (
        f"\n      ... ({more} more diff lines)" if more > 0 else ""
    )


def main(argv: Sequence[str] | None = None, run: Runner = run_in_scratch) -> int:
    """Refresh (or with ``--check`` only compare) the example blocks; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="report the stale blocks and exit 1, change nothing"
    )
    parser.add_argument("files", nargs="*", type=Path, help="default: README.md and docs/*.md")
    options = parser.parse_args(argv)
    files = options.files or default_files()
    stale_count = 0
    try:
        for path in files:
            text = path.read_text(encoding="utf-8")
            new, stale = refresh(text, run)
            shown = (
                path.resolve().relative_to(REPO) if path.resolve().is_relative_to(REPO) else path
            )
            for block, content in stale:
                stale_count += 1
                verb = "stale" if options.check else "updated"
                print(f"{verb}: {shown}:{block.line}: {block.command}")
                if options.check:
                    print(_short_diff(text[block.start : block.end], content))
            if stale and not options.check:
                path.write_text(new, encoding="utf-8")
    except (ExampleError, OSError) as e:
        print(f"regenerate: error: {e}", file=sys.stderr)
        return 2
    if options.check and stale_count:
        print(f"{stale_count} example block(s) differ; run: python docs/regenerate.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
