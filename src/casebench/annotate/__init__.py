"""Collecting human votes on your own cases: a small web app, its database and the export.

``casebench annotate serve DATA --db URL`` shows annotators one case at a time and stores their
votes (``db.py``: schema, versioning, assignment); ``casebench annotate export`` writes the votes
back as a CASE-Bench dataset (``export.py``) that every other command reads unchanged.

The web framework (Starlette, uvicorn, Jinja2) and SQLAlchemy are the ``web`` extra; nothing here
imports them at ``import casebench`` time.
"""

from __future__ import annotations

#: The share of safe votes the paper's annotators gave in intended-safe and intended-unsafe
#: contexts (0.6308 and 0.2453 over 9,000 votes each in the released data), unrounded so the
#: votes per case here is the figure ``casebench human`` prints for the released data (25; the
#: shares rounded to 0.63 and 0.25 gave 26). The default number of votes per case is the number
#: of annotators per context that detects this difference with 80% power at alpha 0.05, one
#: pair's two-proportion test (``casebench human power --p1 0.6308 --p2 0.2453``).
PAPER_SAFE_SHARE: tuple[float, float] = (0.6308, 0.2453)

def require_web(postgres: bool = False) -> None:
    """Fail early (``casebench.extras.MissingExtra``, naming ``pip install 'casebench[web]'``) when
    a part of the ``web`` extra is missing."""
    import importlib

    from ..extras import MissingExtra

    needed = ["sqlalchemy", "starlette", "uvicorn", "jinja2"] + (["psycopg"] if postgres else [])
    missing = []
    for name in needed:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise MissingExtra(", ".join(missing), extra="web", what="the annotation app")


def default_votes_per_case(alpha: float = 0.05, power: float = 0.8) -> tuple[int, dict]:
    """Votes per case for the paper's effect size (see ``PAPER_SAFE_SHARE``), with the analysis."""
    from ..stats.human import power_analysis

    p1, p2 = PAPER_SAFE_SHARE
    result = power_analysis(p1, p2, alpha=alpha, power=power)
    return int(result["n"]), result
