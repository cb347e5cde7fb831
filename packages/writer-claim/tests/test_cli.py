"""mosaic-claims as an operator runs it: list and show a claim root, and the
documented way out of a recovery reservation that will not launch (README "Recovery reservations":
release with the never-spawned proof), in text and `--json`; `--version` and options before or after
the subcommand, `python -m mosaic.writer_claim`; every expected error in one line (exit 1), a usage error
(exit 2), a crash (exit 70), a closed pipe quiet (exit 4, as mosaic-read)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from claim_helpers import BINDING, SEAT, SESSION, SESSION2

from mosaic.writer_claim import ClaimStore, ProofKind, State

VERSION = metadata.version("mosaic-writer-claim")


def run(*args: str, script: bool = False, **kw: object) -> subprocess.CompletedProcess[str]:
    argv = [str(Path(sys.executable).parent / "mosaic-claims")] if script else [sys.executable, "-m",
                                                                                 "mosaic.writer_claim"]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "LC_ALL": "C"}, **kw)  # type: ignore[call-overload]


def one_line(text: str) -> str:
    assert "Traceback" not in text and len(text.strip().splitlines()) == 1, text
    return text.strip()


@pytest.fixture
def reserved(claim_root: Path) -> tuple[Path, str, str]:
    """A recovery reservation waiting for its launcher (this process reserved it: its owner is alive), and
    an ordinary active claim on another session."""
    with ClaimStore(claim_root) as store:
        claim = store.acquire(SEAT, SESSION, BINDING, generation=4, eligibility="elig-21-way-out")
        other = store.acquire(SEAT.__class__("seat-z", SEAT.project, SEAT.workspace), SESSION2, BINDING)
        other.mark_spawn()
    return claim_root, claim.claim_id, other.claim_id


@pytest.mark.parametrize("args", [["--version"], ["list", "--version"], ["release-reservation", "--version"]])
def test_version_before_or_after_the_subcommand(args: list[str]) -> None:
    for script in (False, True):
        done = run(*args, script=script)
        assert (done.returncode, done.stdout) == (0, f"mosaic-claims {VERSION}\n"), done


def test_list_shows_each_pair_on_one_line_with_its_eligibility_and_owner(reserved: tuple[Path, str, str]) -> None:
    root, claim_id, other_id = reserved
    done = run("list", "--claim-root", str(root))
    assert done.returncode == 0, done
    lines = done.stdout.splitlines()
    assert len(lines) == 2, lines
    mine = next(x for x in lines if x.startswith(claim_id))
    assert "  reserved  " in mine and f"seat {SEAT.seat} of {SEAT.project}" in mine
    assert f"session pi:{SESSION.session_id}" in mine and f"unit cohort-{claim_id}.scope" in mine
    assert "eligibility elig-21-way-out pending" in mine and f"owner pid {os.getpid()} alive" in mine
    assert next(x for x in lines if x.startswith(other_id)).split("  ")[1] == "reserved"


def test_list_json_before_the_subcommand_too(reserved: tuple[Path, str, str]) -> None:
    root, claim_id, _ = reserved
    done = run("--json", "--claim-root", str(root), "list")
    assert done.returncode == 0, done
    out = json.loads(done.stdout)
    assert out["ok"] is True and out["unreadable"] == []
    (pair,) = [p for p in out["pairs"] if p["seat"]["head"]["claimId"] == claim_id]
    assert pair["state"] == "reserved" and pair["free"] is False
    assert pair["seat"]["head"]["eligibility"] == {"id": "elig-21-way-out", "taken": False}
    assert pair["seat"]["ownerAlive"] is True and pair["session"]["head"]["claimId"] == claim_id


def test_show_prints_the_pair_and_with_chain_every_revision(reserved: tuple[Path, str, str]) -> None:
    root, claim_id, _ = reserved
    done = run("show", claim_id, "--claim-root", str(root), "--chain", "--json")
    assert done.returncode == 0, done
    out = json.loads(done.stdout)
    assert out["claim"] == claim_id and out["pair"]["state"] == "reserved"
    assert [r["reason"] for r in out["chains"]["seat"]] == ["reserve"]
    text = run("show", claim_id, "--claim-root", str(root))
    assert text.returncode == 0 and text.stdout.splitlines()[0].startswith(claim_id)


def test_release_reservation_is_the_way_out_both_keys_stopped_with_the_never_spawned_proof(
        reserved: tuple[Path, str, str]) -> None:
    root, claim_id, other_id = reserved
    done = run("release-reservation", "elig-21-way-out", "--claim-root", str(root), "--json")
    assert done.returncode == 0, done
    out = json.loads(done.stdout)
    assert (out["ok"], out["claim"], out["eligibility"]) == (True, claim_id, "elig-21-way-out")
    assert out["proof"]["kind"] == "no-unit" and out["proof"]["detail"]["basis"] == "never-spawned"
    with ClaimStore(root) as store:
        pair = store.observe(SEAT, SESSION)
        for obs in pair.keys():
            assert obs.revision is not None and obs.revision.state is State.STOPPED
            assert obs.revision.proof is not None and obs.revision.proof.kind is ProofKind.NO_UNIT
            assert obs.revision.eligibility is not None and obs.revision.eligibility.taken
        assert pair.free
    listed = run("list", "--claim-root", str(root)).stdout
    assert f"{claim_id}  free  " in listed and f"{other_id}  reserved  " in listed
    # Spent: a second release (or a launcher's take-over) is refused in one line.
    again = run("release-reservation", "elig-21-way-out", "--claim-root", str(root))
    assert again.returncode == 1 and again.stdout == ""
    assert one_line(again.stderr).startswith("mosaic-claims: refused: eligibility: ")


def test_release_reservation_text_says_what_it_did(reserved: tuple[Path, str, str]) -> None:
    root, claim_id, _ = reserved
    done = run("--claim-root", str(root), "release-reservation", "elig-21-way-out")
    assert done.returncode == 0
    assert one_line(done.stdout) == (f"released the reservation of claim {claim_id} for eligibility elig-21-way-out: "
                                     "both keys stopped with a no-unit proof (never spawned); a launch with that "
                                     "eligibility is refused from now on")


def test_an_unknown_eligibility_or_claim_is_one_line_exit_1(reserved: tuple[Path, str, str]) -> None:
    root, _, _ = reserved
    done = run("release-reservation", "elig-nope", "--claim-root", str(root))
    assert done.returncode == 1
    assert one_line(done.stderr) == ("mosaic-claims: refused: eligibility: no reservation in the claim root carries "
                                     "eligibility elig-nope")
    shown = run("show", "claim-" + "0" * 32, "--claim-root", str(root), "--json")
    assert shown.returncode == 1
    assert json.loads(shown.stdout) == {"ok": False, "refusal": {
        "code": "not-found", "reconcile": False,
        "message": f"no key in the claim root has claim claim-{'0' * 32} at its head"}}


def test_a_missing_claim_root_is_one_line_exit_1(tmp_path: Path) -> None:
    done = run("list", "--claim-root", str(tmp_path / "missing"))
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert line.startswith("mosaic-claims: refused: ") and str(tmp_path / "missing") in line


def test_usage_errors_are_one_line_exit_2() -> None:
    done = run("list")
    assert done.returncode == 2
    assert one_line(done.stderr) == ("mosaic-claims: --claim-root is required (the claim root has no default) (see "
                                     "mosaic-claims --help)")
    assert run("drop", "--claim-root", "/x").returncode == 2


def test_a_crash_is_one_line_exit_70(reserved: tuple[Path, str, str]) -> None:
    root, _, _ = reserved
    code = ("import sys, mosaic.writer_claim._cli as cli\n"
            "def boom(store, args):\n    raise ZeroDivisionError('the bug')\n"
            "cli.cmd_list = boom\n"
            f"sys.exit(cli.main(['list', '--claim-root', {str(root)!r}]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "MOSAIC_TRACEBACK"})
    assert done.returncode == 70
    assert one_line(done.stderr) == ("mosaic-claims: crashed (a bug): ZeroDivisionError: the bug; MOSAIC_TRACEBACK=1 "
                                     "shows the traceback")


def test_a_closed_pipe_ends_quietly(reserved: tuple[Path, str, str]) -> None:
    root, _, _ = reserved
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line (`| head -0`)
    try:
        done = subprocess.run([sys.executable, "-m", "mosaic.writer_claim", "list", "--claim-root", str(root)],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (4, "")
