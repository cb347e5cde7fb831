"""The project's test matrix.

One session per package, named after it: each builds its own virtualenv and installs only that package,
the Mosaic packages it declares in its pyproject.toml (from the sibling paths, never from an index) and its
`test` extra, then runs its tests from site-packages. An import the package does not declare therefore fails
there: that is the proof that each package installs alone and depends only downward.

`lint` runs ruff, mypy --strict over every package and the layers contract (ci/layers.py).
`mutants` applies every patch in mutants/ in a scratch copy and fails unless its named test fails.
`build` builds each package's sdist and its wheel from that sdist, checks them (twine check --strict) and installs
each package alone from that wheelhouse into a fresh venv (ci/build.py; README "Install one package").
`cohort` (the real-kernel suites), `smoke` (the real Pi), `claude-smoke` (the real Claude Code), `bench`
(ratios, never asserted) and `demo` (the main job's end-to-end run on the real Pi, checked step by step) are
the other sessions.

Plain `nox` runs every package session, `lint` and `mutants`.
"""

from __future__ import annotations

import os
import pathlib
import sys

import nox

sys.path.insert(0, str(pathlib.Path(__file__).parent / "ci"))
import workspace  # noqa: E402  (ci/workspace.py: reads the packages' pyproject files)

ROOT = pathlib.Path(__file__).resolve().parent
# The controller's smoke file on the real Claude Code (`claude-smoke` runs it; `smoke`, on Pi, leaves it out).
CLAUDE_CONTROLLER_SMOKE = str(workspace.package_dir("controller") / "tests_smoke" / "test_claude_real.py")
PYTHON = "3.11"

# uv builds the per-package venvs about 4x faster than virtualenv+pip here (README, "Measured").
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = [*workspace.PACKAGES, "lint", "mutants"]


def _install_package(session: nox.Session, name: str) -> None:
    """Install `name` with its test extra and the Mosaic packages it and its tests declare, from sibling paths."""
    paths = [str(workspace.package_dir(dep)) for dep in workspace.closure(name, tests=True) if dep != name]
    session.install(*paths, f"{workspace.package_dir(name)}[test]")


def _make_package_session(name: str) -> None:
    @nox.session(name=name, python=PYTHON)
    def _session(session: nox.Session) -> None:
        _install_package(session, name)
        tests = workspace.package_dir(name) / "tests"
        if not workspace.has_tests(name):
            session.skip(f"{name} is a stub with no tests yet (filled by {workspace.issue_of(name)})")
        env = {"MOSAIC_REPO": str(ROOT)}
        session.run(
            "python",
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--import-mode=importlib",
            "--rootdir",
            str(tests),
            "-q",
            str(tests),
            *session.posargs,
            env=env,
        )

    _session.__doc__ = f"Install {name} alone (with its declared Mosaic deps) and run its tests."


for _name in workspace.PACKAGES:
    _make_package_session(_name)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff, mypy --strict for every package, the layers contract of DESIGN.md and the public-surface rule
    (with their own tests), every mutant's patch still applying at its place, the fixture manifest."""
    session.install("ruff==0.17.6", "mypy==2.4.1", "cffi>=1.17", "msgspec>=0.19", "prompt_toolkit>=3.0.50", "pytest>=8", "hypothesis>=6.100",
                    "jsonschema>=4.20", "types-jsonschema", "packaging>=24")  # packaging: ci/buildcheck.py
    session.run("ruff", "check", "packages", "ci", "mutants", "noxfile.py")
    # Every mutant still has its place: each patch applies (--dry-run, --fuzz=0) on a scratch copy and its
    # killers' files exist (issue 31: code that moves takes its mutants along; no test runs here).
    session.run("python", "ci/mutants.py", "--apply-only")
    session.run("python", "ci/layers.py")
    # Every numbered rule a comment, docstring or README points at is one its module defines (issue 31).
    session.run("python", "ci/rules.py")
    # The layers check itself is tested: a cross-package private import, an undeclared package (issue 9).
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", "-q", "ci/tests")
    # The committed fixtures still match fixtures/MANIFEST.json (no Pi, no network needed).
    session.run("python", "fixtures/make/regenerate.py", "--check")
    src_dirs = [str(workspace.package_dir(n) / "src") for n in workspace.PACKAGES]
    modules: list[str] = []
    for n in workspace.PACKAGES:
        modules += ["-p", f"mosaic.{workspace.module_name(n)}"]
    session.run(
        "mypy",
        "--strict",
        "--explicit-package-bases",
        "--namespace-packages",
        *modules,
        env={"MYPYPATH": os.pathsep.join(src_dirs)},
    )


def _ci_pin(tool: str) -> str:
    """The pin of `tool` in ci/requirements.txt (what bootstrap installs), so the session uses the same one."""
    for line in (ROOT / "ci" / "requirements.txt").read_text().splitlines():
        if line.split("==")[0].strip() == tool:
            return line.split("#")[0].strip()
    raise RuntimeError(f"ci/requirements.txt pins no {tool}")


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Each package released alone (issue 12): an sdist and a wheel built from it, `twine check --strict`,
    then each installed alone into a fresh venv from the local wheelhouse (mosaic-*, no index consulted) and
    PyPI's wheels (third-party): exactly its declared Mosaic closure, its modules import, its console scripts
    run --help (ci/build.py; artifacts in dist/sdist, dist/wheelhouse, dist/thirdparty)."""
    session.install(_ci_pin("uv"), "twine==7.0.0", "pip", "packaging>=24")
    session.run("python", "ci/build.py", *session.posargs)


@nox.session(python=PYTHON)
def mutants(session: nox.Session) -> None:
    """Apply each patch in mutants/ in a scratch copy; fail unless the test it names fails."""
    session.install("pytest>=8")
    session.run("python", "ci/mutants.py", *session.posargs)


@nox.session(python=PYTHON)
def cohort(session: nox.Session) -> None:
    """K1-K16 on the real kernel: a direct delegated cgroup2 path and a sandboxed systemd --user scope; then
    the controller's claim <-> cohort contract test on the same two routes.

    Needs root (it creates the engine account `cohorttest`, a system account, through cgroup-cohort's
    `testing.account` when it is missing, and brings up user managers in private mount and cgroup
    namespaces). Each test that cannot run here skips
    with its reason, printed by -rs; the whole suite skips only where neither path can run. The two suites
    run as two pytest invocations: each conftest loads the shared plugin (mosaic.cgroup_cohort.testing.lab)
    and pytest takes `pytest_plugins` only from a root conftest.
    """
    _install_package(session, "controller")  # its closure holds cgroup-cohort and writer-claim
    for pkg in ("cgroup-cohort", "controller"):
        tests = workspace.package_dir(pkg) / "tests_cohort"
        session.run("python", "-m", "pytest", "-p", "no:cacheprovider", "--import-mode=importlib",
                    "--rootdir", str(tests), "-q", "-rs", str(tests), *session.posargs,
                    env={"MOSAIC_REPO": str(ROOT)})


@nox.session(python=PYTHON)
def smoke(session: nox.Session) -> None:
    """The sealed real Pi 0.85.1 in a loopback-only network namespace: pi-rpc's conformance (the fake held
    to the real binary), then the controller's flows on the real binary (issue 10), then the terminal driven
    in tmux against a controller of the real binary (issue 12).

    Installs the pinned Pi from the npm registry into .cache/pi (the installer verifies the pin), then runs
    each suite inside a fresh network namespace with only loopback up, so nothing can leave the machine
    even by mistake. The suites fail, never skip, outside that namespace.
    """
    _install_package(session, "controller")  # its closure holds pi-rpc
    session.install(f"{workspace.package_dir('mediated-terminal')}[test]")
    session.install(f"{workspace.package_dir('pi-rpc')}[smoke]")
    pi = str(ROOT / ".cache" / "pi")
    session.run("python", "-m", "mosaic.pi_rpc.testing.smoke", "prepare", pi)
    for pkg in ("pi-rpc", "controller", "mediated-terminal"):
        tests = str(workspace.package_dir(pkg) / "tests_smoke")
        session.run("python", "-m", "mosaic.pi_rpc.testing.netns", "--", "python", "-m", "pytest",
                    "-p", "no:cacheprovider", "--import-mode=importlib", "--rootdir", tests, "-q", tests,
                    f"--ignore={CLAUDE_CONTROLLER_SMOKE}",  # the controller on Claude: `claude-smoke` runs it
                    env={"MOSAIC_PI_DIR": pi, "MOSAIC_REPO": str(ROOT)})


@nox.session(name="claude-smoke", python=PYTHON)
def claude_smoke(session: nox.Session) -> None:
    """The pinned Claude Code 2.1.283 (issue 30, B1): installs (or reuses) it from the npm registry into
    .cache/claude, verified against the pin, and fetches the Agent SDK sources by hash into
    .cache/claude-sources (npm, pip), then runs claude-rpc's tests_smoke in a loopback-only network namespace
    against the scripted Anthropic Messages server: the pin and L7 on the real binary, the isolation
    (strace: only the scripted server, writes only in scratch), every recording and transcript tree made
    again and compared with the committed ones (and the fake engine held to each sealed one), the leaf rule
    proven by --resume, the seal on the binary (planted files kept out) and the Claude link driving the
    sealed binary; then the controller's flows on it (controller/tests_smoke/test_claude_real.py, issue 32)
    (about 50 s with the install cached; run it under the engine lock). No model is called, no
    credential is read."""
    _install_package(session, "claude-rpc")
    session.install(f"{workspace.package_dir('claude-rpc')}[smoke]", "pip")  # pip: the Python SDK's sdist
    claude, sources = str(ROOT / ".cache" / "claude"), str(ROOT / ".cache" / "claude-sources")
    session.run("python", "-m", "mosaic.claude_rpc.testing.smoke", "prepare", claude, sources)
    tests = str(workspace.package_dir("claude-rpc") / "tests_smoke")
    session.run("python", "-m", "mosaic.claude_rpc.testing.netns", "--", "python", "-m", "pytest",
                "-p", "no:cacheprovider", "--import-mode=importlib", "--rootdir", tests, "-q", tests,
                *session.posargs, env={"MOSAIC_CLAUDE_DIR": claude, "MOSAIC_CLAUDE_SOURCES": sources, "MOSAIC_REPO": str(ROOT)})
    # The controller's flows on the same binary (issue 32): the Claude adapter under the runtime and a client.
    _install_package(session, "controller")
    tests = str(workspace.package_dir("controller") / "tests_smoke")
    session.run("python", "-m", "mosaic.claude_rpc.testing.netns", "--", "python", "-m", "pytest",
                "-p", "no:cacheprovider", "--import-mode=importlib", "--rootdir", tests, "-q", CLAUDE_CONTROLLER_SMOKE,
                env={"MOSAIC_CLAUDE_DIR": claude, "MOSAIC_REPO": str(ROOT)})


# Each benchmark: (package, script under packages/<package>/, arguments). Numbers are ratios against a
# floor the script measures in the same run; nothing here asserts a time.
BENCHMARKS: list[tuple[str, str, list[str]]] = [
    ("pi-format", "bench/bench_memory.py", []),
    ("chat-pages", "bench/bench_reader.py", ["--repeat", "3"]),
    ("chat-pages", "bench/bench_load.py", []),
    ("safe-open", "bench/bench_import.py", []),
    ("writer-claim", "bench/bench_claim.py", ["--cycles", "100"]),
    ("cgroup-cohort", "bench/bench_stop.py", ["--repeats", "3"]),
    ("pi-rpc", "bench/bench_link.py", []),
    ("controller-client", "bench/bench_import.py", []),
    ("controller", "bench/bench_import.py", []),
    ("controller", "bench/bench_server.py", []),
    ("controller", "bench/bench_controller.py", []),
    ("controller", "bench/bench_turn_end.py", []),
    ("mediated-terminal", "bench/bench_start.py", []),
]


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks as ratios against a floor measured in the same run (never asserted in tests)."""
    names = sorted({pkg for pkg, _, _ in BENCHMARKS})
    paths = {str(workspace.package_dir(dep)) for n in names for dep in workspace.closure(n)}
    session.install(*sorted(paths))
    for pkg, script, args in BENCHMARKS:
        session.log(f"benchmark {pkg}: {script}")
        session.run("python", str(workspace.package_dir(pkg) / script), *args, *session.posargs)
    # The lifecycle's launch and stop figures on the sealed real Pi (prepared as `smoke` does), inside the
    # loopback-only network namespace: needs root and a writable cgroup2, like the cgroup-cohort benchmark.
    session.install(f"{workspace.package_dir('pi-rpc')}[smoke]")
    pi = str(ROOT / ".cache" / "pi")
    session.run("python", "-m", "mosaic.pi_rpc.testing.smoke", "prepare", pi)
    session.log("benchmark controller: bench/bench_lifecycle.py (real Pi)")
    session.run("python", "-m", "mosaic.pi_rpc.testing.netns", "--", "python",
                str(workspace.package_dir("controller") / "bench" / "bench_lifecycle.py"), *session.posargs,
                env={"MOSAIC_PI_DIR": pi})
    # Sessions of any length on the real Pi (issue 27): start-up and turn end from 100 entries to 93 MB.
    session.log("benchmark controller: bench/bench_length.py (real Pi)")
    session.run("python", "-m", "mosaic.pi_rpc.testing.netns", "--", "python",
                str(workspace.package_dir("controller") / "bench" / "bench_length.py"), *session.posargs,
                env={"MOSAIC_PI_DIR": pi})


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """The main job's demo (ci/demo.py, issue 12) on the sealed real Pi in the loopback-only namespace: a
    controller launches Pi under a writer claim in a cohort and the client library drives six steps, then a
    seventh on the sealed real Claude Code 2.1.283 (issue 32: a permission request answered, an interrupt, a
    force stop with a proof); then
    ci/demo_check.py checks the printed transcript and the recorded facts step by step (and its plain
    words); then ci/demo_interactive_check.py drives the `--interactive` run's mosaic-terminal in tmux as a
    person would (issues 20 and 29: through force stop, recover, the launch from the record and a prompt
    again); then ci/tests_demo: SIGINT, SIGHUP and SIGTERM at each step boundary of the
    demo (the Claude step's among them), each cleaned up with one line, a SIGKILLed run swept by the next, the
    refusals in one line, and the Pi fetch's progress and interrupt (about 5 minutes on a busy 2-core machine;
    each boundary of step 7 runs the Pi steps first). Needs root (a cgroup, the engine account) and
    tmux, like `smoke`."""
    _install_package(session, "controller")
    session.install(str(workspace.package_dir("mediated-terminal")))
    session.install(f"{workspace.package_dir('pi-rpc')}[smoke]")
    pi = str(ROOT / ".cache" / "pi")
    session.run("python", "-m", "mosaic.pi_rpc.testing.smoke", "prepare", pi)
    session.run("python", str(ROOT / "ci" / "prepare_claude.py"), str(ROOT / ".cache" / "claude"))  # step 7's
    out = pathlib.Path(session.create_tmp())
    transcript, evidence = str(out / "demo-transcript.txt"), str(out / "demo-evidence.json")
    session.run("python", "-m", "mosaic.pi_rpc.testing.netns", "--", "python", str(ROOT / "ci" / "demo.py"),
                "--transcript", transcript, "--evidence", evidence,
                env={"MOSAIC_PI_DIR": pi, "MOSAIC_REPO": str(ROOT)})
    session.run("python", str(ROOT / "ci" / "demo_check.py"), transcript, evidence)
    session.run("python", str(ROOT / "ci" / "demo_interactive_check.py"),
                env={"MOSAIC_PI_DIR": pi, "MOSAIC_REPO": str(ROOT)})
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", "-q", str(ROOT / "ci" / "tests_demo"),
                *session.posargs, env={"MOSAIC_PI_DIR": pi, "MOSAIC_REPO": str(ROOT)})
