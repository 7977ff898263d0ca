"""The one registry implementation behind every kind of extension.

Backends (``@backend``), refusal classifiers (``@refusal_classifier``), metrics (``@metric`` /
``register_metric``) and modes (``@mode``) are each a ``Registry``: a name -> entry mapping
that

- imports its built-in modules the first time anything registers or reads it, so a plugin's
  registration is checked against the built-ins and never takes a built-in's name;
- loads the plugins (``casebench.plugins``: entry points, ``$CASEBENCH_PLUGINS``) the first
  time it is *read*, so the Python API sees what the CLI sees (``casebench --plugin`` loads
  its modules before the command runs); registering alone never loads plugins, because a
  built-in registers while its own module is still being imported;
- is read live: lists and tables ask it when they are drawn, so an entry registered late (from
  a notebook, say) is shown like any other.

The entries keep their registration order, with the built-ins first (in ``builtin_modules``
order) whatever was imported first. A kind's decorator builds its own description (a
``BackendInfo``, a ``MetricDef``, a ``Mode``) and calls ``register``; the description is kept
as given, so nothing a class declares is lost on the way in.
"""

from __future__ import annotations

from importlib import import_module
from typing import Callable, Generic, Iterator, Mapping, TypeVar

V = TypeVar("V")


class RegistryError(ValueError):
    """A description that cannot be registered (duplicate name, conflicting flag, bad field)."""


class Registry(Mapping[str, V], Generic[V]):
    """Named entries of one kind of extension (see the module docstring).

    ``kind``: what an entry is, for messages ("backend prefix", "mode"). ``builtin_modules``: the
    modules whose import registers the built-ins. ``same``: whether a new entry under a taken
    name is the same thing registered again (a module imported twice), which is allowed; by
    default only the identical object is. ``module_of``: the module that defined an entry, which
    orders the built-ins (default: the entry's ``__module__``).
    """

    def __init__(self, kind: str, builtin_modules: tuple[str, ...] = (), *,
                 same: Callable[[V, V], bool] | None = None,
                 module_of: Callable[[V], str | None] | None = None,
                 on_load: Callable[[], None] | None = None) -> None:
        self.kind = kind
        self.builtin_modules = builtin_modules
        self._same = same or (lambda old, new: old is new)
        self._module_of = module_of or (lambda v: getattr(v, "__module__", None))
        self._on_load = on_load
        self._entries: dict[str, V] = {}
        self._order: list[str] = []  # primary names, registration order (aliases excluded)
        self._builtins_loaded = False
        self._plugins_loaded = False

    # ------------------------------------------------------------------ loading
    def load_builtins(self) -> None:
        """Import the built-in modules (once)."""
        if self._builtins_loaded:
            return
        self._builtins_loaded = True
        for module in self.builtin_modules:
            import_module(module)
        if self._on_load is not None:
            self._on_load()

    def load(self) -> None:
        """Import the built-ins, then the plugins (each once)."""
        self.load_builtins()
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        from . import plugins

        plugins.load_plugins()

    # ------------------------------------------------------------------ registering
    def register(self, name: str, entry: V, *, aliases: tuple[str, ...] = ()) -> V:
        """Add ``entry`` under ``name`` (and ``aliases``); a taken name raises ``RegistryError``
        naming who has it, unless it is the same entry registered again. Returns ``entry``."""
        self.load_builtins()
        names = (name, *aliases)
        if len(set(names)) != len(names):
            raise RegistryError(f"{self.kind} {name!r} lists a name twice")
        for n in names:
            old = self._entries.get(n)
            if old is not None and not self._same(old, entry):
                raise RegistryError(f"{self.kind} {n!r} is already registered (by {self._where(old)})")
        if name not in self._order:
            self._order.append(name)
        for n in names:
            self._entries[n] = entry
        return entry

    def _where(self, entry: V) -> str:
        owner = getattr(entry, "cls", None) or entry
        module = getattr(owner, "__module__", None)
        qual = getattr(owner, "__qualname__", None) or type(owner).__qualname__
        return f"{module}.{qual}" if module else qual

    # ------------------------------------------------------------------ reading
    def __getitem__(self, name: str) -> V:
        self.load()
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        """The primary names (no aliases): built-ins first, then registration order."""
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def find(self, name: str, error: Callable[[str], Exception], noun: str | None = None) -> V:
        """The entry of ``name``; an unknown name raises ``error`` with a message that names it and
        lists the choices ("unknown mode 'x'; choose one of binary, score, ..."), ``noun`` for
        ``kind`` where the user knows the entry by a shorter word."""
        try:
            return self[name]
        except KeyError:
            raise error(f"unknown {noun or self.kind} {name!r}; choose one of {', '.join(self)}") from None

    def names(self) -> list[str]:
        """The primary names (no aliases): built-ins first, then registration order."""
        self.load()
        return [self._order[i] for i in sorted(range(len(self._order)), key=self._rank_of)]

    def _rank_of(self, i: int) -> tuple[int, int]:
        module = self._module_of(self._entries[self._order[i]])
        rank = self.builtin_modules.index(module) if module in self.builtin_modules else len(self.builtin_modules)
        return rank, i

    def entries(self) -> list[V]:
        """Every entry once, in ``names()`` order."""
        return [self._entries[n] for n in self.names()]

    def __repr__(self) -> str:
        return f"<{self.kind} registry: {', '.join(self._order)}>"


__all__ = ["Registry", "RegistryError"]
