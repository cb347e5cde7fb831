"""Transcript trees from the pinned binary (brief §8 B1 part 4): sessions, receipts, and what ``--resume``
continued.

A tree is a small fake project root as the catalogue reads it (the contract with the reader's tests):

    <tree>/proj/.pi/state/<seat>/session-id                       the launcher receipt: a session UUID, one line
    <tree>/proj/.pi/state/<seat>/launches/<n>/session-id          one receipt per launch, n = 1, 2, ...
    <tree>/claude/projects/<slug>/<sessionId>.jsonl               the binary's transcript (CLAUDE_CONFIG_DIR)
    <tree>/claude/projects/<slug>/<sessionId>/subagents/agent-<id>.jsonl and .meta.json   where a subagent ran
    <tree>/expected.json                                          what --resume continued (below)

The binary runs with its cwd at ``<tree>/proj`` and ``CLAUDE_CONFIG_DIR=<tree>/claude`` (``HOME`` and
``CLAUDE_CODE_TMPDIR`` beside them, not kept), so ``<slug>`` is the slug of ``<tree>/proj``. Only the
transcripts, subagent transcripts and their sidecars are kept from ``claude/`` (not ``.claude.json``, its
backups or the empty ``memory/`` dirs). Receipts are written by the maker, as a launcher would: the seat's
``session-id`` names the session of the last launch.

**The resume check.** For every tree, :func:`resume_check` copies ``claude/`` to a scratch directory, runs
``--resume <the seat's session> -p "resume check"`` there against the scripted server, finds the new user
entry and records its ``parentUuid`` as ``resumeContinuedParent``; the copy is then removed, so the tree
keeps no extra turn. :func:`leaf_by_rule` applies the written rule to the committed file (the ``leafUuid``
of the last ``last-prompt`` line, else the last entry with a ``uuid`` in file order); the maker refuses a
tree where the two disagree.

Trees (:data:`TREES`): ``linear`` (text turns, a Bash tool call, a subagent, and a decoy session in the same
slug dir named by no receipt), ``fork`` (``--resume --fork-session``: a second file with the same uuids),
``edit-branch`` (``--resume --resume-session-at``: two branches in one file), ``image`` (a stream-json image
turn), and three copies of ``edit-branch`` edited by hand and then resumed by the binary, which prove each
clause of the rule: ``edit-branch-old-leaf`` (the last ``last-prompt`` names the older branch's leaf),
``edit-branch-no-last-prompt`` (no ``last-prompt`` line), ``edit-branch-file-order`` (no ``last-prompt``,
and the older branch's lines moved to the end while the edit branch keeps the later timestamps).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosaic.claude_rpc._resume import leaf_by_rule
from mosaic.claude_rpc.testing.drive import DriveError, PrintRun, claude_env, run_print
from mosaic.claude_rpc.testing.model_server import ModelServer
from mosaic.claude_rpc.testing.recordings import png_square, slug

__all__ = [
    "RESUME_PROMPT",
    "SEAT",
    "TREES",
    "Tree",
    "TreeRun",
    "entries",
    "entry_types",
    "leaf_by_rule",
    "make_tree",
    "resume_check",
]

SEAT = "alpha"
RESUME_PROMPT = "resume check"
JsonObject = dict[str, Any]
_PRINT = ("--output-format", "stream-json", "--verbose")


def entries(path: Path) -> list[JsonObject]:
    """The JSON lines of a transcript, in file order."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class TreeRun:
    """The maker's handle on one tree being made: its paths, the binary, the server, the launches."""

    def __init__(self, root: Path, binary: str | os.PathLike[str], server: ModelServer) -> None:
        self.root = root
        self.proj = root / "proj"
        self.config = root / "claude"
        self.binary = binary
        self.server = server
        self.proj.mkdir(parents=True, exist_ok=True)
        self.env = claude_env(root, server.base_url)
        self.launches: list[str] = []
        self.decoys: list[str] = []

    @property
    def sessions_dir(self) -> Path:
        return self.config / "projects" / slug(str(self.proj))

    def file(self, session: str) -> Path:
        return self.sessions_dir / f"{session}.jsonl"

    def run(self, args: Sequence[str], *, stdin: bytes = b"", receipt: bool = True) -> PrintRun:
        """One launch: ``-p`` output as stream-json; its session id is recorded as the next launch
        receipt (unless ``receipt`` is false: a decoy)."""
        done = run_print(self.binary, [*args, *_PRINT], env=self.env, cwd=self.proj, stdin=stdin)
        results = done.of_type("result")
        if done.returncode != 0 or not results or results[-1].get("subtype") != "success":
            raise DriveError(f"{list(args)[:6]}: exit {done.returncode}, results "
                             f"{[r.get('subtype') for r in results]}, stderr {done.stderr[-300:]!r}")
        session = str(results[-1]["session_id"])
        (self.launches if receipt else self.decoys).append(session)
        return done

    def write_receipts(self) -> None:
        state = self.proj / ".pi" / "state" / SEAT
        for n, session in enumerate(self.launches, 1):
            (state / "launches" / str(n)).mkdir(parents=True, exist_ok=True)
            (state / "launches" / str(n) / "session-id").write_text(session + "\n")
        (state / "session-id").write_text(self.launches[-1] + "\n")


def _assistant_text_uuid(path: Path, text: str) -> str:
    """The uuid of the assistant entry whose text block is ``text``."""
    for d in entries(path):
        content = (d.get("message") or {}).get("content") if d.get("type") == "assistant" else None
        if isinstance(content, list) and any(b.get("text") == text for b in content if isinstance(b, dict)):
            return str(d["uuid"])
    raise DriveError(f"no assistant entry says {text!r} in {path.name}")


def _linear(t: TreeRun) -> None:
    session = str(uuid.uuid4())
    t.run(["-p", "hello one", "--session-id", session])
    t.run(["--resume", session, "-p", "BASH: echo linear-bash-ran"])
    agent = t.run(["--resume", session, "-p", "AGENT"])
    if len(agent.of_type("result")) < 2:
        raise DriveError("the background subagent's task notification gave no second turn")
    t.run(["-p", "a decoy session nobody launched", "--session-id", str(uuid.uuid4())], receipt=False)


def _fork(t: TreeRun) -> None:
    session = str(uuid.uuid4())
    t.run(["-p", "one", "--session-id", session])
    t.run(["--resume", session, "-p", "two"])
    t.run(["--resume", session, "--fork-session", "-p", "fork three"])
    if t.launches[-1] == session:
        raise DriveError("--fork-session kept the session id")


def _edit_branch(t: TreeRun) -> None:
    session = str(uuid.uuid4())
    t.run(["-p", "one", "--session-id", session])
    t.run(["--resume", session, "-p", "two"])
    at = _assistant_text_uuid(t.file(session), "Reply to: one")
    t.run(["--resume", session, "--resume-session-at", at, "-p", "edit two"])


def _image(t: TreeRun) -> None:
    session = str(uuid.uuid4())
    data = base64.b64encode(png_square()).decode()
    line = {"type": "user", "parent_tool_use_id": None, "session_id": "default",
            "message": {"role": "user", "content": [{"type": "text", "text": "what is in this image"}, {
                "type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}]}}
    t.run(["-p", "--input-format", "stream-json", "--session-id", session],
          stdin=json.dumps(line).encode() + b"\n")


@dataclass(frozen=True)
class Tree:
    """One tree: its name, what it shows, and its maker (``derive``: a hand edit of another tree's files,
    made after that tree, named in ``source``)."""

    name: str
    scenario: str
    make: Callable[[TreeRun], None] | None = None
    source: str | None = None
    derive: Callable[[Path], None] | None = None


def _rewrite(path: Path, change: Callable[[list[str]], list[str]]) -> None:
    path.write_text("".join(line + "\n" for line in change(path.read_text().splitlines())))


def _branches(lines: list[str]) -> tuple[list[int], list[int]]:
    """The line numbers of the older branch's turn ``two`` and of the edit branch ``edit two``."""
    older: list[int] = []
    edit: list[int] = []
    current: list[int] | None = None
    for i, line in enumerate(lines):
        d = json.loads(line)
        content = (d.get("message") or {}).get("content")
        if d.get("type") == "user" and content in ("two", "edit two"):
            current = older if content == "two" else edit
        elif d.get("type") == "queue-operation" and d.get("content") in ("two", "edit two"):
            current = None  # the queue lines of the next turn come before its user entry
        if current is not None and isinstance(d.get("uuid"), str):
            current.append(i)
    return older, edit


def _old_leaf(path: Path) -> None:
    def change(lines: list[str]) -> list[str]:
        older, _ = _branches(lines)
        leaf = json.loads(lines[older[-1]])["uuid"]
        last = max(i for i, line in enumerate(lines) if json.loads(line).get("type") == "last-prompt")
        d = json.loads(lines[last])
        d["leafUuid"] = leaf
        lines[last] = json.dumps(d, ensure_ascii=False, separators=(",", ":"))
        return lines
    _rewrite(path, change)


def _no_last_prompt(path: Path) -> None:
    _rewrite(path, lambda lines: [x for x in lines if json.loads(x).get("type") != "last-prompt"])


def _file_order(path: Path) -> None:
    def change(lines: list[str]) -> list[str]:
        kept = [x for x in lines if json.loads(x).get("type") != "last-prompt"]
        older, _ = _branches(kept)
        moved = [kept[i] for i in older]
        return [x for i, x in enumerate(kept) if i not in set(older)] + moved
    _rewrite(path, change)


TREES: tuple[Tree, ...] = (
    Tree("linear", "launch 1 `hello one`; launch 2 --resume `BASH: echo linear-bash-ran` (a read-only Bash, "
         "allowed without a prompt); launch 3 --resume `AGENT` (a background general-purpose subagent; its task "
         "notification is a second turn); a decoy session in the same slug dir, named by no receipt", _linear),
    Tree("fork", "launch 1 `one`; launch 2 --resume `two`; launch 3 --resume --fork-session `fork three` (a new "
         "session id); the seat's receipt names the fork", _fork),
    Tree("edit-branch", "launch 1 `one`; launch 2 --resume `two`; launch 3 --resume --resume-session-at <the "
         "assistant entry `Reply to: one`> `edit two`: two branches in one file", _edit_branch),
    Tree("image", "launch 1: a stream-json user message with a text block and a 16x16 PNG image block", _image),
    Tree("edit-branch-old-leaf", "edit-branch, by hand: the last last-prompt line's leafUuid set to the older "
         "branch's leaf", source="edit-branch", derive=_old_leaf),
    Tree("edit-branch-no-last-prompt", "edit-branch, by hand: every last-prompt line removed",
         source="edit-branch", derive=_no_last_prompt),
    Tree("edit-branch-file-order", "edit-branch, by hand: every last-prompt line removed and the older branch's "
         "lines moved to the end of the file (the edit branch keeps the later timestamps)",
         source="edit-branch", derive=_file_order),
)


def resume_check(tree_root: Path, session: str, binary: str | os.PathLike[str], server: ModelServer, *,
                 cwd: Path) -> str:
    """Run ``--resume session -p "resume check"`` on a scratch copy of ``tree_root/claude`` with its cwd at
    ``cwd`` (the project the session was made in: its slug names the session's directory) and return the
    new user entry's ``parentUuid``."""
    with tempfile.TemporaryDirectory(prefix="mosaic-claude-resume-") as scratch:
        base = Path(scratch)
        shutil.copytree(tree_root / "claude", base / "claude", symlinks=True)
        env = claude_env(base, server.base_url)
        proj = cwd
        done = run_print(binary, ["--resume", session, "-p", RESUME_PROMPT, *_PRINT], env=env, cwd=proj)
        if done.returncode != 0:
            raise DriveError(f"--resume {session}: exit {done.returncode}: {done.stderr[-300:]!r}")
        path = base / "claude" / "projects" / slug(str(proj)) / f"{session}.jsonl"
        new = [d for d in entries(path) if d.get("type") == "user"
               and (d.get("message") or {}).get("content") == RESUME_PROMPT]
        if len(new) != 1:
            raise DriveError(f"--resume {session} wrote {len(new)} `{RESUME_PROMPT}` user entries")
        return str(new[0].get("parentUuid"))


def _expected(tree_root: Path, proj: Path, run_launches: list[str], decoys: list[str],
              binary: str | os.PathLike[str], server: ModelServer) -> JsonObject:
    session = run_launches[-1]
    path = tree_root / "claude" / "projects" / slug(str(proj)) / f"{session}.jsonl"
    rule, leaf = leaf_by_rule(entries(path))
    continued = resume_check(tree_root, session, binary, server, cwd=proj)
    if continued != leaf:
        raise DriveError(f"{tree_root.name}: --resume continued {continued}, the rule ({rule}) picks {leaf}")
    return {"seat": SEAT, "sessionId": session, "resumeContinuedParent": continued, "leafRule": rule,
            "launches": run_launches, "decoys": decoys, "cwd": str(proj), "slug": slug(str(proj))}


def make_tree(tree: Tree, root: Path, binary: str | os.PathLike[str], server: ModelServer) -> JsonObject:
    """Make ``tree`` under ``root / tree.name`` (a derived tree copies ``root / tree.source`` first, which
    must exist), write its receipts, run the resume check and write ``expected.json``; return that dict.

    Scratch parts (``home``, ``tmp``, ``claude/.claude.json`` and backups, ``memory`` dirs) are removed, so
    ``root / tree.name`` holds exactly the fixture layout. Raises ``DriveError`` when the binary does
    something the tree relies on differently, or continues another leaf than the rule picks.
    """
    base = root / tree.name
    if tree.derive is not None:
        assert tree.source is not None
        source = json.loads((root / tree.source / "expected.json").read_text())
        shutil.copytree(root / tree.source, base, symlinks=True)
        tree.derive(base / "claude" / "projects" / source["slug"] / f"{source['sessionId']}.jsonl")
        launches, decoys = list(source["launches"]), list(source["decoys"])
        proj = Path(source["cwd"])  # the copy keeps the source's slug directory
    else:
        assert tree.make is not None
        run = TreeRun(base, binary, server)
        tree.make(run)
        run.write_receipts()
        launches, decoys = run.launches, run.decoys
        proj = run.proj
        _strip_scratch(base)
    expected = _expected(base, proj, launches, decoys, binary, server)
    (base / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    _strip_scratch(base)
    return expected


def _strip_scratch(base: Path) -> None:
    for name in ("home", "tmp"):
        shutil.rmtree(base / name, ignore_errors=True)
    config = base / "claude"
    for child in list(config.iterdir()) if config.is_dir() else []:
        if child.name != "projects":
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    for memory in config.glob("projects/*/memory"):
        shutil.rmtree(memory)


def entry_types(paths: Sequence[Path]) -> dict[str, JsonObject]:
    """Every entry type in the transcripts ``paths``, with how many lines have it, the union of their
    top-level fields, and its kinds (an attachment's ``attachment.type``, a queue-operation's
    ``operation``, a user entry's content form: ``text`` for a string, else its block types)."""
    found: dict[str, JsonObject] = {}
    for path in paths:
        for d in entries(path):
            kind = str(d.get("type"))
            row = found.setdefault(kind, {"count": 0, "fields": set(), "kinds": set(), "with_uuid": 0})
            row["count"] += 1
            row["fields"] |= set(d)
            row["with_uuid"] += isinstance(d.get("uuid"), str)
            if kind == "attachment":
                row["kinds"].add(str((d.get("attachment") or {}).get("type")))
            elif kind == "queue-operation":
                row["kinds"].add(str(d.get("operation")))
            elif kind in ("user", "assistant"):
                content = (d.get("message") or {}).get("content")
                forms = ["text"] if isinstance(content, str) else [
                    str(b.get("type")) for b in content or [] if isinstance(b, dict)]
                row["kinds"] |= set(forms)
    return {k: {"count": v["count"], "with_uuid": v["with_uuid"], "fields": sorted(v["fields"]),
                "kinds": sorted(v["kinds"])} for k, v in sorted(found.items())}


def __dir__() -> list[str]:
    return sorted(__all__)
