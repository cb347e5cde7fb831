"""The checks of `nox -s build` (ci/buildcheck.py, ci/build.py) reject each kind of bad artifact: shown on
made-up names, metadata and file lists (the real artifacts are built and checked by `nox -s build`)."""

from __future__ import annotations

import io
import pathlib
import sys
import zipfile

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import build  # noqa: E402
import buildcheck  # noqa: E402
import facades  # noqa: E402
import workspace  # noqa: E402

META = """Metadata-Version: 2.4
Name: mosaic-chat-pages
Version: 0.1.0
Requires-Python: >=3.11
Requires-Dist: mosaic-pi-format
Requires-Dist: Mosaic_Safe.Open>=0.1
Requires-Dist: cffi>=1.17
Requires-Dist: mosaic-pi-rpc; extra == 'test'
Requires-Dist: pytest>=8; extra == "test"
Description-Content-Type: text/markdown

# mosaic-chat-pages
"""


def test_the_closure_check_rejects_an_extra_mosaic_package() -> None:
    installed = ["mosaic-chat-pages", "mosaic_pi_format", "mosaic-claude-format", "Mosaic-Safe-Open", "mosaic-pi-rpc",
                 "cffi"]
    problems = buildcheck.closure_problems("chat-pages", installed, workspace.closure("chat-pages"))
    assert len(problems) == 1 and "installed mosaic-pi-rpc" in problems[0], problems


def test_the_closure_check_rejects_a_missing_declared_package() -> None:
    problems = buildcheck.closure_problems("chat-pages", ["mosaic-chat-pages", "mosaic-safe-open",
                                                          "mosaic-claude-format", "cffi"],
                                           workspace.closure("chat-pages"))
    assert len(problems) == 1 and "mosaic-pi-format" in problems[0], problems


def test_the_closure_check_accepts_exactly_the_closure_in_any_spelling() -> None:
    installed = ["mosaic_chat_pages", "Mosaic.Pi-Format", "Mosaic_Claude.Format", "mosaic-safe-open", "cffi",
                 "pycparser"]
    assert buildcheck.closure_problems("chat-pages", installed, workspace.closure("chat-pages")) == []


def test_extras_only_requirements_are_not_runtime_ones() -> None:
    meta = buildcheck.parse_metadata(META)
    assert buildcheck.mosaic_requirements(meta) == {"pi-format", "safe-open"}
    assert buildcheck.thirdparty_requirements(meta) == ["cffi>=1.17"]


def test_metadata_that_disagrees_with_pyproject_is_rejected() -> None:
    meta = buildcheck.parse_metadata(META.replace("text/markdown", "text/x-rst"))
    problems = buildcheck.metadata_problems("chat-pages", meta, "0.2.0", {"safe-open"},
                                            {"mosaic-read": "mosaic.chat_pages._cli:main"}, {})
    text = "\n".join(problems)
    for what in ("version '0.1.0'", "text/x-rst", "requires mosaic", "console scripts"):
        assert what in text, (what, problems)
    assert len(problems) == 4, problems


def test_metadata_that_matches_pyproject_passes() -> None:
    meta = buildcheck.parse_metadata(META)
    scripts = {"mosaic-read": "mosaic.chat_pages._cli:main"}
    assert buildcheck.metadata_problems("chat-pages", meta, "0.1.0", {"safe-open", "pi-format"},
                                        scripts, scripts) == []


def test_console_scripts_are_read_from_entry_points_only_in_their_section() -> None:
    text = "[gui_scripts]\nmosaic-gui = a:b\n\n[console_scripts]\nmosaic-read = mosaic.chat_pages._cli:main\n"
    assert buildcheck.console_scripts(text) == {"mosaic-read": "mosaic.chat_pages._cli:main"}


def test_a_wheel_missing_a_data_file_or_holding_a_stranger_is_rejected() -> None:
    sources = {"mosaic/cgroup_cohort/__init__.py", "mosaic/cgroup_cohort/cohort_proof.schema.json",
               "mosaic/cgroup_cohort/py.typed"}
    wheel = ["mosaic/cgroup_cohort/__init__.py", "mosaic/cgroup_cohort/py.typed",
             "mosaic/cgroup_cohort/x.pyc", "mosaic_cgroup_cohort-0.1.0.dist-info/METADATA"]
    problems = buildcheck.wheel_file_problems("cgroup-cohort", wheel, sources)
    assert len(problems) == 2, problems
    assert "cohort_proof.schema.json is in src/ but not in the wheel" in problems[0]
    assert "x.pyc, which is no source file" in problems[1]
    full = [*wheel[:2], "mosaic/cgroup_cohort/cohort_proof.schema.json", wheel[3]]
    assert buildcheck.wheel_file_problems("cgroup-cohort", full, sources) == []


def test_an_sdist_without_its_readme_is_rejected() -> None:
    names = ["mosaic_x-0.1.0", "mosaic_x-0.1.0/pyproject.toml", "mosaic_x-0.1.0/PKG-INFO",
             "mosaic_x-0.1.0/src/mosaic/x/__init__.py"]
    assert buildcheck.sdist_problems("x", names) == ["x: the sdist has no README.md"]
    assert buildcheck.sdist_problems("x", [*names, "mosaic_x-0.1.0/README.md"]) == []


def test_installed_bytes_must_be_the_wheelhouse_wheels() -> None:
    a, b = buildcheck.file_hash(b"a"), buildcheck.file_hash(b"b")
    record = {"mosaic/x/__init__.py": a, "mosaic/x/data.json": a}
    assert buildcheck.installed_bytes_problems("x", record, dict(record)) == []
    changed = buildcheck.installed_bytes_problems("x", record, {**record, "mosaic/x/data.json": b})
    assert changed == ["x: installed mosaic/x/data.json differs from the wheelhouse wheel's bytes"]
    extra = buildcheck.installed_bytes_problems("x", record, {**record, "mosaic/x/evil.py": a})
    assert extra == ["x: mosaic/x/evil.py is installed but is not in the wheelhouse wheel"]
    missing = buildcheck.installed_bytes_problems("x", record, {"mosaic/x/__init__.py": a})
    assert missing == ["x: mosaic/x/data.json of the wheelhouse wheel is not installed"]


def test_record_hashes_leave_out_dist_info_and_unhashed_entries() -> None:
    h = buildcheck.file_hash(b"print()\n")
    record = (f"mosaic/x/__init__.py,{h},8\n\"mosaic/x/a,b.json\",{h},8\n"
              "mosaic_x-0.1.0.dist-info/METADATA,sha256=zz,3\nmosaic_x-0.1.0.dist-info/RECORD,,\n")
    assert buildcheck.record_hashes(record) == {"mosaic/x/__init__.py": h, "mosaic/x/a,b.json": h}


def test_read_wheel_finds_metadata_scripts_and_record() -> None:
    buf = io.BytesIO()
    h = buildcheck.file_hash(b"")
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("mosaic/chat_pages/py.typed", b"")
        zf.writestr("mosaic_chat_pages-0.1.0.dist-info/METADATA", META)
        zf.writestr("mosaic_chat_pages-0.1.0.dist-info/entry_points.txt",
                    "[console_scripts]\nmosaic-read = m:f\n")
        zf.writestr("mosaic_chat_pages-0.1.0.dist-info/RECORD", f"mosaic/chat_pages/py.typed,{h},0\n")
    names, meta, entry_points, record = buildcheck.read_wheel(buf)
    assert meta["Name"] == "mosaic-chat-pages" and "mosaic/chat_pages/py.typed" in names
    assert buildcheck.console_scripts(entry_points) == {"mosaic-read": "m:f"}
    assert record == {"mosaic/chat_pages/py.typed": h}


def test_a_mosaic_wheel_fetched_from_pypi_is_rejected() -> None:
    files = ["cffi-2.1.1-cp311-cp311-manylinux2014_x86_64.whl", "pycparser-3.12-py3-none-any.whl",
             "Mosaic_Pi_Format-9.9-py3-none-any.whl", "mosaicism-1.0-py3-none-any.whl"]
    problems = buildcheck.thirdparty_problems(files)
    assert len(problems) == 1 and problems[0].startswith("Mosaic_Pi_Format-9.9"), problems


def test_the_install_consults_no_index_and_no_network() -> None:
    cmd = build.install_command("uv", "/v/bin/python", pathlib.Path("/w"), pathlib.Path("/t"), "chat-pages",
                                pathlib.Path("/c"))
    assert {"--no-index", "--offline", "--no-config"} <= set(cmd)
    assert not any(a.startswith(("--index", "--extra-index", "--default-index", "-i")) for a in cmd), cmd
    links = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--find-links"]
    assert links == ["/w", "/t"] and cmd[-1] == "mosaic-chat-pages"


def test_the_install_environment_drops_uv_and_pip_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_INDEX_URL", "https://example.invalid/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "/elsewhere")
    env = build._clean_env(X="1")
    assert "UV_INDEX_URL" not in env and "PIP_FIND_LINKS" not in env and env["X"] == "1"


def test_a_module_from_the_checkout_or_outside_the_closure_is_rejected() -> None:
    site = pathlib.Path("/v/lib/python3.11/site-packages")
    ok = {"safe-open": f"{site}/mosaic/safe_open/__init__.py",
          "pi-format": f"{site}/mosaic/pi_format/__init__.py", "pi-rpc": None}
    assert buildcheck.import_problems("pi-format", ["safe-open", "pi-format"], ok, site) == []
    checkout = {**ok, "safe-open": "/repo/packages/safe-open/src/mosaic/safe_open/__init__.py"}
    problems = buildcheck.import_problems("pi-format", ["safe-open", "pi-format"], checkout, site)
    assert len(problems) == 1 and "mosaic.safe_open imports from /repo/" in problems[0], problems
    missing = {**ok, "safe-open": None}
    problems = buildcheck.import_problems("pi-format", ["safe-open", "pi-format"], missing, site)
    assert len(problems) == 1 and "mosaic.safe_open imports from None" in problems[0], problems
    leak = {**ok, "pi-rpc": f"{site}/mosaic/pi_rpc/__init__.py"}
    problems = buildcheck.import_problems("pi-format", ["safe-open", "pi-format"], leak, site)
    assert len(problems) == 1 and "mosaic.pi_rpc is importable" in problems[0], problems


def test_the_readme_names_exactly_the_thirdparty_wheels_fetched_and_how_many() -> None:
    readme = (workspace.ROOT / "README.md").read_text(encoding="utf-8")
    fetched = ["cffi-1.17.1-cp311-cp311-manylinux_2_17_x86_64.whl", "pycparser-2.22-py3-none-any.whl",
               "msgspec-0.19.0-cp311-cp311-manylinux_2_17_x86_64.whl", "prompt_toolkit-3.0.52-py3-none-any.whl",
               "wcwidth-0.2.13-py2.py3-none-any.whl"]
    assert buildcheck.readme_thirdparty_problems(readme, fetched) == []
    assert buildcheck.readme_thirdparty_problems(readme, fetched[:2]) == [
        "README.md names the dist/thirdparty wheels ['cffi', 'msgspec', 'prompt-toolkit', 'pycparser', 'wcwidth'], "
        "but the build fetched ['cffi', 'pycparser']"]
    old = ("- `dist/thirdparty/`: the wheels of the third-party runtime requirements and of what they require "
           "(today two: `cffi`, `pycparser`), fetched")
    assert buildcheck.readme_thirdparty_problems(old, fetched[:2]) == []
    assert buildcheck.readme_thirdparty_problems(old.replace("two", "five"), fetched[:2]) == [
        "README.md says 5 dist/thirdparty wheels and names 2"]
    assert buildcheck.readme_thirdparty_problems("no sentence", fetched) == [
        "README.md: the sentence naming the dist/thirdparty wheels is missing"]


def test_the_readme_names_every_direct_thirdparty_runtime_requirement_of_the_eight_packages() -> None:
    from packaging.requirements import Requirement  # noqa: PLC0415
    from packaging.utils import canonicalize_name  # noqa: PLC0415

    said = buildcheck.readme_thirdparty_names((workspace.ROOT / "README.md").read_text(encoding="utf-8"))
    assert said is not None
    listed = {canonicalize_name(n) for n in said[1]}
    direct = {canonicalize_name(Requirement(r).name) for name in workspace.PACKAGES
              for r in workspace.pyproject(name)["project"].get("dependencies", [])
              if not buildcheck.is_mosaic(Requirement(r).name)}
    assert direct and direct <= listed, direct - listed


def test_every_console_script_points_at_a_public_module() -> None:
    found = 0
    for name in workspace.PACKAGES:
        for script, target in workspace.pyproject(name)["project"].get("scripts", {}).items():
            module, _, function = target.partition(":")
            parts = module.split(".")
            assert not any(p.startswith("_") for p in parts) and not function.startswith("_"), (script, target)
            path = workspace.package_dir(name) / "src" / pathlib.Path(*parts).with_suffix(".py")
            assert path.is_file(), (script, path)
            # The module's __all__ as ci/facades.py reads it: a literal list, or a facade's `__all__ += _x.__all__`.
            modules = facades.read_package(name)
            exported = facades.exports(modules[".".join(parts[2:])], modules)
            assert exported is not None and function in exported, (script, target)
            found += 1
    assert found == 4  # mosaic-read, mosaic-claims, mosaic-controller, mosaic-terminal
