"""`mosaic-read` run as a user runs it (a subprocess, a terminal where Ctrl-C
matters). `--version` and `python -m`; options after the command; every expected error ends with one line on
stderr and its documented exit status (a bad --config names the field, a missing file, an unreachable
--url, a closed pipe, Ctrl-C in `follow`); a crash has a status of its own; `serve` stops cleanly on each
signal and removes the token file it made. The README's exit-status table is the code's."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
from helpers import REPO, World, entry, header, write_session

# The exit statuses are the contract under test; the table lives in the private command-line module.
from mosaic.chat_pages.cli import EXIT_CODES

PY = [sys.executable, "-m", "mosaic.chat_pages"]
BOUND = 60.0
README = (REPO / "packages" / "chat-pages" / "README.md").read_text(encoding="utf-8")


def run(*args: str, timeout: float = BOUND) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PY, *args], capture_output=True, text=True, timeout=timeout, check=False)


def one_line(proc: subprocess.CompletedProcess[str], status: int, pattern: str) -> str:
    """Assert the run ended with `status` and exactly one line on stderr matching `pattern`, no traceback."""
    assert proc.returncode == status, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("mosaic-read: ") and re.search(pattern, lines[0]), lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
    return lines[0]


@pytest.fixture
def project(world: World) -> tuple[Path, str]:
    """A project with one conversation of 2,500 entries (about 25 pages, over 1 MB of JSON lines)."""
    root = world.top / "proj"
    lines = [header(root)] + [entry(f"e{i}", f"e{i - 1}" if i else None, f"message {i} " + "word " * 60)
                              for i in range(2500)]
    write_session(root, "s.jsonl", lines)
    world.approve(root)
    return root, world.cid(root, "s.jsonl")


def test_version_from_the_command_and_python_m() -> None:
    expected = f"mosaic-read {version('mosaic-chat-pages')} (mosaic-chat-pages)\n"
    script = Path(sys.executable).parent / "mosaic-read"
    assert script.exists(), f"the console script is not installed beside {sys.executable}"
    for argv in ([str(script), "--version"], [*PY, "--version"]):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=BOUND, check=False)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, expected, ""), argv


def test_options_are_accepted_after_the_command(world: World, project: tuple[Path, str]) -> None:
    root, cid = project
    other = world.top / "other"
    write_session(other, "t.jsonl", [header(other), entry("a", None, "x")])
    before = run("--text", "--spec", str(root), "alpha", "catalogue")
    after = run("catalogue", "--spec", str(root), "alpha", "--text")
    assert before.returncode == after.returncode == 0 and before.stdout == after.stdout != ""
    both = run("--spec", str(root), "alpha", "catalogue", "--spec", str(other), "alpha", "--text")
    assert both.returncode == 0 and "proj/alpha/s.jsonl" in both.stdout and "other/alpha/t.jsonl" in both.stdout
    opened = run("open", cid, "--text", "--spec", str(root), "alpha")
    assert opened.returncode == 0 and opened.stdout.startswith(f"== {cid} branch main")


def test_a_relative_or_wrong_spec_is_one_line_and_a_non_zero_exit(world: World, project: tuple[Path, str],
                                                                   tmp_path: Path) -> None:
    root, _cid = project
    relative = subprocess.run([*PY, "--spec", "proj", "alpha", "catalogue"], capture_output=True, text=True,
                              timeout=BOUND, check=False, cwd=str(root.parent))
    line = one_line(relative, 2, r"PROJECT_ROOT must be an absolute path")
    assert line == (f"mosaic-read: --spec proj alpha: PROJECT_ROOT must be an absolute path (the project directory, "
                    f"e.g. {root})") and relative.stdout == ""
    missing = run("--spec", str(tmp_path / "nope"), "alpha", "--text", "catalogue")
    one_line(missing, 1, rf"^mosaic-read: root {tmp_path / 'nope'} seat alpha refused: unavailable: ")
    seatless = run("--spec", str(root), "beta", "catalogue")  # the project is there, that seat's sessions not
    one_line(seatless, 1, r"seat beta refused: unavailable: \.pi/state/beta/sessions: No such file")
    assert json.loads(seatless.stdout)["refusedRoots"][0]["seat"] == "beta"  # the result is still printed
    both = run("--spec", str(root), "alpha", "--spec", str(tmp_path / "nope"), "alpha", "--text", "catalogue")
    one_line(both, 1, r"refused: unavailable")
    assert "proj/alpha/s.jsonl" in both.stdout  # what could be read is listed
    assert run("--spec", str(root), "alpha", "catalogue").returncode == 0


def test_a_shared_option_after_the_command_shows_its_own_metavar() -> None:
    shown = run("open", "-h").stdout
    assert "[--url URL]" in shown and "LATE_" not in shown


def test_a_bad_config_names_the_bad_field(tmp_path: Path) -> None:
    cases = {
        '{"specs": [{"projectRoot": "/p", "seat": 7}]}': r"Expected `str`, got `int` - at `\$\.specs\[0\]\.seat`",
        '{"specs": [{"seat": "alpha"}]}': r"missing required field `projectRoot` - at `\$\.specs\[0\]`",
        '{"registrations": [{"seat": "a", "harness": "pi", "layoutRepo": "/l", "project": "p", '
        '"sesionsDir": "/s", "startedAt": "2026-01-01T00:00:00Z"}]}': r"unknown field `sesionsDir`",
        '{"specs": [], "spec": []}': r"unknown field `spec`$",
        '{"specs": [': r"not JSON",
        "[]": r"Expected `object`, got `array`",
    }
    for i, (text, pattern) in enumerate(cases.items()):
        cfg = tmp_path / f"c{i}.json"
        cfg.write_text(text)
        proc = run("--config", str(cfg), "catalogue")
        line = one_line(proc, 2, pattern)
        assert line.startswith(f"mosaic-read: --config {cfg}: ") and proc.stdout == ""


def test_a_missing_or_unsafe_file_is_one_line(tmp_path: Path) -> None:
    one_line(run("--config", str(tmp_path / "nope.json"), "catalogue"), 2, r"--config .*nope\.json: no such file")
    one_line(run("--config", str(tmp_path), "catalogue"), 2, r"is a directory")
    one_line(run("--url", "http://127.0.0.1:9", "--token-file", str(tmp_path / "nope"), "catalogue"), 2,
             r"--token-file .*nope: no such file")
    loose = tmp_path / "loose.token"
    loose.write_text("a-token-that-others-can-read\n")
    os.chmod(loose, 0o644)
    one_line(run("--url", "http://127.0.0.1:9", "--token-file", str(loose), "catalogue"), 2,
             r"other users may read it \(mode 0644\); chmod 600 it")
    short = tmp_path / "short.token"
    short.write_text("abc\n")
    os.chmod(short, 0o600)
    one_line(run("serve", "--spec", str(tmp_path), "alpha", "--token-file", str(short)), 2,
             r"at least 16 characters")


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()  # bound, never listened on: a connect is refused
    return port


@pytest.fixture
def not_the_routes() -> Iterator[str]:
    """A loopback server that answers every request with plain text (not a mosaic-read server)."""
    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def answer() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html>hello</html>")

    t = threading.Thread(target=answer, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        t.join(BOUND)
        srv.close()


def test_an_unreachable_url_is_one_line(not_the_routes: str) -> None:
    port = _closed_port()
    one_line(run("--url", f"http://127.0.0.1:{port}", "catalogue"), 3,
             rf"cannot reach http://127\.0\.0\.1:{port}: connection refused")
    one_line(run("--url", not_the_routes, "open", "pi-" + "0" * 40), 3, r"answered 200 without the routes' JSON")
    one_line(run("--url", "localhost:8765", "catalogue"), 2, r"give the http:// URL")
    one_line(run("--url", "http://127.0.0.1:9/conversations?token=a&x=1", "catalogue"), 2,
             r"the only query parameter")


def test_a_broken_pipe_is_one_line(project: tuple[Path, str]) -> None:
    """`mosaic-read open --all ... | head -n 1`: the reader of the pipe goes away after one line while
    more than a pipe's buffer is still to come, so the next write fails (EPIPE)."""
    root, cid = project
    proc = subprocess.Popen([*PY, "--spec", str(root), "alpha", "open", cid, "--all"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    status = proc.wait(BOUND)
    assert json.loads(first)["ok"] is True
    assert status == 4 and err == "mosaic-read: output closed before the end (broken pipe)\n", (status, err)


def test_the_shell_pipeline_into_head_is_one_line(project: tuple[Path, str]) -> None:
    root, cid = project
    line = " ".join([*PY, "--spec", str(root), "alpha", "--text", "open", cid, "--all"])
    proc = subprocess.run(["bash", "-c", f"{line} | head -n 2; echo status=${{PIPESTATUS[0]}} >&2"],
                          capture_output=True, text=True, timeout=BOUND, check=False)
    assert proc.stdout.startswith(f"== {cid} branch main") and len(proc.stdout.splitlines()) == 2
    assert proc.stderr == "mosaic-read: output closed before the end (broken pipe)\nstatus=4\n", proc.stderr


def _read_pty(fd: int, until: bytes, deadline: float) -> bytes:
    """Read the terminal's output until `until` appears (b"" : until the other end closes); bounded."""
    got = b""
    while until not in got or not until:
        left = deadline - time.monotonic()
        assert left > 0, f"the terminal did not show {until!r}; it showed {got[-400:]!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: every process holding the terminal has closed it
            chunk = b""
        if not chunk:
            assert not until, f"the terminal closed before {until!r}; it showed {got[-400:]!r}"
            return got
        got += chunk
    return got


def test_ctrl_c_in_follow_is_one_line_in_a_terminal(project: tuple[Path, str]) -> None:
    """follow runs in a real terminal (a pty, its session's foreground); the user presses Ctrl-C, which the
    terminal turns into SIGINT for the foreground process group."""
    root, cid = project
    argv = [*PY, "--spec", str(root), "alpha", "--text", "follow", cid, "--interval", "0.2"]
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child becomes the command
        os.execv(sys.executable, argv)
    try:
        deadline = time.monotonic() + BOUND
        shown = _read_pty(fd, b"== end; follow: c-", deadline)  # every page printed; now it polls
        os.write(fd, b"\x03")
        shown += _read_pty(fd, b"", deadline)
        _, wait_status = os.waitpid(pid, 0)
        pid = 0
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    text = shown.decode("utf-8", "replace")
    assert os.waitstatus_to_exitcode(wait_status) == 130, text[-400:]
    # After the last page: the terminal's echo of the key ("^C"), then the one line.
    after = text[text.index("== end; follow: c-"):].splitlines()[1:]
    assert [x.strip().removeprefix("^C") for x in after if x.strip()] == ["mosaic-read: interrupted"], after
    assert "Traceback" not in text


def test_a_crash_has_an_exit_status_of_its_own(world: World, project: tuple[Path, str]) -> None:
    """A bug (here: the output stream raises) prints its traceback and exits 70, never 1 (a refusal) nor 2."""
    root, cid = project
    code = ("import io, sys\nfrom mosaic.chat_pages.cli import main\n"
            "class Broken(io.StringIO):\n    def write(self, s):\n        raise ZeroDivisionError('a bug in the writer')\n"
            f"sys.exit(main(['--spec', {str(root)!r}, 'alpha', 'open', {cid!r}], out=Broken()))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=BOUND, check=False)
    assert proc.returncode == 70, proc.stderr
    assert "Traceback" in proc.stderr and "ZeroDivisionError: a bug in the writer" in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("mosaic-read: internal error: this is a bug")
    refused = run("--spec", str(root), "alpha", "open", "pi-" + "0" * 40)
    assert refused.returncode == 1 and json.loads(refused.stdout)["refusal"]["code"] == "unknown-conversation"
    assert len({70, refused.returncode, 2, 3, 4, 130}) == 6


def _serve(*args: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen([*PY, "serve", "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(BOUND)
        raise AssertionError(f"serve did not start: {proc.stderr.read() if proc.stderr else ''}")
    started: dict[str, str] = json.loads(line)
    return proc, started


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_serve_stops_on_each_signal_and_removes_its_token_file(project: tuple[Path, str], sig: int) -> None:
    root, cid = project
    proc, started = _serve("--spec", str(root), "alpha")
    token_file = started["tokenFile"]
    try:
        st = os.stat(token_file)
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
        token = Path(token_file).read_text().strip()
        assert started["url"] == f"{started['serving']}/conversations?token={token}"
        # A client of the same user reads through it with the file, or with the printed URL.
        via_file = run("--url", started["serving"], "--token-file", token_file, "open", cid)
        via_url = run("--url", started["url"], "open", cid)
        assert via_file.returncode == via_url.returncode == 0
        assert json.loads(via_file.stdout)["page"]["parts"] == json.loads(via_url.stdout)["page"]["parts"]
        refused = run("--url", started["serving"], "catalogue")
        assert refused.returncode == 1 and json.loads(refused.stdout)["refusal"]["code"] == "token-required"
    finally:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=BOUND)
    assert proc.returncode == 0 and err == f"mosaic-read: stopped serving ({signal.Signals(sig).name})\n"
    assert not os.path.exists(token_file)


def test_serve_with_a_token_file_or_no_token_and_its_one_line_errors(tmp_path: Path,
                                                                      project: tuple[Path, str]) -> None:
    root, _ = project
    given = tmp_path / "mine.token"
    given.write_text("my-own-token-0123456789\n")
    os.chmod(given, 0o600)
    proc, started = _serve("--spec", str(root), "alpha", "--token-file", str(given))
    try:
        assert started["tokenFile"] == str(given) and started["url"].endswith("?token=my-own-token-0123456789")
        busy = int(started["serving"].rsplit(":", 1)[1])
        one_line(run("serve", "--spec", str(root), "alpha", "--port", str(busy)), 3,
                 rf"cannot listen on 127\.0\.0\.1:{busy}: address already in use")
    finally:
        proc.terminate()
        proc.communicate(timeout=BOUND)
    assert given.exists(), "serve removed a token file it did not make"
    proc, started = _serve("--spec", str(root), "alpha", "--no-token")
    try:
        assert started["tokenFile"] is None and started["url"] == started["serving"] + "/conversations"
        assert run("--url", started["serving"], "catalogue").returncode == 0
    finally:
        proc.terminate()
        proc.communicate(timeout=BOUND)
    one_line(run("serve", "--spec", str(root), "alpha", "--host", "10.0.0.1"), 2, r"--host 10\.0\.0\.1: .*loopback")
    usage = run("serve", "--spec", str(root), "alpha", "--no-token", "--token-file", str(given))
    assert usage.returncode == 2 and "contradict" in usage.stderr and "Traceback" not in usage.stderr
    usage = run("serve", "--url", started["serving"])
    assert usage.returncode == 2 and "not --url" in usage.stderr and "Traceback" not in usage.stderr


def test_the_readme_exit_status_table_is_the_code() -> None:
    start, end = "<!-- exit-codes:start -->", "<!-- exit-codes:end -->"
    table = README[README.index(start) + len(start):README.index(end)]
    rows = {int(m.group(1)): (m.group(2), m.group(3)) for m in
            re.finditer(r"^\| (\d+) \| ([a-z ]+) \| (.+) \|$", table, flags=re.M)}
    assert rows == {code: (name, meaning) for code, (name, meaning) in EXIT_CODES.items()}
