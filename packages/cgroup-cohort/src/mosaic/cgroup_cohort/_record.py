"""Frozen value records without ``dataclasses`` (README "Threads": what a launch costs).

``@dataclass(frozen=True)`` imports ``dataclasses``, and with it ``inspect``, ``ast``, ``dis`` and
``tokenize``: about 7 ms of every process that imports the bindings (``_ffi``) or the cgroup2 readers
(``cgroupfs``). The spawn helper and the shim import both at each launch, before the engine starts, so
their records are ``Record`` subclasses instead. A subclass names its fields in ``__slots__`` (in order),
annotates them, and assigns them once in ``__init__`` through ``_set``. It gets what the frozen dataclasses
gave: equality and hash over the fields (objects of the same class only), a repr naming each field, no
assignment or deletion afterwards (AttributeError), and pickling. Imports nothing.
"""

from __future__ import annotations

__all__ = ["Record"]


class Record:
    """The base of a frozen value record (see the module docstring)."""

    __slots__: tuple[str, ...] = ()

    def _set(self, **fields: object) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot assign to {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Record)
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> tuple[type[Record], tuple[object, ...]]:
        return type(self), self._fields()
