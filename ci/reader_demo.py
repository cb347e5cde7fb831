#!/usr/bin/env python3
"""The reader on the committed fixtures (the README's main-job command; not a test).

Copies fixtures/pi-0.85.1/proj-rpc, proj-sm and fixtures/adversarial/proj-adv into a temporary directory,
rewriting each header cwd as fixtures/README.md says (line 1 only), and makes proj-rpc's seat `claude` a
Claude Code seat: the transcripts of fixtures/claude-2.1.283/trees/linear (the pinned binary's, with their
cwd moved to the copy) under a Claude config directory beside it, and the seat's launcher receipt. Then it
runs `mosaic-read` on it: the catalogue (the Pi files and the Claude session the receipt names, never the
tree's decoy), and the first page of one conversation (default: proj-sm's forks.jsonl), as readable text
or, with --json, JSON lines. The temporary directory is removed at the end.

    python ci/reader_demo.py [--json] [--file proj-sm/forks.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[1])
PROJECTS = {"proj-rpc": "pi-0.85.1/proj-rpc", "proj-sm": "pi-0.85.1/proj-sm", "proj-adv": "adversarial/proj-adv"}
#: The Claude Code 2.1.283 tree the demos show (fixtures/README.md "Claude Code 2.1.283").
CLAUDE_TREE = REPO / "fixtures" / "claude-2.1.283" / "trees" / "linear"


def materialise_claude(project: Path, claude: Path, seat: str) -> tuple[str, list[str]]:
    """Make `seat` of `project` a Claude Code seat: the linear tree's config directory copied to `claude`
    (its transcripts, the subagent's and the decoy's, with their cwd moved from the tree's fixed path to
    `project`'s real path) and the seat's launcher receipt naming the tree's session. Returns the session
    id and the decoys (sessions no receipt names)."""
    expected = json.loads((CLAUDE_TREE / "expected.json").read_text())
    shutil.copytree(CLAUDE_TREE / "claude", claude, symlinks=True)
    old = json.dumps(expected["cwd"])[:-1].encode()
    new = json.dumps(os.path.realpath(project))[:-1].encode()
    for path in claude.rglob("*.jsonl"):
        path.write_bytes(path.read_bytes().replace(b'"cwd":' + old, b'"cwd":' + new))
    receipts = project / ".pi" / "state" / seat
    receipts.mkdir(parents=True, exist_ok=True)
    (receipts / "session-id").write_text(expected["sessionId"] + "\n")
    return expected["sessionId"], list(expected["decoys"])


def materialise(dest: Path) -> list[Path]:
    roots = []
    for name, rel in PROJECTS.items():
        src = REPO / "fixtures" / rel
        root = dest / name
        shutil.copytree(src, root, symlinks=True)
        real = os.path.realpath(root)
        sessions = root / ".pi/state/alpha/sessions"
        for f in sorted(sessions.iterdir()):
            data = f.read_bytes()
            nl = data.find(b"\n")
            try:
                header = json.loads(data[:nl].decode("utf-8")) if nl >= 0 else None
            except ValueError:
                header = None
            old = f"/tmp/mosaic-fixtures/{name}"
            if isinstance(header, dict) and isinstance(header.get("cwd"), str) and (
                    header["cwd"] == old or header["cwd"].startswith(old + "/")):
                header["cwd"] = real + header["cwd"][len(old):]
                f.write_bytes(json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode() + data[nl:])
        roots.append(root)
    return roots


def main() -> int:
    import subprocess

    from mosaic.chat_pages import conversation_id
    from mosaic.chat_pages.sources import claude_conversation_id

    def mosaic_read(argv: list[str]) -> int:
        """The installed command line, as a user runs it (`python -m mosaic.chat_pages` is `mosaic-read`)."""
        sys.stdout.flush()  # keep the "$ mosaic-read ..." line before the child's output
        return subprocess.run([sys.executable, "-m", "mosaic.chat_pages", *argv], check=False).returncode

    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--file", default="proj-sm/forks.jsonl")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="chat-pages-demo-") as tmp:
        roots = materialise(Path(tmp))
        spec: list[str] = []
        for r in roots:
            spec += ["--spec", str(r), "alpha"]
        session, _ = materialise_claude(roots[0], Path(tmp) / "claude", "claude")
        spec += ["--claude-spec", str(roots[0]), "claude", str(Path(tmp) / "claude")]
        fmt = [] if args.json else ["--text"]
        print(f"$ mosaic-read {' '.join(fmt)} --spec <tmp>/proj-rpc alpha --spec <tmp>/proj-sm alpha "
              f"--spec <tmp>/proj-adv alpha --claude-spec <tmp>/proj-rpc claude <tmp>/claude catalogue")
        mosaic_read([*spec, *fmt, "catalogue"])
        cid = claude_conversation_id(str(roots[0]), "claude", session)
        print(f"\n$ mosaic-read {' '.join(fmt)} --spec ... open {cid}    # the Claude Code session the receipt names")
        mosaic_read([*spec, *fmt, "open", cid])
        project, name = args.file.split("/", 1)
        cid = conversation_id(str(Path(tmp) / project), "alpha", name)
        print(f"\n$ mosaic-read {' '.join(fmt)} --spec ... open {cid}    # {args.file}")
        return mosaic_read([*spec, *fmt, "open", cid])


if __name__ == "__main__":
    sys.exit(main())
