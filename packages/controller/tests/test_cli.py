"""mosaic-controller as a user runs it (README "The command line"): `--version` before or after the subcommand
and through `python -m mosaic.controller`, a usage error in one line (exit 2), each expected error in one
line on stderr (exit 1) before anything is made, a crash in one line with an exit status of its own (70),
the library's log one line per record on stderr (its traceback only with --debug or in the --log file).
Serving a real engine is tests_smoke/test_cli_serve.py (root, the real Pi)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from mosaic.controller.route import engine_can_read

VERSION = metadata.version("mosaic-controller")


def run(*args: str, module: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "mosaic.controller", *args]
    if not module:
        argv = [str(Path(sys.executable).parent / "mosaic-controller"), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "LC_ALL": "C", **(env or {})})


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line an error prints: on stderr, nothing on stdout, no traceback."""
    assert done.stdout == "", done.stdout
    out = done.stderr.strip()
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    return out


@pytest.mark.parametrize("args", [["--version"], ["serve", "--version"], ["fixture", "--version"]])
def test_version_before_or_after_the_subcommand(args: list[str]) -> None:
    for module in (True, False):
        done = run(*args, module=module)
        assert (done.returncode, done.stdout) == (0, f"mosaic-controller {VERSION}\n"), done


def test_help_names_both_commands_and_the_exit_statuses() -> None:
    done = run("--help")
    assert done.returncode == 0
    assert "serve" in done.stdout and "fixture" in done.stdout and "Exit status" in done.stdout


def test_a_usage_error_is_one_line_exit_2() -> None:
    done = run("serve", "--session", "/x")
    assert done.returncode == 2
    assert one_line(done) == ("mosaic-controller: the following arguments are required: --fixture-root, --socket "
                              "(see mosaic-controller --help)")
    assert one_line(run("launch")) == ("mosaic-controller: argument {serve,fixture}: invalid choice: 'launch' "
                                       "(choose from 'serve', 'fixture') (see mosaic-controller --help)")


@pytest.fixture
def fixture_root(tmp_path: Path) -> Path:
    root = tmp_path / "fx"
    (root / "proj" / ".pi" / "state" / "seat" / "sessions").mkdir(parents=True)
    (root / "proj" / ".pi" / "state" / "seat" / "sessions" / "s.jsonl").write_text("")
    (tmp_path / "pi").mkdir()
    return root


def serve_args(root: Path, **over: str) -> list[str]:
    args = {"--fixture-root": str(root), "--session": str(root / "proj/.pi/state/seat/sessions/s.jsonl"),
            "--socket": str(root.parent / "ctl" / "controller.sock"), "--pi-dir": str(root.parent / "pi"), **over}
    return ["serve", *[x for kv in args.items() for x in kv]]


@pytest.mark.parametrize("over,said", [
    ({"--session": "/nonexistent/s.jsonl"}, "the session file /nonexistent/s.jsonl does not exist"),
    ({"--fixture-root": "/nonexistent/fx"}, "the fixture root /nonexistent/fx is not a directory "
                                            "(mosaic-controller fixture DIR makes one)"),
    ({"--socket": "/tmp/x.sock"}, "--socket must name <a private directory>/controller.sock (the controller's "
                                  "socket name), not /tmp/x.sock"),
    ({"--pi-dir": "/nonexistent/pi"}, "the Pi install /nonexistent/pi is not a directory"),
])
def test_an_expected_error_is_one_line_exit_1_and_nothing_is_made(
        fixture_root: Path, over: dict[str, str], said: str) -> None:
    done = run(*serve_args(fixture_root, **over))
    assert done.returncode == 1, done
    assert one_line(done) == f"mosaic-controller: {said}"
    assert not (fixture_root.parent / "ctl").exists()


def test_a_grants_file_that_is_not_strictly_right_is_refused_in_one_line_before_anything_is_made(
        fixture_root: Path) -> None:
    # The grants are read before the engine account, the route or the socket's directory: nothing is made.
    bad = fixture_root.parent / "grants.json"
    bad.write_text('{"version": 1, "grants": [{"uid": 65534, "operations": ["observe"], "all": true}]}')
    done = run(*serve_args(fixture_root, **{"--grants": str(bad)}))
    assert done.returncode == 1, done
    assert one_line(done) == ("mosaic-controller: refused: configuration: grants: Object contains unknown field "
                              "`all` - at `$.grants[0]`")
    assert not (fixture_root.parent / "ctl").exists()


def test_no_pi_install_named_is_one_line(fixture_root: Path) -> None:
    args = serve_args(fixture_root)
    i = args.index("--pi-dir")
    del args[i:i + 2]
    env = {k: v for k, v in os.environ.items() if k != "MOSAIC_PI_DIR"}
    done = subprocess.run([sys.executable, "-m", "mosaic.controller", *args], capture_output=True, text=True,
                          timeout=60, env=env)
    assert done.returncode == 1
    assert one_line(done) == ("mosaic-controller: no Pi install: give --pi-dir (python -m mosaic.pi_rpc.testing.smoke "
                              "prepare DIR installs the pinned Pi 0.85.1 there)")


def test_fixture_refuses_a_path_that_exists(tmp_path: Path) -> None:
    done = run("fixture", str(tmp_path))
    assert done.returncode == 1
    assert one_line(done) == f"mosaic-controller: {tmp_path} exists: fixture makes a new tree (name a path that " \
                             "does not exist)"


def test_a_crash_is_one_line_with_its_own_exit_status(fixture_root: Path) -> None:
    code = ("import sys, mosaic.controller._cli as cli\n"
            "def boom(args):\n    raise KeyError('the bug')\n"
            "cli._paths = boom\n"
            f"sys.exit(cli.main({serve_args(fixture_root)!r}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "MOSAIC_TRACEBACK"})
    assert done.returncode == 70
    assert one_line(done) == ("mosaic-controller: crashed (a bug): KeyError: 'the bug'; --debug (or MOSAIC_TRACEBACK=1) "
                              "shows the traceback")
    shown = subprocess.run([sys.executable, "-c", code.replace(f"{serve_args(fixture_root)!r}",
                                                               f"{['--debug', *serve_args(fixture_root)]!r}")],
                           capture_output=True, text=True, timeout=60,
                           env={k: v for k, v in os.environ.items() if k != "MOSAIC_TRACEBACK"})
    assert shown.returncode == 70 and shown.stdout == ""
    assert shown.stderr.startswith("mosaic-controller: crashed (a bug): KeyError: 'the bug'; the traceback follows\n"
                                   "Traceback (most recent call last):")


def logged(fixture_root: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """serve with `options`, where the paths check logs an exception from a library logger (as the runtime
    does when an effect fails) and then refuses: what a person sees of a library's log record."""
    code = ("import logging, sys, mosaic.controller._cli as cli\n"
            "def paths(args):\n"
            "    try:\n        raise ValueError('stopped -> stopped is not a lifecycle step')\n"
            "    except ValueError:\n"
            "        logging.getLogger('mosaic.controller.runtime').exception('effect %s failed', 'claim-generation')\n"
            "    raise cli.CliRefused('stop here')\n"
            "cli._paths = paths\n"
            f"sys.exit(cli.main({[*options, *serve_args(fixture_root)]!r}))\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "MOSAIC_TRACEBACK"})


def test_a_library_log_record_is_one_line_on_stderr_its_traceback_only_with_debug_or_in_the_log_file(
        fixture_root: Path, tmp_path: Path) -> None:
    plain = logged(fixture_root)
    assert (plain.returncode, plain.stdout) == (1, "")
    assert plain.stderr.splitlines() == [
        "mosaic-controller: effect claim-generation failed: ValueError: stopped -> stopped is not a lifecycle step "
        "(--debug shows the traceback)",
        "mosaic-controller: stop here"]
    log = tmp_path / "serve.log"
    filed = logged(fixture_root, "--log", str(log))
    assert filed.stderr.splitlines()[0].endswith(f"(its traceback is in {log})")
    assert "Traceback" not in filed.stderr
    written = log.read_text()
    assert "ERROR mosaic.controller.runtime: effect claim-generation failed\nTraceback (most recent call last):" in written
    assert "ValueError: stopped -> stopped is not a lifecycle step" in written
    debug = logged(fixture_root, "--debug")
    assert "mosaic-controller: ERROR mosaic.controller.runtime: effect claim-generation failed\nTraceback" in debug.stderr
    assert debug.stderr.splitlines()[-1] == "mosaic-controller: stop here"
    unwritable = run(*serve_args(fixture_root), "--log", str(tmp_path / "no" / "such" / "dir.log"))
    assert unwritable.returncode == 1
    assert one_line(unwritable) == f"mosaic-controller: --log {tmp_path / 'no' / 'such' / 'dir.log'}: no such file or directory"


def test_a_malformed_eligibility_id_is_one_line_before_anything_is_made(fixture_root: Path) -> None:
    done = run(*serve_args(fixture_root), "--eligibility", "elig-xyz")
    assert done.returncode == 1
    assert one_line(done) == ("mosaic-controller: --eligibility 'elig-xyz' is not an eligibility ID (elig- and 32 hex "
                              "digits, as the recover printed it)")
    assert not (fixture_root.parent / "ctl").exists()


@pytest.mark.parametrize(("given", "said"), [
    (("--engine-uids", "61000:16"), "--engine-uids FIRST:COUNT and --engine-uid-state DIR go together"),
    (("--engine-uid-state", "/x"), "--engine-uids FIRST:COUNT and --engine-uid-state DIR go together"),
    (("--engine-uids", "61000", "--engine-uid-state", "/x"),
     "--engine-uids '61000' is not FIRST:COUNT (two positive integers, e.g. 61000:1000)"),
    (("--engine-uids", "0:16", "--engine-uid-state", "/x"),
     "--engine-uids '0:16' is not FIRST:COUNT (two positive integers, e.g. 61000:1000)"),
])
def test_an_engine_uid_range_is_checked_in_one_line_before_anything_is_made(
        fixture_root: Path, given: tuple[str, ...], said: str) -> None:
    done = run(*serve_args(fixture_root), *given)
    assert done.returncode == 1
    assert one_line(done) == f"mosaic-controller: {said}"
    assert not (fixture_root.parent / "ctl").exists()


def test_the_console_script_and_python_m_run_the_public_cli_module() -> None:
    script = Path(sys.executable).parent / "mosaic-controller"
    assert "from mosaic.controller.cli import main" in script.read_text()
    import mosaic.controller.cli as cli  # noqa: PLC0415

    assert (cli.EXIT_REFUSED, cli.EXIT_USAGE, cli.EXIT_NOT_STOPPED, cli.EXIT_CRASH) == (1, 2, 3, 70)


def test_engine_can_read_only_a_tree_every_uid_can_reach(tmp_path: Path) -> None:
    open_tree = Path("/tmp") / f"mosaic-read-test-{os.getpid()}"
    open_tree.mkdir(mode=0o755)
    try:
        os.chmod(open_tree, 0o755)
        (open_tree / "f").write_text("x")
        os.chmod(open_tree / "f", 0o644)
        assert engine_can_read(open_tree)
        os.chmod(open_tree / "f", 0o600)
        assert not engine_can_read(open_tree)
    finally:
        (open_tree / "f").unlink()
        open_tree.rmdir()
    os.chmod(tmp_path, 0o700)
    (tmp_path / "pi").mkdir(exist_ok=True)
    assert not engine_can_read(tmp_path / "pi")  # an ancestor (0700) that others cannot search


def test_serve_names_the_dialogs_opt_in_and_the_fixture_extension_both_off_unless_given() -> None:
    """Issue 33: `--answer-dialogs` (the controller answers confirm and select; default P3) and
    `--fixture-extension` (a test seat's dialogs) are flags, so a serve without them is today's."""
    done = run("serve", "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "--answer-dialogs" in text and "default: every dialog is shown disabled and never answered" in text
    assert "--fixture-extension" in text and "test seats only" in text
