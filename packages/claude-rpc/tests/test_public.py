"""The package's public face: a short top level, named public modules for the rest, one object per name.

What a launcher needs (the install, the pin check, the sealed launch, the link, the refusal) is
``mosaic.claude_rpc.__all__``; everything else public is in a named module (README "API"). Every public
module has ``__all__`` and a ``__dir__`` that lists exactly it, and every name in it resolves. A name two
public modules export is the same object in both. Importing the package loads neither subprocess nor the
installer; importing it and its testing module loads no cffi.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import mosaic.claude_rpc

PACKAGE = Path(mosaic.claude_rpc.__file__).parent
TOP = ["pin", "install", "sources", "seal", "link", "framing", "resume", "testing"]
TESTING = ["model_server", "drive", "recordings", "trees", "netns", "smoke", "replay", "fake_engine", "fake_control",
           "conformance"]
PUBLIC = ["mosaic.claude_rpc", *(f"mosaic.claude_rpc.{m}" for m in TOP),
          *(f"mosaic.claude_rpc.testing.{m}" for m in TESTING)]


def test_the_public_modules_are_every_module_without_an_underscore() -> None:
    found = {f"mosaic.claude_rpc.{p.stem}" for p in PACKAGE.glob("*.py") if not p.stem.startswith("_")}
    found |= {f"mosaic.claude_rpc.testing.{p.stem}" for p in (PACKAGE / "testing").glob("*.py")
              if not p.stem.startswith("_")}
    found.add("mosaic.claude_rpc.testing")
    assert found == set(PUBLIC[1:])


@pytest.mark.parametrize("name", PUBLIC)
def test_each_public_module_lists_what_it_exports_and_dir_says_exactly_that(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported and len(exported) == len(set(exported)), name
    assert dir(module) == sorted(exported)
    for attr in exported:
        assert not attr.startswith("_"), attr
        getattr(module, attr)


def test_the_top_level_is_short_and_says_what_a_launcher_needs() -> None:
    assert set(mosaic.claude_rpc.__all__) == {"ClaudeInstall", "ClaudeRpcRefusal", "check_binary", "check_pin",
                                               "engine_binary", "ensure_claude", "ClaudeEngineLink", "ClaudeLinkCore",
                                               "SealedLaunch", "check_launch", "seal_launch"}


def test_a_name_two_modules_export_is_one_object() -> None:
    homes: dict[str, tuple[str, object]] = {}
    for name in PUBLIC:
        module = importlib.import_module(name)
        for attr in set(module.__all__) - {"main"}:  # each runnable module has its own entry point
            value = getattr(module, attr)
            if attr in homes:
                assert homes[attr][1] is value, f"{attr}: {homes[attr][0]} and {name} differ"
            homes[attr] = (name, value)


def test_importing_the_package_loads_no_subprocess_machinery_and_no_cffi() -> None:
    code = ("import sys, mosaic.claude_rpc; a = 'subprocess' in sys.modules; import mosaic.claude_rpc.testing; "
            "print(a, '_cffi_backend' in sys.modules, 'mosaic.claude_rpc._install' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False", "False"]
