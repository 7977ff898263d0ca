"""``casebench annotate``: collect human votes in a web app; export them as a dataset.

    casebench annotate serve DATA --db URL [--votes-per-case N] [--host H] [--port P] ...
    casebench annotate export --db URL -o OUT.json [--safe-rate with-intent|votes-only]
    casebench annotate answers RUN_DIR --sample N --db URL      # label a respond run's answers
    casebench annotate export --db URL --answers RUN_DIR        # ... into RUN_DIR/reader_labels.csv

Needs the ``web`` extra (Starlette, uvicorn, Jinja2, SQLAlchemy; psycopg for PostgreSQL).
"""

from __future__ import annotations

import logging
import secrets
import socket
import sys
from pathlib import Path
from typing import Any

import click

from ._common import HELP, BadInput, bad_input_errors, dataset_argument

DEFAULT_DB = "sqlite:///votes.db"


@click.group("annotate", context_settings={"help_option_names": ["-h", "--help"]})
def annotate_group() -> None:
    """Collect human votes in a web app; export them as a dataset.

    \b
      casebench annotate serve DATA --db sqlite:///votes.db      # or --db postgresql://user@host/db
      casebench annotate export --db sqlite:///votes.db -o OUT.json
      casebench annotate answers RUN_DIR --sample 100 --db sqlite:///labels.db   # check the refusal reader
      casebench annotate export --db sqlite:///labels.db --answers RUN_DIR
      casebench annotate stats --db sqlite:///votes.db [--json]   # ability, posteriors, agreement, drift
      casebench annotate plan --db sqlite:///pilot.db --target-power 0.8 -o plan.json   # votes per case
    """


def _open_store(db: str, settings: Any = None, create: bool = True, sqlite_sync: str = "full") -> Any:
    """Check the extra, connect, create/upgrade the schema; every failure is exit 2 with a message."""
    from ..annotate import require_web

    with bad_input_errors():
        require_web(postgres=db.startswith(("postgresql", "postgres:")))
    from sqlalchemy.exc import ArgumentError, DBAPIError

    from ..annotate.db import StoreError, VoteStore, safe_url

    try:
        return VoteStore.open(db, settings, create=create, sqlite_sync=sqlite_sync)
    except StoreError as e:
        raise BadInput(f"{safe_url(db)}: {e}") from None
    except ArgumentError:
        raise BadInput(f"--db {db!r} is not a database URL (sqlite:///FILE or postgresql://USER@HOST/DB)") from None
    except DBAPIError as e:
        reason = str(e.orig).strip().splitlines()[0] if e.orig is not None else type(e).__name__
        raise BadInput(f"cannot open the database {safe_url(db)}: {reason}") from None


def _attention_cases(path: str) -> list[tuple[dict[str, Any], int]]:
    """Attention checks: records with a query, a context and ``expected`` ("safe" or "unsafe")."""
    from ..data import DatasetError, read_records

    records = read_records(path)
    problems: list[tuple[int | None, str | None, str]] = []
    out = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            problems.append((i, None, "must be a JSON object"))
            continue
        if not (isinstance(rec.get("query"), str) and rec["query"].strip()):
            problems.append((i, "query", "must be a non-empty string"))
        if not isinstance(rec.get("context"), dict):
            problems.append((i, "context", "must be an object"))
        exp = rec.get("expected")
        if exp not in ("safe", "unsafe"):
            problems.append((i, "expected", f"must be \"safe\" or \"unsafe\" (the right answer), found {exp!r}"))
            continue
        out.append(({k: v for k, v in rec.items() if k != "expected"}, 1 if exp == "safe" else 2))
    if not records:
        problems.append((None, None, "the file holds no attention checks"))
    if problems:
        raise DatasetError(path, problems)
    return out


def _server_options(f: Any) -> Any:
    """The options both annotation servers (``serve``, ``answers``) share: the completion page, the
    admin token, how long a handed-out item stays reserved and how the database syncs."""
    for opt in reversed([
        click.option("--completion-code", default=None,
                     help="Code shown when an annotator is done (default: one made on first start, kept in the "
                          "database)."),
        click.option("--completion-url", default=None, help="A link shown on the completion page (e.g. Prolific's)."),
        click.option("--admin-token", envvar="CASEBENCH_ADMIN_TOKEN", default=None,
                     help="Token for /admin (env CASEBENCH_ADMIN_TOKEN; default: a new random one, printed)."),
        click.option("--reserve-minutes", type=click.FloatRange(min=0.05), default=20.0, show_default=True,
                     help=HELP["--reserve-minutes"]),
        click.option("--sqlite-sync", type=click.Choice(["full", "normal"]), default="full", show_default=True,
                     help=HELP["--sqlite-sync"]),
    ]):
        f = opt(f)
    return f


def _bind(host: str, port: int) -> socket.socket:
    """Bind the listening socket ourselves, so --port 0 works and the printed URL is the real one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto given explicitly: asyncio sets TCP_NODELAY only on sockets that say IPPROTO_TCP, and
    # without it every response on a kept-alive connection waits ~40 ms for a delayed ACK
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise BadInput(f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class VotesPerCase(click.ParamType):  # type: ignore[type-arg]  # generic in click >= 8.2 only
    """``--votes-per-case``: a whole number, or a plan written by ``annotate plan -o PLAN.json``."""

    name = "N|PLAN.json"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if text.isdigit():
            if int(text) < 1:
                self.fail("must be at least 1", param, ctx)
            return int(text)
        import json

        path = Path(text)
        if not path.is_file():
            self.fail(f"{text!r} is neither a whole number nor a plan file (annotate plan -o PLAN.json)", param, ctx)
        try:
            plan = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            self.fail(f"{text}: not a JSON plan ({e})", param, ctx)
        n = plan.get("votes_per_case") if isinstance(plan, dict) else None
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            self.fail(f"{text}: field 'votes_per_case' must be a whole number of at least 1 (the plan reached no "
                      f"answer within its max_votes), found {n!r}", param, ctx)
        return n


@annotate_group.command("serve")
@click.argument("data", type=click.Path(dir_okay=False), required=False)
@click.option("--db", default=DEFAULT_DB, show_default=True,
              help=HELP["--db"])
@click.option("--votes-per-case", type=VotesPerCase(), default=None,
              help="Votes each case gets: a number, or a plan from `annotate plan -o PLAN.json`. Default: "
                   "annotators per context for 80% power on the paper's context effect (casebench human power "
                   "--p1 0.6308 --p2 0.2453).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="0: any free port.")
@click.option("--one-context-per-query", is_flag=True,
              help="Never show one annotator two contexts of the same query.")
@click.option("--attention-checks", type=click.Path(dir_okay=False), default=None,
              help="JSON/JSONL records with query, context and expected (\"safe\"/\"unsafe\"); wrong answers "
                   "are flagged in the export.")
@click.option("--attention-every", type=click.IntRange(min=1), default=10, show_default=True,
              help="Show the next attention check after every this many votes.")
@click.option("--cases-per-annotator", type=click.IntRange(min=1), default=None,
              help="At most this many cases per annotator (default: as many as need them).")
@_server_options
@click.option("--traits-form", type=click.Path(dir_okay=False), default=None,
              help="An optional form of annotator traits (JSON: fields with name, label and choices; every answer "
                   "optional, kept apart from the votes); kept in the database for later starts.")
@click.option("--access-log", is_flag=True, help="Log every request (off by default).")
def serve_cmd(data: str | None, db: str, votes_per_case: int | None, host: str, port: int, one_context_per_query: bool,
              attention_checks: str | None, attention_every: int, cases_per_annotator: int | None,
              completion_code: str | None, completion_url: str | None, admin_token: str | None,
              reserve_minutes: float, sqlite_sync: str, traits_form: str | None, access_log: bool) -> None:
    """Serve DATA to annotators, one case at a time, and store their votes in --db.

    Annotators open /?PROLIFIC_PID=ID (or /?annotator=ID). Restarting with the same DATA and --db
    carries on where the study stopped. DATA defaults to $CASEBENCH_DATA, else the user cache.
    """
    from ..annotate import PAPER_SAFE_SHARE, default_votes_per_case
    from ..data import load_dataset

    data = dataset_argument(data)

    from ..annotate.traits import TraitsError, TraitsForm

    with bad_input_errors():
        ds = load_dataset(data)
        attention = _attention_cases(attention_checks) if attention_checks else []
    try:
        form = TraitsForm.read(traits_form) if traits_form else None
    except TraitsError as e:
        raise BadInput(str(e)) from None
    if completion_code is not None and not (0 < len(completion_code) <= 64 and completion_code.isprintable()):
        raise BadInput("--completion-code must be 1 to 64 printable characters")
    if completion_url is not None and not completion_url.startswith(("https://", "http://")):
        raise BadInput("--completion-url must be an http(s) URL")
    power_note = ""
    if votes_per_case is None:
        votes_per_case, pw = default_votes_per_case()
        power_note = (f" (80% power, alpha 0.05, for the paper's context effect: {PAPER_SAFE_SHARE[0]:g} vs "
                      f"{PAPER_SAFE_SHARE[1]:g} safe votes, Cohen's h {pw['effect_size_h']:.3f}; "
                      f"casebench human power --p1 {PAPER_SAFE_SHARE[0]:g} --p2 {PAPER_SAFE_SHARE[1]:g})")

    from ..annotate.db import Settings, StoreError, safe_url

    settings = Settings(votes_per_case=votes_per_case, one_context_per_query=one_context_per_query,
                        attention_every=attention_every, cases_per_annotator=cases_per_annotator,
                        reserve_seconds=reserve_minutes * 60.0)
    store = _open_store(db, settings, sqlite_sync=sqlite_sync)
    try:
        records = []
        for c in ds:
            rec = c.to_record()
            rec.pop("scores", None)
            rec.pop("safe_rate", None)
            records.append(rec)
        try:
            new = store.load_cases(records, attention, dataset_path=str(Path(data).resolve()))
        except StoreError as e:
            raise BadInput(f"{safe_url(db)}: {e}") from None
        extra = [f"attention checks: {len(attention)}, one after every {attention_every} votes"] if attention else []
        form = _traits_form(store, form)
        if form is not None:
            extra.append(f"optional traits form: {', '.join(f.name for f in form.fields)} (at /about)")
        _run_app(store, db=db, what=f"{len(records)} cases from {data}", new=new, host=host, port=port,
                 admin_token=admin_token, completion_code=completion_code, completion_url=completion_url,
                 access_log=access_log, per_item=("votes per case", votes_per_case, power_note), extra=extra,
                 traits_form=form)
    finally:
        store.close()


def _run_app(store: Any, *, db: str, what: str, new: bool, host: str, port: int, admin_token: str | None,
             completion_code: str | None, completion_url: str | None, access_log: bool,
             per_item: tuple[str, int, str], extra: list[str], study: str = "cases",
             traits_form: Any = None) -> None:
    """Print the start-up lines (the URLs, the admin token, the completion code) and serve the app
    over ``store`` until stopped: one path for a study of cases and one of answers."""
    from ..annotate.db import safe_url

    words, n, note = per_item
    meta = store.meta()
    previous_n = meta.get("votes_per_case")
    code = completion_code or meta.get("completion_code") or secrets.token_hex(4).upper()
    store.set_meta({"votes_per_case": str(n), "completion_code": code})
    summary = store.admin_summary()
    token = admin_token or secrets.token_urlsafe(18)

    sock = _bind(host, port)
    real_port = sock.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    base = f"http://{shown_host}:{real_port}"
    done = "labels" if study == "answers" else "votes"
    state = "new study" if new else f"resuming: {summary['votes']} {done} so far, {summary['cases_complete']} complete"
    echo = lambda s: click.echo(s)  # noqa: E731
    echo(f"casebench annotate: {what} ({state}); database {safe_url(db)}, schema version {meta['schema_version']}")
    for line in extra:
        echo(line)
    echo(f"{words}: {n}{note}")
    if previous_n and previous_n != str(n):
        echo(f"note: {words} changed from {previous_n} to {n}")
    echo(f"annotators: {base}/?PROLIFIC_PID=<id>   (or {base}/?annotator=<id>)")
    echo(f"admin:      {base}/admin?token={token}")
    echo(f"completion code: {code}")
    sys.stdout.flush()

    import uvicorn

    from ..annotate.app import AppConfig, create_app

    logging.basicConfig(level=logging.INFO, format="casebench annotate: %(levelname)s %(message)s",
                        stream=sys.stderr)
    app = create_app(store, AppConfig(admin_token=token, completion_code=code, completion_url=completion_url,
                                      study=study, traits_form=traits_form))
    config = uvicorn.Config(app, log_level="warning", access_log=access_log, lifespan="off",
                            timeout_keep_alive=30, server_header=False)
    uvicorn.Server(config).run(sockets=[sock])


@annotate_group.command("answers")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--sample", "n_sample", type=click.IntRange(min=1), default=100, show_default=True,
              help="How many of the run's answers to serve, stratified by the reader's verdict and the context's "
                   "intent (proportional allocation: the sample is self-weighting).")
@click.option("--sample-seed", "--seed", "sample_seed", type=int, default=0, show_default=True,
              help="Seed of the sample's draw within each stratum (--seed: the same, the older name).")
@click.option("--target-width", type=click.FloatRange(0, 2, min_open=True, max_open=True), default=None,
              help="Only say how many labels would give the run's refusal rate (from people's labels, PPI++) a "
                   "95% interval of this width, from the reader's stored validation; serve nothing.")
@click.option("--db", default="sqlite:///answer_labels.db", show_default=True,
              help=HELP["--db"])
@click.option("--labels-per-answer", type=click.IntRange(min=1), default=1, show_default=True,
              help="How many people label each answer (the export takes the majority; ties are left out).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="0: any free port.")
@click.option("--answers-per-annotator", type=click.IntRange(min=1), default=None,
              help="At most this many answers per annotator (default: as many as need them).")
@_server_options
@click.option("--access-log", is_flag=True, help="Log every request (off by default).")
@click.option("--turns", "by_turn", is_flag=True, default=False,
              help="A reveal run (--context-as reveal-early/late): sample the answers of every turn, stratified by turn "
                   "too; labels of earlier turns are exported apart (reader_turn_labels.csv), as they measure the "
                   "reader inside a conversation, not the run's final answers.")
def answers_cmd(run_dir: str, n_sample: int, sample_seed: int, target_width: float | None, db: str, labels_per_answer: int, host: str, port: int,
                answers_per_annotator: int | None, completion_code: str | None, completion_url: str | None,
                admin_token: str | None, reserve_minutes: float, sqlite_sync: str, access_log: bool,
                by_turn: bool = False) -> None:
    """Serve a sample of a respond run's answers for people to label comply / partial / refuse.

    The labels measure the refusal reader's error on this very model's answers: export them into
    the run (`casebench annotate export --db URL --answers RUN_DIR`) and the run's scores, report
    and corrected refusal rates use them; `casebench refusal-eval RUN_DIR/reader_labels.csv`
    scores any reader on them. Restarting with the same run, --sample, --sample-seed and --db carries on
    where the study stopped. Each answer's sampling weight is recorded with it, and the run's
    figures from the labels use it.
    """
    from ..annotate.answers import AnswerItem, draw_sample
    from ..annotate.db import Settings, StoreError, safe_url
    from ..runs.record import RunError, final_records, iter_records, read_manifest
    from ..runs.results import run_dataset

    if completion_code is not None and not (0 < len(completion_code) <= 64 and completion_code.isprintable()):
        raise BadInput("--completion-code must be 1 to 64 printable characters")
    if completion_url is not None and not completion_url.startswith(("https://", "http://")):
        raise BadInput("--completion-url must be an http(s) URL")
    try:
        m = read_manifest(run_dir)
        if m.asked.classifier is None:
            raise BadInput(f"{run_dir}: a {m.mode} run; only a respond run's answers are read by a refusal reader")
        ds = run_dataset(run_dir, m)
        finals = final_records(iter_records(run_dir))
    except (RunError, OSError, ValueError) as e:
        raise BadInput(str(e)) from None
    items = [AnswerItem(case=c, sample=s, query=ds[c].query, answer=rec.text, reader=rec.behaviour,
                        intended_safe=ds[c].intended_safe,
                        **({"turn": rec.detail.get("turn"), "turns": rec.detail.get("turns")} if by_turn else {}))
             for (c, s), rec in sorted(finals.items()) if rec.text and rec.text.strip()]
    if by_turn:
        items += _earlier_turns(run_dir, m, ds)
        if target_width is not None:
            raise BadInput("--target-width plans the labels of the run's final answers; leave out --turns")
    if not items:
        raise BadInput(f"{run_dir}: the run holds no answer text to label")
    if target_width is not None:
        _say_labels_needed(run_dir, m, items, target_width)
        return
    drawn = draw_sample(items, n_sample, sample_seed)
    chosen = [d.item for d in drawn]
    run = str(Path(run_dir).resolve())
    records = [d.item.record(run, d.weight) for d in drawn]
    settings = Settings(votes_per_case=labels_per_answer, cases_per_annotator=answers_per_annotator,
                        reserve_seconds=reserve_minutes * 60.0, )
    store = _open_store(db, settings, sqlite_sync=sqlite_sync)
    try:
        try:
            new = store.load_cases(records, dataset_path=run, study="answers")
        except StoreError as e:
            raise BadInput(f"{safe_url(db)}: {e}") from None
        strata = ", ".join(f"{k} {v}" for k, v in sorted(_count(str(it.reader) for it in chosen).items()))
        _run_app(store, db=db, what=f"{len(records)} of {len(items)} answers of the respond run {run_dir}", new=new,
                 host=host, port=port, admin_token=admin_token, completion_code=completion_code,
                 completion_url=completion_url, access_log=access_log,
                 per_item=("labels per answer", labels_per_answer, ""),
                 extra=[f"sample: stratified by the reader's verdict and the context's intent (seed {sample_seed}); "
                        f"reader's verdicts in it: {strata}"], study="answers")
    finally:
        store.close()


def _earlier_turns(run_dir: str, m: Any, ds: Any) -> list[Any]:
    """The answers of a reveal run's earlier turns as items to label (``--turns``): each shown
    with the user turn it answered."""
    from ..annotate.answers import AnswerItem
    from ..prompts import REVEAL_PLACEMENTS
    from ..runs.record import RunError
    from ..runs.reveal import iter_turns

    if m.asked.context_as not in REVEAL_PLACEMENTS:
        raise BadInput(f"--turns: {run_dir} is not a reveal run (its context is placed as {m.asked.context_as}); "
                       "its answers have one turn")
    try:
        turns = list(iter_turns(run_dir))
    except RunError as e:
        raise BadInput(str(e)) from None
    return [AnswerItem(case=t.case, sample=t.sample, query=t.prompt, answer=t.text, reader=t.behaviour,
                       intended_safe=ds[t.case].intended_safe, turn=t.turn + 1, turns=t.turns)
            for t in sorted(turns, key=lambda t: t.key) if t.text.strip()]


def _say_labels_needed(run_dir: str, m: Any, items: list[Any], width: float) -> None:
    """``answers --target-width W``: how many labels the run's refusal rate needs for an interval
    of width W (``stats.people_refusal.labels_needed``), from the reader's stored validation."""
    from ..runs.results import run_classifier
    from ..stats.people_refusal import plan_labels

    partial_safe = str((m.asked.classifier or {}).get("partial_as") or "unsafe") == "safe"
    read = [it for it in items if it.reader]
    if not read:
        raise BadInput(f"{run_dir}: the reader read none of the run's answers")
    val = run_classifier(run_dir, m).get("validation") or {}
    if not val.get("matrix"):
        raise BadInput(f"{run_dir}: the reader has no stored validation with counts to plan from "
                       "(casebench refusal-eval measures one)")
    got = plan_labels(width, [1 if it.reader == "refuse" or (it.reader == "partial" and not partial_safe) else 0
                              for it in read], [it.query for it in read], val)
    if got is None:
        raise BadInput(f"{run_dir}: the reader's stored validation has no refusals or no answers to plan from")
    sets = got["sets"]
    where = (f"refusal rate {got['observed_rate']:.1%} as read over {len(read)} answers, design effect "
             f"{got['design_effect']:.2f} (queries); the reader's sensitivity {got['sensitivity']:.3f} and specificity "
             f"{got['specificity']:.3f} pooled over {sets} validation set{'s' if sets != 1 else ''} "
             f"({val.get('what') or val.get('set')})")
    click.echo(f"target: a 95% interval {width:g} wide for the refusal rate from people's labels ({where})")
    for key, words in (("n_ppi", "with the reader's readings (PPI++)"), ("n_labels_only", "from the labels alone")):
        n = got[key]
        click.echo(f"  {words}: " + (f"{n} labels (rounded up)" if n is not None else
                                     "not reachable even with every answer labelled (the run is too small)"))
    click.echo("  (a plan from the pooled validation and the run's clustering; the interval the labels give is "
               "measured on them)")


def _count(xs: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


@annotate_group.command("export")
@click.option("--db", default=DEFAULT_DB, show_default=True, help=HELP["--db"])
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), default=None,
              help="The dataset file to write (CASE-Bench JSON); a study of cases needs it.")
@click.option("--answers", "answers_out", type=click.Path(), default=None,
              help="A study of a respond run's answers (annotate answers): write the labels here, in XSTest's CSV "
                   "format; a directory (the run) gets reader_labels.csv, which the run's scores then use.")
@click.option("--labelled-by", type=click.Choice(["people", "ai", "writer"]), default="people", show_default=True,
              help=HELP["--labelled-by"])
@click.option("--safe-rate", "rule", type=click.Choice(["with-intent", "votes-only"]), default="with-intent",
              show_default=True,
              help="with-intent: (safe votes + intended safe) / (votes + 1), as the published data; "
                   "votes-only: safe votes / votes.")
@click.option("--min-votes", type=click.IntRange(min=1), default=1, show_default=True,
              help="Leave out cases with fewer votes (they cannot have a safe_rate).")
@click.option("--exclude-flagged", is_flag=True, help="Drop the votes of annotators who failed an attention check.")
@click.option("--annotations", type=click.Path(dir_okay=False), default=None,
              help="Side file with annotators, attention checks and every vote (default OUT.annotations.json).")
@click.option("--with-traits", is_flag=True,
              help="Also write what each annotator told on the optional traits form (side file; never by default).")
def export_cmd(db: str, out: str | None, answers_out: str | None, labelled_by: str, rule: str, min_votes: int, exclude_flagged: bool,
               annotations: str | None, with_traits: bool) -> None:
    """Write the votes in --db as a CASE-Bench dataset that every casebench command reads; or,
    for a study of a respond run's answers, the labels with --answers."""
    store = _open_existing(db)
    if store.study == "answers" or answers_out is not None:
        try:
            _export_answers(store, answers_out, labelled_by)
        finally:
            store.close()
        return
    if out is None:
        store.close()
        raise BadInput("give -o OUT.json, the dataset to write")
    try:
        from ..annotate.export import export_votes

        doc = export_votes(store, out, rule=rule, min_votes=min_votes,  # type: ignore[arg-type]
                           exclude_flagged=exclude_flagged, side=annotations, with_traits=with_traits)
    finally:
        store.close()
    n = doc["votes_per_case"]
    flagged = sum(1 for a in doc["annotators"] if a["flagged"])
    short = 0
    if n:
        short = sum(1 for v in _votes_per_record(doc) if v < n)
    click.echo(f"wrote {doc['records']} cases ({len(doc['votes'])} votes from {len(doc['annotators'])} annotators; "
               f"safe_rate {rule}) to {out}")
    if doc["cases_left_out"]:
        click.echo(f"left out {len(doc['cases_left_out'])} cases with fewer than {min_votes} votes", err=True)
    if short:
        click.echo(f"note: {short} cases hold fewer than the {n} votes asked for", err=True)
    if flagged:
        what = "their votes left out" if exclude_flagged else "their votes kept; --exclude-flagged drops them"
        click.echo(f"note: {flagged} annotators failed an attention check ({what})", err=True)
    click.echo(f"annotators, attention checks and every vote: {doc['side_file']}")


@annotate_group.command("stats")
@click.option("--db", default=DEFAULT_DB, show_default=True, help=HELP["--db"])
@click.option("--json", "as_json", is_flag=True, help=HELP["--json"])
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=0), default=400, show_default=True,
              help="Case resamples behind the intervals (0: none).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the case resamples.")
@click.option("--level", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95, show_default=True,
              help=HELP["--level"])
@click.option("--window", type=click.IntRange(min=2), default=None,
              help="Votes per window of time, in the order cast (default: a sixth of the votes, at least 30).")
@click.option("--by", "by", default=None, metavar="TRAIT",
              help="Instead: agreement within and across the groups of annotators this trait makes (from the "
                   "optional traits form), and each group's safe share per case with intervals.")
def stats_cmd(db: str, as_json: bool, n_boot: int, seed: int, level: float, window: int | None,
              by: str | None) -> None:
    """Annotator ability, each case's posterior P(safe), agreement over time and drift, from the
    votes in --db (a latent-class model of the votes: casebench.stats.votes)."""
    import json

    from ..annotate.traits import read_traits
    from ..present.votes import vote_stats_lines
    from ..present.votes import trait_lines
    from ..stats.vote_groups import trait_groups
    from ..stats.votes import VotesError, vote_stats

    store = _open_existing(db)
    try:
        if store.study == "answers":
            raise BadInput("annotate stats models safe/unsafe votes on cases; this database holds labels of answers")
        votes = store.case_votes()
        traits = read_traits(store) if by is not None else {}
    finally:
        store.close()
    if by is not None:
        try:
            groups = trait_groups(votes, traits, by, n_boot=n_boot, seed=seed, level=level)
        except VotesError as e:
            raise BadInput(f"--db {db}: {e}") from None
        for line in ([json.dumps(groups.to_dict(), indent=1)] if as_json else trait_lines(groups)):
            click.echo(line)
        return
    try:
        result = vote_stats(votes, n_boot=n_boot, seed=seed, level=level, window=window)
    except VotesError as e:
        raise BadInput(f"--db {db}: {e}") from None
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
        return
    for line in vote_stats_lines(result):
        click.echo(line)


@annotate_group.command("plan")
@click.option("--db", default=None, help="A pilot's vote database (the one given to `annotate serve`).")
@click.option("--data", "data_path", type=click.Path(dir_okay=False), default=None,
              help="Or a dataset file with votes ('scores'), e.g. CASE-Bench's own.")
@click.option("--target-width", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="Plan for a case's safe share whose interval is at most this wide (on average).")
@click.option("--target-power", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="Plan for this power to detect a query's context effect (Fisher's exact test).")
@click.option("--level", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95, show_default=True,
              help="Level of the interval (--target-width).")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05, show_default=True,
              help="Significance level of the test (--target-power).")
@click.option("--draws", type=click.IntRange(min=1), default=40, show_default=True,
              help="Draws of each case's share from the fitted model.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--max-votes", type=click.IntRange(min=2, max=1000), default=200, show_default=True,
              help="The most votes per case considered.")
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), default=None,
              help="Write the plan as JSON here; `annotate serve --votes-per-case PLAN.json` takes it.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def plan_cmd(db: str | None, data_path: str | None, target_width: float | None, target_power: float | None,
             level: float, alpha: float, draws: int, seed: int, max_votes: int, out: str | None,
             as_json: bool) -> None:
    """Votes per case for a target width of a case's safe share, or a target power for the
    context effect, simulated from a model fitted to a pilot's votes (casebench.stats.vote_plan)."""
    import json

    from ..atomic import write_json_atomic
    from ..present.votes import plan_lines
    from ..stats.vote_plan import PlanError, plan_votes

    if (db is None) == (data_path is None):
        raise BadInput("give the pilot's votes: --db URL or --data FILE (one of them)")
    if (target_width is None) == (target_power is None):
        raise BadInput("give one target: --target-width W or --target-power P")
    pilot, source = _pilot(db, data_path)
    try:
        plan = plan_votes(pilot, "width" if target_width is not None else "power",
                          target_width if target_width is not None else float(target_power or 0), level=level,
                          alpha=alpha, draws=draws, seed=seed, max_votes=max_votes, source=source)
    except PlanError as e:
        raise BadInput(f"{source}: {e}") from None
    if out:
        write_json_atomic(Path(out), plan.to_dict(), indent=1)
    if as_json:
        click.echo(json.dumps(plan.to_dict(), indent=1))
        return
    for line in plan_lines(plan):
        click.echo(line)
    if out:
        click.echo(f"plan written to {out}" + ("" if plan.votes_per_case is None
                                                 else f"; annotate serve --votes-per-case {out} takes it"))


def _pilot(db: str | None, data_path: str | None) -> tuple[list[Any], str]:
    """The pilot's cases (``stats.vote_plan.PilotCase``) from a vote database or a dataset file."""
    from ..annotate.db import VOTE_SAFE, query_key, safe_url
    from ..stats.vote_plan import PilotCase

    if data_path is not None:
        from ..data import load_dataset

        with bad_input_errors():
            ds = load_dataset(data_path)
        return [PilotCase(sum(1 for v in c.votes if v == 1), len(c.votes), c.intended_safe, query_key(c.query))
                for c in ds], data_path
    assert db is not None
    store = _open_existing(db)
    try:
        if store.study == "answers":
            raise BadInput("annotate plan plans votes on cases; this database holds labels of answers")
        data = store.export_data()
    finally:
        store.close()
    return [PilotCase(sum(1 for _, v, _, _ in c.votes if v == VOTE_SAFE), len(c.votes),
                      bool(c.record.get("context_intended_to_be_safe")), query_key(str(c.record.get("query", ""))))
            for c in data.cases], safe_url(db)


def _traits_form(store: Any, given: Any) -> Any:
    """The traits form in force: the one given now (kept in the database), else the one kept."""
    import json

    from ..annotate.traits import META_KEY, form_of

    if given is not None:
        store.set_meta({META_KEY: json.dumps(given.to_dict())})
        return given
    return form_of(store)


def _open_existing(db: str) -> Any:
    """An existing vote database (a SQLite file that is not there is refused, not created)."""
    if db.startswith("sqlite:///"):
        path = db[len("sqlite:///"):]
        if path and path != ":memory:" and not Path(path).is_file():
            raise BadInput(f"--db {db}: no such database file")
    return _open_store(db, create=False)


def _export_answers(store: Any, answers_out: str | None, labelled_by: str = "people") -> None:
    """``export --answers``: the labels of an answer study, in XSTest's CSV format."""
    from ..annotate.answers import earlier_turn, labelled_rows, labels_csv, turn_labels_csv
    from ..atomic import write_text_atomic
    from ..classify.validation import RUN_LABELS_FILE, RUN_TURN_LABELS_FILE

    if store.study != "answers":
        raise BadInput("--answers: this database holds votes on cases, not labels of answers; export it with -o")
    if answers_out is None:
        raise BadInput("this database holds labels of a respond run's answers: give --answers RUN_DIR (or a CSV path)")
    rows = labelled_rows(store.export_data())
    if not rows:
        raise BadInput("no answer has a label yet: nothing to export")
    target = Path(answers_out)
    earlier = [r for r in rows if earlier_turn(r.record)]
    if earlier:  # a reveal run sampled by turn: the earlier turns' labels apart from the final answers'
        where = target / RUN_TURN_LABELS_FILE if target.is_dir() else target.with_name(target.stem + "_turns.csv")
        write_text_atomic(where, turn_labels_csv(earlier, labelled_by))
        click.echo(f"wrote {sum(1 for r in earlier if r.label)} labelled answers of earlier turns to {where}")
        rows = [r for r in rows if not earlier_turn(r.record)]
    target = target / RUN_LABELS_FILE if target.is_dir() else target
    if not rows:
        return
    write_text_atomic(target, labels_csv(rows, labelled_by))
    ties = sum(1 for r in rows if r.label is None)
    counts = _count(r.label for r in rows if r.label)
    click.echo(f"wrote {len(rows) - ties} labelled answers ("
               + ", ".join(f"{k} {counts[k]}" for k in ("comply", "partial", "refuse") if k in counts)
               + f"; labelled by {labelled_by}) to {target}")
    if ties:
        click.echo(f"left out {ties} answers whose labels tie", err=True)


def _votes_per_record(doc: dict[str, Any]) -> list[int]:
    counts = [0] * doc["records"]
    for v in doc["votes"]:
        counts[v["record"]] += 1
    return counts
