"""Data flows forward: no module imports one that comes later in the pipeline.

Every import of every module under ``src/casebench`` is read with ``ast`` -- module level,
inside functions and under ``TYPE_CHECKING`` alike, since an import hidden in a function is still
a dependency -- and checked against ``MAY_IMPORT``, which says for each unit (a top-level module
or a subpackage) which other units it may import. The table is the layering of
``../shared/DESIGN.md``:

    foundation (atomic, jsonutil, session, cache, extras, plugins, registry, offload, the package itself)
      < data, sources, parse < prompts < backends < modes < predictions < naming, published, classify
      < runs < loader < stats < reference_rows, present < contexts, annotate, integrations < cli

with three rules the order alone would not give: ``stats`` imports nothing from ``runs``,
``present``, ``cli``, ``backends``, ``classify`` or ``loader`` (statistics never start runs and
know nothing of presentation); ``backends`` import nothing from ``runs``, ``cli``, ``present``,
``modes`` or ``stats``; ``present`` imports nothing from ``runs``, ``loader`` or ``cli``. Nothing
but ``cli`` imports ``cli``. The table itself must stay acyclic, and no two modules may import
each other, directly or round a longer circle.

A new top-level module or subpackage fails here until it is placed in ``MAY_IMPORT``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "casebench"

FOUNDATION = frozenset({"casebench", "atomic", "jsonutil", "cache", "extras", "plugins", "registry", "session", "input_state",
                        "offload"})

#: unit -> the other units it may import (besides itself and the foundation)
MAY_IMPORT: dict[str, frozenset[str]] = {name: frozenset(deps) for name, deps in {
    # the foundation: small helpers with no casebench dependency of their own
    "casebench": (),  # the package: lazy re-exports by name only
    "atomic": (),
    "jsonutil": (),
    # the scoring session: the memo caches of one piece of work (standard library only)
    "session": (),
    "cache": (),
    "extras": (),
    # whether an input is whole (an unfinished run or log): read by loaders, statistics and output
    "input_state": (),
    # plain calls run in a second process beside the main one (standard library only)
    "offload": (),
    # the plugin loader: every registry (backends, classifiers, metrics, modes) may ask it to
    # import plugins, so it imports them by name only (importlib), never a registry itself
    "plugins": (),
    # the one registry implementation under every decorator (it asks ``plugins`` to load)
    "registry": (),
    # the data model and what reads text
    "data": ("sources",),
    "sources": (),
    "parse": (),
    "prompts": ("data",),
    # SORRY-Bench's query rewordings (ciphers, the user's copy of its files): text in, text out
    "mutations": (),
    # backends answer prompts and know nothing of modes, runs, statistics or presentation
    "backends": ("parse",),
    # a mode asks (prompts) and reads (parse); it names the backend's answer type
    "modes": ("data", "parse", "prompts", "backends"),
    "predictions": ("data", "modes", "prompts"),
    "published": ("data", "modes", "predictions"),
    # what an input is called beside others (its facets: placement, removals, mutation)
    "naming": ("data", "modes", "predictions"),
    "classify": ("backends", "data", "parse"),
    # runs own every run, the ablation and placement studies included
    "runs": ("data", "sources", "parse", "prompts", "backends", "modes", "predictions", "published", "classify",
             "mutations"),
    # inspect logs read back (casebench's task's format, and any task's scores per sample)
    "inspect_log": ("data", "modes", "predictions", "classify", "runs"),
    "loader": ("data", "sources", "modes", "predictions", "published", "runs", "inspect_log"),
    # statistics judge predictions; they never start runs nor present
    "stats": ("data", "modes", "predictions", "naming"),
    # published reference rows: loaded (published) and scored (stats), kept on disk
    "reference_rows": ("data", "modes", "predictions", "published", "stats"),
    # presentation lays out what stats computed
    "present": ("data", "modes", "predictions", "naming", "stats"),
    # the applications built on the pipeline
    "contexts": ("data", "sources", "parse", "prompts", "backends", "modes", "predictions", "runs"),
    "annotate": ("data", "stats"),
    "integrations": ("data", "sources", "parse", "prompts", "mutations", "backends", "modes", "predictions", "naming",
                     "published", "classify", "loader", "inspect_log", "runs", "stats", "present"),
    # the command line: thin wrappers over all of the above
    "cli": ("data", "sources", "parse", "prompts", "backends", "modes", "predictions", "naming", "published", "classify",
            "mutations", "runs", "inspect_log", "loader", "stats", "reference_rows", "present", "contexts", "annotate",
            "integrations"),
}.items()}

#: what the layering must never allow, whatever the table says (the rules of DESIGN.md)
NEVER: dict[str, frozenset[str]] = {
    "stats": frozenset({"runs", "present", "cli", "backends", "classify", "loader"}),
    "backends": frozenset({"runs", "cli", "present", "stats", "modes", "classify", "loader"}),
    "present": frozenset({"runs", "loader", "cli"}),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def unit_of(module: str) -> str:
    """``casebench.stats.metrics`` -> ``stats``; ``casebench`` -> ``casebench``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _known(name: str) -> str:
    """The module a dotted name lands in (``casebench.stats.metrics.Score`` -> its module)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imports_of(module: str) -> list[tuple[int, str]]:
    """(line, imported casebench module) for every import statement of ``module``, wherever it is."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, _known(a.name)) for a in node.names if a.name.split(".")[0] == "casebench"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "casebench":
                target = node.module
            else:
                continue
            for a in node.names:  # ``from . import x`` may name a submodule
                sub = f"{target}.{a.name}"
                out.append((node.lineno, sub if sub in MODULES else _known(target)))
    return out


def test_the_reader_sees_imports_inside_functions():
    """The check is only as good as its reader: an import inside a function counts."""
    found = dict((m, line) for line, m in imports_of("casebench.modes"))
    assert "casebench.prompts" in found  # ``Mode.conversation`` imports it inside the method
    assert any(m == "casebench.stats.metrics" for _, m in imports_of("casebench.present.report_scores"))


def test_every_unit_is_placed_in_the_layers():
    units = {unit_of(m) for m in MODULES}
    missing = sorted(units - set(MAY_IMPORT))
    assert not missing, (f"new unit(s) {missing} under src/casebench: place each in MAY_IMPORT of "
                         "tests/test_import_layers.py (what it may import), following ../shared/DESIGN.md")


def test_the_layers_keep_the_rules_and_have_no_cycle():
    for unit, never in NEVER.items():
        assert not (MAY_IMPORT[unit] & never), f"MAY_IMPORT lets {unit} import {sorted(MAY_IMPORT[unit] & never)}"
    assert not any("cli" in deps for unit, deps in MAY_IMPORT.items() if unit != "cli"), "nothing but cli imports cli"
    state: dict[str, int] = {}

    def visit(u: str, path: tuple[str, ...]) -> None:
        if state.get(u) == 2:
            return
        assert state.get(u) != 1, f"MAY_IMPORT has a cycle: {' -> '.join(path + (u,))}"
        state[u] = 1
        for d in sorted(MAY_IMPORT[u]):
            visit(d, path + (u,))
        state[u] = 2

    for u in MAY_IMPORT:
        visit(u, ())
    assert all(not MAY_IMPORT[f] for f in FOUNDATION)


@pytest.mark.parametrize("unit", sorted(MAY_IMPORT))
def test_no_import_goes_back_up_the_layers(unit):
    allowed = MAY_IMPORT[unit] | FOUNDATION | {unit}
    bad = []
    for module in sorted(m for m in MODULES if unit_of(m) == unit):
        for line, target in imports_of(module):
            if unit_of(target) not in allowed:
                rel = MODULES[module].relative_to(SRC.parent.parent)
                bad.append(f"{rel}:{line}: {module} imports {target} ({unit} may not import {unit_of(target)})")
    assert not bad, "imports against the layering (see ../shared/DESIGN.md):\n  " + "\n  ".join(bad)


def test_stats_starts_no_run():
    """``runs/study.py`` owns the ablation and placement runs; no statistic imports ``runs``."""
    hits = [(m, line, t) for m in MODULES if unit_of(m) == "stats" for line, t in imports_of(m) if unit_of(t) == "runs"]
    assert not hits and "casebench.runs.study" in MODULES


def test_no_import_circle_between_modules():
    """No two modules import each other, directly or round a longer circle (imports inside
    functions included), e.g. ``modes`` <-> ``prompts``."""
    graph = defaultdict(set)
    for m in MODULES:
        for _, t in imports_of(m):
            if t != m:
                graph[m].add(t)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(MODULES):
        if v not in index:
            connect(v)
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)
