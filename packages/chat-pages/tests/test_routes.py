"""F16: the two GET routes over real HTTP on loopback, one status per refusal code (the table checked against
every refusal code the source can produce), and the mosaic-read command line over the same API."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest
from helpers import (
    World,
    check_result,
    drop_to_nobody,
    entry,
    header,
    materialise,
    open_to_all,
    root_dirs,
    watched_tree,
    write_session,
)
from http_client import get as http_get

from mosaic.chat_pages import (
    ReaderRefusal,
    ReaderServer,
    RepositorySpec,
    SeatRegistration,
    conversation_id,
    create_reader,
    roots_from_specs,
)

# The console script's entry point (`mosaic-read = mosaic.chat_pages.cli:main`), run in this process
# against the reader and the server this test holds (cursors live in the memory of the process that
# issued them).
from mosaic.chat_pages.cli import TOKEN_ENV, main
from mosaic.chat_pages.reader import CURSOR_TTL_SECONDS
from mosaic.chat_pages.server import REFUSAL_STATUS
from mosaic.pi_format import FormatRefusal
from mosaic.safe_open import SafeOpenRefusal


def test_F16_status_table_covers_exactly_the_refusal_codes_the_source_can_produce() -> None:
    import mosaic.chat_pages as pkg

    src = Path(pkg.__file__).parent
    literal = set()
    for f in src.glob("*.py"):
        literal |= set(re.findall(r'ReaderRefusal\(\s*"([a-z-]+)"', f.read_text(encoding="utf-8")))
    # Codes passed through from the layers below: safe-open's and pi-format's tables.
    produced = literal | set(SafeOpenRefusal.CODES) | set(FormatRefusal.CODES)
    assert produced == set(ReaderRefusal.CODES) == set(REFUSAL_STATUS)
    assert all(400 <= s < 500 for s in REFUSAL_STATUS.values())


def _row(cat: dict[str, object], file: str) -> str:
    rows = cat["conversations"]
    assert isinstance(rows, list)
    return str(next(r["id"] for r in rows if r.get("file") == file))


def test_F16_routes_answer_every_refusal_with_its_status_over_real_http(world: World, server: ReaderServer) -> None:
    root = materialise(world.top, "proj-adv", ["crlf.jsonl", "cwd-outside.jsonl", "header-no-id.jsonl", "empty.jsonl"])
    (root / ".pi/state/alpha/sessions/link.jsonl").symlink_to(root / ".pi/state/alpha/sessions/crlf.jsonl")
    big = root / ".pi/state/alpha/sessions/big.jsonl"
    big.write_bytes(header(root))
    with open(big, "r+b") as f:
        f.truncate(256 * 1024 * 1024 + 1)
    world.approve(root)
    lines = [header(world.top / "p2")] + [entry(f"e{i}", f"e{i-1}" if i else None, f"t{i}") for i in range(150)]
    grow = write_session(world.top / "p2", "grow.jsonl", lines)
    world.approve(world.top / "p2")
    uns = materialise(world.top, "proj-rpc", ["plain.jsonl"], seat="rocko")
    world.approve(uns, seat="rocko")
    world.registrations.append(SeatRegistration("rocko", "claude-code", "/layout/repo", "proj-rpc",
                                                str(uns / ".pi/state/rocko/sessions"), "2026-01-01T00:00:00Z"))
    url = server.url
    status, cat = world.http(url, "/conversations", token=server.token)
    assert status == 200 and cat["ok"]
    crlf = _row(cat, "crlf.jsonl")
    seen: dict[str, int] = {}

    def get(target: str, conv: str | None) -> dict[str, object]:
        status, body = world.http(url, target, conv, token=server.token)
        if body["ok"]:
            assert status == 200
        else:
            code = body["refusal"]["code"]
            assert status == REFUSAL_STATUS[code], (code, status)
            seen[code] = status
        return body

    ok = get(f"/conversations/{crlf}", crlf)
    assert ok["ok"]
    get("/conversations/pi-" + "0" * 40, None)
    get(f"/conversations/{crlf}?branch=b.nope", crlf)
    uid = next(r["id"] for r in cat["conversations"] if r["kind"] == "unsupported")
    get(f"/conversations/{uid}", None)
    get(f"/conversations/{_row(cat, 'link.jsonl')}", _row(cat, "link.jsonl"))
    get(f"/conversations/{_row(cat, 'cwd-outside.jsonl')}", _row(cat, "cwd-outside.jsonl"))
    get(f"/conversations/{_row(cat, 'header-no-id.jsonl')}", _row(cat, "header-no-id.jsonl"))
    get(f"/conversations/{_row(cat, 'empty.jsonl')}", _row(cat, "empty.jsonl"))
    get(f"/conversations/{_row(cat, 'big.jsonl')}", _row(cat, "big.jsonl"))
    get(f"/conversations/{crlf}?actor=mallory", crlf)
    get(f"/conversations/{crlf}?purpose=export", crlf)
    gid = _row(cat, "grow.jsonl")
    first = get(f"/conversations/{gid}", gid)
    cur = first["cursor"]["id"]  # type: ignore[index]
    get(f"/conversations/{gid}?cursor=c-{'0' * 32}&branch=main", gid)
    get(f"/conversations/{gid}?cursor={cur}&branch=b.other", gid)
    page2 = get(f"/conversations/{gid}?cursor={cur}&branch=main", gid)
    assert page2["ok"] and page2["follow"] is not None
    world.clock.advance(CURSOR_TTL_SECONDS)
    get(f"/conversations/{gid}?cursor={page2['follow']['id']}&branch=main", gid)  # type: ignore[index]
    again = get(f"/conversations/{gid}", gid)
    grow.write_bytes(grow.read_bytes().replace(b'"t1"', b'"T1"'))  # rewritten in place
    get(f"/conversations/{gid}?cursor={again['cursor']['id']}&branch=main", gid)  # type: ignore[index]
    again = get(f"/conversations/{gid}", gid)
    os.rename(world.top / "p2/.pi/state/alpha/sessions", world.top / "p2/.pi/state/alpha/moved")
    get(f"/conversations/{gid}?cursor={again['cursor']['id']}&branch=main", gid)  # type: ignore[index]
    # The guard's refusals, in the same shape (test_guard.py has them browser by browser).
    for kw in ({"token": server.token, "host": "evil.example"},
               {"token": server.token, "headers": [("Origin", "http://evil.example")]},
               {}, {"token": "not-the-token-of-this-server"}):
        status, _, raw_body = http_get(url, "/conversations", **kw)  # type: ignore[arg-type]
        body = json.loads(raw_body)
        check_result(body)
        assert status == REFUSAL_STATUS[body["refusal"]["code"]]
        seen[body["refusal"]["code"]] = status
    missing = set(REFUSAL_STATUS) - set(seen) - {"unreadable"}
    assert not missing, missing  # unreadable: test_F16_unreadable_over_http (needs a dropped uid)


def test_F16_bad_requests_other_methods_and_routes(world: World, server: ReaderServer) -> None:
    root = materialise(world.top, "proj-rpc", ["plain.jsonl"])
    world.approve(root)
    cid = world.cid(root, "plain.jsonl")
    for target, status in ((f"/conversations/{cid}?cursor=a&cursor=b", 400), (f"/conversations/{cid}?x=1", 400),
                           ("/conversations?x=1", 400), ("/elsewhere", 404), ("/conversations/a/b", 404)):
        got, body = world.http(server.url, target, cid, token=server.token)
        assert got == status and body["ok"] is False
    req = urllib.request.Request(server.url + "/conversations", method="POST", data=b"{}",
                                 headers={"Authorization": f"Bearer {server.token}"})
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req, timeout=10)
    assert exc.value.code == 405 and exc.value.headers["Allow"] == "GET"
    with pytest.raises(ValueError):
        ReaderServer(world.reader, "0.0.0.0")


def test_F16_unreadable_over_http(tmp_path: Path) -> None:
    """The server runs in a forked child that dropped to uid 65534; the parent asks over HTTP."""
    if os.geteuid() != 0:
        pytest.skip("SKIPPED LOUDLY: needs root to drop privileges in a child")
    with tempfile.TemporaryDirectory(prefix="chat-pages-http-") as tmp:
        top = Path(tmp)
        root = top / "proj"
        write_session(root, "s.jsonl", [header(root), entry("u1", None, "hi")])
        open_to_all(top, root)
        os.chmod(root / ".pi/state/alpha/sessions/s.jsonl", 0o000)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                os.close(r)
                drop_to_nobody()
                specs = [RepositorySpec(str(root), "alpha", "/l")]
                srv = ReaderServer(create_reader(lambda: roots_from_specs(specs)))
                os.write(w, f"{srv.url} {srv.token}\n".encode())
                srv.serve_forever()
            finally:
                os._exit(0)
        os.close(w)
        try:
            with os.fdopen(r, "rb") as rf:
                started = rf.readline().decode().split()
            assert len(started) == 2 and started[0].startswith("http://127.0.0.1:"), "the child server did not start"
            url, token = started
            cid = conversation_id(str(root), "alpha", "s.jsonl")
            allowed = root_dirs(root) | {str(root / ".pi/state/alpha/sessions/s.jsonl")}
            with watched_tree(top, allowed), pytest.raises(urllib.error.HTTPError) as exc:
                urllib.request.urlopen(urllib.request.Request(f"{url}/conversations/{cid}",
                                                              headers={"Authorization": f"Bearer {token}"}), timeout=30)
            body = json.loads(exc.value.read())
            check_result(body)
            assert exc.value.code == REFUSAL_STATUS["unreadable"] == 403
            assert body["refusal"]["code"] == "unreadable"
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def test_F16_cli_catalogue_open_follow_in_process_and_next_over_http(world: World, server: ReaderServer,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    root = world.top / "proj"
    lines = [header(root)] + [entry(f"e{i}", f"e{i-1}" if i else None, f"t{i}\u202e") for i in range(120)]
    write_session(root, "s.jsonl", lines)
    world.approve(root)
    cid = world.cid(root, "s.jsonl")
    spec = ["--spec", str(root), "alpha"]
    out = io.StringIO()
    assert main([*spec, "catalogue"], out=out) == 0
    row = json.loads(out.getvalue())
    check_result(row)
    assert row["conversations"][0]["id"] == cid
    out = io.StringIO()
    assert main([*spec, "open", cid, "--all"], out=out) == 0
    results = [json.loads(x) for x in out.getvalue().splitlines()]
    assert len(results) == 2 and sum(len(r["page"]["parts"]) for r in results) == 120
    for r in results:
        check_result(r)
    out = io.StringIO()
    assert main([*spec, "--text", "open", cid], out=out) == 0
    text = out.getvalue()
    assert "-- line 2: user n.e0" in text and "<U+202E>" in text and "\u202e" not in text
    out = io.StringIO()
    assert main([*spec, "follow", cid, "--polls", "1", "--interval", "0"], out=out) == 0
    assert len(out.getvalue().splitlines()) == 2
    # next needs the process that issued the cursor: over HTTP against the running server.
    first = world.open(cid)
    out = io.StringIO()
    assert server.token is not None
    monkeypatch.setenv(TOKEN_ENV, server.token)  # the token from the environment, never from argv
    assert main(["--url", server.url, "next", first["cursor"]["id"], cid, "main"], out=out) == 0
    nxt = json.loads(out.getvalue())
    check_result(nxt)
    assert len(nxt["page"]["parts"]) == 20
    out = io.StringIO()
    assert main(["--url", server.url, "--text", "open", "pi-" + "0" * 40], out=out) == 1
    assert out.getvalue().startswith("refused: unknown-conversation")


def test_F16_python_m_runs_the_cli(world: World) -> None:
    root = materialise(world.top, "proj-rpc", ["plain.jsonl"])
    proc = subprocess.run([sys.executable, "-m", "mosaic.chat_pages", "--spec", str(root), "alpha", "--text",
                           "catalogue"], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "proj-rpc/alpha/plain.jsonl" in proc.stdout and "ok" in proc.stdout
    usage = subprocess.run([sys.executable, "-m", "mosaic.chat_pages", "catalogue"], capture_output=True,
                           text=True, timeout=60, check=False)
    assert usage.returncode == 2
