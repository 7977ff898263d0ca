"""The refusal-classifier registry: every classifier describes itself once, with
``@refusal_classifier(...)`` on its class (the same style as ``backends.registry.backend``).

A description gives the classifier's kind (the spec reads ``KIND`` or ``KIND:ARGUMENT``), what the
argument names (``MODEL_SPEC``, ``PATH``; None: the spec takes none), aliases, a summary and its
options (``backends.registry.Option``: keyword, CLI flag, help, type). ``make_classifier``, the
classifier flags of ``casebench run``/``classify``/``refusal-eval`` and their ``--help``, and the
table in docs/readers.md are derived from these descriptions. The class is built as ``cls(ARGUMENT,
**options)`` (or ``cls(**options)`` without an argument) and must satisfy
``classify.base.RefusalClassifier``.

Built-in classifiers live in the modules of ``BUILTIN_MODULES`` (imported when the registry is
first read; they import their libraries only when built); others come from plugins
(``casebench.plugins``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from ..backends.registry import Option
from ..registry import Registry, RegistryError
from .base import ClassifierError

T = TypeVar("T")

BUILTIN_MODULES: tuple[str, ...] = (
    "casebench.classify.learned",
    "casebench.classify.learned_lm",
    "casebench.classify.rules",
    "casebench.classify.llm",
    "casebench.classify.hf_classifier",
)


@dataclass(frozen=True)
class ClassifierInfo:
    """What a refusal classifier says about itself (see the module docstring)."""

    kind: str
    summary: str
    cls: type
    argument: str | None = None
    aliases: tuple[str, ...] = ()
    options: tuple[Option, ...] = ()
    #: the optional extra it needs (``pip install 'casebench[EXTRA]'``), or None
    extra: str | None = None

    @property
    def spec_form(self) -> str:
        """How a spec of this classifier reads, e.g. ``llm:MODEL_SPEC``."""
        return f"{self.kind}:{self.argument}" if self.argument else self.kind


#: every classifier description by kind and alias (``casebench.registry.Registry``)
CLASSIFIERS: Registry[ClassifierInfo] = Registry(
    "refusal classifier", BUILTIN_MODULES, same=lambda old, new: old.cls is new.cls,
    module_of=lambda info: info.cls.__module__)


def register_classifier(info: ClassifierInfo) -> ClassifierInfo:
    """Add a description (its kind and aliases must be new). Returns ``info``."""
    for name in (info.kind, *info.aliases):
        if not name or ":" in name or name != name.strip():
            raise RegistryError(f"refusal classifier kind {name!r} must be a non-empty word without ':'")
    return CLASSIFIERS.register(info.kind, info, aliases=tuple(info.aliases))


def refusal_classifier(kind: str, *, summary: str, argument: str | None = None, aliases: tuple[str, ...] = (),
                       options: tuple[Option, ...] = (), extra: str | None = None) -> Callable[[type[T]], type[T]]:
    """Class decorator: register the class as the refusal classifier ``kind`` (``extra``: the
    optional extra it needs)."""

    def wrap(cls: type[T]) -> type[T]:
        register_classifier(ClassifierInfo(kind=kind, summary=summary, cls=cls, argument=argument,
                                           aliases=tuple(aliases), options=tuple(options), extra=extra))
        return cls

    return wrap


def classifiers() -> list[ClassifierInfo]:
    """Every registered description, once (aliases folded): the built-ins in ``BUILTIN_MODULES``
    order, then plugins in registration order."""
    return CLASSIFIERS.entries()


def spec_help() -> str:
    """The valid specs, for error messages and ``--help``."""
    return ", ".join(f"'{i.spec_form}'" for i in classifiers())


def info_for(spec: str | None, default: str) -> tuple[ClassifierInfo, str | None]:
    """(the description, the argument) of a spec. Raises ``ClassifierError`` for an unknown
    kind (listing the valid ones) or a missing or unexpected argument."""
    name = (spec or default).strip()
    kind, sep, rest = name.partition(":")
    info = CLASSIFIERS.get(kind.strip())
    if info is None:
        raise ClassifierError(f"unknown refusal classifier {name!r}; valid refusal classifiers: {spec_help()}")
    if info.argument is None:
        if sep:
            raise ClassifierError(f"refusal classifier {kind!r} takes no argument after ':'")
        return info, None
    if not sep or not rest.strip():
        what = "model" if "MODEL" in info.argument else info.argument.lower()
        raise ClassifierError(f"refusal classifier {name!r} names no {what}; write {info.spec_form}")
    return info, rest.strip()


def build(spec: str | None, default: str, options: dict[str, Any]) -> Any:
    """The classifier a spec names, built with ``options`` (None values dropped)."""
    info, argument = info_for(spec, default)
    opts = {k: v for k, v in options.items() if v is not None}
    if not info.options and opts:
        others = [i.spec_form for i in classifiers() if i.options]
        raise ClassifierError(f"the {info.kind} classifier takes no options; got {', '.join(sorted(opts))} "
                              f"(they belong to {' or '.join(others) or 'other classifiers'})")
    return info.cls(argument, **opts) if argument is not None else info.cls(**opts)


__all__ = ["BUILTIN_MODULES", "CLASSIFIERS", "ClassifierInfo", "build", "classifiers", "info_for", "refusal_classifier",
           "register_classifier", "spec_help"]
