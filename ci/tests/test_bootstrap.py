"""Bootstrap safely (issue 21, item 2): nox and uv go into the project's tool venv (.cache/tools/venv), never
into the system Python, whether its pip is refused (Debian 12, PEP 668) or allowed; the first run says what
it fetches, a second run is quiet; ci/test and ci/run_sessions.py use the tool venv's nox.

The bootstrap test fetches nox and uv from PyPI into a scratch copy (3-10 s here with pip's cache)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, copy_scripts, system_python

sys.path.insert(0, str(REPO / "ci"))
import workspace  # noqa: E402


def pins() -> dict[str, str]:
    out = {}
    for line in (REPO / "ci" / "requirements.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("#")[0].strip().split("==")
            out[name] = version
    return out


def test_bootstrap_installs_nox_and_uv_into_the_tool_venv_never_the_system_python(scratch_repo: Path) -> None:
    copy_scripts(scratch_repo, "bootstrap", "requirements.txt")
    system = system_python()
    stdlib = subprocess.run([system, "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
                            capture_output=True, text=True, timeout=60).stdout.strip()
    marker = Path(stdlib) / "EXTERNALLY-MANAGED"
    # The interpreter the bootstrap is given, wrapped: every call of the system Python is logged.
    calls = scratch_repo / "calls.log"
    wrapper = scratch_repo / "python3.11"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {system} "$@"\n')
    os.chmod(wrapper, 0o755)
    env = {**os.environ, "PYTHON": str(wrapper), "LC_ALL": "C"}
    done = subprocess.run(["bash", str(scratch_repo / "ci" / "bootstrap")], capture_output=True, text=True,
                          timeout=300, env=env, cwd="/")
    assert done.returncode == 0, done
    assert "Traceback" not in done.stdout + done.stderr
    said = [x for x in done.stdout.splitlines() if not x.startswith("bootstrap: apt-get")]
    want = pins()
    assert said[0] == f"bootstrap: first run: making the tool venv .cache/tools/venv with {wrapper} (nox and uv live " \
                      "there, not in the system Python)"
    assert said[1] == (f"bootstrap: installing nox=={want['nox']} uv=={want['uv']} into .cache/tools/venv from PyPI "
                       "(about 80 MB, a few seconds)")
    assert said[2].startswith("bootstrap: nox and uv ready in .cache/tools/venv (") and said[2].endswith(" s)")
    tools = scratch_repo / ".cache" / "tools" / "venv" / "bin"
    nox = subprocess.run([str(tools / "nox"), "--version"], capture_output=True, text=True, timeout=60)
    uv = subprocess.run([str(tools / "uv"), "--version"], capture_output=True, text=True, timeout=60)
    assert (nox.stdout + nox.stderr).strip() == want["nox"]
    assert uv.stdout.split()[:2] == ["uv", want["uv"]]
    # The system Python was asked to make a venv, and never to run pip (refused under PEP 668 where the
    # marker is there; left alone where it is not).
    logged = calls.read_text().splitlines()
    assert logged and all("-m pip" not in x for x in logged), logged
    assert any(x.startswith("-m venv") for x in logged), logged
    if marker.exists():
        refused = subprocess.run([system, "-m", "pip", "install", "--dry-run", "nox"], capture_output=True,
                                 text=True, timeout=60)
        assert refused.returncode != 0  # what the old bootstrap ran into (externally-managed-environment)
    # A second run changes nothing and says nothing.
    again = subprocess.run(["bash", str(scratch_repo / "ci" / "bootstrap")], capture_output=True, text=True,
                           timeout=300, env=env, cwd="/")
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")


def test_ci_test_and_run_sessions_call_the_tool_venvs_nox() -> None:
    test_script = (REPO / "ci" / "test").read_text()
    assert "exec .cache/tools/venv/bin/python ci/run_sessions.py" in test_script
    assert workspace.TOOLS_BIN == REPO / ".cache" / "tools" / "venv" / "bin"
    main_script = (REPO / "ci" / "main").read_text()
    assert "UV=.cache/tools/venv/bin/uv" in main_script and "pip install" not in main_script.replace(
        '"$UV" pip install', "")


def test_run_sessions_without_the_tool_venv_says_run_bootstrap(scratch_repo: Path) -> None:
    copy_scripts(scratch_repo, "run_sessions.py", "workspace.py")
    done = subprocess.run([sys.executable, str(scratch_repo / "ci" / "run_sessions.py"), "lint"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stdout == (f"run_sessions: no nox in {scratch_repo}/.cache/tools/venv/bin: run bash ci/bootstrap "
                           "first (bash ci/test does)\n")


def test_a_tool_venv_that_cannot_be_made_is_one_line_and_leaves_nothing(scratch_repo: Path) -> None:
    copy_scripts(scratch_repo, "bootstrap", "requirements.txt")
    broken = scratch_repo / "python3.11"  # imports ensurepip and venv, but its venv fails (a full disk, say)
    broken.write_text(f'#!/bin/sh\nif [ "$1" = -m ]; then echo "Error: [Errno 28] No space left on device" >&2; '
                      f'exit 1; fi\nexec {system_python()} "$@"\n')
    os.chmod(broken, 0o755)
    done = subprocess.run(["bash", str(scratch_repo / "ci" / "bootstrap")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHON": str(broken), "LC_ALL": "C"}, cwd="/")
    assert done.returncode == 1
    assert "Traceback" not in done.stdout + done.stderr
    assert done.stderr.splitlines()[-1] == (f"bootstrap: {broken} could not make the tool venv .cache/tools/venv "
                                            "(above): apt-get install python3.11-venv, then run again")
    assert not (scratch_repo / ".cache" / "tools" / "venv").exists()


# The tools that live only in the tool venv (ci/requirements.txt): a script that runs one of them by bare name
# works only where the machine has one of its own on PATH (issue 26, item 1: `uv` in ci/mutants.py).
TOOL_VENV_ONLY = {"nox", "uv", "uvx"}


def _bare_tool_calls(path: Path) -> list[str]:
    """Each argv literal in `path` (a list or tuple of strings, as subprocess takes) whose program is one of
    the tool venv's tools by bare name, as "file:line name"."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and first.value in TOOL_VENV_ONLY and len(node.elts) > 1:
                found.append(f"{path.name}:{node.lineno} {first.value}")
    return found


def test_no_ci_script_runs_a_tool_venv_tool_by_bare_name(tmp_path: Path) -> None:
    scripts = [p for p in sorted((REPO / "ci").glob("**/*.py")) if p.relative_to(REPO / "ci").parts[0] != "tests"]
    scripts.append(REPO / "noxfile.py")
    assert [x for p in scripts for x in _bare_tool_calls(p)] == []
    # The check sees what it is for: the call issue 26 found.
    old = tmp_path / "old.py"
    old.write_text('out = _run(["uv", "venv", "-q", "--python", sys.executable, str(venv)])\n')
    assert _bare_tool_calls(old) == ["old.py:1 uv"]
    for shell in ("test", "main", "bootstrap"):
        text = (REPO / "ci" / shell).read_text()
        lines = [x for x in text.splitlines() if not x.lstrip().startswith("#")]
        assert not [x for x in lines if x.lstrip().startswith(("uv ", "nox ", "exec nox", "exec uv"))], shell

def _path_without_npm(repo: Path, *, apt_log: Path) -> str:
    """A PATH directory with what ci/bootstrap and ci/main run (python3.11, git, patch, tmux and the shell
    tools), no npm and no node, and an apt-get that logs its call and fails (nothing is installed)."""
    bin_dir = repo / "bin"
    bin_dir.mkdir(mode=0o755)
    os.symlink(system_python(), bin_dir / "python3.11")
    for tool in ("git", "patch", "tmux", "strace", "cmp", "cp", "grep", "tr", "dirname", "cat", "printf"):
        found = shutil.which(tool)
        assert found is not None, tool
        os.symlink(found, bin_dir / tool)
    apt = bin_dir / "apt-get"
    apt.write_text(f'#!/bin/sh\necho "$*" >> {apt_log}\nexit 1\n')
    os.chmod(apt, 0o755)
    return str(bin_dir)


def _tool_venv_ready(repo: Path) -> None:
    """The tool venv as a first run leaves it (its interpreter and the pins it installed), so bootstrap has
    nothing to fetch."""
    tools = repo / ".cache" / "tools" / "venv"
    (tools / "bin").mkdir(parents=True)
    os.symlink(system_python(), tools / "bin" / "python")
    shutil.copy(REPO / "ci" / "requirements.txt", tools / "requirements.txt")


def _pin_check(repo: Path) -> None:
    """Stand-ins for pi-rpc's and claude-rpc's sources in the scratch copy: each `check_pin` passes for an
    engine directory holding VERIFIES (the real checks hash the whole install; their use from the sources is
    the test below)."""
    for package, module, engine in (("pi-rpc", "pi_rpc", "pi"), ("claude-rpc", "claude_rpc", "claude")):
        pkg = repo / "packages" / package / "src" / "mosaic" / module
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("import os\n\ndef check_pin(d):\n"
                                         "    return None if os.path.exists(os.path.join(d, 'VERIFIES')) else 'no'\n")
        record = repo / ".cache" / engine / "node_modules" / ".package-lock.json"
        record.parent.mkdir(parents=True)
        record.write_text("{}")


def test_bootstrap_asks_for_no_npm_once_the_pinned_engines_verify(scratch_repo: Path) -> None:
    copy_scripts(scratch_repo, "bootstrap", "requirements.txt")
    _tool_venv_ready(scratch_repo)
    _pin_check(scratch_repo)
    for engine in ("pi", "claude"):
        (scratch_repo / ".cache" / engine / "VERIFIES").write_text("")
    apt_log = scratch_repo / "apt.log"
    env = {"PATH": _path_without_npm(scratch_repo, apt_log=apt_log), "LC_ALL": "C"}
    bash = shutil.which("bash") or "/bin/bash"
    done = subprocess.run([bash, str(scratch_repo / "ci" / "bootstrap")], capture_output=True, text=True,
                          timeout=120, env=env, cwd="/")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), done
    assert not apt_log.exists()  # no npm (and so no apt-get) when both pinned engines verify
    # Either engine that does not verify (or is not there) still needs npm, which fetches it.
    for missing in ("pi", "claude"):
        for engine in ("pi", "claude"):
            (scratch_repo / ".cache" / engine / "VERIFIES").write_text("")
        (scratch_repo / ".cache" / missing / "VERIFIES").unlink()
        fetching = subprocess.run([bash, str(scratch_repo / "ci" / "bootstrap")], capture_output=True,
                                  text=True, timeout=120, env=env, cwd="/")
        assert fetching.returncode == 1, missing
        assert fetching.stdout.splitlines() == ["bootstrap: apt-get install npm"], missing
        assert apt_log.read_text().splitlines()[0] == "update -qq"
        apt_log.unlink()


@pytest.mark.parametrize("package", ["pi-rpc", "claude-rpc"])
def test_the_pin_check_bootstrap_asks_runs_from_the_sources_with_the_system_python(package: str) -> None:
    # What ci/bootstrap runs, nothing installed: the real check_pin imported from packages/ under -I.
    module = "mosaic." + package.replace("-", "_")
    code = (f"import importlib, sys\nsys.path[:0] = ['packages/{package}/src', 'packages/safe-open/src']\n"
            f"print(importlib.import_module('{module}').check_pin('/nonexistent/engine').code)")
    done = subprocess.run([system_python(), "-I", "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=str(REPO))
    assert (done.returncode, done.stdout, done.stderr) == (0, "engine-pin-mismatch\n", ""), done


def test_main_says_a_line_before_it_installs_the_packages_into_the_venv(scratch_repo: Path) -> None:
    copy_scripts(scratch_repo, "main")
    _tool_venv_ready(scratch_repo)
    ci = scratch_repo / "ci"
    for name, body in (("check.py", "import sys; sys.exit(0)"), ("prepare_pi.py", "import sys; sys.exit(0)")):
        (ci / name).write_text(body)
    (ci / "bootstrap").write_text("#!/bin/sh\nexit 0\n")
    calls = scratch_repo / "calls.log"
    # uv and the venv's python stand in: each says on stdout that it ran (the order on the terminal is the
    # point) and logs its arguments.
    uv = scratch_repo / ".cache" / "tools" / "venv" / "bin" / "uv"
    uv.write_text(f'#!/bin/sh\necho "uv $1 $2"\necho "uv $*" >> {calls}\n'
                  f'if [ "$1" = venv ]; then mkdir -p {scratch_repo}/.venv/bin; '
                  f'printf \'#!/bin/sh\\necho "python $*" >> {calls}\\n\' > {scratch_repo}/.venv/bin/python; '
                  f'chmod 755 {scratch_repo}/.venv/bin/python; fi\n')
    os.chmod(uv, 0o755)
    (scratch_repo / ".cache" / "pi" / "node_modules").mkdir(parents=True)
    (scratch_repo / ".cache" / "pi" / "node_modules" / ".package-lock.json").write_text("{}")
    env = {"PATH": f"{Path(system_python()).parent}:/usr/bin:/bin", "LC_ALL": "C"}
    done = subprocess.run(["bash", str(ci / "main")], capture_output=True, text=True, timeout=60, env=env, cwd="/")
    assert done.returncode == 0, done
    said = done.stdout.splitlines()
    install = said.index("uv pip install")
    assert said[install - 1] == "main: installing the packages into .venv (a few seconds; longer on a busy machine)"
    first = next(i for i, x in enumerate(said) if x.startswith("main: first run: it fetches "))
    assert "the packages' dependencies (about 30 MB, PyPI)" in said[first] and first < install
