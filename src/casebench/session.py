"""A scoring session: the memo caches of one piece of work (a command, a report), as an object.

Why: an input's figures are computed once and read by every consumer (``stats.result``), people's
references are one bootstrap per set of pairs (``stats.context``), a cases fingerprint is one hash
per input (``predictions``) and one JSON per context (``data``), a dataset beside published files
is read once (``loader``). Kept in module globals keyed by ``id()``, such caches outlive the
work they serve (a test, a notebook, a server holding several commands in one process) and a
reused identity could find another object's result. Here they belong to a ``ScoringSession``: the work opens one (``with
scoring_session():`` reuses the one already open, else opens its own), everything inside shares
it, and it is dropped when the work ends. Outside any session nothing is kept: each call computes
afresh.

Standard library only; no import from the rest of the package.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar
import functools
from typing import Any, Callable, Hashable, Iterator, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

#: how many results each cache of a session keeps (the least recently used dropped first)
MAX_KEPT = 512


class ScoringSession:
    """The caches of one piece of work. ``by_object`` memoises a value per live object and key
    (a weak reference to the object guards against a reused identity); ``by_key`` memoises a
    value per plain key."""

    def __init__(self, max_kept: int = MAX_KEPT) -> None:
        self.max_kept = max_kept
        self._objects: OrderedDict[tuple[str, int, Hashable], tuple[weakref.ref[Any], Any]] = OrderedDict()
        self._keys: OrderedDict[tuple[str, Hashable], Any] = OrderedDict()
        self._held: dict[tuple[str, int, Hashable], tuple[Any, Any]] = {}

    def by_object(self, kind: str, obj: Any, key: Hashable, make: Callable[[], T]) -> T:
        """``make()`` for (``obj``, ``key``) once in this session; the same value afterwards."""
        k = (kind, id(obj), key)
        got = self._objects.get(k)
        if got is not None and got[0]() is obj:
            self._objects.move_to_end(k)
            value: T = got[1]
            return value
        value = make()
        self._objects[k] = (weakref.ref(obj), value)
        while len(self._objects) > self.max_kept:
            self._objects.popitem(last=False)
        return value

    def by_held(self, kind: str, obj: Any, key: Hashable, make: Callable[[], T]) -> T:
        """``make()`` for (``obj``, ``key``) once in this session, for an object that cannot be
        weakly referenced (a dict: a case's context). The session holds the object, so its
        identity cannot pass to another while the value is kept; nothing is dropped before the
        session ends (what is held is what the work holds anyway: its loaded cases)."""
        k = (kind, id(obj), key)
        got = self._held.get(k)
        if got is not None and got[0] is obj:
            value: T = got[1]
            return value
        value = make()
        self._held[k] = (obj, value)
        return value

    def by_key(self, kind: str, key: Hashable, make: Callable[[], T]) -> T:
        """``make()`` for ``key`` once in this session; the same value afterwards."""
        k = (kind, key)
        if k in self._keys:
            self._keys.move_to_end(k)
            value: T = self._keys[k]
            return value
        value = make()
        self._keys[k] = value
        while len(self._keys) > self.max_kept:
            self._keys.popitem(last=False)
        return value


_CURRENT: ContextVar[ScoringSession | None] = ContextVar("casebench_scoring_session", default=None)


def current_session() -> ScoringSession | None:
    """The session the running work opened (None: none; nothing is kept)."""
    return _CURRENT.get()


@contextmanager
def scoring_session(session: ScoringSession | None = None) -> Iterator[ScoringSession]:
    """Run the block in ``session``, else in the session already open, else in a new one that
    ends with the block."""
    active = session or _CURRENT.get()
    if active is not None and active is _CURRENT.get():
        yield active
        return
    active = active or ScoringSession()
    token = _CURRENT.set(active)
    try:
        yield active
    finally:
        _CURRENT.reset(token)


def memo_by_object(kind: str, obj: Any, key: Hashable, make: Callable[[], T]) -> T:
    """``make()`` kept in the current session per (``obj``, ``key``); computed afresh outside one."""
    s = _CURRENT.get()
    return make() if s is None else s.by_object(kind, obj, key, make)


def memo_by_held(kind: str, obj: Any, key: Hashable, make: Callable[[], T]) -> T:
    """``make()`` kept in the current session per (``obj``, ``key``), ``obj`` held by the session
    (``ScoringSession.by_held``); computed afresh outside one."""
    s = _CURRENT.get()
    return make() if s is None else s.by_held(kind, obj, key, make)


def memo_by_key(kind: str, key: Hashable, make: Callable[[], T]) -> T:
    """``make()`` kept in the current session per ``key``; computed afresh outside one."""
    s = _CURRENT.get()
    return make() if s is None else s.by_key(kind, key, make)


def in_session(fn: Callable[P, T]) -> Callable[P, T]:
    """Run ``fn`` in the scoring session already open, else in its own (an entry point of the
    Python API: a report, a comparison, a study computes each input's figures once)."""
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with scoring_session():
            return fn(*args, **kwargs)

    return wrapper
