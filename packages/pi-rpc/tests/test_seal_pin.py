"""The seal (seed README "Seal", N24) and the pin as a refusal (FACTS.md §0)."""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mosaic.pi_rpc import PiRpcRefusal, check_pin, sealed_engine_argv
from mosaic.pi_rpc.install import pin_data
from mosaic.pi_rpc.seal import (
    CHORD_INTEGRITY,
    CHORD_PACKAGE,
    CODES,
    SEALED_FLAGS,
    build_sealed_argv,
    check_pre_args,
    check_seal,
    pin_mismatches,
)
from mosaic.safe_open import Refusal

SESSION = "/tmp/x/proj/.pi/state/seat/sessions/s.jsonl"
SEALED = [*SEALED_FLAGS, "--session", SESSION]
REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])


def test_sealed_argv_is_the_seed_allow_list_plus_the_two_decided_flags() -> None:
    assert SEALED_FLAGS == ("--mode", "rpc", "--no-extensions", "--no-prompt-templates", "--no-themes",
                            "--no-context-files", "--no-skills")
    assert check_seal(SEALED) is None
    argv = build_sealed_argv(SESSION, model="fake-model-1", provider="fakeprov", thinking="off")
    assert argv == [*SEALED, "--model", "fake-model-1", "--provider", "fakeprov", "--thinking", "off"]
    assert check_seal(argv) is None
    assert check_seal([*SEALED, "--thinking", "high", "--model", "m"]) is None  # any order


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        ([*SEALED[:2], *SEALED[3:]], "missing --no-extensions"),
        ([s for s in SEALED if s != "--no-context-files"], "missing --no-context-files"),
        ([s for s in SEALED if s != "--no-skills"], "missing --no-skills"),
        ([*SEALED, "--mode", "json"], "a second --mode"),
        ([*SEALED, "--session", "/tmp/other.jsonl"], "a second --session"),
        ([*SEALED, "-e", "/tmp/ext.js"], "an extension"),
        ([*SEALED, "--extension", "/tmp/ext.js"], "an extension, long form"),
        ([*SEALED, "--no-session"], "a session flag"),
        ([*SEALED, "--fork", "abc"], "a session flag"),
        ([*SEALED, "--export", "/tmp/o.html"], "an output flag"),
        ([*SEALED, "--print"], "an output flag"),
        ([*SEALED, "--continue"], "a session flag"),
        ([*SEALED, "hello"], "a bare word is a prompt"),
        ([*SEALED, "--model", "a", "--model", "b"], "a flag twice"),
        ([*SEALED, "--model"], "a flag without value"),
        ([*SEALED, "--model", "-x"], "a value starting with -"),
        ([*SEALED, "--model", "@file"], "a value starting with @"),
        ([*SEALED, "--model", ""], "an empty value"),
        ([*SEALED, "--model=a"], "the =value form"),
        ([*SEALED, "--thinking", "ultra"], "not a thinking level"),
        ([*SEALED[:-1], "relative/s.jsonl"], "a relative session path"),
        ([*SEALED[:-1], "/tmp/../etc/s.jsonl"], "an unnormalised session path"),
        ([*SEALED[:-2]], "no --session"),
        (["--no-extensions", *SEALED], "a flag before the sealed prefix"),
        ([*SEALED, "--api-key", "k"], "a credential flag"),
    ],
)
def test_N24_anything_else_refuses_unsealed_engine(argv: list[str], why: str) -> None:
    refusal = check_seal(argv)
    assert refusal is not None, why
    assert refusal.code == "unsealed-engine" and refusal.reconcile is False


def test_build_refuses_what_check_refuses() -> None:
    with pytest.raises(PiRpcRefusal) as info:
        build_sealed_argv("relative.jsonl")
    assert info.value.code == "unsealed-engine"
    with pytest.raises(PiRpcRefusal):
        build_sealed_argv(SESSION, model="--no-session")


def test_pre_args_carrying_a_pi_option_refuse() -> None:
    assert check_pre_args(["/x/cli.js"]) is None
    assert check_pre_args(["-m", "mosaic.pi_rpc.testing.fake_engine", "--fake-control", "/tmp/c"]) is None
    for bad in (["--extension", "/tmp/e.js"], ["-e", "x"], ["--no-session"], ["--session=/x"], ["--"]):
        refusal = check_pre_args(bad)
        assert refusal is not None and refusal.code == "unsealed-engine", bad


def test_sealed_engine_argv_with_a_test_command_checks_pre_args_and_seal() -> None:
    argv = sealed_engine_argv("/nonexistent", SESSION, command=["/usr/bin/python3", "-m", "fake"])
    assert argv == ["/usr/bin/python3", "-m", "fake", *SEALED]
    with pytest.raises(PiRpcRefusal) as info:
        sealed_engine_argv("/nonexistent", SESSION, command=["/usr/bin/python3", "--extension", "e.js"])
    assert info.value.code == "unsealed-engine"


def test_pin_mismatch_refuses_before_spawn(tmp_path: Path) -> None:
    # The default command is the pinned engine: a directory that is not the pinned install refuses.
    with pytest.raises(PiRpcRefusal) as info:
        sealed_engine_argv(tmp_path, SESSION)
    assert info.value.code == "engine-pin-mismatch" and info.value.reconcile is False
    missing = check_pin(tmp_path / "absent")
    assert missing is not None and missing.code == "engine-pin-mismatch"


def _fabricated_install(root: Path, *, chord_integrity: str = CHORD_INTEGRITY) -> None:
    """The lock files of an install, without the packages: npm's record copied from the committed lock."""
    pin = pin_data()
    (root / "package.json").write_bytes(pin["package.json"])
    (root / "package-lock.json").write_bytes(pin["package-lock.json"])
    lock = json.loads(pin["package-lock.json"])
    packages = {k: v for k, v in lock["packages"].items() if k}
    packages[f"node_modules/{CHORD_PACKAGE}"] = {**packages[f"node_modules/{CHORD_PACKAGE}"],
                                                 "integrity": chord_integrity}
    (root / "node_modules").mkdir()
    (root / "node_modules" / ".package-lock.json").write_text(json.dumps({"packages": packages}))


def test_chord_integrity_is_pinned_and_a_changed_one_is_reported(tmp_path: Path) -> None:
    lock = json.loads(pin_data()["package-lock.json"])
    assert lock["packages"][f"node_modules/{CHORD_PACKAGE}"]["integrity"] == CHORD_INTEGRITY
    good = tmp_path / "good"
    good.mkdir()
    _fabricated_install(good)
    kinds = {m.kind for m in pin_mismatches(good)}
    # No package files, no bundle: those are reported; the lock records match.
    assert "bundle-file-missing" in kinds and "node-missing" in kinds
    assert not any(m.kind == "installed-integrity" for m in pin_mismatches(good))
    bad = tmp_path / "bad"
    bad.mkdir()
    _fabricated_install(bad, chord_integrity="sha512-AAAA")
    found = [m for m in pin_mismatches(bad) if m.kind == "installed-integrity"]
    assert any(CHORD_PACKAGE in m.path and m.actual == "sha512-AAAA" for m in found)
    refusal = check_pin(bad)
    assert refusal is not None and refusal.code == "engine-pin-mismatch"


def test_refusal_values_have_the_three_fields_and_pickle() -> None:
    r = PiRpcRefusal("unsealed-engine", "x")
    assert r.to_dict() == {"code": "unsealed-engine", "reconcile": False, "message": "x"}
    r2 = pickle.loads(pickle.dumps(PiRpcRefusal("engine-pin-mismatch", "y", reconcile=True)))
    assert (r2.code, r2.reconcile, r2.message) == ("engine-pin-mismatch", True, "y")
    with pytest.raises(ValueError):
        PiRpcRefusal("busy", "not ours")


def test_refusal_is_one_of_the_family_caught_by_the_shared_base() -> None:
    # One refusal family: every package's refusal subclasses mosaic.safe_open.Refusal.
    assert issubclass(PiRpcRefusal, Refusal)
    assert PiRpcRefusal.CODES is CODES
    with pytest.raises(Refusal) as info:
        build_sealed_argv("relative.jsonl")  # a real refusing call, caught by the base alone
    assert type(info.value) is PiRpcRefusal and info.value.code == "unsealed-engine"
    refusal = check_seal(["--mode", "rpc"])
    assert refusal is not None
    try:
        raise refusal
    except Refusal as caught:
        assert caught.to_dict() == {"code": "unsealed-engine", "reconcile": False, "message": refusal.message}
    # A refusal is a value: equal by class, code, reconcile and message (the base's rule).
    assert PiRpcRefusal("unsealed-engine", "x") == PiRpcRefusal("unsealed-engine", "x")
    assert PiRpcRefusal("unsealed-engine", "x") != PiRpcRefusal("engine-pin-mismatch", "x")


def test_importing_pi_rpc_loads_no_cffi() -> None:
    # The Refusal base comes from safe-open, whose root-opening (cffi) names load lazily: pi-rpc pays nothing.
    code = ("import sys, mosaic.pi_rpc, mosaic.pi_rpc.testing; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cffi', '_cffi_backend')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_readme_refusal_table_matches_the_code_table() -> None:
    text = (REPO / "packages" / "pi-rpc" / "README.md").read_text()
    section = text.split("## Refusals", 1)
    assert len(section) == 2, "README.md has no '## Refusals' section"
    body = section[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z-]+)` \| (yes|no) \|", body, flags=re.M)
    assert {code: flag == "yes" for code, flag in rows} == dict(CODES)
