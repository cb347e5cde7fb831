"""What the monorepo holds, read from the packages' own pyproject files (no second list to keep in sync).

The layer table of docs/design.md lives here as data (`MAY_IMPORT`); ci/layers.py checks every package's
declared dependencies and every import in its source and tests against it.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The project's tool venv (ci/bootstrap): nox and uv, apart from the system Python (PEP 668).
TOOLS_BIN = ROOT / ".cache" / "tools" / "venv" / "bin"
# How many things the test command's scripts run side by side unless told (`--jobs N`): the CPU count, at
# most 2 (ci/run_sessions.py's lanes, ci/mutants.py's scratch copies).
DEFAULT_JOBS = min(2, os.cpu_count() or 1)
#: The variable ci/run_sessions.py names the engine lane's lock file in, for the mutation pass (ci/mutants.py).
LANE_LOCK_ENV = "MOSAIC_ENGINE_LANE_LOCK"


def tool(name: str) -> str | None:
    """The path of the tool `name` (uv, nox) to run: the tool venv's, which is never on a session's PATH
    (nox puts only the session's own venv there), else one on PATH; None when there is neither. A script
    never runs these by bare name: on a machine whose only uv is the tool venv's, that is FileNotFoundError."""
    found = TOOLS_BIN / name
    if os.access(found, os.X_OK) and found.is_file():
        return str(found)
    return shutil.which(name)


def split_jobs(argv: list[str]) -> tuple[str | None, list[str]]:
    """`--jobs N` or `--jobs=N` taken out of `argv`: (N as written, or None when absent; the other arguments).
    Each script judges N itself."""
    value: str | None = None
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--jobs":
            value = next(args, "")
        elif arg.startswith("--jobs="):
            value = arg.partition("=")[2]
        else:
            rest.append(arg)
    return value, rest

# Bottom to top. docs/design.md "Packages and layers".
PACKAGES = [
    "safe-open",
    "pi-format",
    "claude-format",
    "chat-pages",
    "writer-claim",
    "cgroup-cohort",
    "pi-rpc",
    "claude-rpc",
    "controller-client",
    "controller",
    "mediated-terminal",
]

# docs/design.md: which packages each may import (the "may import" column). Every package may import safe-open,
# the bottom layer: it holds the `Refusal` base of every refusal and the shared host/process/digest
# identities (issue 9, "One refusal family"; README "Packages and layers" says why).
MAY_IMPORT: dict[str, set[str]] = {
    "safe-open": set(),
    "pi-format": {"safe-open"},
    "claude-format": {"safe-open"},
    "chat-pages": {"safe-open", "pi-format", "claude-format"},
    "writer-claim": {"safe-open"},
    "cgroup-cohort": {"safe-open"},
    "pi-rpc": {"safe-open"},
    "claude-rpc": {"safe-open"},
    "controller-client": {"safe-open"},
    "controller": {"safe-open", "controller-client", "pi-format", "chat-pages", "writer-claim", "cgroup-cohort",
                   "pi-rpc", "claude-rpc", "claude-format"},
    "mediated-terminal": {"controller-client"},
}

# What a package's tests (tests/, tests_*/, bench/) may import besides MAY_IMPORT, declared in its
# [project.optional-dependencies].test (ci/layers.py rules 1 and 2): the terminal's source reaches only the
# client, its tests drive a real controller on the fake engine (`mosaic.controller.testing`).
MAY_IMPORT_IN_TESTS: dict[str, set[str]] = {
    "mediated-terminal": {"controller", "claude-rpc", "pi-rpc"},  # a terminal on a Claude seat (issue 32): its
    # engine link (pi-rpc's EngineLink over the ClaudeWire) and claude-rpc's fake engine
}

# ci/layers.py rule 7: the import circles between files not broken yet, per package, each by its files (module
# names inside the package, e.g. "_claim"; "core._io" in a folder). Issue 31 breaks them; an entry whose
# circle is gone is a violation, so this only shrinks.
KNOWN_CIRCLES: dict[str, list[frozenset[str]]] = {}

# ci/layers.py rule 8: the folders of a package's source and what each may import (issue 31). A package with a
# row has every private module of its source in a folder that has a row (a folder under one with a row is
# that row's; the top-level files are row ""); a private module may import, of its own package, only the
# modules of its own row and of the rows listed for it ("*": any), and of the other Mosaic packages only
# those in FOLDER_PACKAGES[package][row] when the row is there (else what the package declares:
# `ci/layers.py` rule 2). An `__init__.py` is exempt: a folder's facade re-exports its own modules. Folders
# are paths inside the package ("engines/pi"). The controller's (issue 31, docs/design.md "The controller's
# four parts and the engine seam"): the seam imports nothing of the controller; an adapter only the seam; the
# sans-io core only the seam (never an adapter, the server or the lifecycle); the server the core; the
# lifecycle the core, the server and the seam (an adapter only through the `EngineFactory` it is given).
FOLDERS: dict[str, dict[str, set[str]]] = {
    "controller": {
        "engines": set(),
        "engines/pi": {"engines"},
        "engines/claude": {"engines"},  # issue 32: nothing but the top-level files (CLI, testing) imports it
        "core": {"engines"},
        "server": {"core", "engines"},
        "lifecycle": {"core", "server", "engines"},
        "": {"*"},  # the top-level files: facades, the command, the client (until S14), testing
    },
}
FOLDER_PACKAGES: dict[str, dict[str, set[str]]] = {
    "controller": {
        # pi-rpc's link (LinkCore, Command, the link events) is the core's wire vocabulary (the seam's `Wire`).
        # mosaic-controller-client: the refusal (ControlRefusal) and the method table every part reads (issue 31 S14).
        "core": {"pi-rpc", "safe-open", "controller-client"},
        "engines": {"pi-rpc", "safe-open", "cgroup-cohort", "writer-claim"},  # the last two: `Engine`'s types
        "engines/pi": {"pi-rpc", "pi-format", "chat-pages", "safe-open", "writer-claim", "cgroup-cohort",
                       "controller-client"},
        # claude-rpc's link core under the seam's `Wire` (pi-rpc's LinkCore surface): `engines/claude/_link`.
        # Its lifecycle half (issue 32): claude-format's leaf and branch names, chat-pages' Claude seat (history),
        # the claim's pins, the cohort's limits, the refusal.
        "engines/claude": {"claude-rpc", "claude-format", "pi-rpc", "safe-open", "chat-pages", "writer-claim",
                           "cgroup-cohort", "controller-client"},
        "server": {"pi-rpc", "safe-open", "controller-client"},
        "lifecycle": {"pi-rpc", "safe-open", "writer-claim", "cgroup-cohort", "controller-client"},
    },
}
# Imports that still cross a folder's row while the files move: package -> (importing module, imported module),
# both dotted inside the package ("core._state", "_refusal"), -> why, and the step that removes it. An
# exception that is no longer needed is a violation, so this only shrinks; empty when issue 31 is done.
KNOWN_FOLDER_EXCEPTIONS: dict[str, dict[tuple[str, str], str]] = {}

# ci/layers.py rule 9 (ci/facades.py): the most names each package promises in its public modules (issue 31),
# and its one unstable module (what only its own tests and reviewers use, with no compatibility promise),
# which the budget does not count. Raising a budget is a reviewed one-line change here. A package without
# a budget is not checked yet: the controller (its files move in issue 31).
PUBLIC_BUDGET: dict[str, int] = {
    "safe-open": 30,  # + mosaic.safe_open.ids (safe_id, HASH_PREFIX): the client and the reader share it
    "pi-format": 28,  # + ItemJson: an entry's item as JSON cut from its line (issue 34), what chat-pages splices
    "claude-format": 25,
    "chat-pages": 49,
    "writer-claim": 37,  # + PairObservation: what ClaimStore.observe returns, the controller reads it
    "cgroup-cohort": 121,
    # 114 after issue 31's cut, plus issue 33's engine side of Pi's dialogs: the link's answer
    # (UI_RESPONSE), the seal's one fixture entry (five names), and the dialog conformance scripts' steps
    # and cues (testing.script, testing.dialogs: what the controller's dialog suite drives a seat with).
    "pi-rpc": 139,
    # The client installed alone (issue 31): the client library, the protocol table it shares with the
    # controller's server, and the controller's refusal; one module, nothing unstable.
    "controller-client": 49,
    # The terminal (issue 31): its screen's tuning constants and input wrapper are private now.
    "mediated-terminal": 42,
    # Every name of the Claude engine side as it stands (issue 31); the promised/unstable cut comes with the
    # controller's Claude adapter (issue 32), which shows what another package needs.
    "claude-rpc": 176,
    # The controller (issue 31): every public module's names as they stand, `testing` unstable. Re-exports of
    # mosaic-controller-client (`client`) count here too. Next cuts: the old single-purpose modules the
    # folders replaced (`tables`, `drift`, `protocol`, `runtime`: only this repository imports them).
    # Issue 32 adds the Claude adapter's public module (`engines.claude`), and its lifecycle half's four names.
    "controller": 259,
}
UNSTABLE: dict[str, str] = {
    "safe-open": "internals",
    "pi-format": "testing",
    "chat-pages": "testing",
    "writer-claim": "internals",
    "cgroup-cohort": "internals",
    "pi-rpc": "internals",
    "controller": "testing",
}

ISSUE = {
    "safe-open": 2,
    "pi-format": 2,
    "claude-format": 30,
    "chat-pages": 3,
    "writer-claim": 4,
    "cgroup-cohort": 5,
    "pi-rpc": 6,
    "claude-rpc": 30,
    "controller-client": 31,
    "controller": 255,
    "mediated-terminal": 12,
}


def package_dir(name: str) -> pathlib.Path:
    return ROOT / "packages" / name


def module_name(name: str) -> str:
    return name.replace("-", "_")


def pyproject(name: str) -> dict:  # type: ignore[type-arg]
    with open(package_dir(name) / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def declared_mosaic_deps(name: str) -> set[str]:
    """The Mosaic packages `name` declares in [project].dependencies (by package name, no prefix)."""
    out: set[str] = set()
    for req in pyproject(name)["project"].get("dependencies", []):
        m = re.match(r"\s*mosaic-([a-z-]+)", req)
        if m:
            out.add(m.group(1))
    return out


def declared_test_deps(name: str) -> set[str]:
    """The Mosaic packages `name` declares in [project.optional-dependencies].test (by package name)."""
    out: set[str] = set()
    for req in pyproject(name)["project"].get("optional-dependencies", {}).get("test", []):
        m = re.match(r"\s*mosaic-([a-z-]+)", req)
        if m:
            out.add(m.group(1))
    return out


def closure(name: str, *, tests: bool = False) -> list[str]:
    """`name` and every Mosaic package it needs, transitively, bottom first; with `tests`, also what its
    tests declare (and what those need)."""
    seen: list[str] = []

    def visit(n: str) -> None:
        for d in sorted(declared_mosaic_deps(n)):
            visit(d)
        if n not in seen:
            seen.append(n)

    if tests:
        for d in sorted(declared_test_deps(name)):
            visit(d)
    visit(name)
    return seen


def has_tests(name: str) -> bool:
    return any((package_dir(name) / "tests").glob("**/test_*.py"))


def issue_of(name: str) -> str:
    """Which issue fills a package, as words: "issue 3", or "a later issue" where none is filed yet."""
    n = ISSUE[name]
    return f"issue {n}" if n else "a later issue, not yet filed"
