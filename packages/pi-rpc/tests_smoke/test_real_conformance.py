"""Conformance against the real binary: every scenario, real Pi against its committed golden, and the fake
against the real Pi run live. Any difference fails (the README lists the normalisation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mosaic.pi_rpc.testing import (
    CONFORMANCE,
    Script,
    child_env,
    diff_transcripts,
    load_golden,
    run_normalized,
)
from mosaic.pi_rpc.testing.conformance import fake_engine, real_engine

GOLDENS = Path(__file__).resolve().parents[1] / "tests" / "data" / "conformance"


@pytest.mark.parametrize("script", CONFORMANCE, ids=[s.name for s in CONFORMANCE])
def test_real_binary_matches_its_golden_and_the_fake(script: Script, pi_dir: Path, tmp_path: Path) -> None:
    real = run_normalized(script, real_engine(pi_dir), scratch_parent=str(tmp_path))
    golden = load_golden(GOLDENS, script.name)
    diff = diff_transcripts(golden, real, names=("golden", "real pi 0.85.1"))
    assert diff == "", f"the real binary no longer matches the golden of {script.name}:\n{diff}"
    fake = run_normalized(script, fake_engine(env=child_env()), scratch_parent=str(tmp_path))
    diff = diff_transcripts(real, fake, names=("real pi 0.85.1", "fake"))
    assert diff == "", f"the fake differs from the real binary in {script.name}:\n{diff}"
