"""Run by ci/build.py inside each fresh virtualenv (`python -I`, stdlib only): report what is installed there.

Argument: a JSON list of the Mosaic module names (chat_pages, ...) of every package of the repository. Prints
one JSON object: every distribution installed, with the files and console scripts of each Mosaic one; for
each Mosaic module, where it imports from (or that it cannot be found: a package outside the closure must
not be importable from anywhere, the repository included).
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import importlib.metadata as md
import importlib.util
import json
import sys
import sysconfig
from pathlib import Path


def _hash(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _dist_files(dist: md.Distribution, site: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in dist.files or []:
        rel = Path(str(f))
        if rel.parts[0].endswith(".dist-info") or "__pycache__" in rel.parts:
            continue
        path = Path(str(dist.locate_file(f))).resolve()
        if not path.is_relative_to(site):
            continue  # a console-script launcher in bin/: the installer wrote it, the wheel only names it
        out[path.relative_to(site).as_posix()] = _hash(path)
    return out


def main() -> None:
    modules: list[str] = json.loads(sys.argv[1])
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    dists = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        entry: dict[str, object] = {"version": dist.version}
        if name.lower().replace("_", "-").startswith("mosaic-"):
            entry["files"] = _dist_files(dist, site)
            entry["scripts"] = sorted(ep.name for ep in dist.entry_points if ep.group == "console_scripts")
            entry["installer"] = (dist.read_text("INSTALLER") or "").strip()
        dists[name] = entry
    imports: dict[str, str | None] = {}
    for mod in modules:
        spec = importlib.util.find_spec(f"mosaic.{mod}") if importlib.util.find_spec("mosaic") else None
        if spec is None:
            imports[mod] = None
            continue
        module = importlib.import_module(f"mosaic.{mod}")
        imports[mod] = str(Path(str(module.__file__)).resolve())
    print(json.dumps({"site": str(site), "dists": dists, "imports": imports}))


if __name__ == "__main__":
    main()
