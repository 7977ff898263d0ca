"""Plugins: a backend, a refusal classifier, a metric or a mode added from outside casebench.

A plugin is a Python module (or a ``.py`` file) whose import registers what it adds, each with
its registration: ``@backend(...)`` (``casebench.backends.registry``),
``@refusal_classifier(...)`` (``casebench.classify.registry``), ``@metric(...)`` /
``register_metric`` (``casebench.stats.metrics``) or ``@mode`` (``casebench.modes``). casebench
imports plugins from, in this order:

- the entry-point group ``casebench.plugins`` of installed packages (``[project.entry-points.
  "casebench.plugins"] mine = "my_package.casebench_plugin"``; an entry point naming a function
  is called after import);
- ``$CASEBENCH_PLUGINS``: module names or ``.py`` paths, separated by commas;
- ``casebench --plugin MODULE_OR_FILE`` (repeatable), before the command's options are read.

Each is imported once. The registries load plugins themselves the first time they are read, so
the Python API sees the same backends and classifiers as the CLI.

``python -m casebench.plugins --readme README.md`` rewrites the README's tables of built-in
backends, refusal classifiers, metrics and modes (between ``<!-- registry:KIND -->`` and
``<!-- /registry:KIND -->``) from the registries; ``--check`` only says whether they are in sync
(exit 1 when not).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Iterable

ENTRY_POINT_GROUP = "casebench.plugins"
ENV_VAR = "CASEBENCH_PLUGINS"

#: what has been imported: the module name or file path -> where it was named
LOADED: dict[str, str] = {}
_entry_points_loaded = False


class PluginError(ImportError):
    """A plugin that cannot be imported; the message names it and where it was named."""


def load_plugins(modules: Iterable[str] = ()) -> list[str]:
    """Import the entry-point plugins and ``$CASEBENCH_PLUGINS`` (each once), then ``modules``.
    Returns the names imported by this call. Raises ``PluginError`` naming a plugin that fails."""
    global _entry_points_loaded
    done: list[str] = []
    if not _entry_points_loaded:
        _entry_points_loaded = True
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            key = f"entry point {ep.name} = {ep.value}"
            if key in LOADED:
                continue
            LOADED[key] = f"entry point group {ENTRY_POINT_GROUP}"
            try:
                obj = ep.load()
            except Exception as e:
                raise PluginError(f"plugin {ep.value!r} (entry point {ep.name!r} of group {ENTRY_POINT_GROUP}) "
                                  f"failed to import: {type(e).__name__}: {e}") from e
            if callable(obj) and not isinstance(obj, type):
                obj()
            done.append(ep.value)
    env = [m.strip() for m in os.environ.get(ENV_VAR, "").split(",") if m.strip()]
    for name in env:
        if _load_one(name, f"${ENV_VAR}"):
            done.append(name)
    for name in modules:
        if _load_one(name, "--plugin"):
            done.append(name)
    return done


def _load_one(name: str, where: str) -> bool:
    if name in LOADED:
        return False
    LOADED[name] = where
    try:
        if name.endswith(".py") or os.sep in name or "/" in name:
            path = Path(name).expanduser().resolve()
            if not path.is_file():
                raise FileNotFoundError(f"no such file: {path}")
            mod_name = f"casebench_plugin_{path.stem}"
            spec = importlib.util.spec_from_file_location(mod_name, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot import {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module
            spec.loader.exec_module(module)
        else:
            importlib.import_module(name)
    except Exception as e:
        del LOADED[name]
        raise PluginError(f"plugin {name!r} (named by {where}) failed to import: {type(e).__name__}: {e}") from e
    return True


# --------------------------------------------------------------------------- README tables


def _builtin(obj: Any) -> bool:
    return str(getattr(obj, "__module__", "")).startswith("casebench.")


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _flags(options: Iterable[Any]) -> str:
    out = []
    for o in options:
        flag = o.cli_flag
        if flag is None:
            continue
        out.append(f"`{flag}`" + ("" if o.answers else " (transport)"))
    return ", ".join(out) or "-"


def table_backends() -> str:
    """The Markdown table of the built-in backends."""
    from .backends.registry import backends

    rows = ["| spec | what | text | P(safe) | batch API | runs | options |", "|---|---|---|---|---|---|---|"]
    for b in backends():
        if b.cls is not None and not _builtin(b.cls):
            continue
        if b.refused is not None:
            rows.append(f"| `{b.prefix}/...` | {_cell(b.summary)} | - | - | - | - | - |")
            continue
        c = b.capabilities
        yes = lambda v: "yes" if v else "no"  # noqa: E731
        rows.append(f"| `{b.spec_form}` | {_cell(b.summary)} | {yes(c.generate)} | {yes(c.token_probs)} | "
                    f"{yes(b.batch_api)} | {'local' if b.local else 'remote'} | {_flags(b.options)} |")
    return "\n".join(rows)


def table_classifiers() -> str:
    """The Markdown table of the built-in refusal classifiers."""
    from .classify.registry import classifiers

    rows = ["| `--refusal-classifier` | what | options |", "|---|---|---|"]
    for c in classifiers():
        if not _builtin(c.cls):
            continue
        name = f"`{c.spec_form}`" + "".join(f" (or `{a}`)" for a in c.aliases)
        rows.append(f"| {name} | {_cell(c.summary)} | {_flags(c.options)} |")
    return "\n".join(rows)


def table_metrics() -> str:
    """The Markdown table of the built-in metrics."""
    from .stats.metrics import METRICS

    rows = ["| metric | printed as | better | applies to | paired test (`compare`) |", "|---|---|---|---|---|"]
    for m in METRICS:
        if not _builtin(m.formula):
            continue
        applies = "respond runs" if m.behaviour else "modes with a continuous prediction" if m.continuous else "every mode"
        rows.append(f"| `{m.name}` | {_cell(m.label)} | {'higher' if m.higher_is_better else 'lower'} | "
                    f"{applies} | {m.test or '-'} |")
    return "\n".join(rows)


def table_modes() -> str:
    """The Markdown table of the built-in modes."""
    from .modes import MODES

    rows = ["| `--mode` | asks for | what |", "|---|---|---|"]
    for m in MODES.values():
        if not _builtin(type(m)):
            continue
        rows.append(f"| `{m.name}` | {'P(safe)' if m.want == 'p_safe' else 'text'} | {_cell(getattr(m, 'help', ''))} |")
    return "\n".join(rows)


TABLES = {"backends": table_backends, "classifiers": table_classifiers, "metrics": table_metrics,
          "modes": table_modes}


def render_readme(text: str) -> str:
    """``text`` with every ``<!-- registry:KIND -->`` ... ``<!-- /registry:KIND -->`` block
    replaced by the table of KIND (backends, classifiers, metrics, modes)."""
    for kind, make in TABLES.items():
        start, end = f"<!-- registry:{kind} -->", f"<!-- /registry:{kind} -->"
        i = text.find(start)
        if i < 0:
            continue
        j = text.find(end, i)
        if j < 0:
            raise ValueError(f"README: {start} has no closing {end}")
        text = text[: i + len(start)] + "\n" + make() + "\n" + text[j:]
    return text


def main(argv: list[str] | None = None) -> int:
    """``python -m casebench.plugins --readme README.md [--check]``."""
    ap = argparse.ArgumentParser(prog="python -m casebench.plugins", description=__doc__.split("\n\n")[0])
    ap.add_argument("--readme", type=Path, help="rewrite the registry tables of this README")
    ap.add_argument("--check", action="store_true", help="only check that the README's tables are in sync")
    ap.add_argument("--list", action="store_true", help="print the tables (plugins included)")
    args = ap.parse_args(argv)
    if args.list or not args.readme:
        for kind, make in TABLES.items():
            print(f"## {kind}\n\n{make()}\n")
        return 0
    old = args.readme.read_text(encoding="utf-8")
    new = render_readme(old)
    if args.check:
        if new != old:
            print(f"{args.readme}: the registry tables are out of date; run python -m casebench.plugins "
                  f"--readme {args.readme}", file=sys.stderr)
            return 1
        return 0
    if new != old:
        args.readme.write_text(new, encoding="utf-8")
        print(f"{args.readme}: registry tables rewritten")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
