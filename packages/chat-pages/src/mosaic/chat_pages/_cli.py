"""mosaic-read: the reader on the command line (catalogue, open, next, follow, serve).

Output is JSON lines (one API result per line, exactly what the API returns) or readable text with --text.
Roots come from --spec DIR SEAT (repeatable) or a --config JSON file; nothing has a default path. With --url
the commands ask a running `mosaic-read serve` over HTTP instead of reading in-process (cursors live in the
memory of the process that issued them, so `next` needs --url, or use `open --all` / `follow`).

Exit status: 0 when the last result was ok, 1 when it was a refusal, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ._jsonout import dumps

if TYPE_CHECKING:  # imported where a command needs them, so `mosaic-read --help` stays fast (issue 13)
    from ._reader import Reader
    from ._sources import Roots

# Controls, bidi and invisible characters are shown escaped in --text, so session content cannot drive
# or spoof the terminal (the seed's terminal rules, "The terminal").
_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028\u2029\u202a-\u202e"
                     "\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f\ud800-\udfff]")


def _safe(text: str) -> str:
    return _UNSAFE.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


class _Api:
    """The reader API in-process, or over HTTP against a running server."""

    def __init__(self, reader: Reader | None, url: str | None) -> None:
        self.reader = reader
        self.url = url.rstrip("/") if url else None

    def _get(self, path: str, params: dict[str, str | None]) -> dict[str, Any]:
        import urllib.error  # noqa: PLC0415 - only --url needs HTTP (start-up cost, issue 13)
        import urllib.parse  # noqa: PLC0415
        import urllib.request  # noqa: PLC0415

        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        target = f"{self.url}{path}" + (f"?{query}" if query else "")
        try:
            with urllib.request.urlopen(target, timeout=60) as resp:
                body: dict[str, Any] = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            body = json.loads(e.read())
        return body

    def catalogue(self) -> dict[str, Any]:
        if self.reader is not None:
            return self.reader.catalogue()
        return self._get("/conversations", {})

    def open(self, conversation: str, branch: str | None) -> dict[str, Any]:
        if self.reader is not None:
            return self.reader.open(conversation=conversation, branch=branch)
        return self._get("/conversations/" + _quote(conversation), {"branch": branch})

    def next(self, cursor: str, conversation: str, branch: str | None) -> dict[str, Any]:
        if self.reader is not None:
            return self.reader.next(cursor=cursor, conversation=conversation, branch=branch)
        return self._get("/conversations/" + _quote(conversation), {"cursor": cursor, "branch": branch})


def _quote(segment: str) -> str:
    import urllib.parse  # noqa: PLC0415 - only --url needs it

    return urllib.parse.quote(segment, safe="")


def _roots(args: argparse.Namespace) -> Callable[[], Roots]:
    from ._sources import RepositorySpec, SeatRegistration, roots_from_specs  # noqa: PLC0415 - see the imports

    specs = [RepositorySpec(d, s, d) for d, s in (args.spec or [])]
    regs: list[SeatRegistration] = []
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            cfg = json.load(f)
        for s in cfg.get("specs", []):
            specs.append(RepositorySpec(s["projectRoot"], s["seat"], s.get("layoutRepo", s["projectRoot"])))
        for r in cfg.get("registrations", []):
            regs.append(SeatRegistration(r["seat"], r["harness"], r["layoutRepo"], r["project"],
                                         r["sessionsDir"], r["startedAt"]))
    return lambda: roots_from_specs(specs, regs)


def _emit(result: dict[str, Any], text: bool, out: TextIO) -> None:
    if not text:
        out.write(dumps(result) + "\n")
        return
    if not result.get("ok"):
        r = result.get("refusal") or result
        out.write(f"refused: {r.get('code', r.get('error'))} (reconcile: {r.get('reconcile')}) "
                  f"{_safe(str(r.get('message')))}\n")
        return
    if "conversations" in result:
        for row in result["conversations"]:
            where = f"{_safe(row['project'])}/{_safe(row['seat'])}"
            if row["kind"] == "unsupported":
                out.write(f"{row['id']}  {where}  unsupported-harness ({_safe(row['harness'])})\n")
                continue
            state = "ok" if row["refusal"] is None else f"refused: {row['refusal']['code']}"
            out.write(f"{row['id']}  {where}/{_safe(row['file'])}  {row['size']} bytes  {state}\n")
        for bad in result["refusedRoots"]:
            out.write(f"root refused: {_safe(bad['projectRoot'])} seat {_safe(bad['seat'])}: "
                      f"{bad['refusal']['code']}\n")
        return
    page = result["page"]
    view = result["view"]
    out.write(f"== {page['conversation']} branch {page['branch']} (default {view['defaultBranch']}; "
              f"{view['branchCount']} branches{'; incomplete' if view['incomplete'] else ''})\n")
    for part in page["parts"]:
        label = f"{part['kind']} {part['item']}" + (f" (part {part['index'] + 1})" if part["index"] else "")
        out.write(f"-- line {part['line']}: {label}\n")
        if part.get("notice"):
            out.write(f"   notice {part['notice']['code']}: {_safe(part['notice']['message'])}\n")
        for block in part["blocks"]:
            kind = block["kind"]
            body = block.get("value") if kind == "fragment" else (
                block.get("text") or block.get("arguments") or block.get("mimeType") or block.get("type") or "")
            name = f" {block['name']}" if kind == "toolCall" and block.get("name") else ""
            shown = _safe(str(body)).replace("<U+000A>", "\n   ")
            out.write(f"   [{kind}{name}] {shown}\n")
    tail = "more: " + result["cursor"]["id"] if result["cursor"] else "end; follow: " + result["follow"]["id"]
    out.write(f"== {tail}\n")


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    """Run mosaic-read; returns the exit status."""
    p = argparse.ArgumentParser(prog="mosaic-read", description="Read Pi session histories, read-only.")
    p.add_argument("--spec", nargs=2, action="append", metavar=("PROJECT_ROOT", "SEAT"),
                   help="an approved root: <PROJECT_ROOT>/.pi/state/<SEAT>/sessions (repeatable)")
    p.add_argument("--config", help='JSON file: {"specs": [{"projectRoot", "seat", "layoutRepo"}], '
                                    '"registrations": [{"seat", "harness", "layoutRepo", "project", '
                                    '"sessionsDir", "startedAt"}]}')
    p.add_argument("--url", help="use a running `mosaic-read serve` at this base URL")
    p.add_argument("--text", action="store_true", help="readable text instead of JSON lines")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("catalogue", help="list the approved conversations")
    o = sub.add_parser("open", help="the first page (--all: every page) of a conversation")
    o.add_argument("conversation")
    o.add_argument("--branch")
    o.add_argument("--all", action="store_true")
    n = sub.add_parser("next", help="the next page for a cursor (needs --url: cursors live in the server)")
    n.add_argument("cursor")
    n.add_argument("conversation")
    n.add_argument("branch")
    f = sub.add_parser("follow", help="read every page, then poll the follow cursor for appended parts")
    f.add_argument("conversation")
    f.add_argument("--branch")
    f.add_argument("--polls", type=int, default=0, help="stop after this many polls (0: until interrupted)")
    f.add_argument("--interval", type=float, default=1.0)
    s = sub.add_parser("serve", help="serve the two GET routes on loopback")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8765)
    args = p.parse_args(argv)
    if args.url is None and not (args.spec or args.config):
        p.error("give --spec PROJECT_ROOT SEAT (or --config FILE), or --url of a running server")
    if args.url is None:
        from ._reader import create_reader  # noqa: PLC0415 - a command runs: now the reader is needed

        reader: Reader | None = create_reader(_roots(args))
    else:
        reader = None
    api = _Api(reader, args.url)

    if args.command == "serve":
        assert reader is not None
        from ._server import serve  # noqa: PLC0415 - only `serve` needs the server (asyncio)

        server = serve(reader, args.host, args.port)
        out.write(json.dumps({"serving": server.url}) + "\n")
        out.flush()
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            server.close()
        return 0
    if args.command == "catalogue":
        result = api.catalogue()
        _emit(result, args.text, out)
        return 0 if result.get("ok") else 1
    if args.command == "next":
        result = api.next(args.cursor, args.conversation, args.branch)
        _emit(result, args.text, out)
        return 0 if result.get("ok") else 1

    result = api.open(args.conversation, args.branch)
    _emit(result, args.text, out)
    read_all = args.command == "follow" or args.all
    while read_all and result.get("ok") and result["cursor"] is not None:
        result = api.next(result["cursor"]["id"], args.conversation, result["page"]["branch"])
        _emit(result, args.text, out)
    if args.command == "follow":
        polls = 0
        while result.get("ok") and (args.polls == 0 or polls < args.polls):
            time.sleep(args.interval)  # polling the file for growth; not test synchronisation
            polls += 1
            cursor = result["follow"] or result["cursor"]
            result = api.next(cursor["id"], args.conversation, result["page"]["branch"])
            if not result.get("ok") or result["page"]["parts"]:
                _emit(result, args.text, out)
    return 0 if result.get("ok") else 1
