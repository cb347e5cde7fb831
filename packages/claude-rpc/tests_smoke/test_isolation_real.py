"""B1 part 1: the pinned binary runs in the loopback-only namespace with only the scripted server, the fake
key and the scratch HOME, CLAUDE_CONFIG_DIR and CLAUDE_CODE_TMPDIR, with auto-update and every
non-essential connection off (DISABLE_AUTOUPDATER=1, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1:
docs/claude-2.1.283.md "Switches").

One `-p` turn runs under `strace -f` (file and network calls). What it shows, asserted here:
- every socket address the binary names is 127.0.0.1 at the scripted server's port, or its messaging
  socket under CLAUDE_CODE_TMPDIR: no DNS, no netlink, nothing else;
- the scripted server saw exactly the connectivity probe and one model request, with the fake key;
- every file the binary creates, writes, renames or removes is under the scratch directory (or /dev/null),
  and it touches nothing under this process's own HOME (the real `~/.claude` is never opened).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from mosaic.claude_rpc import ClaudeInstall
from mosaic.claude_rpc.testing import ModelServer
from mosaic.claude_rpc.testing.drive import FAKE_KEY, claude_env, run_print

WRITE_CALLS = {"mkdir", "mkdirat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "link", "linkat",
               "symlink", "symlinkat", "chmod", "fchmodat", "truncate", "utimensat", "creat", "rmdir"}
# A file call's first path, with or without a directory fd. With `strace -y` a directory fd prints its path
# (`openat(23</x/y>, "probe", ...)`): a relative path is resolved against it, or against the binary's cwd for
# AT_FDCWD or a call without one (no chdir happens: asserted below).
LINE = re.compile(r'^\d+\s+(\w+)\((?:(AT_FDCWD|-?\d+(?:<[^>]*>)?), )?"([^"]*)"(.*)$')
# The second path of a rename or a link (`renameat2(AT_FDCWD, "a.tmp", AT_FDCWD, "a", 0)`, `rename("a", "b")`).
SECOND = re.compile(r'^, (?:(AT_FDCWD|-?\d+(?:<[^>]*>)?), )?"([^"]*)"')
TWO_PATHS = {"rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat"}
DIRFD = re.compile(r"-?\d+<([^>]*)>")


def _placed(dirfd: str | None, path: str, cwd: Path, line: str) -> str:
    """The absolute path a traced call named: as written, or joined to its directory fd's path or the cwd."""
    if path.startswith("/"):
        return os.path.normpath(path)
    if dirfd is None or dirfd == "AT_FDCWD":
        return os.path.normpath(os.path.join(cwd, path))
    d = DIRFD.fullmatch(dirfd)
    if d is None:
        pytest.fail(f"a relative path on a directory fd strace could not name: {line}")
    return os.path.normpath(os.path.join(d.group(1), path))


def test_a_turn_in_the_namespace_reaches_only_the_scripted_server_and_writes_only_in_scratch(
        claude: ClaudeInstall, tmp_path: Path) -> None:
    strace = shutil.which("strace")
    if strace is None:
        pytest.fail("strace is needed to show what the binary connects to and writes (apt-get install strace)")
    scratch = tmp_path / "s"
    (scratch / "proj").mkdir(parents=True)
    trace = tmp_path / "trace"
    with ModelServer() as server:
        env = claude_env(scratch, server.base_url)
        assert env["DISABLE_AUTOUPDATER"] == env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
        assert set(env) == {"PATH", "HOME", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_TMPDIR", "DISABLE_AUTOUPDATER",
                            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"}
        done = run_print(claude.binary, ["-p", "netns hello", "--output-format", "stream-json", "--verbose"],
                         env=env, cwd=scratch / "proj",
                         prefix=[strace, "-f", "-qq", "-y", "-e", "trace=%file,%network", "-o", str(trace)])
        assert done.returncode == 0 and done.of_type("result")[-1]["result"] == "Reply to: netns hello"
        init = done.of_type("system", "init")[0]
        assert init["analytics_disabled"] is True and init["product_feedback_disabled"] is True
        seen = [(r.method, r.route, r.headers.get("x-api-key")) for r in server.requests]
        # The connectivity probe carries no key; the model request carries the fake one.
        assert seen == [("HEAD", "/api/hello", None), ("POST", "/v1/messages", FAKE_KEY)]
        port = server.port
    text = trace.read_text()
    inet = re.findall(r"sa_family=AF_INET6?, [^}]*", text)
    assert inet and all(f"sin_port=htons({port}), sin_addr=inet_addr(\"127.0.0.1\")" in a for a in inet), inet
    families = set(re.findall(r"sa_family=(AF_\w+)", text))
    assert families <= {"AF_INET", "AF_UNIX"}, families
    unix = re.findall(r'(\w+)\(\d+(?:<[^>]*>)?, \{sa_family=AF_UNIX, sun_path="([^"]*)"', text)
    assert unix and all(call == "bind" and path.startswith(env["CLAUDE_CODE_TMPDIR"] + "/") for call, path in unix)
    home = os.environ.get("HOME", "")
    written: list[str] = []
    # Its children chdir to the project directory they already stand in; anywhere else, relative paths
    # could not be placed.
    cwd = str(scratch / "proj")
    # (a call strace saw interrupted by another thread's is `chdir("..." <unfinished ...>`.)
    moved = [c for c in re.findall(r"^\d+\s+(f?chdir\(.*)$", text, flags=re.M)
             if not re.match(r'chdir\("' + re.escape(cwd) + r'"(\)| <unfinished)', c)]
    assert moved == [], f"the binary changed its directory elsewhere (its relative paths could not be placed): {moved}"
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        call, dirfd, path, rest = m.groups()
        # A symlink's first path is what the link says, not a place written.
        paths = [] if call in ("symlink", "symlinkat") else [(dirfd, path)]
        second = SECOND.match(rest) if call in TWO_PATHS else None
        if second is not None:
            paths.append(second.groups())
        for fd, name in paths:
            full = _placed(fd, name, scratch / "proj", line)
            if home not in ("", "/") and (full == home or full.startswith(home.rstrip("/") + "/")):
                pytest.fail(f"the binary touched this process's HOME: {line}")
            if call in WRITE_CALLS or re.search(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC", rest):
                written.append(full)
    outside = [p for p in written if not p.startswith(str(scratch) + "/") and p != "/dev/null"]
    assert written and outside == [], outside
    transcripts = list((scratch / "claude" / "projects").rglob("*.jsonl"))
    assert len(transcripts) == 1 and transcripts[0].stat().st_mode & 0o777 == 0o600
    assert os.listdir(scratch / "home") == []
