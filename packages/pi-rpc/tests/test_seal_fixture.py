"""The seal's one extension entry (issue 33): the fixture extension, by its exact path and sha256, only with the
seal's explicit option (off by default), never any other extension; the environment it needs (jiti's cache
off); the loader files the pin covers for such a seat. N24: everything outside the allow-list refuses
``unsealed-engine``."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mosaic.pi_rpc
from mosaic.pi_rpc import PiRpcRefusal, sealed_engine_argv
from mosaic.pi_rpc.install import pin_data
from mosaic.pi_rpc.seal import (
    FIXTURE_EXTENSION_ENV,
    FIXTURE_EXTENSION_PATH,
    FIXTURE_EXTENSION_SHA256,
    FIXTURE_LOADER_SHA256,
    SEALED_FLAGS,
    build_sealed_argv,
    check_fixture_env,
    check_pin,
    check_seal,
    pin_mismatches,
)

SESSION = "/tmp/x/proj/.pi/state/seat/sessions/s.jsonl"
SEALED = [*SEALED_FLAGS, "--session", SESSION]
FIXTURE = ["--extension", FIXTURE_EXTENSION_PATH]


def _code(refusal: PiRpcRefusal | None) -> str | None:
    return None if refusal is None else refusal.code


def test_N24_the_entry_names_the_package_fixture_by_its_exact_path_and_its_bytes() -> None:
    package = Path(mosaic.pi_rpc.__file__).resolve().parent
    assert FIXTURE_EXTENSION_PATH == str(package / "testing" / "fixture_extension" / "dialogs.js")
    assert os.path.isabs(FIXTURE_EXTENSION_PATH) and os.path.realpath(FIXTURE_EXTENSION_PATH) == FIXTURE_EXTENSION_PATH
    data = Path(FIXTURE_EXTENSION_PATH).read_bytes()
    assert hashlib.sha256(data).hexdigest() == FIXTURE_EXTENSION_SHA256
    assert data.startswith(b"// Mosaic's fixture extension for test seats only")
    assert dict(FIXTURE_EXTENSION_ENV) == {"JITI_FS_CACHE": "false"}


def test_N24_the_fixture_option_is_off_by_default_and_the_fixture_alone_refuses_without_it() -> None:
    argv = [*SEALED, *FIXTURE]
    assert _code(check_seal(argv)) == "unsealed-engine"  # the default: no extension at all
    assert check_seal(argv, fixture_extension=True) is None
    assert build_sealed_argv(SESSION) == SEALED  # nothing added by default
    assert build_sealed_argv(SESSION, fixture_extension=True) == argv
    command = ["/usr/bin/python3", "-m", "fake"]
    assert sealed_engine_argv("/nonexistent", SESSION, command=command) == [*command, *SEALED]
    assert sealed_engine_argv("/nonexistent", SESSION, command=command, fixture_extension=True) == [*command, *argv]
    # The option allows the entry; it does not require it, and the optional flags still go anywhere after it.
    assert check_seal(SEALED, fixture_extension=True) is None
    assert check_seal([*SEALED, "--model", "m", *FIXTURE, "--thinking", "off"], fixture_extension=True) is None


OTHER_EXTENSIONS = {
    "another-extension": [*SEALED, "--extension", "/tmp/other-extension.js"],
    "a-neighbour": [*SEALED, "--extension", FIXTURE_EXTENSION_PATH + ".bak"],
    "the-directory": [*SEALED, "--extension", os.path.dirname(FIXTURE_EXTENSION_PATH)],
    "not-normalised": [*SEALED, "--extension",
                       FIXTURE_EXTENSION_PATH.replace("/fixture_extension/", "/fixture_extension/./")],
    "relative": [*SEALED, "--extension", os.path.relpath(FIXTURE_EXTENSION_PATH, "/tmp")],
    "short-form": [*SEALED, "-e", FIXTURE_EXTENSION_PATH],
    "equals-form": [*SEALED, f"--extension={FIXTURE_EXTENSION_PATH}"],
    "twice": [*SEALED, *FIXTURE, *FIXTURE],
    "no-value": [*SEALED, "--extension"],
    "before-session": [*SEALED_FLAGS, *FIXTURE, "--session", SESSION],
    "no-extensions-dropped": [s for s in SEALED if s != "--no-extensions"] + FIXTURE,
    "fixture-and-another": [*SEALED, *FIXTURE, "--extension", "/tmp/other-extension.js"],
}


@pytest.mark.parametrize("argv", list(OTHER_EXTENSIONS.values()), ids=list(OTHER_EXTENSIONS))
def test_N24_with_the_option_any_other_extension_refuses(argv: list[str]) -> None:
    refusal = check_seal(argv, fixture_extension=True)
    assert _code(refusal) == "unsealed-engine"
    assert refusal is not None and refusal.reconcile is False


def test_N24_a_copy_of_the_fixture_elsewhere_refuses_though_its_bytes_are_right(tmp_path: Path) -> None:
    copy = tmp_path / "dialogs.js"
    shutil.copyfile(FIXTURE_EXTENSION_PATH, copy)
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == FIXTURE_EXTENSION_SHA256
    refusal = check_seal([*SEALED, "--extension", str(copy)], fixture_extension=True)
    assert _code(refusal) == "unsealed-engine"
    assert refusal is not None and "not on the seal's allow-list" in refusal.message
    link = tmp_path / "link.js"
    link.symlink_to(FIXTURE_EXTENSION_PATH)
    assert _code(check_seal([*SEALED, "--extension", str(link)], fixture_extension=True)) == "unsealed-engine"


def _seal_in_a_copy(tmp_path: Path, change: str) -> dict[str, object]:
    """Copy this package to ``tmp_path/site`` (the fixture's path is then the copy's), change the copy's
    fixture as ``change`` says, and ask the copy's seal about its own fixture path in a fresh interpreter."""
    site = tmp_path / "site"
    package = Path(mosaic.pi_rpc.__file__).resolve().parent
    shutil.copytree(package, site / "mosaic" / "pi_rpc", ignore=shutil.ignore_patterns("__pycache__"))
    fixture = site / "mosaic" / "pi_rpc" / "testing" / "fixture_extension" / "dialogs.js"
    if change == "other-bytes":
        fixture.write_bytes(fixture.read_bytes().replace(b"answered", b"ANSWERED"))
    elif change == "symlink":
        elsewhere = tmp_path / "elsewhere.js"
        shutil.copyfile(fixture, elsewhere)  # the right bytes, behind a symlink at the right path
        fixture.unlink()
        fixture.symlink_to(elsewhere)
    elif change == "fifo":
        fixture.unlink()
        os.mkfifo(fixture)
    elif change == "larger":
        fixture.write_bytes(fixture.read_bytes() + b"//" + b"x" * (1 << 21))
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1])\n"
        "import mosaic.pi_rpc.seal as seal\n"
        "assert seal.__file__.startswith(sys.argv[1]), seal.__file__\n"
        "argv = [*seal.SEALED_FLAGS, '--session', '/tmp/s.jsonl', '--extension', seal.FIXTURE_EXTENSION_PATH]\n"
        "r = seal.check_seal(argv, fixture_extension=True)\n"
        "print(json.dumps({'path': seal.FIXTURE_EXTENSION_PATH, 'refusal': r and r.to_dict()}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    assert result["path"] == str(fixture)
    return result


def test_N24_the_copy_harness_admits_an_unchanged_fixture(tmp_path: Path) -> None:
    # The three tests below change one thing; unchanged, the copy's seal admits its own fixture.
    assert _seal_in_a_copy(tmp_path, "none")["refusal"] is None


@pytest.mark.parametrize("change", ["other-bytes", "symlink", "fifo", "larger"])
def test_N24_the_right_path_with_other_bytes_or_not_a_plain_file_refuses(tmp_path: Path, change: str) -> None:
    refusal = _seal_in_a_copy(tmp_path, change)["refusal"]
    assert isinstance(refusal, dict) and refusal["code"] == "unsealed-engine", change


def test_N24_a_symlinked_directory_on_the_way_refuses(tmp_path: Path) -> None:
    # The same file reached through a symlinked directory is not the exact path.
    link = tmp_path / "pkg"
    link.symlink_to(Path(FIXTURE_EXTENSION_PATH).parent)
    refusal = check_seal([*SEALED, "--extension", str(link / "dialogs.js")], fixture_extension=True)
    assert _code(refusal) == "unsealed-engine"


def test_N24_the_fixture_needs_jitis_cache_off_and_no_other_jiti_variable() -> None:
    base = {"HOME": "/h", "PATH": "/usr/bin:/bin", "PI_CODING_AGENT_DIR": "/a"}
    assert check_fixture_env({**base, **FIXTURE_EXTENSION_ENV}) is None
    for env in (base, {**base, "JITI_FS_CACHE": "0"}, {**base, "JITI_FS_CACHE": "true"},
                {**base, **FIXTURE_EXTENSION_ENV, "JITI_ALIAS": '{"typebox": "/tmp/x.js"}'},
                {**base, **FIXTURE_EXTENSION_ENV, "JITI_REBUILD_FS_CACHE": "true"}):
        assert _code(check_fixture_env(env)) == "unsealed-engine", env


def test_the_pin_covers_the_extension_loader_only_for_a_fixture_seat(tmp_path: Path) -> None:
    # Fabricated lock files, no packages: without the option no loader file is asked for; with it, each of
    # the four jiti files is reported missing, and a changed one is reported with its digest.
    pin = pin_data()
    (tmp_path / "package.json").write_bytes(pin["package.json"])
    (tmp_path / "package-lock.json").write_bytes(pin["package-lock.json"])
    assert not [m for m in pin_mismatches(tmp_path) if m.kind == "fixture-loader-file"]
    found = {m.path: m for m in pin_mismatches(tmp_path, fixture_extension=True) if m.kind == "fixture-loader-file"}
    assert sorted(found) == sorted(FIXTURE_LOADER_SHA256)
    assert all(m.actual is None for m in found.values())
    changed = tmp_path / "node_modules" / "jiti" / "dist" / "babel.cjs"
    changed.parent.mkdir(parents=True)
    changed.write_bytes(b"module.exports = () => 'other code'")
    found = {m.path: m for m in pin_mismatches(tmp_path, fixture_extension=True) if m.kind == "fixture-loader-file"}
    assert found["node_modules/jiti/dist/babel.cjs"].actual == hashlib.sha256(changed.read_bytes()).hexdigest()
    refusal = check_pin(tmp_path, fixture_extension=True)
    assert refusal is not None and refusal.code == "engine-pin-mismatch"
