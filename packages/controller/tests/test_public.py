"""The package's public face: a short top level, named public modules for the rest, one object per name.

What runs a controller (the controller, its placement and engine, the hooks, the grants, the bounds, the
refusal) is ``mosaic.controller.__all__``; everything else public is in a named module (README "Public
modules"). Every public module has ``__all__`` and a ``__dir__`` that lists exactly it, and every name in it
resolves. A name two public modules export is the same object in both. Importing the package loads none of
its modules.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import mosaic.controller

PACKAGE = Path(mosaic.controller.__file__).parent
MODULES = ("access", "cli", "client", "core", "drift", "engines", "engines.claude", "engines.pi", "lifecycle", "plain", "protocol",
           "route", "runtime", "server", "tables", "testing")
PUBLIC = ["mosaic.controller", *(f"mosaic.controller.{m}" for m in MODULES)]


def test_the_public_modules_are_every_module_without_an_underscore() -> None:
    # A public folder is a public module (its `__init__`); its own public modules are public too.
    found = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and not any(part.startswith("_") for part in parts):
            found.add(".".join(parts))
    assert found == set(MODULES)


@pytest.mark.parametrize("name", PUBLIC)
def test_each_public_module_lists_what_it_exports_and_dir_says_exactly_that(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported and len(exported) == len(set(exported)), name
    assert dir(module) == sorted(exported)
    for attr in exported:
        assert not attr.startswith("_"), attr
        getattr(module, attr)


def test_the_top_level_is_short_and_says_what_runs_a_controller() -> None:
    top = set(mosaic.controller.__all__)
    assert len(top) <= 10
    assert {"LaunchingController", "Placement", "PiSpec", "Grants", "ControlRefusal"} <= top


def test_a_name_two_modules_export_is_one_object() -> None:
    homes: dict[str, tuple[str, object]] = {}
    for name in PUBLIC:
        module = importlib.import_module(name)
        for attr in module.__all__:
            value = getattr(module, attr)
            if attr in homes:
                assert homes[attr][1] is value, f"{attr}: {homes[attr][0]} and {name} differ"
            homes[attr] = (name, value)


def _mosaic_modules_after(module: str, names: str = "") -> list[str]:
    """The `mosaic.` modules a fresh interpreter holds after `import <module>` (or `from <module> import <names>`),
    sorted."""
    load = f"from {module} import {names}" if names else f"import {module}"
    code = f"import sys\n{load}\nprint(*sorted(m for m in sys.modules if m.startswith('mosaic.')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()


def test_importing_the_package_loads_none_of_its_modules() -> None:
    assert [m for m in _mosaic_modules_after("mosaic.controller") if m.startswith("mosaic.controller.")] == []


def test_the_client_library_loads_none_of_the_server_side() -> None:
    # A terminal imports the client; it must not pay for (or depend on) the core, the server, the lifecycle,
    # the cohort, the claim or the engine link. Through this facade it loads the facade, the client package
    # (mosaic-controller-client: its own modules, the method and refusal tables it shares with the server)
    # and safe-open's refusal base and ids below it.
    loaded = _mosaic_modules_after("mosaic.controller.client", "*")
    allowed = ("mosaic.controller", "mosaic.controller.client", "mosaic.safe_open", "mosaic.safe_open._refusal",
               "mosaic.safe_open.ids", "mosaic.safe_open._ids")
    stray = [m for m in loaded if m not in allowed and not m.startswith("mosaic.controller_client")]
    assert stray == [], stray
    assert "mosaic.controller_client._transcript" in loaded  # the probe sees the client's own modules
    # Issue 34: the client alone loads neither the transcript nor the value types' dataclasses (until used).
    alone = _mosaic_modules_after("mosaic.controller.client", "ControllerClient")
    assert "mosaic.controller_client._client" in alone
    assert "mosaic.controller_client._transcript" not in alone and "mosaic.controller_client._values" not in alone


def test_the_client_facade_the_protocol_and_the_refusal_are_the_client_packages_objects() -> None:
    """Issue 31: the client is its own distribution; what the controller shows of it is the same objects, so
    a client catches exactly what the server raises and validates exactly what it sends."""
    import mosaic.controller_client as client_package  # noqa: PLC0415

    facade = importlib.import_module("mosaic.controller.client")
    protocol = importlib.import_module("mosaic.controller.protocol")
    for name in facade.__all__:
        assert getattr(facade, name) is getattr(client_package, name), name
    for name in set(protocol.__all__) & set(client_package.__all__):
        assert getattr(protocol, name) is getattr(client_package, name), name
    assert mosaic.controller.ControlRefusal is client_package.ControlRefusal
