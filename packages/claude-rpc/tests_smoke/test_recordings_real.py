"""B1 part 3 again on the binary: every recording made anew (the generator's own makers, a fresh scratch
directory and scripted server each) has the committed recording's shape, line kinds in order for each
direction, its exit code and the facts fixtures/MANIFEST.json records.

The conformance suite rides on the same runs (README "Conformance"): each sealed recording is also made by
the fake engine, and the fake's run, the run made now and the committed one must not differ
(:func:`mosaic.claude_rpc.testing.conformance.differences`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mosaic.claude_rpc import ClaudeInstall
from mosaic.claude_rpc.testing.conformance import NOT_MODELLED, Run, differences, run_fake
from mosaic.claude_rpc.testing.recordings import RECORDINGS, Recording, make_recording, redact, shape

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])
COMMITTED = REPO / "fixtures" / "claude-2.1.283" / "recordings"


def by_direction(records: list[dict[str, Any]]) -> dict[str, list[tuple[str, str, str]]]:
    kinds = shape(records)
    return {d: [k for k in kinds if k[0] == d] for d in ("in", "out")}


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda r: r.name)
def test_the_recording_made_again_has_the_committed_shape_exit_and_facts_and_the_fake_conforms(
        recording: Recording, claude: ClaudeInstall,
                                                                          tmp_path: Path) -> None:
    made = make_recording(recording, claude.binary, tmp_path / "s")
    committed = [json.loads(x) for x in (COMMITTED / f"{recording.name}.jsonl").read_text().splitlines()]
    assert by_direction(made.records) == by_direction(committed)
    rows = json.loads((REPO / "fixtures" / "MANIFEST.json").read_text())["claude-2.1.283"]["files"]
    row = next(r for r in rows if r["path"] == f"claude-2.1.283/recordings/{recording.name}.jsonl")
    assert made.exit_code == row["exit_code"]
    assert redact(made.facts, str(tmp_path / "s")) == row["facts"]
    if recording.sealed:
        real = Run.of(made, tmp_path / "s")
        committed_run = Run.committed(REPO / "fixtures", recording.name)
        assert differences(real, committed_run, names=("now", "committed")) == []
        fake = run_fake(recording, tmp_path / "fake")
        assert differences(fake, real, names=("fake", "real"), ignore=NOT_MODELLED) == []
