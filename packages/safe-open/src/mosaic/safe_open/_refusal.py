"""The shared refusal base and safe-open's own code table.

Every Mosaic package that declares safe-open subclasses `Refusal` with its own `CODES` table (DESIGN.md,
"Principles" 2: every refusal is a value with a code from the seeds' tables, a reconcile flag and a
message). The codes and reconcile flags of `SafeOpenRefusal` are the rows of the seed README's
"Refusal codes" table that the "Opening a file" rules can produce.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

__all__ = ["Refusal", "SafeOpenRefusal"]


class Refusal(Exception):
    """A refusal: a `code` from the class's `CODES` table, a `reconcile` flag and a human `message`.

    `Refusal` itself has an empty table, so only subclasses that declare `CODES` can be raised. Building
    one with a code outside its class's table raises `ValueError`: that is a programming error, not a
    refusal. `reconcile` defaults to the table's flag for the code; a caller may override it for one case
    (the seed's `incomplete-header` row is reconcile only in the incomplete case).

    Refusals pickle with all three fields, so they cross process boundaries unchanged.
    """

    CODES: ClassVar[Mapping[str, bool]] = MappingProxyType({})

    code: str
    reconcile: bool
    message: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        codes = cls.__dict__.get("CODES")
        if codes is None:
            return
        if not isinstance(codes, Mapping):
            raise TypeError(f"{cls.__name__}.CODES must be a mapping of code -> reconcile flag")
        for code, flag in codes.items():
            if not isinstance(code, str) or not code or not isinstance(flag, bool):
                raise TypeError(f"{cls.__name__}.CODES: {code!r} -> {flag!r} is not a str -> bool row")
        # Freeze the table so no caller can add a code at runtime.
        cls.CODES = MappingProxyType(dict(codes))

    def __init__(self, code: str, message: str, *, reconcile: bool | None = None) -> None:
        table = type(self).CODES
        if code not in table:
            raise ValueError(f"{type(self).__name__}: unknown refusal code {code!r} (table: {sorted(table)})")
        if reconcile is not None and not isinstance(reconcile, bool):
            raise TypeError("reconcile must be a bool or None")
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.reconcile = table[code] if reconcile is None else reconcile

    def to_dict(self) -> dict[str, object]:
        """The wire form: exactly {"code", "reconcile", "message"}."""
        return {"code": self.code, "reconcile": self.reconcile, "message": self.message}

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    # A refusal is a value (DESIGN.md principle 2): two refusals of one class with the same code, flag and
    # message are equal wherever they were made, so a refusal returned (pi-format's parse) compares like a
    # refusal raised.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Refusal):
            return NotImplemented
        return type(self) is type(other) and (self.code, self.reconcile, self.message) == (
            other.code, other.reconcile, other.message)

    def __hash__(self) -> int:
        return hash((type(self), self.code, self.reconcile, self.message))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r}, reconcile={self.reconcile!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception's default pickling replays only `args`, which would lose a reconcile override; the
        # instance dict (reconcile, and whatever a subclass adds) is restored by BaseException.__setstate__.
        # A subclass whose __init__ needs more than (code, message) overrides this.
        return (type(self), (self.code, self.message), dict(self.__dict__))


class SafeOpenRefusal(Refusal):
    """Why safe-open refused a path. Codes and reconcile flags from the seed README's refusal table:

    - unsafe-path: a symlink, a bad name, not a regular file / not a directory, a mount crossing, or a
      file swapped between its lstat and its open;
    - too-large: a session file over 256 MiB;
    - unreadable: permission denied on the file, the root, or a directory inside the root;
    - unavailable: the root, a directory beneath it or the file no longer exists.
    """

    CODES: ClassVar[Mapping[str, bool]] = {
        "unsafe-path": False,
        "too-large": False,
        "unreadable": False,
        "unavailable": False,
    }
