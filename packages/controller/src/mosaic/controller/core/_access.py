"""Who may connect, and what they may do: the peer's credentials, the grants, and the decision. Pure: no I/O
but `Grants.load` (one bounded read of a file the caller names).

The brief's CHAT-03 has one actor, local-operator, guarded only by the socket directory's mode (seeds/003
§1 "Actor", Limit 1). This module makes the controller check every connection itself, as tmux 3.3's
`server-access` does (other users allowed explicitly, read-only or not), with the seed README's refusal
codes ("Refusals": `channel` when the channel is not authenticated, `capability` when the grant lacks the
operation's capability). The rules this file keeps:

1. A connection's peer is what the kernel recorded at connect(2) (`SO_PEERCRED`: the effective uid and
   gid and the pid; `SO_PEERGROUPS`: the supplementary groups, read only when a grant names a gid, the
   only thing that looks at them), read once by the server at accept and never again. The pid names the process in records only: it is never a reason to admit (pids are reused).
2. The owner (the controller's own effective uid) may do everything. A grant cannot narrow it, so a grant
   naming the owner's uid is refused at construction.
3. Anyone else may do exactly the operations the grants list for its uid, for its gid or for any of its
   supplementary groups (the union). No grant at all: the connection is refused `channel` at connect.
   Unknown credentials (the server could not read them) are no grant. Supplementary groups the server
   could not read in full (more than `MAX_PEER_GROUPS`) count as none: a gid grant can then only miss,
   never admit someone it does not name.
4. Every method needs one operation (`METHOD_OPERATIONS`, walked by a test): a grant without it refuses
   `capability`, before anything else about the request is looked at (the seed's check order puts
   capability before generation, controller and the incarnation token). `ping` needs only a connection.
   `issue-confirmation` and `answer-confirmation` need the operation they serve (the `operation` param;
   the named confirmation's operation, either confirmable operation when it names none of this
   connection's); `acquire-recovery-control` needs `force-stop`: recovery control exists so that an
   execution whose controller went away can still be force stopped (K9), and recover needs that stop first.
5. Operations do not imply each other: a client that prompts must also be granted `takeover` (prompts come
   from the controlling connection) and `observe` (the incarnation token every command carries comes from
   observe), so a grant without `observe` is refused as unusable.
6. A grant may have an `id` (a CHAT-01 id) and a `scope`: the conversations it covers (absent: every
   one). A grant covers a controller only where its scope holds: the rights of a connection that said no
   hello are the union of the grants that name its peer and cover this conversation; a peer some grant
   names but none covers here is connected (its channel holds) and every request it makes is refused
   `scope` (`admit`). The seed's `hello` names a grant by its id (`hello`): the owner may name any grant,
   anyone else only one that names it (else `grant`, "no active grant"); from then on the connection may do
   exactly that grant's operations (a subset of its peer's rights: narrowing, never widening), and
   everything it asks is refused `scope` where that grant's scope does not hold.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Annotated, Any, Literal, NamedTuple

import msgspec

from mosaic.controller_client import ControlRefusal

from ._io import ConnId, Peer

__all__ = [
    "ACTOR_NAME",
    "GRANT_ID",
    "MAX_GRANTS_FILE_BYTES",
    "MAX_PEER_GROUPS",
    "METHOD_OPERATIONS",
    "OPERATIONS",
    "SERVED",
    "AccessPolicy",
    "Admission",
    "Grant",
    "Grants",
    "Operation",
    "Peer",
    "actor_record",
    "required_operations",
]

Operation = Literal["observe", "prompt", "takeover", "interrupt", "force-stop", "recover"]
OPERATIONS: tuple[Operation, ...] = ("observe", "prompt", "takeover", "interrupt", "force-stop", "recover")
ALL_OPERATIONS: frozenset[str] = frozenset(OPERATIONS)
CONFIRMABLE: tuple[Operation, ...] = ("force-stop", "recover")  # the protocol's ENUMS' issue-confirmation operations

SERVED = "served"
"""In `METHOD_OPERATIONS`: the method needs the operation it serves (a confirmation's)."""

METHOD_OPERATIONS: Mapping[str, str | None] = MappingProxyType({
    "hello": None,  # names a grant (rule 6): it needs none of its own
    "observe": "observe",
    "ping": None,  # a connection is enough; the server answers it
    "prompt": "prompt",
    "takeover": "takeover",
    "acquire-recovery-control": "force-stop",  # rule 4
    "interrupt": "interrupt",
    "issue-confirmation": SERVED,  # its `operation` param: force-stop or recover
    "answer-confirmation": SERVED,  # the operation of the confirmation it answers
    "force-stop": "force-stop",
    "recover": "recover",
    "approval": "prompt",  # answering the engine's dialog is the controller's turn, as a prompt is (issue 33)
})

ACTOR_NAME = "local-operator"
"""The CHAT-01 actor every client still is (seeds/003 §1 "Actor"): the dedup key's actor. Who that actor
was, as the kernel saw it, is the rest of the actor record (`actor_record`)."""

MAX_PEER_GROUPS = 256  # SO_PEERGROUPS read into 1 KiB (CPython's getsockopt buffer cap): rule 3
MAX_GRANTS_FILE_BYTES = 1 << 20
_ID_MAX = 2**32 - 2  # (uid_t)-1 is "no id" to the kernel


def actor_record(ids: tuple[int, int, int], conn: ConnId) -> dict[str, Any]:
    """The CHAT-01 actor object of schemas/chat-01-control.schema.json (`#/$defs/actor`): the actor's name
    (local-operator) and who it was: uid, gid and pid at connect, and the connection."""
    uid, gid, pid = ids
    return {"name": ACTOR_NAME, "uid": uid, "gid": gid, "pid": pid, "connection": conn}


# ------------------------------------------------------------------------------------------------ grants


_Id = Annotated[int, msgspec.Meta(ge=0, le=_ID_MAX)]


GRANT_ID = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
"""A grant's id, and each conversation of a scope: the CHAT-01 id pattern."""
_GrantId = Annotated[str, msgspec.Meta(pattern=GRANT_ID)]


class _GrantEntry(msgspec.Struct, forbid_unknown_fields=True):
    operations: Annotated[list[Operation], msgspec.Meta(min_length=1)]
    uid: _Id | msgspec.UnsetType = msgspec.UNSET
    gid: _Id | msgspec.UnsetType = msgspec.UNSET
    id: _GrantId | msgspec.UnsetType = msgspec.UNSET
    scope: Annotated[list[_GrantId], msgspec.Meta(min_length=1)] | msgspec.UnsetType = msgspec.UNSET


class _GrantsFile(msgspec.Struct, forbid_unknown_fields=True):
    version: Literal[1]
    grants: list[_GrantEntry]


_DECODER = msgspec.json.Decoder(_GrantsFile)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"a key appears twice in one object: {sorted({k for k in keys if keys.count(k) > 1})}")
    return dict(pairs)


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


GrantKey = tuple[Literal["uid", "gid"], int]


@dataclass(frozen=True)
class Grant:
    """One grant a hello can name (rule 6): its id, whom it names (`kind` uid or gid, `ident`), its
    operations, and its scope (the conversations it covers; None: every one)."""

    grant: str
    kind: Literal["uid", "gid"]
    ident: int
    operations: frozenset[str]
    scope: frozenset[str] | None

    def covers(self, conversation: str) -> bool:
        return self.scope is None or conversation in self.scope

    def names(self, peer: Peer) -> bool:
        if self.kind == "uid":
            return peer.uid == self.ident
        return self.ident == peer.gid or self.ident in (peer.groups or ())


class Admission(NamedTuple):
    """What one connection may do (rules 3 and 6): its `operations`, whether its grant covers this
    controller's conversation (`in_scope`: False, every request is refused `scope`), and the grant its hello
    named (`grant`, with that grant's `scope`; None before a hello)."""

    operations: frozenset[str]
    in_scope: bool = True
    grant: str | None = None
    scope: frozenset[str] | None = None


@dataclass(frozen=True)
class Grants:
    """Who besides the owner may connect, and the operations each may do: per uid (`users`) and per gid
    (`groups`); a grant's id (`ids`: id to its uid or gid) and its scope (`scopes`: uid or gid to the
    conversations it covers; a grant absent there covers every one). `Grants()` grants nothing (owner
    only)."""

    users: Mapping[int, frozenset[str]] = field(default_factory=dict)
    groups: Mapping[int, frozenset[str]] = field(default_factory=dict)
    ids: Mapping[str, GrantKey] = field(default_factory=dict)
    scopes: Mapping[GrantKey, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for kind, table in (("uid", self.users), ("gid", self.groups)):
            for ident, ops in table.items():
                if not isinstance(ident, int) or isinstance(ident, bool) or not 0 <= ident <= _ID_MAX:
                    raise ControlRefusal("configuration", f"grants: {kind} {ident!r} is not a uid or gid")
                _check_operations(f"{kind} {ident}", ops)
        for where, key in [*(("grant " + g, k) for g, k in self.ids.items()),
                           *(("a scope", k) for k in self.scopes)]:
            table = self.users if key[0] == "uid" else self.groups
            if key[1] not in table:
                raise ControlRefusal("configuration", f"grants: {where} names {key[0]} {key[1]}, which has no grant")
        if len(set(self.ids.values())) != len(self.ids):
            raise ControlRefusal("configuration", "grants: one grant has two ids")
        object.__setattr__(self, "users", MappingProxyType({k: frozenset(v) for k, v in self.users.items()}))
        object.__setattr__(self, "groups", MappingProxyType({k: frozenset(v) for k, v in self.groups.items()}))
        object.__setattr__(self, "ids", MappingProxyType(dict(self.ids)))
        object.__setattr__(self, "scopes", MappingProxyType({k: frozenset(v) for k, v in self.scopes.items()}))

    def named(self, grant: str) -> Grant | None:
        """The grant whose id is `grant`, or None (rule 6)."""
        key = self.ids.get(grant)
        if key is None:
            return None
        kind, ident = key
        return Grant(grant, kind, ident, (self.users if kind == "uid" else self.groups)[ident],
                     self.scopes.get(key))

    def covers(self, key: GrantKey, conversation: str | None) -> bool:
        """Whether the grant of `key` covers `conversation` (None: any, the scope not looked at)."""
        scope = self.scopes.get(key)
        return scope is None or conversation is None or conversation in scope

    @classmethod
    def from_json(cls, data: bytes) -> Grants:
        """Decode the grants file format, strictly: ``{"version": 1, "grants": [{"uid": N, "operations":
        [...]}, {"gid": N, "operations": [...], "id": "ops-team", "scope": ["pi-..."]}, ...]}``, each entry
        exactly one of uid or gid (an integer, not a name: names resolve through NSS, ids do not), its
        operations a non-empty list of `OPERATIONS` including observe (rule 5), and optionally its `id`
        (what a hello names) and `scope` (the conversations it covers, rule 6), both CHAT-01 ids; no uid,
        gid or grant id twice, no unknown field, no duplicate key, UTF-8 JSON only. Raises `ControlRefusal`
        ``configuration`` naming what is wrong."""
        try:
            json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicate_keys, parse_constant=_not_json)
            decoded = _DECODER.decode(data)
        except (UnicodeDecodeError, ValueError, msgspec.DecodeError) as exc:
            raise ControlRefusal("configuration", f"grants: {exc}") from None
        users: dict[int, frozenset[str]] = {}
        groups: dict[int, frozenset[str]] = {}
        ids: dict[str, GrantKey] = {}
        scopes: dict[GrantKey, frozenset[str]] = {}
        for n, entry in enumerate(decoded.grants):
            where = f"grants[{n}]"
            if (entry.uid is msgspec.UNSET) == (entry.gid is msgspec.UNSET):
                raise ControlRefusal("configuration", f"{where} must name exactly one of uid or gid")
            if len(set(entry.operations)) != len(entry.operations):
                raise ControlRefusal("configuration", f"{where} lists an operation twice")
            table, ident, kind = ((users, entry.uid, "uid") if not isinstance(entry.uid, msgspec.UnsetType)
                                  else (groups, entry.gid, "gid"))
            assert isinstance(ident, int)
            if ident in table:
                raise ControlRefusal("configuration", f"{where}: {kind} {ident} has another grant already")
            table[ident] = frozenset(entry.operations)
            key: GrantKey = ("uid", ident) if kind == "uid" else ("gid", ident)
            if not isinstance(entry.id, msgspec.UnsetType):
                if entry.id in ids:
                    raise ControlRefusal("configuration", f"{where}: grant id {entry.id!r} is taken already")
                ids[entry.id] = key
            if not isinstance(entry.scope, msgspec.UnsetType):
                scopes[key] = frozenset(entry.scope)
        return cls(users, groups, ids, scopes)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Grants:
        """Read and decode a grants file (`from_json`). The file is a security boundary, so it must be a
        regular file (not a symlink), owned by this uid or root, writable by no one else (as ssh's
        StrictModes asks of authorized_keys), and at most `MAX_GRANTS_FILE_BYTES`. Raises `ControlRefusal`
        ``configuration``."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise ControlRefusal("configuration", f"grants file {os.fspath(path)!r}: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ControlRefusal("configuration", f"grants file {os.fspath(path)!r} is not a regular file")
            if st.st_uid not in (os.geteuid(), 0):
                raise ControlRefusal("configuration", f"grants file {os.fspath(path)!r} is owned by uid "
                                                      f"{st.st_uid}, not by this uid or root")
            if st.st_mode & 0o022:
                raise ControlRefusal("configuration", f"grants file {os.fspath(path)!r} is writable by others "
                                                      f"(mode {stat.S_IMODE(st.st_mode):04o})")
            data = os.read(fd, MAX_GRANTS_FILE_BYTES + 1)
            if len(data) > MAX_GRANTS_FILE_BYTES:
                raise ControlRefusal("configuration", f"grants file {os.fspath(path)!r} is over "
                                                      f"{MAX_GRANTS_FILE_BYTES} bytes")
        finally:
            os.close(fd)
        return cls.from_json(data)

    @property
    def empty(self) -> bool:
        return not self.users and not self.groups


def _check_operations(who: str, ops: Iterable[str]) -> None:
    ops = list(ops)
    unknown = sorted(set(ops) - ALL_OPERATIONS)
    if unknown:
        raise ControlRefusal("configuration", f"grants: {who}: unknown operations {unknown}")
    if not ops:
        raise ControlRefusal("configuration", f"grants: {who} grants no operation")
    if "observe" not in ops:
        raise ControlRefusal("configuration", f"grants: {who} lacks observe, which every other operation needs "
                                              "(the incarnation token comes from observe)")


def owner_uid() -> int:
    """The controller process's effective uid: what SO_PEERCRED reports for its own connections."""
    return os.geteuid()


@dataclass(frozen=True)
class AccessPolicy:
    """The owner and the grants of one controller (rules 2-3). `AccessPolicy()` is owner-only for this
    process's effective uid. Raises `ControlRefusal` ``configuration`` for a grant naming the owner."""

    owner: int = field(default_factory=owner_uid)
    grants: Grants = field(default_factory=Grants)

    def __post_init__(self) -> None:
        if self.owner in self.grants.users:
            raise ControlRefusal("configuration", f"grants: uid {self.owner} is the controller's owner, which may "
                                                  "do everything; a grant cannot narrow it")

    def operations(self, peer: Peer | None) -> frozenset[str] | None:
        """What `peer` may do; None when nothing grants it anything (refused `channel` at connect)."""
        if peer is None:
            return None
        if peer.uid == self.owner:
            return ALL_OPERATIONS
        grants = self.grants
        found = set(grants.users.get(peer.uid, ()))
        for gid in {peer.gid, *(peer.groups or ())}:
            found.update(grants.groups.get(gid, ()))
        return frozenset(found) or None

    def admit(self, peer: Peer | None, conversation: str | None = None) -> Admission | None:
        """What a connection of `peer` may do before any hello, on the controller of `conversation` (rules
        2, 3 and 6): the owner everything; anyone else the union of the grants naming it that cover
        `conversation` (None: every grant covers). None when no grant names it (refused `channel` at
        connect); `in_scope` False when grants name it but none covers this conversation."""
        if peer is None:
            return None
        if peer.uid == self.owner:
            return Admission(ALL_OPERATIONS)
        grants = self.grants
        keys: list[GrantKey] = []
        if peer.uid in grants.users:
            keys.append(("uid", peer.uid))
        keys += [("gid", gid) for gid in sorted({peer.gid, *(peer.groups or ())}) if gid in grants.groups]
        if not keys:
            return None
        found: set[str] = set()
        for key in keys:
            if grants.covers(key, conversation):
                found.update(grants.users[key[1]] if key[0] == "uid" else grants.groups[key[1]])
        return Admission(frozenset(found), bool(found))

    def hello(self, peer: Peer, grant: str, conversation: str | None = None) -> Admission | ControlRefusal:
        """A hello of `peer` naming `grant` (rule 6): the connection's `Admission` from now on, or the
        refusal `grant` when no grant has that id or it does not name this peer (the owner may name any).
        The operations are the grant's, which a grant naming the peer never exceeds: narrowing only."""
        found = self.grants.named(grant)
        if found is None or (peer.uid != self.owner and not found.names(peer)):
            return ControlRefusal("grant", f"no active grant {grant!r} for uid {peer.uid}")
        in_scope = conversation is None or found.covers(conversation)
        return Admission(found.operations, in_scope, found.grant, found.scope)

    def standing(self, peer: Peer | None, conversation: str | None = None) -> str:
        """Which slots of the server's connection bound `peer` may take (`ServerLimits`, issue 28 item 2):
        "owner" (every slot, no per-uid share), "force-stop" (a uid a grant covering `conversation` lets force
        stop: all but the owner's reserve, within its share) or "other" (below both reserves, within its
        share). A force-stop grant scoped to other conversations gives no reserve here (rule 6)."""
        if peer is not None and peer.uid == self.owner:
            return "owner"
        admission = self.admit(peer, conversation)
        return "force-stop" if admission is not None and "force-stop" in admission.operations else "other"

    def reach(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The uids and gids besides the owner that must be able to reach the socket: (uids, gids), sorted."""
        return tuple(sorted(self.grants.users)), tuple(sorted(self.grants.groups))


def required_operations(method: str, params: Mapping[str, Any], served: str | None = None) -> tuple[str, ...]:
    """The operations any one of which lets a connection call `method` with `params` (rule 4): one
    operation, or () when a connection is enough. `served` is, for answer-confirmation, the operation of
    the confirmation it names when that is one of this connection's (None: any confirmable operation).
    A method the table lacks (one the server passes on unchecked, `UNVERIFIED_METHODS`, which the gate
    refuses before this) needs an operation no grant holds, ``unlisted:<method>``: fail closed."""
    needed = METHOD_OPERATIONS.get(method, f"unlisted:{method}")
    if needed is None:
        return ()
    if needed != SERVED:
        return (needed,)
    if method == "issue-confirmation":
        operation = params.get("operation")
        return (operation,) if operation in CONFIRMABLE else CONFIRMABLE
    return (served,) if served in CONFIRMABLE else CONFIRMABLE
