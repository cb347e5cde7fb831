"""B1 part 4 again on the binary: every tree made anew (the generator's makers, under a temporary root)
has the committed tree's layout and turns, and on each the binary's `--resume` continues the entry the
written leaf rule picks (make_tree refuses otherwise), by the same clause of the rule as the committed one."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from mosaic.claude_rpc import ClaudeInstall
from mosaic.claude_rpc.testing import ModelServer
from mosaic.claude_rpc.testing.trees import TREES, entries, make_tree

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])
COMMITTED = REPO / "fixtures" / "claude-2.1.283" / "trees"


def summary(base: Path) -> dict[str, Any]:
    exp = json.loads((base / "expected.json").read_text())
    main = base / "claude" / "projects" / exp["slug"] / f"{exp['sessionId']}.jsonl"
    lines = entries(main)
    files = Counter("subagent" if "subagents" in p.parts else p.suffix for p in (base / "claude").rglob("*")
                    if p.is_file())
    return {"rule": exp["leafRule"], "launches": len(exp["launches"]), "distinct": len(set(exp["launches"])),
            "decoys": len(exp["decoys"]), "files": files,
            "prompts": [d["message"]["content"] for d in lines if d["type"] == "user"
                        and isinstance(d["message"]["content"], str) and not d.get("isMeta")
                        and not d["message"]["content"].startswith("<task-notification>")],
            "types": sorted({d["type"] for d in lines})}


def test_every_tree_made_again_matches_the_committed_one_and_resume_follows_the_rule(claude: ClaudeInstall,
                                                                                     tmp_path: Path) -> None:
    with ModelServer() as server:
        made = {tree.name: make_tree(tree, tmp_path, claude.binary, server) for tree in TREES}
        assert server.errors == ()
    for name, exp in made.items():
        assert exp["resumeContinuedParent"], name
        assert summary(tmp_path / name) == summary(COMMITTED / name), name
