"""`nox -s build`: each package released alone (issue 12).

1. Build an sdist of each package, then its wheel FROM that sdist (`uv build`), into dist/sdist and
   dist/wheelhouse. The wheel must hold every source file under the package's src/ (code, py.typed, the
   schemas and data it reads at runtime) and nothing else: the sdist is complete.
2. `twine check --strict` every artifact; the wheel's metadata must say what pyproject.toml says (name,
   version, Markdown README, Requires-Python, Mosaic requirements, console scripts).
3. Fetch the third-party runtime requirements (never a mosaic-* name) from PyPI as wheels into
   dist/thirdparty (`pip download --only-binary=:all:`: nothing is built or run).
4. For each package, a fresh virtualenv; `uv pip install --no-index --find-links dist/wheelhouse
   --find-links dist/thirdparty --offline mosaic-<name>`. No index is consulted and uv may not touch the
   network, so a mosaic-* name can only resolve from the wheelhouse. Then the venv must hold exactly the
   package's declared Mosaic closure, each installed file must have the bytes of the wheelhouse wheel,
   `uv pip check` must pass, every module of the closure must import from the venv and every other Mosaic
   module must be missing, and every console script the package's metadata declares must run `--help`
   with exit 0.

`python ci/build.py [--out DIR]` (default DIR: dist/ in the repository). Exit 1 on any problem, with each.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import buildcheck
import workspace

PROBE = Path(__file__).resolve().with_name("build_probe.py")


def _uv() -> str:
    try:
        uv = importlib.import_module("uv")  # the uv the session installed (the ci/requirements.txt pin)
    except ImportError:
        found = shutil.which("uv")
        if not found:
            raise SystemExit("build: uv is neither installed in this environment nor on PATH") from None
        return found
    return str(uv.find_uv_bin())


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, text=True, capture_output=True, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout + proc.stderr)
        raise SystemExit(f"build: exit {proc.returncode}: {' '.join(cmd)}")
    return proc  # type: ignore[no-any-return]


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment of every step in a fresh venv: without any UV_*/PIP_* setting, which could add an
    index or a find-links location (the builds keep them: a mirror may serve hatchling)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env.update(extra)
    return env


def source_files(name: str) -> set[str]:
    """What hatchling sees under packages/<name>/src: tracked or untracked, never ignored (below src/)."""
    src = f"packages/{name}/src/"
    out = _run(["git", "-C", str(workspace.ROOT), "ls-files", "-z", "--cached", "--others",
                "--exclude-standard", "--", src]).stdout
    return {p[len(src):] for p in out.split("\0") if p and (workspace.ROOT / p).is_file()}


def install_command(uv: str, python: str, wheelhouse: Path, thirdparty: Path, name: str,
                    cache: Path) -> list[str]:
    """No index at all: mosaic-* resolves from the wheelhouse only, third-party from the PyPI wheels fetched
    into `thirdparty` (which holds no mosaic-* file: buildcheck.thirdparty_problems)."""
    return [uv, "pip", "install", "--python", python, "--no-index", "--offline", "--no-config",
            "--cache-dir", str(cache), "--link-mode", "copy",
            "--find-links", str(wheelhouse), "--find-links", str(thirdparty),
            f"{buildcheck.MOSAIC_PREFIX}{name}"]


def build_all(uv: str, sdists: Path, wheelhouse: Path) -> dict[str, tuple[Path, Path]]:
    out: dict[str, tuple[Path, Path]] = {}
    for name in workspace.PACKAGES:
        stem = f"mosaic_{workspace.module_name(name)}-{workspace.pyproject(name)['project']['version']}"
        _run([uv, "build", "-q", "--no-config", "--python", sys.executable, "--sdist", "-o", str(sdists),
              str(workspace.package_dir(name))])
        sdist = sdists / f"{stem}.tar.gz"
        _run([uv, "build", "-q", "--no-config", "--python", sys.executable, "--wheel", "-o", str(wheelhouse),
              str(sdist)])
        wheels = sorted(wheelhouse.glob(f"{stem}-*.whl"))
        if len(wheels) != 1:
            raise SystemExit(f"build: expected one wheel {stem}-*.whl from {sdist.name}, found {wheels}")
        out[name] = (sdist, wheels[0])
        print(f"built {sdist.name} and, from it, {out[name][1].name}", flush=True)
    return out


def static_problems(artifacts: dict[str, tuple[Path, Path]]) -> tuple[list[str], list[str]]:
    """The metadata and completeness checks of every artifact; also the third-party requirements."""
    problems: list[str] = []
    thirdparty: set[str] = set()
    for name, (sdist, wheel) in artifacts.items():
        names, meta, entry_points, _ = buildcheck.read_wheel(str(wheel))
        project = workspace.pyproject(name)["project"]
        problems += buildcheck.metadata_problems(
            name, meta, project["version"], workspace.declared_mosaic_deps(name),
            buildcheck.console_scripts(entry_points), project.get("scripts", {}))
        problems += buildcheck.wheel_file_problems(name, names, source_files(name))
        problems += buildcheck.sdist_problems(name, buildcheck.sdist_names(str(sdist)))
        thirdparty.update(buildcheck.thirdparty_requirements(meta))
    return problems, sorted(thirdparty)


def fetch_thirdparty(requirements: list[str], dest: Path) -> list[str]:
    if requirements:
        _run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
              "--only-binary=:all:", "-d", str(dest), *requirements])
    files = sorted(p.name for p in dest.iterdir())
    print(f"third-party wheels from PyPI for {requirements}: {files}", flush=True)
    readme = (workspace.ROOT / "README.md").read_text(encoding="utf-8")
    return buildcheck.thirdparty_problems(files) + buildcheck.readme_thirdparty_problems(readme, files)


def install_alone(uv: str, name: str, wheel: Path, dirs: tuple[Path, Path], tmp: Path) -> list[str]:
    """Install mosaic-<name> alone into a fresh venv under tmp and check what it holds and runs."""
    wheelhouse, thirdparty = dirs
    venv = tmp / f"venv-{name}"
    _run([uv, "venv", "-q", "--no-config", "--python", sys.executable, str(venv)], env=_clean_env())
    py = str(venv / "bin" / "python")
    _run(install_command(uv, py, wheelhouse, thirdparty, name, tmp / "uv-cache"), env=_clean_env())
    _run([uv, "pip", "check", "--python", py], env=_clean_env())
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    run_env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    modules = [workspace.module_name(p) for p in workspace.PACKAGES]
    probe = json.loads(_run([py, "-I", str(PROBE), json.dumps(modules)], cwd=home, env=run_env).stdout)
    closure = workspace.closure(name)
    problems = buildcheck.closure_problems(name, probe["dists"], closure)
    site = Path(probe["site"])
    _, _, _, record = buildcheck.read_wheel(str(wheel))
    for dist, info in probe["dists"].items():
        if buildcheck.short_name(dist) == name:
            problems += buildcheck.installed_bytes_problems(name, record, info["files"])
    imports = {p: probe["imports"][workspace.module_name(p)] for p in workspace.PACKAGES}
    problems += buildcheck.import_problems(name, closure, imports, site)
    scripts: list[str] = next(
        (i["scripts"] for d, i in probe["dists"].items() if buildcheck.short_name(d) == name), [])
    problems += _script_problems(name, [str(venv / "bin" / s) for s in scripts], home, run_env)
    mosaic = sorted(d for d in probe["dists"] if buildcheck.is_mosaic(d))
    others = sorted(d for d in probe["dists"] if not buildcheck.is_mosaic(d))
    print(f"installed mosaic-{name} alone: {mosaic} + {others}; scripts {scripts or 'none'}", flush=True)
    return problems


def _script_problems(name: str, scripts: list[str], cwd: Path, env: dict[str, str]) -> list[str]:
    """Each console script runs `--help` with exit 0 and prints its usage."""
    problems: list[str] = []
    for script in scripts:
        proc = subprocess.run([script, "--help"], cwd=cwd, env=env, text=True, capture_output=True,
                              timeout=120)
        if proc.returncode != 0 or not proc.stdout.strip():
            problems.append(f"{name}: `{Path(script).name} --help` exited {proc.returncode}: "
                            f"{proc.stderr.strip()[-500:]}")
        else:
            usage = proc.stdout.strip().splitlines()[0][:90]
            print(f"  {Path(script).name} --help: exit 0, {usage}", flush=True)
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=workspace.ROOT / "dist")
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    dirs = {k: out / k for k in ("sdist", "wheelhouse", "thirdparty")}
    for d in dirs.values():  # only the three directories this script owns, never the rest of --out
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    uv = _uv()
    start = time.monotonic()
    artifacts = build_all(uv, dirs["sdist"], dirs["wheelhouse"])
    built = time.monotonic()
    files = sorted(str(p) for pair in artifacts.values() for p in pair)
    twine = _run([sys.executable, "-m", "twine", "--no-color", "check", "--strict", *files])
    sys.stdout.write(twine.stdout)
    print(f"twine check --strict: {len(files)} artifacts passed", flush=True)
    problems, requirements = static_problems(artifacts)
    problems += fetch_thirdparty(requirements, dirs["thirdparty"])
    checked = time.monotonic()
    if not problems:
        with tempfile.TemporaryDirectory(prefix="mosaic-build-") as tmp:
            for name, (_, wheel) in artifacts.items():
                local = (dirs["wheelhouse"], dirs["thirdparty"])
                problems += install_alone(uv, name, wheel, local, Path(tmp))
    done = time.monotonic()
    print(f"times: build {built - start:.1f}s, checks {checked - built:.1f}s, installs {done - checked:.1f}s")
    for p in problems:
        print(f"PROBLEM: {p}")
    if problems:
        return 1
    print(f"all {len(artifacts)} packages: built, checked, installed alone; wheelhouse {dirs['wheelhouse']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
