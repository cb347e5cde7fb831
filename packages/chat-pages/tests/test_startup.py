"""Start-up cost: `import mosaic.chat_pages` and `mosaic-read --help` load neither the reader's
parser nor the server's asyncio nor HTTP; each public name still resolves, on first use, to the object its
module defines. (The milliseconds are measured in `nox -s bench`, never asserted here.)"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import mosaic.chat_pages as chat_pages

HEAVY = ("asyncio", "ssl", "http.client", "urllib.request", "concurrent.futures", "mosaic.pi_format",
         "mosaic.safe_open", "mosaic.chat_pages._reader", "mosaic.chat_pages._server")


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_importing_the_package_loads_nothing_heavy() -> None:
    loaded = _loaded_after("import mosaic.chat_pages")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_help_of_the_command_line_loads_nothing_heavy() -> None:
    code = ("import io, contextlib\nfrom mosaic.chat_pages.cli import main\n"
            "buf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):\n    main(['--help'])\n"
            "assert 'mosaic-read' in buf.getvalue()")
    loaded = _loaded_after(code)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


PUBLIC_MODULES = ("cli", "guard", "parts", "reader", "server", "sources", "testing")


def test_every_public_name_resolves_to_its_modules_object() -> None:
    """Each public module lists what it holds (`__all__`, and `dir()` shows exactly that), every name resolves,
    and a name means one thing wherever the package names it: the top level's names are the same objects as
    the public modules'."""
    seen: dict[str, object] = {}
    for short in PUBLIC_MODULES:
        module = importlib.import_module(f"mosaic.chat_pages.{short}")
        assert dir(module) == sorted(module.__all__), short
        for name in module.__all__:
            value = getattr(module, name)
            assert seen.setdefault(name, value) is value, f"{name} means two things"
    for name in chat_pages.__all__:
        assert getattr(chat_pages, name) is seen[name], name
    assert dir(chat_pages) == sorted(chat_pages.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        chat_pages.no_such_name  # noqa: B018 - the lookup is the test
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("an unknown name resolved")
