"""The fixture extension on the real Pi 0.85.1 (issue 33): the pin with the fixture accepts the install, and
why the seal wants jiti's cache off (``check_fixture_env``): with the cache on, a file planted in jiti's cache
runs in place of the fixture whose path and sha256 the seal checked."""

from __future__ import annotations

from pathlib import Path

from mosaic.pi_rpc import check_pin, sealed_engine_argv
from mosaic.pi_rpc.seal import FIXTURE_EXTENSION_ENV, FIXTURE_EXTENSION_PATH, check_fixture_env
from mosaic.pi_rpc.testing import Script, run_normalized
from mosaic.pi_rpc.testing.conformance import Engine, real_engine
from mosaic.pi_rpc.testing.dialogs import dialog_prompt
from mosaic.pi_rpc.testing.script import answer, cmd, settled, wait


def test_the_pin_with_the_fixture_accepts_the_install(pi_dir: Path) -> None:
    assert check_pin(pi_dir, fixture_extension=True) is None
    argv = sealed_engine_argv(pi_dir, "/tmp/x/s.jsonl", fixture_extension=True)
    assert argv[-2:] == ["--extension", FIXTURE_EXTENSION_PATH]


CONFIRM = Script("fixture-confirm", (cmd("p1", "prompt", message=dialog_prompt("confirm")),
                                     wait(type="extension_ui_request"), answer(confirmed=True), settled()),
                 fixture_extension=True)


def _tool_text(engine: Engine, tmp_path: Path) -> str:
    transcript = run_normalized(CONFIRM, engine, scratch_parent=str(tmp_path))
    ends = [r for r in transcript["records"] if r.get("type") == "tool_execution_end"]
    assert len(ends) == 1
    text: str = ends[0]["result"]["content"][0]["text"]
    return text


def test_a_planted_jiti_cache_file_runs_in_place_of_the_fixture_unless_the_cache_is_off(
        pi_dir: Path, tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    real = real_engine(pi_dir)
    cached = Engine("real", real.command, real=True, env=(("JITI_FS_CACHE", "true"), ("TMPDIR", str(tmpdir))))
    assert check_fixture_env(dict(cached.env)) is not None  # the seal refuses this environment
    assert _tool_text(cached, tmp_path) == "confirm answered true"
    files = list((tmpdir / "jiti").iterdir())
    assert len(files) == 1 and files[0].suffix == ".mjs"  # jiti kept the transpiled fixture
    planted = files[0].read_text().replace("answered", "PLANTED")
    files[0].write_text(planted)  # other code, the trailer naming the fixture's source hash kept
    assert _tool_text(cached, tmp_path) == "confirm PLANTED true"  # the planted file ran
    # With the seal's environment the cache is not read (nor written): the fixture's own bytes run.
    sealed = Engine("real", real.command, real=True, env=(("TMPDIR", str(tmpdir)),))
    assert check_fixture_env({**FIXTURE_EXTENSION_ENV, **dict(sealed.env)}) is None
    assert _tool_text(sealed, tmp_path) == "confirm answered true"
    assert [f.name for f in (tmpdir / "jiti").iterdir()] == [files[0].name]
