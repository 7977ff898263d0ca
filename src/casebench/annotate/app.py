"""The annotation web app (Starlette, server-rendered Jinja2 pages, no JavaScript at all).

In an answer-labelling study (``AppConfig.study == "answers"``, ``annotate.answers``) ``/case``
shows a request and the assistant's answer with the Comply, Partial and Refuse buttons instead.

Pages: ``/`` (instructions), ``/case`` (one case, the Safe and Unsafe buttons, progress; or the
completion page; or, for an annotator who answered nothing because every case already has its
votes, a "study is full" page with no completion code, counted on the admin page), ``POST /vote`` (records one vote, then redirects to ``/case``: the vote is
committed before the next case is shown, and reloading the next page never posts again),
``/admin`` (token required), ``/healthz``, ``/style.css``.

An annotator is named by ``?annotator=ID`` or ``?PROLIFIC_PID=ID`` (1 to 64 letters, digits, '_',
'-', '.'). Every user-supplied text is escaped by Jinja2's autoescaping, and the pages forbid
scripts outright (Content-Security-Policy ``script-src 'none'``), so a query holding a script tag
is shown as text and never runs. Database errors (a PostgreSQL restart, SQLite locked for too
long) give a 503 page saying the vote was not recorded; the engine reconnects on the next request.
"""

from __future__ import annotations

import logging
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy.exc import DBAPIError, OperationalError
from starlette.applications import Starlette
import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..data import CI_PARAMETERS
from ..stats.votes import VoteStats, vote_stats
from .traits import TraitsError, TraitsForm, save_traits
from .db import VOTE_CLARIFY, VOTE_PARTIAL, VOTE_SAFE, VOTE_UNSAFE, Finished, Shown, VoteOutcome, VoteStore, valid_annotator_id

log = logging.getLogger("casebench.annotate")

TEMPLATES = Path(__file__).resolve().parent / "templates"
MAX_BODY = 4096
SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                                "base-uri 'none'; frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
DOWN = object()  # what ``guarded`` returns when the database cannot be reached
VOTE_WORDS = {"safe": VOTE_SAFE, "unsafe": VOTE_UNSAFE, "1": VOTE_SAFE, "2": VOTE_UNSAFE}
#: the words of an answer-labelling study (``annotate.answers``)
LABEL_WORDS = {"comply": VOTE_SAFE, "refuse": VOTE_UNSAFE, "partial": VOTE_PARTIAL, "clarify": VOTE_CLARIFY}
#: the page title of an answer-labelling study
ANSWERS_TITLE = "What did the assistant do?"


@dataclass(frozen=True)
class AppConfig:
    """What the pages need besides the database."""

    admin_token: str
    completion_code: str
    completion_url: str | None = None
    title: str = "Is it safe to answer?"
    db_threads: int = 0  # worker threads for database calls; 0: 2 for SQLite, 8 for PostgreSQL
    #: ``cases`` (Safe / Unsafe on cases) or ``answers`` (Comply / Partial / Refuse on a respond
    #: run's answers, ``annotate.answers``): the store's study
    study: str = "cases"
    #: case resamples behind the admin page's intervals of ability, posteriors and agreement
    admin_bootstrap: int = 200
    #: the admin page reloads itself every this many seconds (0: never), so it follows the votes live
    admin_refresh: int = 30
    #: the optional form of annotator traits (``annotate.traits``); None: no form
    traits_form: TraitsForm | None = None


class VotesModelCache:
    """The votes model (``stats.votes``) of the store's votes, refitted only when votes were added
    since the last fit (the admin page may be reloaded often; a fit takes a fraction of a second
    per few hundred votes). Thread-safe: it is called from the database worker threads."""

    def __init__(self, store: VoteStore, n_boot: int) -> None:
        self.store, self.n_boot = store, n_boot
        self._lock = threading.Lock()
        self._key: int | None = None
        self._stats: VoteStats | None = None

    def current(self) -> VoteStats | None:
        """The model of every vote so far; None before the first vote."""
        votes = self.store.case_votes()
        with self._lock:
            if self._key != len(votes):
                self._stats = vote_stats(votes, n_boot=self.n_boot) if votes else None
                self._key = len(votes)
            return self._stats


def label(key: str) -> str:
    """'nature_of_the_interaction' -> 'Nature of the interaction'."""
    words = str(key).replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def context_fields(context: Any) -> list[dict[str, Any]]:
    """A context as labelled groups of labelled fields (CI parameters in their published order,
    then anything else), for the template; values that are objects become nested fields."""
    if not isinstance(context, Mapping):
        return [{"label": "Context", "fields": [{"label": "", "value": str(context)}]}]

    def text(v: Any) -> str:
        """A value as plain words: objects deeper than the page shows become 'Key: value; ...'."""
        if isinstance(v, Mapping):
            return "; ".join(f"{label(k)}: {text(x)}" for k, x in v.items())
        if isinstance(v, list):
            return "; ".join(text(x) for x in v)
        return "" if v is None else str(v)

    def fields(obj: Mapping[str, Any], order: tuple[str, ...] = (), depth: int = 0) -> list[dict[str, Any]]:
        keys = [k for k in order if k in obj] + [k for k in obj if k not in order]
        out = []
        for k in keys:
            v = obj[k]
            if isinstance(v, Mapping) and depth == 0:
                out.append({"label": label(k), "fields": fields(v, depth=1)})
            else:
                out.append({"label": label(k), "value": text(v)})
        return out

    groups = []
    keys = [k for k in CI_PARAMETERS if k in context] + [k for k in context if k not in CI_PARAMETERS]
    for k in keys:
        v = context[k]
        if isinstance(v, Mapping):
            groups.append({"label": label(k), "fields": fields(v, CI_PARAMETERS.get(k, ()))})
        else:
            groups.append({"label": label(k), "fields": [{"label": "", "value": str(v)}]})
    return groups


def create_app(store: VoteStore, config: AppConfig) -> Starlette:
    """The Starlette app over one vote store."""
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(default=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["qs"] = lambda d: urlencode(d)
    css = (TEMPLATES / "style.css").read_bytes()
    # Database calls run in worker threads, but few of them: SQLite takes one writer at a time
    # anyway, and every extra thread competing for the GIL delays the event loop's socket work
    # (measured: p95 per vote several times higher with Starlette's default 40 threads).
    limiter_box: list[anyio.CapacityLimiter] = []

    def limiter() -> anyio.CapacityLimiter:
        if not limiter_box:  # made inside the running event loop
            limiter_box.append(anyio.CapacityLimiter(config.db_threads or (2 if store.sqlite else 8)))
        return limiter_box[0]

    # what the participant is shown and gives, in words: a case to answer, or an answer to label
    said = ({"item": "answer", "plural": "answers", "gives": "labels", "gave": "labelled"} if config.study == "answers"
            else {"item": "case", "plural": "cases", "gives": "answers", "gave": "answered"})

    def page(name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        title = ANSWERS_TITLE if config.study == "answers" and config.title == AppConfig.title else config.title
        body = env.get_template(name).render(title=title, study=config.study, w=said, **ctx)
        return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)

    def error(status: int, message: str, annotator: str | None = None) -> HTMLResponse:
        return page("error.html", status=status, message=message, annotator=annotator)

    def annotator_of(params: Mapping[str, str]) -> tuple[str | None, HTMLResponse | None]:
        """The annotator id from ?annotator= or ?PROLIFIC_PID=, or an error page."""
        given = [params[k] for k in ("annotator", "PROLIFIC_PID") if params.get(k)]
        if not given:
            return None, None
        if len(set(given)) > 1:
            return None, error(400, "The link names two different participants (annotator and PROLIFIC_PID).")
        if not valid_annotator_id(given[0]):
            return None, error(400, "The participant id in this link is not valid: it must be 1 to 64 "
                                    "letters, digits, '_', '-' or '.'.")
        return given[0], None

    async def guarded(fn: Any, *args: Any) -> Any:
        """Run a database call in a worker thread; a database outage becomes ``DOWN`` + a log line."""
        try:
            return await anyio.to_thread.run_sync(fn, *args, limiter=limiter())
        except (OperationalError, DBAPIError) as e:
            if isinstance(e, DBAPIError) and not (isinstance(e, OperationalError) or e.connection_invalidated):
                raise
            log.error("database unavailable: %s", type(e.orig).__name__ if e.orig is not None else type(e).__name__)
            return DOWN

    def unavailable(annotator: str | None) -> HTMLResponse:
        return error(503, "The database cannot be reached at the moment, so nothing was recorded. "
                          "Please wait a little and try again; your earlier answers are safe.", annotator)

    async def index(request: Request) -> Response:
        annotator, bad = annotator_of(request.query_params)
        if bad:
            return bad
        return page("index.html", annotator=annotator, traits_form=config.traits_form)

    async def show_case(request: Request) -> Response:
        annotator, bad = annotator_of(request.query_params)
        if bad:
            return bad
        if annotator is None:
            return page("index.html", status=400, annotator=None)
        got = await guarded(store.next_case, annotator)
        if got is DOWN:
            return unavailable(annotator)
        if isinstance(got, Finished):
            if got.done == 0:  # nothing answered: no completion code (a platform would pay for it)
                return page("full.html", annotator=annotator, full=got.full)
            return page("done.html", annotator=annotator, done=got.done, code=config.completion_code,
                        completion_url=config.completion_url)
        assert isinstance(got, Shown)
        rec = got.record
        percent = int(100 * got.done / got.total) if got.total else 0
        if config.study == "answers":
            return page("answer.html", annotator=annotator, case_id=got.case_id, query=str(rec.get("query", "")),
                        answer=str(rec.get("answer", "")), number=got.done + 1, total=got.total, percent=percent)
        return page("case.html", annotator=annotator, case_id=got.case_id, query=str(rec.get("query", "")),
                    groups=context_fields(rec.get("context", {})), number=got.done + 1, total=got.total,
                    percent=int(100 * got.done / got.total) if got.total else 0)

    async def vote(request: Request) -> Response:
        try:
            length = int(request.headers.get("content-length", "0"))
        except ValueError:
            return error(400, "Bad request.")
        if length > MAX_BODY:
            return error(413, "Request too large.")
        body = await request.body()
        if len(body) > MAX_BODY:
            return error(413, "Request too large.")
        try:
            form = {k: v[0] for k, v in parse_qs(body.decode("utf-8"), max_num_fields=8, strict_parsing=False).items()}
        except (UnicodeDecodeError, ValueError):
            return error(400, "The form could not be read.")
        annotator, bad = annotator_of(form)
        if bad:
            return bad
        if annotator is None:
            return error(400, "The form does not say who is answering (annotator).")
        case_text, vote_text = form.get("case", ""), form.get("vote", "").strip().lower()
        if not (case_text.isascii() and case_text.isdigit() and len(case_text) <= 9):
            return error(400, "The form names no valid case.", annotator)
        words = LABEL_WORDS if config.study == "answers" else VOTE_WORDS
        if vote_text not in words:
            return error(400, "A label is Full compliance, Partial compliance, Clarifying question or Full refusal." if config.study == "answers"
                         else "A vote is Safe or Unsafe.", annotator)
        outcome = await guarded(store.record_vote, annotator, int(case_text), words[vote_text])
        if outcome is DOWN:
            return unavailable(annotator)
        if outcome in (VoteOutcome.RECORDED, VoteOutcome.REPEATED):
            return RedirectResponse("/case?" + urlencode({"annotator": annotator}), status_code=303,
                                    headers=SECURITY_HEADERS)
        item, gives, gave = said["item"], said["gives"], said["gave"]
        one = gives[:-1]  # "answer" or "label"
        status, message = {
            VoteOutcome.UNKNOWN_CASE: (404, f"There is no such {item}."),
            VoteOutcome.FINISHED: (409, f"This {item} already has all the {gives} it needs, so your {one} was "
                                        f"not recorded. Please continue with the next {item}."),
            VoteOutcome.NOT_ASSIGNED: (409, f"This is not the {item} you are being shown now (perhaps you went "
                                            f"back a page), so your {one} was not recorded."),
            VoteOutcome.CONFLICT: (409, f"You have already {gave} this {item}; your first {one} stands."),
        }[outcome]
        return error(status, message, annotator)

    async def read_form(request: Request, fields: int) -> dict[str, str] | HTMLResponse:
        """A small urlencoded form, or an error page (too large, unreadable)."""
        try:
            length = int(request.headers.get("content-length", "0"))
        except ValueError:
            return error(400, "Bad request.")
        body = await request.body() if length <= MAX_BODY else b""
        if length > MAX_BODY or len(body) > MAX_BODY:
            return error(413, "Request too large.")
        try:
            return {k: v[0] for k, v in parse_qs(body.decode("utf-8"), max_num_fields=fields).items()}
        except (UnicodeDecodeError, ValueError):
            return error(400, "The form could not be read.")

    async def about(request: Request) -> Response:
        """The optional form of annotator traits: GET shows it, POST keeps the answers given."""
        form = config.traits_form
        if form is None:
            return error(404, "There is no such page.")
        params: Mapping[str, str] = request.query_params
        if request.method == "POST":
            got = await read_form(request, len(form.fields) + 2)
            if isinstance(got, HTMLResponse):
                return got
            params = got
        annotator, bad = annotator_of(params)
        if bad:
            return bad
        if annotator is None:
            return error(400, "The link does not say who is answering (annotator).")
        if request.method == "GET":
            return page("about.html", annotator=annotator, form=form, given={}, problem=None)
        try:
            kept = form.clean(params)
        except TraitsError as e:
            return page("about.html", status=400, annotator=annotator, form=form, given={}, problem=str(e))
        if await guarded(save_traits, store, annotator, kept) is DOWN:
            return unavailable(annotator)
        return RedirectResponse("/case?" + urlencode({"annotator": annotator}), status_code=303,
                                headers=SECURITY_HEADERS)

    def admin_allowed(request: Request) -> bool:
        given = request.query_params.get("token", "")
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        return bool(given) and secrets.compare_digest(given.encode(), config.admin_token.encode())

    model = VotesModelCache(store, config.admin_bootstrap)

    async def admin(request: Request) -> Response:
        if not admin_allowed(request):
            return error(403, "The admin page needs the admin token printed when the server started.")
        summary = await guarded(store.admin_summary)
        if summary is DOWN:
            return unavailable(None)
        stats = None
        if config.study == "cases":
            stats = await guarded(model.current)
            if stats is DOWN:
                return unavailable(None)
        if request.query_params.get("format") == "json":
            return JSONResponse({**summary, "votes_model": stats.to_dict() if stats else None},
                                headers=SECURITY_HEADERS)
        posterior = {i.case: i for i in stats.items} if stats else {}
        return page("admin.html", s=summary, m=stats, posterior=posterior, refresh=config.admin_refresh)

    async def healthz(request: Request) -> Response:
        if await guarded(store.ping) is DOWN:
            return JSONResponse({"database": "unavailable"}, status_code=503, headers=SECURITY_HEADERS)
        return JSONResponse({"database": "ok"}, headers=SECURITY_HEADERS)

    async def style(request: Request) -> Response:
        return Response(css, media_type="text/css", headers={"Cache-Control": "max-age=3600",
                                                            "X-Content-Type-Options": "nosniff"})

    async def favicon(request: Request) -> Response:
        return Response(status_code=204, headers={"Cache-Control": "max-age=86400"})

    async def not_found(request: Request, exc: Exception) -> Response:
        return error(404, "There is no such page.")

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return error(405, "Method not allowed.")

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/case", show_case, methods=["GET"]),
        Route("/vote", vote, methods=["POST"]),
        Route("/admin", admin, methods=["GET"]),
        Route("/about", about, methods=["GET", "POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/style.css", style, methods=["GET"]),
        Route("/favicon.ico", favicon, methods=["GET"]),
    ]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})
