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
LINE = re.compile(r'^\d+\s+(\w+)\((?:AT_FDCWD|-?\d+), "([^"]*)"(.*)$')


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
                         prefix=[strace, "-f", "-qq", "-e", "trace=%file,%network", "-o", str(trace)])
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
    unix = re.findall(r'(\w+)\(\d+, \{sa_family=AF_UNIX, sun_path="([^"]*)"', text)
    assert unix and all(call == "bind" and path.startswith(env["CLAUDE_CODE_TMPDIR"] + "/") for call, path in unix)
    home = os.environ.get("HOME", "")
    written: list[str] = []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        call, path, rest = m.groups()
        if home not in ("", "/") and (path == home or path.startswith(home.rstrip("/") + "/")):
            pytest.fail(f"the binary touched this process's HOME: {line}")
        if call in WRITE_CALLS or re.search(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC", rest):
            written.append(path)
    outside = [p for p in written if not p.startswith(str(scratch) + "/") and p != "/dev/null"]
    assert written and outside == [], outside
    transcripts = list((scratch / "claude" / "projects").rglob("*.jsonl"))
    assert len(transcripts) == 1 and transcripts[0].stat().st_mode & 0o777 == 0o600
    assert os.listdir(scratch / "home") == []
