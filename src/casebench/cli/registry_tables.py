"""The documentation's tables of the built-in backends, refusal classifiers, metrics and modes,
read from their registries (they live in ``docs/``: running.md, readers.md, scoring.md).

``python -m casebench.cli.registry_tables --readme README.md docs/*.md`` rewrites every block between
``<!-- registry:KIND -->`` and ``<!-- /registry:KIND -->``; ``--check`` only says whether they
are in sync (exit 1 when not); ``--list`` prints the tables, plugins included.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Iterable



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
    from ..backends.registry import backends

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
    from ..classify.registry import classifiers

    rows = ["| `--refusal-classifier` | what | options |", "|---|---|---|"]
    for c in classifiers():
        if not _builtin(c.cls):
            continue
        name = f"`{c.spec_form}`" + "".join(f" (or `{a}`)" for a in c.aliases)
        rows.append(f"| {name} | {_cell(c.summary)} | {_flags(c.options)} |")
    return "\n".join(rows)


def table_metrics() -> str:
    """The Markdown table of the built-in metrics."""
    from ..stats.metrics import METRICS

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
    from ..modes import MODES

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
    """``python -m casebench.cli.registry_tables --readme README.md docs/*.md [--check]``."""
    ap = argparse.ArgumentParser(prog="python -m casebench.cli.registry_tables", description=__doc__.split("\n\n")[0])
    ap.add_argument("--readme", type=Path, nargs="+", help="rewrite the registry tables of these Markdown files")
    ap.add_argument("--check", action="store_true", help="only check that the documentation's tables are in sync")
    ap.add_argument("--list", action="store_true", help="print the tables (plugins included)")
    args = ap.parse_args(argv)
    if args.list or not args.readme:
        for kind, make in TABLES.items():
            print(f"## {kind}\n\n{make()}\n")
        return 0
    stale = 0
    for path in args.readme:
        old = path.read_text(encoding="utf-8")
        new = render_readme(old)
        if new == old:
            continue
        if args.check:
            print(f"{path}: the registry tables are out of date; run python -m casebench.cli.registry_tables "
                  f"--readme {path}", file=sys.stderr)
            stale += 1
        else:
            path.write_text(new, encoding="utf-8")
            print(f"{path}: registry tables rewritten")
    return 1 if stale else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
