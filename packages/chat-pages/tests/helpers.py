"""The reader test harness: fixtures materialised into tmp_path, and a wrapper that runs EVERY reader call
inside a fingerprint of the fixture tree and an inotify IN_OPEN watch, then validates what it returned.

Seed README, "Tests": "Every reader call runs inside a fingerprint of the fixture tree: size, SHA-256, mtime,
(dev, ino), mode and every directory listing, before and after." The seed made files that no read may touch
mode 000; CI runs as root, which mode 000 does not stop, so here an inotify watch on the whole tree fails the
call on any IN_OPEN outside what that call may open (F17):

- every call may open the directories from an approved project root down to its sessions directory;
- catalogue() may open every *.jsonl directly in an approved sessions directory;
- open()/next() may open only the one file the conversation id names;
- for a Claude seat (issue 30): every call may open its receipts and the directories down to them, the
  Claude root, its `projects/` and each directory in it (looked into by exact name); catalogue() may open
  the transcripts its receipts name, open()/next() the one the conversation names. Nothing else: a decoy
  transcript no receipt names, a subagent transcript, another project's files are never opened.

Every result is validated against schemas/chat-01.schema.json (jsonschema, Draft 2020-12) and checked
against the page limits that a schema cannot express (bytes, UTF-16 units, fragment sizes).
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mosaic.chat_pages import (
    Reader,
    RepositorySpec,
    SeatRegistration,
    conversation_id,
    create_reader,
    dumps,
    roots_from_specs,
)
from mosaic.chat_pages.parts import (
    MAX_BLOCKS_PER_PART,
    MAX_FRAGMENT_JSON,
    MAX_PAGE_BYTES,
    MAX_PART_BYTES,
    MAX_PARTS_PER_PAGE,
    MAX_STRING_UNITS,
    dump_bytes,
)
from mosaic.chat_pages.sources import (
    CLAUDE_HARNESS,
    Roots,
    claude_conversation_id,
)
from mosaic.chat_pages.testing import receipts_rel, sessions_rel
from mosaic.safe_open import Root, is_session_name
from mosaic.safe_open.testing import OpenWatch

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])
FIXTURES = REPO / "fixtures"
SCHEMA: dict[str, Any] = json.loads((REPO / "schemas" / "chat-01.schema.json").read_text(encoding="utf-8"))
LAYOUT = "/layout/repo"

#: Transcript trees made by the pinned Claude Code 2.1.283 (fixtures/README.md "Claude Code 2.1.283").
CLAUDE_TREES = FIXTURES / "claude-2.1.283" / "trees"

FIXTURE_DIRS = {
    "proj-rpc": FIXTURES / "pi-0.85.1" / "proj-rpc",
    "proj-sm": FIXTURES / "pi-0.85.1" / "proj-sm",
    "proj-adv": FIXTURES / "adversarial" / "proj-adv",
}


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """The schema with every local $ref replaced by its definition (the schema has no recursion). The same
    validation, without resolving references on every instance, which made validating large pages slow."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        rest = {k: _inline(v, defs) for k, v in node.items() if k != "$ref"}
        if isinstance(ref, str):
            target: Any = {"$defs": defs}
            for key in ref.removeprefix("#/").split("/"):
                target = target[key]
            target = _inline(target, defs)
            return {"allOf": [target, rest]} if rest else target
        return rest
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


class SchemaCheck:
    """One definition of the schema, as the tests hold results to it: `validate(instance)` fails the test with
    an AssertionError (raised here, in the suite) naming the definition, the first violation and where it is:
    a result that breaks the schema is a failed assertion of the test, never jsonschema's own error."""

    def __init__(self, definition: str, checker: jsonschema.protocols.Validator) -> None:
        self.definition = definition
        self._checker = checker

    def validate(self, instance: Any) -> None:
        error = jsonschema.exceptions.best_match(self._checker.iter_errors(instance))
        if error is not None:
            at = "/".join(str(p) for p in error.absolute_path) or "the top"
            message = error.message if len(error.message) <= 400 else error.message[:200] + " ... " + error.message[-200:]
            raise AssertionError(f"not a valid #/$defs/{self.definition} at {at}: {message}")


def validator(definition: str) -> SchemaCheck:
    full = {**SCHEMA, "$ref": f"#/$defs/{definition}"}
    cls = jsonschema.validators.validator_for(full)
    cls.check_schema(full)
    inlined = _inline({"$ref": f"#/$defs/{definition}"}, SCHEMA["$defs"])
    inlined["$schema"] = SCHEMA["$schema"]
    return SchemaCheck(definition, cls(inlined))


VALIDATE = {name: validator(name) for name in ("readResult", "catalogue", "cursorRecord", "page", "part")}
_VALID_PARTS: set[bytes] = set()


def validate_read_result(result: dict[str, Any]) -> None:
    """Validate an open/next result against #/$defs/readResult.

    The same validation as one call, done in two steps for speed: the result with an empty parts list, then
    each part against #/$defs/part (what `page.parts.items` says), each distinct part once per run (keyed by
    the SHA-256 of its JSON). `check_page` checks the 100-part limit.
    """
    if not result.get("ok"):
        VALIDATE["readResult"].validate(result)
        return
    page = result["page"]
    VALIDATE["readResult"].validate({**result, "page": {**page, "parts": []}})
    for part in page["parts"]:
        key = hashlib.sha256(dump_bytes(part)).digest()
        if key not in _VALID_PARTS:
            VALIDATE["part"].validate(part)
            _VALID_PARTS.add(key)

#: Counters printed at the end of the run, so the report shows that every call was checked.
CHECKED = {"calls": 0, "pages": 0, "cursors": 0, "catalogues": 0}


# --- fixtures on disk ---------------------------------------------------------------------------------


def rewrite_header(data: bytes, old_project: str, new_project: str) -> bytes:
    """fixtures/README.md: rewrite line 1's cwd prefix (a whole path component), keep every other byte."""
    nl = data.find(b"\n")
    if nl < 0:
        return data
    try:
        # Decoded as str first: json.loads(bytes) would silently strip a BOM (header-bom.jsonl's point).
        header = json.loads(data[:nl].decode("utf-8"))
    except ValueError:
        return data
    if not isinstance(header, dict) or not isinstance(header.get("cwd"), str):
        return data
    cwd: str = header["cwd"]
    if cwd == old_project or cwd.startswith(old_project + "/"):
        header["cwd"] = new_project + cwd[len(old_project):]
        return json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode() + data[nl:]
    return data


def materialise(
    dest_parent: Path, project: str, files: Iterable[str] | None = None, *, seat: str = "alpha", name: str | None = None
) -> Path:
    """Copy fixture session files of `project` into dest_parent/<name or project>/.pi/state/<seat>/sessions,
    with the header cwd rewritten to the new project's real path. Returns the project root."""
    src = FIXTURE_DIRS[project] / ".pi" / "state" / "alpha" / "sessions"
    root = dest_parent / (name or project)
    sessions = root / sessions_rel(seat)
    sessions.mkdir(parents=True, exist_ok=True)
    real = os.path.realpath(root)
    wanted = sorted(os.listdir(src)) if files is None else list(files)
    for fname in wanted:
        data = (src / fname).read_bytes()
        (sessions / fname).write_bytes(rewrite_header(data, f"/tmp/mosaic-fixtures/{project}", real))
    return root


@dataclass(frozen=True)
class ClaudeTree:
    """A fixture tree copied into a test directory: the project root (its receipts), the Claude config
    directory, the project directory beneath it, and what `expected.json` says."""

    project: Path
    claude: Path
    expected: dict[str, Any]

    @property
    def session(self) -> str:
        return str(self.expected["sessionId"])

    @property
    def slug_dir(self) -> Path:
        return self.claude / "projects" / self.expected["slug"]

    def transcript(self, session: str | None = None) -> Path:
        return self.slug_dir / f"{session or self.session}.jsonl"


def claude_tree(dest_parent: Path, tree: str, *, name: str | None = None) -> ClaudeTree:
    """Copy fixtures/claude-2.1.283/trees/<tree> into dest_parent/<name or tree>/ (proj/ and claude/), with
    every transcript's cwd moved from the tree's fixed path to the copy's real project path (that path as a
    JSON string: no other byte changes). The project directory keeps its name: the reader never computes it."""
    src = CLAUDE_TREES / tree
    expected: dict[str, Any] = json.loads((src / "expected.json").read_text())
    dest = dest_parent / (name or tree)
    shutil.copytree(src / "proj", dest / "proj", symlinks=True)
    shutil.copytree(src / "claude", dest / "claude", symlinks=True)
    real = os.path.realpath(dest / "proj")
    old = json.dumps(expected["cwd"])[:-1].encode()
    for path in (dest / "claude").rglob("*.jsonl"):
        data = path.read_bytes()
        path.write_bytes(data.replace(b'"cwd":' + old, b'"cwd":' + json.dumps(real)[:-1].encode()))
    return ClaudeTree(dest / "proj", dest / "claude", expected)


def write_receipt(project: Path, seat: str, *ids: str, launch: str | None = None) -> Path:
    """A launcher receipt: the seat's `session-id`, or `launches/<launch>/session-id`, one id per line."""
    d = project / receipts_rel(seat) if launch is None else project / receipts_rel(seat) / "launches" / launch
    d.mkdir(parents=True, exist_ok=True)
    p = d / "session-id"
    p.write_text("".join(f"{i}\n" for i in ids))
    return p


def listed_dirs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, the directory (relative to its root) of every `Root.listdir` the reader makes, in order: a
    spy on safe-open's public `Root`, undone with `monkeypatch`."""
    listed: list[str] = []
    listdir = Root.listdir

    def counted(self: Root, rel: str) -> list[str]:
        listed.append(rel)
        return listdir(self, rel)

    monkeypatch.setattr(Root, "listdir", counted)
    return listed


def header(project: Path, **extra: Any) -> bytes:
    h = {"type": "session", "version": 3, "id": "01a22bb8-0000-7000-8000-000000000001",
         "timestamp": "2026-11-30T09:00:00.000Z", "cwd": os.path.realpath(project), **extra}
    return json.dumps(h, separators=(",", ":")).encode() + b"\n"


def entry(eid: str, parent: str | None, text: str, role: str = "user", ts: str = "2026-11-30T09:00:01.000Z") -> bytes:
    msg: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}]}
    obj = {"type": "message", "id": eid, "parentId": parent, "timestamp": ts, "message": msg}
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"


def write_session(project: Path, name: str, lines: Iterable[bytes], seat: str = "alpha") -> Path:
    d = project / sessions_rel(seat)
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_bytes(b"".join(lines))
    return p


# --- fingerprint ----------------------------------------------------------------------------------------


_HASHES: dict[tuple[Any, ...], str] = {}


NOBODY = 65534


def drop_to_nobody() -> None:
    """In a forked child: become uid and gid 65534 with no supplementary groups. CI runs as root, which mode
    bits do not stop, so a permission case runs in such a child."""
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)


def open_to_all(top: Path, root: Path, *, sessions: bool = True, seat: str = "alpha") -> None:
    """Mode 0755 on `top` and on `root` down to its seat directory (and its sessions directory, unless
    `sessions` is false), so the uid 65534 of `as_nobody` can reach what the test leaves readable."""
    seat_dir = root / ".pi" / "state" / seat
    chain = [top, root, root / ".pi", root / ".pi" / "state", seat_dir, seat_dir / "sessions"]
    for d in chain if sessions else chain[:-1]:
        os.chmod(d, 0o755)


def as_nobody(produce: Callable[[], Any]) -> Any:
    """`produce()` run in a forked child at uid 65534 (`drop_to_nobody`); its result, serialised with the
    reader's `dumps`, read back as JSON in the parent."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.close(r)
            drop_to_nobody()
            os.write(w, dumps(produce()).encode())
        finally:
            os._exit(0)
    os.close(w)
    out = b""
    while chunk := os.read(r, 65536):
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(out)


def fingerprint(top: Path) -> dict[str, Any]:
    """size, SHA-256, mtime, (dev, ino), mode of every path under `top`, and every directory listing."""
    out: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        names = sorted(dirnames + filenames)
        st = os.lstat(dirpath)
        out[dirpath] = ("dir", st.st_mode, st.st_mtime_ns, st.st_dev, st.st_ino, tuple(names))
        for n in names:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode):
                continue
            digest: str | None = None
            if stat.S_ISREG(st.st_mode) and st.st_mode & 0o444:
                # Cached by the full identity including ctime_ns: any write (or utime to hide one) moves
                # ctime, so a changed file is always hashed again.
                key = (p, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                digest = _HASHES.get(key)
                if digest is None:
                    with open(p, "rb") as f:
                        digest = hashlib.sha256(f.read()).hexdigest()
                    _HASHES[key] = digest
            elif stat.S_ISLNK(st.st_mode):
                digest = os.readlink(p)
            out[p] = (st.st_size, digest, st.st_mtime_ns, st.st_dev, st.st_ino, st.st_mode)
    return out


# --- result checks --------------------------------------------------------------------------------------


def utf16_units(s: str) -> int:
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def check_page(page: dict[str, Any]) -> None:
    """The CHAT-01 limits a schema cannot say: bytes, UTF-16 units, fragment JSON size, valid UTF-8."""
    raw = dump_bytes(page)
    raw.decode("utf-8")  # strict: lone surrogates must have been escaped
    assert json.loads(raw) == page
    assert len(raw) <= MAX_PAGE_BYTES, len(raw)
    assert len(page["parts"]) <= MAX_PARTS_PER_PAGE
    for part in page["parts"]:
        assert len(dump_bytes(part)) <= MAX_PART_BYTES
        assert len(part["blocks"]) <= MAX_BLOCKS_PER_PART
        for block in part["blocks"]:
            if block["kind"] == "fragment":
                assert len(dump_bytes(block["value"])) <= MAX_FRAGMENT_JSON
    for s in _strings(page):
        assert utf16_units(s) <= MAX_STRING_UNITS


def check_result(result: dict[str, Any]) -> None:
    if "conversations" in result:
        VALIDATE["catalogue"].validate(result)
        CHECKED["catalogues"] += 1
        return
    validate_read_result(result)
    if result["ok"]:
        check_page(result["page"])
        CHECKED["pages"] += 1
        CHECKED["cursors"] += (result["cursor"] is not None) + (result["follow"] is not None)
        if result["cursor"] is not None:
            assert result["page"]["nextCursor"] == result["cursor"]["id"]
        else:
            assert result["page"]["nextCursor"] is None
        for rec in (result["cursor"], result["follow"]):
            if rec is not None:
                assert rec["branch"] == result["page"]["branch"]
                assert rec["conversation"] == result["page"]["conversation"]


# --- the harness ----------------------------------------------------------------------------------------


@contextmanager
def watched_tree(top: Path, allowed: set[str]) -> Iterator[None]:
    """The F17 checks around code that calls a reader in another process (the uid-drop tests): the
    fingerprint of `top` before and after, and an IN_OPEN watch on `top` (inotify sees every process)."""
    before = fingerprint(top)
    with OpenWatch([top]) as watch:
        yield
        opened = watch.opened()
    assert fingerprint(top) == before, "the reader changed the fixture tree"
    forbidden = _forbidden(opened, allowed)
    assert not forbidden, f"the reader opened files no read may touch: {sorted(forbidden)}"
    CHECKED["calls"] += 1


def root_dirs(project: Path, seat: str = "alpha") -> set[str]:
    """The directories every call may open for one approved root: the project root down to sessions."""
    cur = os.path.realpath(project)
    out = {cur}
    for comp in sessions_rel(seat).split("/"):
        cur = os.path.join(cur, comp)
        out.add(cur)
    return out


def _forbidden(opened: set[str], allowed: set[str]) -> set[str]:
    """Opened paths outside `allowed`. inotify watches inodes, so opening a hard link to an allowed file is
    reported under the other name too: such a path counts as allowed when its (dev, ino) is."""

    def ino(path: str) -> tuple[int, int] | None:
        try:
            st = os.lstat(path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    allowed_inodes = {ino(p) for p in allowed} - {None}
    return {p for p in opened - allowed if ino(p) not in allowed_inodes}


class Clock:
    """An injected clock for cursor TTL tests (no sleeps)."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class World:
    """A temporary tree with approved specs, and a reader whose every call is fingerprinted and watched."""

    top: Path
    specs: list[RepositorySpec] = field(default_factory=list)
    registrations: list[SeatRegistration] = field(default_factory=list)
    clock: Clock = field(default_factory=Clock)
    reader: Reader = field(init=False)
    opened_log: list[set[str]] = field(default_factory=list)
    extra_allowed: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.reader = create_reader(self.roots, clock=self.clock)

    def roots(self) -> Roots:
        return roots_from_specs(self.specs, self.registrations)

    def approve(self, project: Path, seat: str = "alpha", layout: str = LAYOUT) -> None:
        self.specs.append(RepositorySpec(str(project), seat, layout))

    def cid(self, project: Path, name: str, seat: str = "alpha") -> str:
        return conversation_id(posixpath.normpath(str(project)), seat, name)

    def approve_claude(self, project: Path, claude: Path | str | None, seat: str = "alpha",
                       layout: str = LAYOUT) -> None:
        self.specs.append(RepositorySpec(str(project), seat, layout, CLAUDE_HARNESS,
                                         None if claude is None else str(claude)))

    def claude_cid(self, project: Path, session: str, seat: str = "alpha") -> str:
        return claude_conversation_id(posixpath.normpath(str(project)), seat, session)

    # What a call may open ---------------------------------------------------------------------------

    def _dirs(self) -> set[str]:
        allowed: set[str] = set()
        for s in self.roots().sessions:
            real = os.path.realpath(s.project_root)
            allowed.add(real)
            cur = real
            for comp in s.sessions_rel.split("/"):
                cur = os.path.join(cur, comp)
                allowed.add(cur)
        for c in self.roots().claude:
            real = os.path.realpath(c.project_root)
            allowed.add(real)
            cur = real
            for comp in c.receipts_rel.split("/"):
                cur = os.path.join(cur, comp)
                allowed.add(cur)
            launches = os.path.join(cur, "launches")
            allowed.add(launches)
            if os.path.isdir(launches):
                allowed |= {os.path.join(launches, n) for n in os.listdir(launches)}
                allowed |= {os.path.join(launches, n, "session-id") for n in os.listdir(launches)}
            allowed.add(os.path.join(cur, "session-id"))
            croot = os.path.realpath(c.claude_root)
            projects = os.path.join(croot, "projects")
            allowed |= {croot, projects}
            if os.path.isdir(projects):
                allowed |= {os.path.join(projects, n) for n in os.listdir(projects)}
        return allowed

    def _claude_files(self, conversation: str | None) -> set[str]:
        """The transcripts a call may open: those the receipts name (catalogue), or the conversation's."""
        files: set[str] = set()
        for c in self.roots().claude:
            ids: list[str] = []
            base = os.path.join(os.path.realpath(c.project_root), c.receipts_rel)
            receipts = [os.path.join(base, "session-id")]
            if os.path.isdir(os.path.join(base, "launches")):
                receipts += [os.path.join(base, "launches", n, "session-id")
                             for n in os.listdir(os.path.join(base, "launches"))]
            for r in receipts:
                try:
                    ids += [x.strip() for x in Path(r).read_text().splitlines() if x.strip()]
                except OSError:
                    continue
            projects = os.path.join(os.path.realpath(c.claude_root), "projects")
            slugs = os.listdir(projects) if os.path.isdir(projects) else []
            for i in ids:
                if conversation is not None and claude_conversation_id(c.project_root, c.seat, i) != conversation:
                    continue
                files |= {os.path.join(projects, slug, f"{i}.jsonl") for slug in slugs if "/" not in i}
        return files

    def _files(self, conversation: str | None) -> set[str]:
        files: set[str] = set()
        for s in self.roots().sessions:
            d = os.path.join(os.path.realpath(s.project_root), s.sessions_rel)
            try:
                names = os.listdir(d)
            except OSError:
                continue
            for n in names:
                if not is_session_name(n):
                    continue
                if conversation is None or conversation_id(s.project_root, s.seat, n) == conversation:
                    files.add(os.path.join(d, n))
        return files

    def call(self, op: str, **kw: Any) -> dict[str, Any]:
        which = kw.get("conversation") if op != "catalogue" else None
        allowed = self._dirs() | self._files(which) | self._claude_files(which)
        allowed |= self.extra_allowed
        before = fingerprint(self.top)
        with OpenWatch([self.top]) as watch:
            result: dict[str, Any] = getattr(self.reader, op)(**kw)
            opened = watch.opened()
        after = fingerprint(self.top)
        assert before == after, "the reader changed the fixture tree"
        forbidden = _forbidden(opened, allowed)
        assert not forbidden, f"the reader opened files no read may touch: {sorted(forbidden)}"
        self.opened_log.append(opened)
        check_result(result)
        CHECKED["calls"] += 1
        return result

    def http(self, base_url: str, target: str, conversation: str | None = None, *,
             token: str | None = None) -> tuple[int, dict[str, Any]]:
        """One real HTTP GET to the routes, inside the same fingerprint and inotify watch as `call`;
        `token` (the server's) is sent as `Authorization: Bearer`."""
        import urllib.error
        import urllib.request

        allowed = self._dirs() | self._files(conversation) | self._claude_files(conversation) | self.extra_allowed
        before = fingerprint(self.top)
        with OpenWatch([self.top]) as watch:
            try:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                req = urllib.request.Request(base_url + target, headers=headers)
                with urllib.request.urlopen(req, timeout=30) as resp:
                    status, raw = resp.status, resp.read()
                    ctype = resp.headers["Content-Type"]
            except urllib.error.HTTPError as e:
                status, raw, ctype = e.code, e.read(), e.headers["Content-Type"]
            opened = watch.opened()
        after = fingerprint(self.top)
        assert before == after, "the reader changed the fixture tree"
        forbidden = _forbidden(opened, allowed)
        assert not forbidden, f"the reader opened files no read may touch: {sorted(forbidden)}"
        assert ctype == "application/json; charset=utf-8"
        body: dict[str, Any] = json.loads(raw.decode("utf-8"))
        if "ok" in body and ("refusal" in body or body.get("ok")):
            check_result(body)
        CHECKED["calls"] += 1
        return status, body

    def catalogue(self) -> dict[str, Any]:
        return self.call("catalogue")

    def open(self, conversation: str, branch: str | None = None, **kw: Any) -> dict[str, Any]:
        return self.call("open", conversation=conversation, branch=branch, **kw)

    def next(self, cursor: str, conversation: str, branch: str | None, **kw: Any) -> dict[str, Any]:
        return self.call("next", cursor=cursor, conversation=conversation, branch=branch, **kw)

    def read_all(self, conversation: str, branch: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Every part of a branch, page by page; returns (parts, last result)."""
        res = self.open(conversation, branch)
        assert res["ok"], res
        parts = list(res["page"]["parts"])
        while res["cursor"] is not None:
            res = self.next(res["cursor"]["id"], conversation, res["page"]["branch"])
            assert res["ok"], res
            parts += res["page"]["parts"]
        return parts, res

    def follow(self, res: dict[str, Any]) -> dict[str, Any]:
        assert res["ok"] and res["follow"] is not None
        return self.next(res["follow"]["id"], res["page"]["conversation"], res["page"]["branch"])


def assemble(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rebuild items from parts: each item's blocks with every continued string concatenated back."""
    items: list[dict[str, Any]] = []
    frags: dict[tuple[str, int | None, str], list[str]] = {}
    for part in parts:
        if part["index"] == 0:
            items.append({"id": part["item"], "kind": part["kind"], "line": part["line"],
                          "timestamp": part["timestamp"], "attrs": dict(part["attrs"]), "notice": part["notice"],
                          "blocks": []})
        else:
            assert items and items[-1]["id"] == part["item"]
        item = items[-1]
        for block in part["blocks"]:
            if block["kind"] == "fragment":
                key = (part["item"], block["block"], block["field"])
                got = frags.setdefault(key, [])
                assert block["fragment"] == len(got)
                got.append(block["value"])
            else:
                b = dict(block)
                b.pop("continued", None)
                assert b.pop("block") == len(item["blocks"])
                item["blocks"].append(b)
    for (item_id, bidx, fld), values in frags.items():
        item = next(i for i in items if i["id"] == item_id)
        text = "".join(values)
        if bidx is None:
            if fld == "timestamp":
                item["timestamp"] = text
            else:
                item["attrs"][fld[len("attrs."):]] = text
        else:
            item["blocks"][bidx][fld] = text
    return items


def expected_items(data: bytes, project: str, branch: str | None = None) -> list[dict[str, Any]]:
    """What pi-format renders for a branch, in the reader's wire shape (toolCall arguments as JSON text)."""
    from mosaic.chat_pages import dumps
    from mosaic.pi_format import Parsed, parse

    parsed = parse(data, project=project, realpath=os.path.realpath)
    assert isinstance(parsed, Parsed)
    out = []
    for item in parsed.branches[branch or parsed.default_branch].items:
        j = item.to_json()
        blocks = []
        for b in j["blocks"]:  # type: ignore[union-attr]
            b = dict(b)  # type: ignore[arg-type]
            if b["kind"] == "toolCall":
                b["arguments"] = dumps(b["arguments"])
            blocks.append(b)
        out.append({"id": j["id"], "kind": j["kind"], "line": j["line"], "timestamp": j["timestamp"],
                    "attrs": j["attrs"], "notice": j["notice"], "blocks": blocks})
    return out

