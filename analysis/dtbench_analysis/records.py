"""Typed results: the dataclasses the computing modules return also read like the dicts they
replaced, so notebooks (``result["groups"]``), ``--json`` and attribute access (``result.groups``)
all work on one object.

Declare one with ``@record`` (a dataclass whose equality is the Record's). ``Record`` adds
mapping access (``keys``, ``[]``, ``get``, ``in``, ``dict(record)``) and
``as_dict()`` (nested records, lists and dicts made plain, in field order) to a dataclass. A field
declared with ``absent()`` is left out of the mapping while it holds ``ABSENT``: a quantity that
does not apply to this result (e.g. a speedup for a point outside any scaling series), as
opposed to ``None``, a quantity that applies but could not be measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Dict, Iterator, List


class _Absent:
    """The value of a field that does not apply (see ``absent``)."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = _Absent()


def absent():
    """A dataclass field that is ABSENT unless set: left out of the mapping and of as_dict."""
    return field(default=ABSENT)


def internal(default=None):
    """A dataclass field used by the computation only: never part of the mapping."""
    return field(default=default, repr=False, compare=False, metadata={"internal": True})


def record(cls):
    """``@dataclass`` for a Record: equal to another record or a dict with the same items."""
    return dataclass(eq=False)(cls)


class Record:
    """Mixin for result dataclasses: mapping access and ``as_dict`` (see the module doc)."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Record, dict)):
            return self.as_dict() == plain(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dicts they replace

    def keys(self) -> List[str]:
        return [f.name for f in fields(self)  # type: ignore[arg-type]
                if not f.metadata.get("internal") and getattr(self, f.name) is not ABSENT]

    def __getitem__(self, key: str) -> Any:
        if key in self.keys():
            return getattr(self, key)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in self.keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self.keys() else default

    def items(self):
        return [(k, getattr(self, k)) for k in self.keys()]

    def as_dict(self) -> Dict[str, Any]:
        return {k: plain(v) for k, v in self.items()}


def plain(value: Any) -> Any:
    """Records, and the records inside dicts, lists and tuples, as plain dicts."""
    if isinstance(value, Record):
        return value.as_dict()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
