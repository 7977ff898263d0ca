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

The documentation's tables of the registries (docs/running.md, readers.md, scoring.md) are written by ``casebench.cli.registry_tables``: this
module is imported by every registry, so it imports none of them.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Iterable

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
