"""mosaic-claims: look at a claim root, and the documented way out of a reservation that will not launch
(also `python -m mosaic.writer_claim`).

    mosaic-claims list --claim-root DIR [--json]
    mosaic-claims show --claim-root DIR CLAIM_ID [--chain] [--json]
    mosaic-claims release-reservation --claim-root DIR ELIGIBILITY_ID [--json]

`list` reads every key directory's head and prints one line per pair: the claim, the pair state, the
seat and session keys, the unit name, the eligibility (a recovery reservation) and whether its owner is
alive; unreadable heads are listed with why. `show` prints a claim's pair in full (`--chain`: every
revision of both keys). Neither writes anything.

`release-reservation` is the operator's way out of a recovery reservation that will never be launched
(README "Recovery reservations"; the controller README's "Launch": K18, the leaf moved; or a recovering
controller or launcher that crashed): it takes the reservation over for that eligibility ID (writer-claim
`take_over`, which has one winner: a launcher still on its way to it is refused, so no engine can start
under it) and releases it with the no-unit proof of a claim that never spawned (both keys stopped). The
controller's eligibility record, if one was written, stays unused; a launch with it is refused
(`eligibility`: the claim is no longer an untaken reservation).

Ids are printed in full (they are what the commands take). `--json` prints one JSON object instead:
`{"ok": true, ...}`, or `{"ok": false, "refusal": {code, reconcile, message}}` (a writer-claim or safe-open
refusal, or this command's own `not-found`). The claim root is an argument; nothing has a default path.
Options are accepted before or after the subcommand.

Exit status (as mosaic-read's): 0 done; 1 refused (one line: the code and why); 2 a usage error (one
line); 4 the output was closed before everything was written (`| head`: quietly, no line); 70 a crash (a
bug: one line; MOSAIC_TRACEBACK=1 shows the traceback); 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # imported where a command needs them, so --help and --version stay quick
    from ._core import KeyObservation, PairObservation
    from ._model import KeyKind
    from ._store import ClaimStore

# What mosaic.writer_claim.cli offers (it star-imports this list).
__all__ = ["EXIT_CRASH", "EXIT_INTERRUPTED", "EXIT_OUTPUT_CLOSED", "EXIT_REFUSED", "EXIT_USAGE", "main"]

PROG = "mosaic-claims"
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_OUTPUT_CLOSED = 4
EXIT_CRASH = 70
EXIT_INTERRUPTED = 130


class NotFound(Exception):
    """What was asked for is not in the claim root (code `not-found`)."""


def _version() -> str:
    try:
        return metadata.version("mosaic-writer-claim")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """A usage error in one line (argparse prints the whole usage first)."""
        self.exit(EXIT_USAGE, f"{PROG}: {message} (see {PROG} --help)\n")


def _parser() -> argparse.ArgumentParser:
    def common(suppress: bool) -> _Parser:
        """The options every subcommand takes, before or after it (after it, an option left out does not
        undo one given before: its default is SUPPRESS there)."""
        p = _Parser(add_help=False)
        default: Any = argparse.SUPPRESS if suppress else None
        p.add_argument("--version", action="version", version=f"{PROG} {_version()}")
        p.add_argument("--claim-root", default=default, help="the claim root (required; no default)")
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS if suppress else False,
                       help="print one JSON object")
        return p

    ap = _Parser(prog=PROG, parents=[common(False)], description=__doc__,
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True, metavar="{list,show,release-reservation}",
                            parser_class=_Parser)
    sub.add_parser("list", parents=[common(True)], help="every pair in the claim root, one line each")
    show = sub.add_parser("show", parents=[common(True)], help="one claim's pair in full")
    show.add_argument("claim_id", help="the claim ID (claim- and 32 hex)")
    show.add_argument("--chain", action="store_true", help="every revision of both keys, oldest first")
    release = sub.add_parser("release-reservation", parents=[common(True)],
                             help="release a recovery reservation that will not be launched")
    release.add_argument("eligibility_id", help="the eligibility ID the reservation carries")
    return ap


# ---------------------------------------------------------------------------------------------- reading


def _key_dirs(store: ClaimStore) -> list[str]:
    import re  # noqa: PLC0415

    pattern = re.compile(r"(seat|session)-[0-9a-f]{64}")
    return sorted(n for n in os.listdir(store.root.fd) if pattern.fullmatch(n))


def _head(store: ClaimStore, dirname: str) -> KeyObservation:
    kind: KeyKind = "seat" if dirname.startswith("seat-") else "session"
    return store._observe_key(kind, dirname, store._dir_fd(dirname, create=False))


def _pairs(store: ClaimStore) -> tuple[list[PairObservation], list[KeyObservation]]:
    """Every pair a readable head names (each once, seat key first) and every unreadable head."""
    from ._core import Unreadable  # noqa: PLC0415

    seen: set[tuple[str, str]] = set()
    pairs, unreadable = [], []
    for dirname in _key_dirs(store):
        obs = _head(store, dirname)
        if isinstance(obs.head, Unreadable):
            unreadable.append(obs)
            continue
        rev = obs.revision
        if rev is None or (rev.seat.dirname, rev.session.dirname) in seen:
            continue
        seen.add((rev.seat.dirname, rev.session.dirname))
        pairs.append(store.observe(rev.seat, rev.session))
    return pairs, unreadable


def _alive(store: ClaimStore, obs: KeyObservation) -> bool | None:
    from ._host import ProcLiveness  # noqa: PLC0415

    rev = obs.revision
    if rev is None or rev.host != store.host:
        return None  # another machine's or boot's owner: not asked here
    return ProcLiveness().owner_alive(rev.owner)


def _key_json(store: ClaimStore, obs: KeyObservation) -> dict[str, Any]:
    from ._codec import revision_to_json  # noqa: PLC0415
    from ._core import Unreadable  # noqa: PLC0415

    out: dict[str, Any] = {"dirname": obs.dirname, "headNumber": obs.head_number, "held": obs.held}
    if isinstance(obs.head, Unreadable):
        out["unreadable"] = obs.head.reason
    elif obs.revision is not None:
        out["head"] = revision_to_json(obs.revision)
        out["ownerAlive"] = _alive(store, obs)
    return out


def _pair_json(store: ClaimStore, pair: PairObservation) -> dict[str, Any]:
    state = pair.state
    return {"state": state.value if state is not None else "free", "free": pair.free,
            "seat": _key_json(store, pair.seat), "session": _key_json(store, pair.session)}


def _pair_line(store: ClaimStore, pair: PairObservation) -> str:
    rev = pair.seat.revision or pair.session.revision
    assert rev is not None
    state = pair.state.value if pair.state is not None else "free"
    owner = {True: "alive", False: "gone", None: "unknown"}[_alive(store, pair.seat if pair.seat.revision else
                                                                    pair.session)]
    claims = {r.claim_id for r in (pair.seat.revision, pair.session.revision) if r is not None}
    parts = [" / ".join(sorted(claims)), state,
             f"seat {rev.seat.seat} of {rev.seat.project}", f"session {rev.session.harness}:{rev.session.session_id}",
             f"unit {rev.unit_name}"]
    if rev.eligibility is not None:
        parts.append(f"eligibility {rev.eligibility.id} {'taken' if rev.eligibility.taken else 'pending'}")
    parts.append(f"owner pid {rev.owner.process.pid} {owner}")
    parts.append(f"r{rev.number} {rev.reason} {rev.published_at}")
    return "  ".join(parts)


def _find_claim(store: ClaimStore, claim_id: str) -> PairObservation:
    for pair in _pairs(store)[0]:
        if any(r is not None and r.claim_id == claim_id for r in (pair.seat.revision, pair.session.revision)):
            return pair
    raise NotFound(f"no key in the claim root has claim {claim_id} at its head")


# --------------------------------------------------------------------------------------------- commands


def cmd_list(store: ClaimStore, args: argparse.Namespace) -> dict[str, Any]:
    pairs, unreadable = _pairs(store)
    if args.json:
        return {"ok": True, "pairs": [_pair_json(store, p) for p in pairs],
                "unreadable": [{"dirname": o.dirname, "headNumber": o.head_number,
                                "reason": getattr(o.head, "reason", "")} for o in unreadable]}
    for pair in pairs:
        _print(_pair_line(store, pair))
    for obs in unreadable:
        _print(f"unreadable  {obs.dirname}  r{obs.head_number}: {getattr(obs.head, 'reason', '')}")
    if not pairs and not unreadable:
        _print(f"no claims in {args.claim_root}")
    return {"ok": True}


def cmd_show(store: ClaimStore, args: argparse.Namespace) -> dict[str, Any]:
    from ._codec import revision_to_json  # noqa: PLC0415
    from ._core import Unreadable  # noqa: PLC0415

    pair = _find_claim(store, args.claim_id)
    out = {"ok": True, "claim": args.claim_id, "pair": _pair_json(store, pair)}
    if args.chain:
        chains = {}
        for obs in pair.keys():
            rev = obs.revision
            key = (rev.seat if obs.key == "seat" else rev.session) if rev is not None else None
            chain = store.read_chain(key) if key is not None else []
            chains[obs.key] = [revision_to_json(r) if not isinstance(r, Unreadable) else
                               {"number": r.number, "unreadable": r.reason} for r in chain]
        out["chains"] = chains
    if not args.json:
        _print(_pair_line(store, pair))
        _print(json.dumps({k: v for k, v in out.items() if k not in ("ok",)}, indent=1, sort_keys=True))
    return out


def cmd_release(store: ClaimStore, args: argparse.Namespace) -> dict[str, Any]:
    from ._model import ProofRef  # noqa: PLC0415
    from ._refusal import ClaimRefusal  # noqa: PLC0415

    wanted = args.eligibility_id
    found = [p for p in _pairs(store)[0] if p.seat.revision is not None and p.seat.revision.eligibility is not None
             and p.seat.revision.eligibility.id == wanted]
    if not found:
        raise ClaimRefusal("eligibility", f"no reservation in the claim root carries eligibility {wanted}")
    rev = found[0].seat.revision
    assert rev is not None
    claim = store.take_over(rev.seat, rev.session, rev.claim_id, eligibility=wanted)
    proof = ProofRef.never_spawned(claim.claim_id, "eligibility released without a launch (mosaic-claims)")
    claim.release(proof)
    if not args.json:
        _print(f"released the reservation of claim {claim.claim_id} for eligibility {wanted}: both keys stopped "
               f"with a no-unit proof (never spawned); a launch with that eligibility is refused from now on")
    return {"ok": True, "claim": claim.claim_id, "eligibility": wanted,
            "proof": {"kind": proof.kind.value, "digest": proof.digest, "detail": dict(proof.detail)}}


def _print(text: str) -> None:
    print(text, flush=True)


def _refusal_json(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "refusal": {"code": code, "reconcile": False, "message": message}}


def main(argv: Sequence[str] | None = None) -> int:
    """Run mosaic-claims; returns the exit status (see the module docstring)."""
    args = _parser().parse_args(argv)
    if args.claim_root is None:
        _parser().error("--claim-root is required (the claim root has no default)")
    try:
        from mosaic.safe_open import Refusal  # noqa: PLC0415

        from ._store import ClaimStore  # noqa: PLC0415

        try:
            with ClaimStore(args.claim_root) as store:
                command = {"list": cmd_list, "show": cmd_show, "release-reservation": cmd_release}[args.command]
                out = command(store, args)
        except Refusal as e:
            out = {"ok": False, "refusal": e.to_dict()}
        except NotFound as e:
            out = _refusal_json("not-found", str(e))
        if args.json:
            _print(json.dumps(out, sort_keys=True))
        elif not out["ok"]:
            refusal = out["refusal"]
            print(f"{PROG}: refused: {refusal['code']}: {refusal['message']}", file=sys.stderr, flush=True)
        return 0 if out["ok"] else EXIT_REFUSED
    except BrokenPipeError:
        # The reader left (`| head`): nothing more to say, and the interpreter's own flush at exit must
        # not fail on the closed pipe either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OUTPUT_CLOSED
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except Exception as e:  # noqa: BLE001 - a crash, said in one line
        first = str(e).splitlines()[0] if str(e) else ""
        print(f"{PROG}: crashed (a bug): {type(e).__name__}: {first}; MOSAIC_TRACEBACK=1 shows the traceback",
              file=sys.stderr, flush=True)
        if os.environ.get("MOSAIC_TRACEBACK"):
            traceback.print_exc()
        return EXIT_CRASH


if __name__ == "__main__":
    sys.exit(main())
