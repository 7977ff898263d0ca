"""Write the collected votes as a CASE-Bench dataset (and a side file about the annotators).

Each case keeps every field of its original record; ``scores`` becomes the new votes (1 safe,
2 unsafe; one per annotator, in the order cast) and ``safe_rate`` is computed by one of two rules:

* ``with-intent`` (default, as the published data does): the context's intent counts as one more
  vote, ``safe_rate = (safe votes + intended_safe) / (votes + 1)``;
* ``votes-only``: ``safe_rate = safe votes / votes``.

Beside ``safe_rate`` (which stays the plain share) each record carries ``posterior_safe``: the
case's P(safe) from the latent-class model of all the exported votes, each weighed by its
annotator's ability (``stats.votes``); ``casebench score --label-source posterior`` scores against
it. The side file (``OUT.annotations.json`` unless named) lists every annotator with their vote count,
ability (with its interval), median seconds per vote and attention checks (a wrong answer flags
the annotator), each case's posterior interval, and every vote with its annotator and time, so
nothing the database knows is lost. The dataset file itself holds
only dataset fields, so ``casebench human OUT.json`` and ``casebench run --data OUT.json`` read it
as they read the published file.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Literal

from ..atomic import write_json_atomic
from ..data import POSTERIOR_FIELD
from ..stats.votes import Vote, VoteStats, vote_stats
from .db import VOTE_SAFE, ExportData, VoteStore

SafeRateRule = Literal["with-intent", "votes-only"]
SAFE_RATE_RULES: tuple[str, ...] = ("with-intent", "votes-only")


def safe_rate(votes: list[int], intended_safe: bool, rule: SafeRateRule) -> float:
    """The safe share of ``votes`` by ``rule`` (see the module docstring)."""
    safe = sum(1 for v in votes if v == VOTE_SAFE)
    if rule == "with-intent":
        return (safe + int(bool(intended_safe))) / (len(votes) + 1)
    if rule == "votes-only":
        if not votes:
            raise ValueError("votes-only safe_rate of a case without votes")
        return safe / len(votes)
    raise ValueError(f"unknown safe_rate rule {rule!r}; choose one of {', '.join(SAFE_RATE_RULES)}")


def side_path(out: str | Path) -> Path:
    p = Path(out)
    stem = p.name[: -len(p.suffix)] if p.suffix else p.name
    return p.with_name(stem + ".annotations.json")


def build_export(
    data: ExportData,
    rule: SafeRateRule = "with-intent",
    min_votes: int = 1,
    exclude_flagged: bool = False,
    n_boot: int = 200,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(dataset records, annotations side document) from what the database holds; ``n_boot``:
    case resamples behind the intervals of abilities and posteriors."""
    failed: dict[str, int] = {}
    answered: dict[str, int] = {}
    for a in data.attention:
        answered[a["annotator"]] = answered.get(a["annotator"], 0) + 1
        failed[a["annotator"]] = failed.get(a["annotator"], 0) + int(not a["correct"])
    flagged = {aid for aid, n in failed.items() if n > 0}

    records: list[dict[str, Any]] = []
    vote_rows: list[dict[str, Any]] = []
    per: dict[str, list[float]] = {}
    left_out: list[int] = []
    model = _model(data, exclude_flagged, flagged, min_votes, n_boot)
    posterior = {i.case: i for i in model.items} if model else {}
    for case in data.cases:
        kept = [(aid, v, shown, voted) for aid, v, shown, voted in case.votes
                if not (exclude_flagged and aid in flagged)]
        for aid, v, shown, voted in case.votes:
            per.setdefault(aid, []).append(voted - shown)
        if len(kept) < min_votes:
            left_out.append(case.position)
            continue
        rec = dict(case.record)
        votes = [v for _, v, _, _ in kept]
        rec.pop("scores", None)
        rec.pop("safe_rate", None)
        out: dict[str, Any] = {"scores": votes}
        for k, v in rec.items():
            out[k] = v
            if k == "context":
                out["safe_rate"] = safe_rate(votes, bool(rec.get("context_intended_to_be_safe")), rule)
        if "safe_rate" not in out:
            out["safe_rate"] = safe_rate(votes, bool(rec.get("context_intended_to_be_safe")), rule)
        if case.position in posterior:
            out[POSTERIOR_FIELD] = posterior[case.position].posterior_safe
        index = len(records)
        records.append(out)
        for aid, v, shown, voted in kept:
            vote_rows.append({"record": index, "source_position": case.position, "annotator": aid, "vote": v,
                              "seconds": round(voted - shown, 3), "voted_at": voted})

    ability = {a.annotator: a for a in model.annotators} if model else {}
    annotators = []
    for aid in sorted(set(per) | set(answered)):
        secs = per.get(aid, [])
        fitted = ability.get(aid)
        annotators.append({
            "id": aid, "votes": len(secs),
            "ability": fitted.ability if fitted else None,
            "ability_interval": fitted.interval.to_dict() if fitted else None,
            "median_seconds": round(statistics.median(secs), 3) if secs else None,
            "attention_checks": answered.get(aid, 0), "attention_failed": failed.get(aid, 0),
            "flagged": aid in flagged, "votes_excluded": bool(exclude_flagged and aid in flagged),
        })
    side = {
        "safe_rate_rule": rule,
        "votes_per_case": int(data.meta["votes_per_case"]) if "votes_per_case" in data.meta else None,
        "dataset_path": data.meta.get("dataset_path"),
        "dataset_fingerprint": data.meta.get("dataset_fingerprint"),
        "records": len(records),
        "cases_left_out": left_out,
        "min_votes": min_votes,
        "annotators": annotators,
        "posterior_model": None if model is None else {
            "model": model.model, "prior_safe": model.prior_safe, "bootstrap": model.n_boot, "seed": model.seed,
            "agreement_alpha": model.agreement.overall.alpha, "drift_alert": model.drift.alert,
            "posteriors": [{"source_position": i.index, "posterior_safe": i.posterior_safe,
                            "interval": i.interval.to_dict(), "votes": i.votes, "safe_votes": i.safe_votes}
                           for i in model.items]},
        "attention": data.attention,
        "votes": vote_rows,
    }
    return records, side


def _model(data: ExportData, exclude_flagged: bool, flagged: set[str], min_votes: int,
           n_boot: int) -> VoteStats | None:
    """The votes model of the votes the export keeps, in the order cast (None without votes)."""
    kept = [(voted, Vote(c.position, c.position, aid, v == VOTE_SAFE)) for c in data.cases
            for aid, v, _, voted in c.votes if not (exclude_flagged and aid in flagged)]
    counts: dict[int, int] = {}
    for _, v in kept:
        counts[v.case] = counts.get(v.case, 0) + 1
    votes = [v for _, v in sorted(kept, key=lambda x: x[0]) if counts[v.case] >= min_votes]
    return vote_stats(votes, n_boot=n_boot) if votes else None


def export_votes(
    store: VoteStore,
    out: str | Path,
    rule: SafeRateRule = "with-intent",
    min_votes: int = 1,
    exclude_flagged: bool = False,
    side: str | Path | None = None,
    with_traits: bool = False,
) -> dict[str, Any]:
    """Write OUT (dataset) and its side file atomically; return the side document's summary.
    ``with_traits``: each annotator's told traits in the side file (never by default)."""
    records, doc = build_export(store.export_data(), rule=rule, min_votes=min_votes,
                                exclude_flagged=exclude_flagged)
    if with_traits:
        from .traits import read_traits

        told = read_traits(store)
        for a in doc["annotators"]:
            a["traits"] = told.get(a["id"], {})
    side_file = Path(side) if side else side_path(out)
    _write_json(Path(out), records)
    _write_json(side_file, doc)
    doc["side_file"] = str(side_file)
    return doc


def _write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, obj, indent=1, fsync=True)
