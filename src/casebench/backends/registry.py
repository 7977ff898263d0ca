"""The backend registry: every backend describes itself once, with ``@backend(...)`` on its class.

A description says everything the rest of casebench needs to know without building the backend:

- the spec prefix (``openai`` serves ``openai/MODEL``) and a one-line summary;
- its options (``Option``): the constructor keyword, the CLI flag and its help text, the type,
  and whether the option changes answers (recorded in the run's ``Asked`` and compared on resume)
  or only how they are fetched (recorded per invocation);
- its capabilities: free text, P(safe), several samples in one request, a provider batch API
  (``batch_api``: ``"module:Class"`` of its adapter in ``backends.batch`` or a plugin), and
  whether it runs on this machine (``local``: costs nothing per token) or remotely;
- an optional price lookup (``price(model) -> (input, output)`` USD per million tokens, or None)
  consulted after the user's and the built-in price tables.

Derived from these descriptions, and listed nowhere else: ``make_backend``'s prefixes, the
backend flags of ``casebench run``/``ablate``/``contexts generate`` and their ``--help``,
``runs.pricing``'s local prefixes, the batch path, and the backend table in docs/running.md
(``python -m casebench.cli.registry_tables --readme README.md docs/*.md``).

A new backend is one module with one decorated class; it is found when casebench imports the
module: a built-in one is listed in ``BUILTIN_MODULES``, anything else is a plugin
(``casebench.plugins``: the entry-point group ``casebench.plugins``, ``$CASEBENCH_PLUGINS`` or
``casebench --plugin MODULE``)::

    from casebench.backends.registry import Option, backend

    @backend("echo", summary="answers 'safe' to everything", text=True, local=True,
             options=(Option("verdict", "The verdict to give.", choices=("safe", "unsafe")),))
    class EchoBackend:
        def __init__(self, model: str, *, verdict: str = "safe"): ...

Built-in backend modules import their SDK (``openai``, ``anthropic``, ``torch``) only when a
backend is built, so reading the registry stays light.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ..jsonutil import json_object
from ..registry import Registry, RegistryError
from .base import Capabilities

if TYPE_CHECKING:
    from .base import Backend

T = TypeVar("T")

#: The modules holding the built-in backends (imported when the registry is first read).
BUILTIN_MODULES: tuple[str, ...] = (
    "casebench.backends.openai",
    "casebench.backends.anthropic",
    "casebench.backends.hf",
)

#: Option value types an ``Option`` can declare (``json``: a JSON object given as text; ``url``: an
#: http(s) URL with a host, checked where it is given).
OPTION_TYPES: tuple[str, ...] = ("str", "int", "float", "bool", "json", "url")


@dataclass(frozen=True)
class Option:
    """One option of a backend or refusal classifier.

    ``name``: the constructor keyword. ``help``: the help text (the CLI's and the documentation's).
    ``flag``: the CLI flag; empty (the default) means ``--`` + name with dashes; None keeps the
    option off the CLI (the Python API still takes it). ``type``: one of ``OPTION_TYPES``;
    ``choices``: the allowed values of a ``str`` option. ``answers``: whether the option can
    change what the model answers (True: part of a run's answer-changing settings, a resume with
    another value is refused; False: transport only, e.g. an endpoint or a batch size).
    """

    name: str
    help: str
    flag: str | None = ""
    type: str = "str"
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    answers: bool = True
    #: the smallest value an ``int`` or ``float`` option takes (the CLI refuses less where it is
    #: given, in the user's flag); ``above``: the value must be greater (a timeout above 0)
    minimum: float | None = None
    above: bool = False

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise RegistryError(f"option name {self.name!r} must be an identifier (a constructor keyword)")
        if self.type not in OPTION_TYPES:
            raise RegistryError(f"option {self.name!r}: type must be one of {', '.join(OPTION_TYPES)}, "
                                f"not {self.type!r}")
        if self.flag and not self.flag.startswith("--"):
            raise RegistryError(f"option {self.name!r}: flag {self.flag!r} must start with '--'")

    @property
    def cli_flag(self) -> str | None:
        """The CLI flag (None: not on the CLI)."""
        if self.flag is None:
            return None
        return self.flag or "--" + self.name.replace("_", "-")

    def convert(self, value: Any) -> Any:
        """A CLI value as the constructor takes it (``json``: parsed, must be an object).
        Raises ``ValueError`` naming the flag."""
        if self.minimum is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
            if value != value or value < self.minimum or (self.above and value == self.minimum):
                raise ValueError(f"{self.cli_flag or self.name} must be {'above' if self.above else 'at least'} "
                                 f"{self.minimum:g}, got {value!r}")
        if self.type == "url" and isinstance(value, str):
            from .urls import check_base_url

            return check_base_url(value, self.cli_flag or self.name)
        if self.type != "json" or not isinstance(value, str):
            return value
        try:
            return json_object(value, line=False)
        except ValueError as e:
            raise ValueError(f"{self.cli_flag or self.name}: {e}") from None


@dataclass(frozen=True)
class BackendInfo:
    """What a backend says about itself (see the module docstring). ``cls`` is None for a
    refused prefix, whose ``refused`` message (``{model}`` filled in) says what to use instead."""

    prefix: str
    summary: str
    cls: type | None = None
    options: tuple[Option, ...] = ()
    capabilities: Capabilities = field(default_factory=Capabilities)
    local: bool = False
    batch_api: str | None = None
    price: Callable[[str], "tuple[float, float] | None"] | None = None
    model_help: str = "NAME"
    refused: str | None = None

    @property
    def spec_form(self) -> str:
        """How a spec of this backend reads, e.g. ``openai/NAME``."""
        return f"{self.prefix}/{self.model_help}"

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)

    def transport_options(self) -> frozenset[str]:
        """The options that never change answers."""
        return frozenset(o.name for o in self.options if not o.answers)


def _module_of(info: BackendInfo) -> str:
    # a refused prefix ranks after the built-in backends and before the plugins
    return info.cls.__module__ if info.cls is not None else __name__


#: every backend description by prefix (``casebench.registry.Registry``)
BACKENDS: Registry[BackendInfo] = Registry(
    "backend prefix", (*BUILTIN_MODULES, __name__), same=lambda old, new: old.cls is new.cls,
    module_of=_module_of, on_load=lambda: None if "vllm" in BACKENDS._entries else _refuse_vllm())


def register_backend(info: BackendInfo) -> BackendInfo:
    """Add a description to the registry (its prefix must be new). Returns ``info``."""
    BACKENDS.load_builtins()  # a plugin imported first is checked against the built-ins
    prefix = info.prefix
    if not prefix or "/" in prefix or ":" in prefix or prefix != prefix.strip():
        raise RegistryError(f"backend prefix {prefix!r} must be a non-empty word without '/' or ':'")
    names = [o.name for o in info.options]
    if len(set(names)) != len(names):
        raise RegistryError(f"backend {prefix!r} declares an option twice")
    if info.cls is not None:
        params = inspect.signature(info.cls).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        missing = [n for n in names if n not in params and not takes_any]
        if missing:
            raise RegistryError(f"backend {prefix!r} declares option(s) {', '.join(missing)} that "
                                f"{info.cls.__qualname__}.__init__ does not take")
    for o in info.options:  # a flag two backends share must mean one thing
        flag = o.cli_flag
        for other in BACKENDS._entries.values():
            if other.prefix == prefix:
                continue
            for p in other.options:
                if flag and p.cli_flag == flag and (p.name, p.type, p.choices) != (o.name, o.type, o.choices):
                    raise RegistryError(f"backend {prefix!r}: flag {flag} is already {other.prefix!r}'s option "
                                        f"{p.name!r} of another kind; choose another flag")
    return BACKENDS.register(prefix, info)


def backend(prefix: str, *, summary: str, options: tuple[Option, ...] = (), text: bool | None = None,
            p_safe: bool | None = None, shared_samples: bool | None = None, local: bool = False,
            batch_api: str | None = None, price: Callable[[str], "tuple[float, float] | None"] | None = None,
            model_help: str = "NAME") -> Callable[[type[T]], type[T]]:
    """Class decorator: register the class as the backend of ``prefix`` (see the module docstring).

    The class is built as ``cls(model, **options)`` and must have ``spec``, ``batch_size``,
    ``answer``, ``describe`` and ``aclose`` (``backends.base.Backend``). ``text``/``p_safe``/
    ``shared_samples``: its capabilities (given here they set ``cls.capabilities``; left out they
    are read from the class's own ``capabilities``); ``batch_api`` the ``"module:Class"`` of its
    batch adapter (``capabilities.batch`` follows from it)."""

    def wrap(cls: type[T]) -> type[T]:
        # every capability the class declares survives (per_answer included); the decorator's
        # arguments override only the ones they name
        base = getattr(cls, "capabilities", None) or Capabilities()
        given = {"generate": text, "token_probs": p_safe, "shared_samples": shared_samples}
        caps = dataclasses.replace(base, batch=batch_api is not None,
                                   **{k: bool(v) for k, v in given.items() if v is not None})
        cls.capabilities = caps  # type: ignore[attr-defined]
        register_backend(BackendInfo(prefix=prefix, summary=summary, cls=cls, options=tuple(options),
                                     capabilities=caps, local=local, batch_api=batch_api, price=price,
                                     model_help=model_help))
        return cls

    return wrap


def refuse_prefix(prefix: str, message: str, *, summary: str, local: bool = True) -> BackendInfo:
    """Register a prefix that is recognised but refused; ``message`` (with ``{model}``) says what
    to use instead."""
    return register_backend(BackendInfo(prefix=prefix, summary=summary, refused=message, local=local))


def _refuse_vllm() -> None:
    refuse_prefix(
        "vllm",
        "the 'vllm/' backend (vllm's offline engine) is not available: it runs only on a GPU "
        "and cannot be tested without one. Serve the model with vllm's OpenAI-compatible "
        "server instead and use the openai backend, which is tested against real servers:\n"
        "  vllm serve {model} --port 8000\n"
        "  casebench run --model openai/{model} --base-url http://127.0.0.1:8000/v1 ...",
        summary="refused: serve the model with `vllm serve` and use openai/",
    )


def backends() -> list[BackendInfo]:
    """Every registered description: the built-ins in ``BUILTIN_MODULES`` order, the refused
    prefixes, then plugins in registration order."""
    return BACKENDS.entries()


def valid_prefixes() -> list[str]:
    """Every registered prefix, refused ones included, sorted."""
    return sorted(i.prefix for i in backends())


def info_for(spec: str) -> BackendInfo | None:
    """The description of the backend a spec's prefix names (None: no such prefix)."""
    if not isinstance(spec, str):
        return None
    return BACKENDS.get(spec.split("/", 1)[0])


def is_local_spec(spec: str) -> bool:
    """True when the spec's backend runs on this machine (a refused or unknown prefix: False)."""
    info = info_for(spec)
    return bool(info and info.local)


def is_remote_spec(spec: str) -> bool:
    """True when the spec names a backend that asks a server (worth a wall-clock time limit)."""
    info = info_for(spec)
    return bool(info and info.cls is not None and not info.local)


def _check_spec(spec: str) -> tuple[BackendInfo, str]:
    if not isinstance(spec, str) or "/" not in spec:
        raise ValueError(
            f"model spec {spec!r} must read PREFIX/MODEL, e.g. openai/gpt-4o-mini; "
            f"valid prefixes: {', '.join(valid_prefixes())}"
        )
    prefix, model = spec.split("/", 1)
    info = info_for(spec)
    if info is None:
        raise ValueError(
            f"unknown backend prefix {prefix!r} in model spec {spec!r}; "
            f"valid prefixes: {', '.join(valid_prefixes())}"
        )
    if info.refused is not None:
        raise ValueError(info.refused.format(model=model or "MODEL"))
    return info, model


def backend_class(spec: str) -> type:
    """The class that serves a spec's prefix."""
    info = info_for(spec)
    if info is None or info.cls is None:
        _check_spec(spec)  # raises with the reason
    assert info is not None and info.cls is not None
    return info.cls


def make_backend(spec: str, **options: Any) -> "Backend":
    """Build the backend a spec names, passing ``options`` to its constructor.

    Raises ``ValueError`` for a malformed spec, an unknown prefix (listing the valid ones) or a
    refused prefix (saying what to use instead); a missing SDK raises ``extras.MissingExtra``
    naming the extra to install.
    """
    info, model = _check_spec(spec)
    if not model.strip():
        raise ValueError(f"model spec {spec!r} names no model after {info.prefix + '/'!r}")
    assert info.cls is not None
    # Every backend is built as ``Class(model, **options)`` and names its own spec
    # (``PREFIX/MODEL``), so the factory and the classes cannot disagree.
    try:
        return info.cls(model, **options)
    except ModuleNotFoundError as e:
        from ..extras import missing_extra

        extra = missing_extra(e, what=f"needed by {info.prefix}/ models")
        if extra is None:
            raise
        raise extra from None


def resolve_options(spec: str, options: dict[str, Any], cls: type | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(answer-changing options, transport options) a backend would be built with: every keyword
    of its constructor, with the user's value or the constructor's default. Answer-changing
    options go into a run's ``Asked`` (so ``--prob-method`` given or left at its default compare
    equal when they mean the same), transport options (those its description marks
    ``answers=False``) into the invocation's history. ``cls``: the class of a backend built by
    the caller (default: the class the spec's prefix names)."""
    cls = cls or backend_class(spec)
    info = info_for(spec)
    transport_names = info.transport_options() if info is not None and info.cls is cls else _described_transport(cls)
    params = inspect.signature(cls).parameters
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise ValueError(f"backend for {spec!r} does not take option(s) {', '.join(unknown)}")
    answer: dict[str, Any] = {}
    transport: dict[str, Any] = {}
    for name, p in params.items():
        if name in ("self", "model") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        value = options.get(name, None if p.default is inspect.Parameter.empty else p.default)
        (transport if name in transport_names else answer)[name] = value
    return answer, transport


def _described_transport(cls: type) -> frozenset[str]:
    """Transport options of a class built by a caller: its own description if it has one, else
    every option some registered backend marks as transport only (an endpoint, a key variable,
    a timeout, a batch size)."""
    for info in backends():
        if info.cls is cls:
            return info.transport_options()
    return transport_option_names()


def transport_option_names() -> frozenset[str]:
    """Every option some registered backend marks as transport only."""
    out: set[str] = set()
    for info in backends():
        out |= info.transport_options()
    return frozenset(out)


def cli_options() -> list[tuple[Option, list[BackendInfo]]]:
    """Every CLI flag of every registered backend, once, with the backends that take it (a flag
    several backends share, such as ``--base-url``, is one option)."""
    out: dict[str, tuple[Option, list[BackendInfo]]] = {}
    for info in backends():
        for o in info.options:
            flag = o.cli_flag
            if flag is None:
                continue
            if flag in out:
                out[flag][1].append(info)
            else:
                out[flag] = (o, [info])
    return list(out.values())


__all__ = [
    "BACKENDS", "BUILTIN_MODULES", "BackendInfo", "OPTION_TYPES", "Option", "RegistryError", "backend",
    "backend_class", "backends", "cli_options", "info_for", "is_local_spec", "is_remote_spec", "make_backend",
    "refuse_prefix", "register_backend", "resolve_options", "transport_option_names", "valid_prefixes",
]
