"""The vote database: a versioned schema, the cases, who is shown what, and the votes.

SQLite (one file, the default) or PostgreSQL (a team's server), through SQLAlchemy Core.
Correctness rests on the database, not on the web process, so that several server processes,
reloads, back buttons and double clicks cannot break it:

* ``UNIQUE(case_id, annotator_id)`` on ``votes``: an annotator votes on a case at most once.
* A vote raises ``cases.votes`` with ``UPDATE ... WHERE votes < N`` in the same transaction as its
  ``INSERT``: a case never holds more than N votes, even when several annotators were shown it.
* Choosing an annotator's next case is one transaction under a lock (``BEGIN IMMEDIATE`` on
  SQLite; a transaction-scoped advisory lock on PostgreSQL) and counts the cases other annotators
  hold on screen (``assignments``, a reservation that lapses after ``reserve_seconds``), so two
  annotators are not both given the last open slot of a case.

The schema carries its version in ``casebench_meta``; ``VoteStore.open`` creates it on first
start, applies the migrations in ``MIGRATIONS`` to an older one and refuses a newer one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import threading
import time
import zlib
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from sqlalchemy import (
    CheckConstraint, Column, Float, ForeignKey, Index, Integer, MetaData, SmallInteger, String, Table,
    Text, UniqueConstraint, create_engine, event, func, inspect, select, text,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import IntegrityError

if TYPE_CHECKING:
    from ..stats.votes import Vote

#: Bump when the tables change, and add the step from the previous version to ``MIGRATIONS``.
#: Version 2: a vote may be 3 (``VOTE_PARTIAL``: a respond answer labelled partial, in an
#: answer-labelling study, ``annotate.answers``). Version 3: ``annotator_traits``, what an
#: annotator chose to say about themselves (``annotate.traits``), kept apart from the votes.
#: Version 4: a vote may be 4 (``VOTE_CLARIFY``: a respond answer labelled a clarifying question,
#: the fourth outcome of ``classify.outcome``).
SCHEMA_VERSION = 4
#: An annotator id (a Prolific PID is 24 hex digits): letters, digits, '_', '-', '.'; 1 to 64.
ANNOTATOR_ID_MAX = 64
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.")
#: Advisory lock key (PostgreSQL) that serialises the choice of next cases.
_ASSIGN_LOCK_KEY = 0x0CA5EBE4C
VOTE_SAFE, VOTE_UNSAFE = 1, 2
#: an answer-labelling study (``annotate.answers``) reads 1 as comply, 2 as refuse, 3 as partial
#: and 4 as a clarifying question
VOTE_PARTIAL = 3
VOTE_CLARIFY = 4
VOTES: tuple[int, ...] = (VOTE_SAFE, VOTE_UNSAFE, VOTE_PARTIAL, VOTE_CLARIFY)
#: the votes' check constraint
_VOTE_CHECK = "vote IN (1, 2, 3, 4)"

metadata = MetaData()

meta_t = Table(
    "casebench_meta", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
cases_t = Table(
    "cases", metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("kind", String(16), nullable=False),           # 'case' or 'attention'
    Column("position", Integer, nullable=False),          # index in the dataset (or attention file)
    Column("query_key", String(64), nullable=False),      # hash of the normalised query
    Column("record", Text, nullable=False),               # the original record, as JSON
    Column("expected", SmallInteger, nullable=True),      # attention checks: the right answer
    Column("votes", Integer, nullable=False, server_default="0"),
    CheckConstraint("kind IN ('case', 'attention')", name="ck_cases_kind"),
    Index("ix_cases_kind_votes", "kind", "votes"),
)
annotators_t = Table(
    "annotators", metadata,
    Column("id", String(ANNOTATOR_ID_MAX), primary_key=True),
    Column("first_seen", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
)
votes_t = Table(
    "votes", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("case_id", Integer, ForeignKey("cases.id"), nullable=False),
    Column("annotator_id", String(ANNOTATOR_ID_MAX), ForeignKey("annotators.id"), nullable=False),
    Column("vote", SmallInteger, nullable=False),
    Column("shown_at", Float, nullable=False),
    Column("voted_at", Float, nullable=False),
    UniqueConstraint("case_id", "annotator_id", name="uq_votes_case_annotator"),
    CheckConstraint(_VOTE_CHECK, name="ck_votes_vote"),
    Index("ix_votes_annotator", "annotator_id"),
)
assignments_t = Table(
    "assignments", metadata,
    Column("annotator_id", String(ANNOTATOR_ID_MAX), ForeignKey("annotators.id"), primary_key=True),
    Column("case_id", Integer, ForeignKey("cases.id"), nullable=False),
    Column("shown_at", Float, nullable=False),
    Column("done", Integer, nullable=False),              # the annotator's votes when it was shown
    Index("ix_assignments_case", "case_id"),
)

#: what an annotator chose to tell about themselves on the optional form (``annotate.traits``):
#: one JSON object per annotator, apart from the votes, so that votes export without it
traits_t = Table(
    "annotator_traits", metadata,
    Column("annotator_id", String(ANNOTATOR_ID_MAX), ForeignKey("annotators.id"), primary_key=True),
    Column("traits", Text, nullable=False),
    Column("given_at", Float, nullable=False),
)


def _add_traits(conn: Connection) -> None:
    """Schema 2 -> 3: the table of annotators' traits (``annotate.traits``)."""
    traits_t.create(conn, checkfirst=True)


def _widen_vote_check(conn: Connection) -> None:
    """Schema 1 -> 2 and 3 -> 4: the votes' check admits 3 (partial), then 4 (a clarifying
    question; the step writes today's check either way). PostgreSQL alters the constraint;
    SQLite cannot, so the table is rebuilt with the new definition and its rows copied."""
    if conn.dialect.name == "sqlite":
        conn.execute(text("ALTER TABLE votes RENAME TO votes_v1"))
        conn.execute(text("DROP INDEX IF EXISTS ix_votes_annotator"))
        votes_t.create(conn)
        cols = ", ".join(c.name for c in votes_t.columns)
        conn.execute(text(f"INSERT INTO votes ({cols}) SELECT {cols} FROM votes_v1"))
        conn.execute(text("DROP TABLE votes_v1"))
    else:
        conn.execute(text("ALTER TABLE votes DROP CONSTRAINT IF EXISTS ck_votes_vote"))
        conn.execute(text(f"ALTER TABLE votes ADD CONSTRAINT ck_votes_vote CHECK ({_VOTE_CHECK})"))


#: version -> function upgrading a connection's schema from that version to the next.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _widen_vote_check, 2: _add_traits, 3: _widen_vote_check}


class StoreError(ValueError):
    """The database cannot serve this dataset or these settings (message says why and what to do)."""


class VoteOutcome(Enum):
    """What became of a submitted vote. Only ``RECORDED`` wrote anything."""

    RECORDED = "recorded"
    REPEATED = "repeated"          # the same vote by the same annotator exists: nothing written
    CONFLICT = "conflict"          # a different vote by this annotator exists: the first stands
    NOT_ASSIGNED = "not_assigned"  # the case is not the one this annotator is being shown
    FINISHED = "finished"          # the case already holds N votes
    UNKNOWN_CASE = "unknown_case"


@dataclass(frozen=True)
class Settings:
    """How cases are handed out (given at every start; the database keeps the votes)."""

    votes_per_case: int
    one_context_per_query: bool = False
    attention_every: int = 10
    cases_per_annotator: int | None = None
    reserve_seconds: float = 20 * 60.0

    def __post_init__(self) -> None:
        """Refuse nonsense where it is given (``StoreError`` naming the setting)."""
        for name, value in (("votes_per_case", self.votes_per_case), ("attention_every", self.attention_every),
                            ("cases_per_annotator", self.cases_per_annotator)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise StoreError(f"{name} must be a whole number of at least 1, got {value!r}")
        if not (isinstance(self.reserve_seconds, (int, float)) and self.reserve_seconds >= 0):
            raise StoreError(f"reserve_seconds must be 0 or more, got {self.reserve_seconds!r}")


@dataclass(frozen=True)
class Shown:
    """The case an annotator is looking at, and their progress."""

    case_id: int
    kind: str
    record: Mapping[str, Any]
    done: int
    total: int


@dataclass(frozen=True)
class Finished:
    """No case needs this annotator any more. ``full``: every case has all its votes (an
    annotator with ``done == 0`` then arrived too late, and is owed no completion code)."""

    done: int
    full: bool = False


@dataclass
class ExportCase:
    position: int
    record: dict[str, Any]
    votes: list[tuple[str, int, float, float]] = field(default_factory=list)  # annotator, vote, shown, voted


@dataclass
class ExportData:
    """Everything the export needs, read in one transaction."""

    meta: dict[str, str]
    cases: list[ExportCase]
    attention: list[dict[str, Any]]  # one row per attention-check vote


def valid_annotator_id(value: str) -> bool:
    return 0 < len(value) <= ANNOTATOR_ID_MAX and all(ch in _ID_CHARS for ch in value)


def normalise_url(url: str) -> str:
    """``postgresql://`` means psycopg 3 (SQLAlchemy's own default driver is psycopg2)."""
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            return "postgresql+psycopg://" + url[len(plain):]
    return url


def safe_url(url: str) -> str:
    """The URL with any password masked, for messages and logs."""
    try:
        return make_url(normalise_url(url)).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparseable URL is reported by the caller
        return "<unparseable database URL>"


def query_key(query: str) -> str:
    return hashlib.sha256(" ".join(query.split()).casefold().encode("utf-8")).hexdigest()[:32]


def content_fingerprint(records: Sequence[Mapping[str, Any]]) -> str:
    """SHA-256 over what annotators see and the export keeps (not the old votes), in order."""
    h = hashlib.sha256()
    for r in records:
        item = {k: v for k, v in r.items() if k not in ("scores", "safe_rate")}
        h.update(json.dumps(item, sort_keys=True, ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def make_engine(url: str, sqlite_sync: str = "full") -> Engine:
    """An engine with the settings this store relies on (WAL and immediate transactions on SQLite;
    pre-ping on PostgreSQL so a restarted server is reconnected to, not reported dead forever)."""
    u = make_url(normalise_url(url))
    backend = u.get_backend_name()
    if sqlite_sync not in ("full", "normal"):
        raise StoreError(f"sqlite_sync must be 'full' or 'normal', not {sqlite_sync!r}")
    if backend == "sqlite":
        if not u.database or u.database == ":memory:":
            raise StoreError(f"{url}: give SQLite a file (sqlite:///votes.db); an in-memory database loses the votes")
        engine = create_engine(u, connect_args={"timeout": 30, "check_same_thread": False},
                               pool_size=8, max_overflow=8)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (below)
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            # full: a committed vote survives a power cut (one fsync per vote); normal: it survives
            # a crash of the server, and the last votes before a power cut may be lost
            cur.execute(f"PRAGMA synchronous={sqlite_sync.upper()}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            # writers take the write lock at BEGIN, so a transaction never fails half-way on
            # "database is locked"; readers begin deferred and read a snapshot (WAL)
            immediate = conn.get_execution_options().get("casebench_write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine
    if backend == "postgresql":
        return create_engine(u, pool_pre_ping=True, pool_size=16, max_overflow=16, pool_timeout=15,
                             connect_args={"connect_timeout": 5})
    raise StoreError(f"unsupported database {safe_url(url)}: use sqlite:///FILE or postgresql://...")


class VoteStore:
    """The vote database of one study. Thread-safe; open it with ``VoteStore.open``."""

    def __init__(self, engine: Engine, settings: Settings):
        self.engine = engine
        self.settings = settings
        self.sqlite = engine.dialect.name == "sqlite"
        # SQLite takes one writer at a time anyway; queueing writers here rather than in SQLite's
        # busy handler (which sleeps in steps) keeps the latency per vote low and even.
        self._write_lock: threading.Lock | None = threading.Lock() if self.sqlite else None
        self._totals: dict[str, int] = {}
        #: ``cases`` (votes safe / unsafe on cases) or ``answers`` (labels comply / refuse /
        #: partial on a respond run's answers, ``annotate.answers``); kept in the database
        self.study = "cases"

    # ------------------------------------------------------------------ opening and schema

    @classmethod
    def open(cls, url: str, settings: Settings | None = None, create: bool = True,
             sqlite_sync: str = "full") -> "VoteStore":
        """Connect, and create (unless ``create`` is false) or upgrade the schema. Cases are
        loaded by ``load_cases``."""
        engine = make_engine(url, sqlite_sync=sqlite_sync)
        store = cls(engine, settings or Settings(votes_per_case=1))
        try:
            store.ensure_schema(create=create)
            store.study = store.meta().get("study", "cases")
        except BaseException:
            engine.dispose()
            raise
        return store

    def close(self) -> None:
        self.engine.dispose()

    def ensure_schema(self, create: bool = True) -> int:
        """Create the tables on first start; migrate an older schema; refuse a newer one."""
        with self._tx() as conn:
            if not inspect(conn).has_table("casebench_meta"):
                if not create:
                    raise StoreError("the database holds no casebench votes (no casebench_meta table)")
                existing = inspect(conn).get_table_names()
                if existing:
                    raise StoreError(
                        f"the database already holds tables ({', '.join(sorted(existing)[:5])}) but no "
                        "casebench_meta table: it is not a casebench vote database; give another --db"
                    )
                metadata.create_all(conn)
                conn.execute(meta_t.insert(), [
                    {"key": "schema_version", "value": str(SCHEMA_VERSION)},
                    {"key": "created_at", "value": repr(time.time())},
                ])
                return SCHEMA_VERSION
            version = int(self._meta(conn).get("schema_version", "0"))
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"the database schema is version {version}, newer than this casebench understands "
                    f"({SCHEMA_VERSION}); upgrade casebench"
                )
            while version < SCHEMA_VERSION:
                step = MIGRATIONS.get(version)
                if step is None:
                    raise StoreError(f"no migration from schema version {version}; recreate the database")
                step(conn)
                version += 1
                conn.execute(meta_t.update().where(meta_t.c.key == "schema_version").values(value=str(version)))
            return version

    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            return int(self._meta(conn)["schema_version"])

    @staticmethod
    def _meta(conn: Connection) -> dict[str, str]:
        return {k: v for k, v in conn.execute(select(meta_t.c.key, meta_t.c.value))}

    def meta(self) -> dict[str, str]:
        with self.engine.connect() as conn:
            return self._meta(conn)

    def set_meta(self, values: Mapping[str, str]) -> None:
        with self._tx() as conn:
            for k, v in values.items():
                done = conn.execute(meta_t.update().where(meta_t.c.key == k).values(value=v)).rowcount
                if not done:
                    conn.execute(meta_t.insert().values(key=k, value=v))

    def load_cases(
        self,
        records: Sequence[Mapping[str, Any]],
        attention: Sequence[tuple[Mapping[str, Any], int]] = (),
        dataset_path: str = "",
        study: str = "cases",
    ) -> bool:
        """Store the study's cases on first start (returns True), or check that the database
        holds these very cases (same content, same attention checks) and keep its votes.
        ``study``: ``cases`` or ``answers`` (``VoteStore.study``); a database holds one kind."""
        if study not in ("cases", "answers"):
            raise ValueError(f"study must be 'cases' or 'answers', not {study!r}")
        fp = content_fingerprint(records)
        att_fp = content_fingerprint([dict(r, expected=e) for r, e in attention])
        with self._tx() as conn:
            meta = self._meta(conn)
            if "dataset_fingerprint" in meta and meta.get("study", "cases") != study:
                raise StoreError(f"the database holds a study of {meta.get('study', 'cases')}, not of {study}: "
                                 "give a new --db for a new study")
            if "dataset_fingerprint" in meta:
                if meta["dataset_fingerprint"] != fp:
                    raise StoreError(
                        f"the database holds votes on another dataset (loaded from {meta.get('dataset_path')!r}, "
                        f"{meta.get('cases')} cases): give the same DATA, or a new --db for a new study"
                    )
                if meta.get("attention_fingerprint") != att_fp:
                    raise StoreError(
                        f"the database was started with other attention checks ({meta.get('attention_checks')} "
                        "of them): give the same --attention-checks file, or a new --db"
                    )
                return False
            rows = []
            for i, rec in enumerate(records):
                rows.append({"id": i, "kind": "case", "position": i, "query_key": query_key(str(rec["query"])),
                             "record": json.dumps(rec, ensure_ascii=False), "expected": None, "votes": 0})
            base = len(records)
            for j, (rec, expected) in enumerate(attention):
                rows.append({"id": base + j, "kind": "attention", "position": j,
                             "query_key": query_key(str(rec["query"])),
                             "record": json.dumps(rec, ensure_ascii=False), "expected": int(expected), "votes": 0})
            for start in range(0, len(rows), 500):
                conn.execute(cases_t.insert(), rows[start:start + 500])
            conn.execute(meta_t.insert(), [
                {"key": "dataset_fingerprint", "value": fp},
                {"key": "dataset_path", "value": dataset_path},
                {"key": "cases", "value": str(len(records))},
                {"key": "attention_fingerprint", "value": att_fp},
                {"key": "attention_checks", "value": str(len(attention))},
                {"key": "study", "value": study},
            ])
            self.study = study
            return True

    # ------------------------------------------------------------------ transactions

    @contextlib.contextmanager
    def _tx(self, assign: bool = False) -> Iterator[Connection]:
        """A write transaction: serialised on SQLite, row-locked (and for ``assign``, advisory-
        locked) on PostgreSQL."""
        lock = self._write_lock or contextlib.nullcontext()
        with lock:
            with self.engine.connect().execution_options(casebench_write=True) as conn, conn.begin():
                if assign and not self.sqlite:
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ASSIGN_LOCK_KEY})
                yield conn

    def ping(self) -> None:
        """Raise when the database cannot be reached (for ``/healthz``)."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    # ------------------------------------------------------------------ annotators

    def _counts(self, conn: Connection, annotator: str) -> tuple[int, int]:
        """(real cases voted on, attention checks answered) by this annotator."""
        rows = conn.execute(
            select(cases_t.c.kind, func.count())
            .select_from(votes_t.join(cases_t, cases_t.c.id == votes_t.c.case_id))
            .where(votes_t.c.annotator_id == annotator)
            .group_by(cases_t.c.kind)
        ).all()
        got = {k: int(n) for k, n in rows}
        return got.get("case", 0), got.get("attention", 0)

    def _total(self, conn: Connection) -> int:
        """The most cases one annotator can be given (for the progress line)."""
        if "total" not in self._totals:
            col = func.count(func.distinct(cases_t.c.query_key)) if self.settings.one_context_per_query else func.count()
            n = int(conn.execute(select(col).where(cases_t.c.kind == "case")).scalar_one())
            self._totals["total"] = n
        n = self._totals["total"]
        cap = self.settings.cases_per_annotator
        return min(n, cap) if cap else n

    def _attention_checks(self, conn: Connection) -> int:
        if "attention" not in self._totals:
            self._totals["attention"] = int(conn.execute(
                select(func.count()).where(cases_t.c.kind == "attention")).scalar_one())
        return self._totals["attention"]

    def progress(self, annotator: str) -> tuple[int, int]:
        with self.engine.connect() as conn:
            return self._counts(conn, annotator)[0], self._total(conn)

    def next_case(self, annotator: str) -> Shown | Finished:
        """The case this annotator should see now: the one already on their screen if it still
        needs them, else a new one (fewest votes first), an attention check when one is due, or
        ``Finished``. Registers the annotator on their first visit.

        A reload reads only (no lock, no write); a new case is chosen under the assignment lock."""
        if not valid_annotator_id(annotator):
            raise ValueError("invalid annotator id")
        with self.engine.connect() as conn:
            shown = self._current(conn, annotator)
            if shown is not None:
                return shown
        with self._tx(assign=True) as conn:
            return self._assign(conn, annotator, time.time())

    def _current(self, conn: Connection, annotator: str) -> Shown | None:
        """The case on this annotator's screen, if it still needs their vote (an assignment is
        deleted in the transaction that records the annotator's vote on it)."""
        current = conn.execute(
            select(assignments_t.c.case_id, assignments_t.c.done, cases_t.c.kind, cases_t.c.votes,
                   cases_t.c.record)
            .select_from(assignments_t.join(cases_t, cases_t.c.id == assignments_t.c.case_id))
            .where(assignments_t.c.annotator_id == annotator)
        ).first()
        if current is None:
            return None
        if current.kind == "case" and current.votes >= self.settings.votes_per_case:
            return None
        return Shown(current.case_id, current.kind, json.loads(current.record), current.done, self._total(conn))

    def _assign(self, conn: Connection, annotator: str, now: float,
                after_vote: tuple[int, int] | None = None) -> Shown | Finished:
        """Inside a write transaction holding the assignment lock: keep a still-valid current case,
        else choose and reserve the next one. ``after_vote``: (cases, attention checks) the
        annotator has now voted on, when called right after recording a vote (the annotator
        exists and their assignment was just deleted)."""
        s = self.settings
        if after_vote is None:
            updated = conn.execute(
                annotators_t.update().where(annotators_t.c.id == annotator).values(last_seen=now)
            ).rowcount
            if not updated:
                conn.execute(annotators_t.insert().values(id=annotator, first_seen=now, last_seen=now))
            shown = self._current(conn, annotator)
            if shown is not None:
                return shown
            conn.execute(assignments_t.delete().where(assignments_t.c.annotator_id == annotator))
            done, att_done = self._counts(conn, annotator)
        else:
            done, att_done = after_vote
        total = self._total(conn)
        if s.cases_per_annotator and done >= s.cases_per_annotator:
            return Finished(done)

        pick = None
        if self._attention_checks(conn) and s.attention_every > 0 and att_done < done // s.attention_every:
            pick = conn.execute(text(
                "SELECT c.id, c.kind, c.record FROM cases c WHERE c.kind = 'attention' AND NOT EXISTS "
                "(SELECT 1 FROM votes v WHERE v.case_id = c.id AND v.annotator_id = :me) "
                "ORDER BY c.position LIMIT 1"), {"me": annotator}).first()
        if pick is None:
            same_query = (
                "AND NOT EXISTS (SELECT 1 FROM votes v2 JOIN cases c2 ON c2.id = v2.case_id "
                "WHERE v2.annotator_id = :me AND c2.query_key = c.query_key) "
                if s.one_context_per_query else ""
            )
            # fewest votes (counting cases others hold on screen) first; among equals, an order
            # of its own for each annotator, so that not everybody starts with the same cases
            pick = conn.execute(text(
                "SELECT c.id, c.kind, c.record FROM cases c LEFT JOIN (SELECT case_id, COUNT(*) AS n "
                "FROM assignments WHERE shown_at > :fresh GROUP BY case_id) r ON r.case_id = c.id "
                "WHERE c.kind = 'case' AND c.votes < :n AND c.votes + COALESCE(r.n, 0) < :n "
                "AND NOT EXISTS (SELECT 1 FROM votes v WHERE v.case_id = c.id AND v.annotator_id = :me) "
                + same_query +
                "ORDER BY c.votes + COALESCE(r.n, 0), (c.id * 7919 + :salt) % 10007, c.id LIMIT 1"),
                {"fresh": now - s.reserve_seconds, "n": s.votes_per_case, "me": annotator,
                 "salt": zlib.crc32(annotator.encode()) % 10007},
            ).first()
        if pick is None:
            return Finished(done, full=self._open_cases(conn) == 0)
        conn.execute(assignments_t.insert().values(annotator_id=annotator, case_id=pick.id, shown_at=now, done=done))
        return Shown(int(pick.id), pick.kind, json.loads(pick.record), done, total)

    def record_vote(self, annotator: str, case_id: int, vote: int) -> VoteOutcome:
        """Record one vote and reserve the annotator's next case, in one transaction; or say why
        not (then nothing is written)."""
        if vote not in (VOTES if self.study == "answers" else (VOTE_SAFE, VOTE_UNSAFE)):
            raise ValueError("a vote is 1 (safe) or 2 (unsafe); in an answer-labelling study 1 (comply), "
                             "2 (refuse) or 3 (partial)")
        try:
            return self._record_vote(annotator, case_id, vote)
        except IntegrityError:
            # Two submissions of the same vote raced (PostgreSQL: both passed the check before
            # either committed); the unique constraint let exactly one through.
            with self.engine.connect() as conn:
                prior = conn.execute(select(votes_t.c.vote).where(
                    votes_t.c.case_id == case_id, votes_t.c.annotator_id == annotator)).scalar()
            if prior is None:
                raise
            return VoteOutcome.REPEATED if prior == vote else VoteOutcome.CONFLICT

    def _record_vote(self, annotator: str, case_id: int, vote: int) -> VoteOutcome:
        now = time.time()
        with self._tx() as conn:
            # the case, this annotator's vote on it and their assignment, in one look
            row = conn.execute(text(
                "SELECT c.kind, v.vote, a.case_id AS held, a.shown_at, a.done FROM cases c "
                "LEFT JOIN votes v ON v.case_id = c.id AND v.annotator_id = :me "
                "LEFT JOIN assignments a ON a.annotator_id = :me WHERE c.id = :c"),
                {"me": annotator, "c": case_id}).first()
            if row is None:
                return VoteOutcome.UNKNOWN_CASE
            if row.vote is not None:
                return VoteOutcome.REPEATED if row.vote == vote else VoteOutcome.CONFLICT
            if row.held != case_id:
                return VoteOutcome.NOT_ASSIGNED
            bump = cases_t.update().where(cases_t.c.id == case_id).values(votes=cases_t.c.votes + 1)
            if row.kind == "case":
                bump = bump.where(cases_t.c.votes < self.settings.votes_per_case)
            if conn.execute(bump).rowcount != 1:
                return VoteOutcome.FINISHED
            conn.execute(votes_t.insert().values(case_id=case_id, annotator_id=annotator, vote=vote,
                                                 shown_at=row.shown_at, voted_at=now))
            conn.execute(assignments_t.delete().where(assignments_t.c.annotator_id == annotator))
            # the next case is chosen in the same transaction: one commit per vote, and the page
            # after the redirect only reads
            if not self.sqlite:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ASSIGN_LOCK_KEY})
            if row.kind == "case":
                counts = (row.done + 1, self._attention_done(conn, annotator))
            else:
                counts = (row.done, self._attention_done(conn, annotator))
            self._assign(conn, annotator, now, after_vote=counts)
            return VoteOutcome.RECORDED

    def _open_cases(self, conn: Connection) -> int:
        """Real cases that still need votes (0: the study is full)."""
        return int(conn.execute(select(func.count()).where(
            cases_t.c.kind == "case", cases_t.c.votes < self.settings.votes_per_case)).scalar_one())

    def _attention_done(self, conn: Connection, annotator: str) -> int:
        if not self._attention_checks(conn):
            return 0
        return int(conn.execute(
            select(func.count()).select_from(votes_t.join(cases_t, cases_t.c.id == votes_t.c.case_id))
            .where(votes_t.c.annotator_id == annotator, cases_t.c.kind == "attention")).scalar_one())

    # ------------------------------------------------------------------ reading everything

    def admin_summary(self) -> dict[str, Any]:
        """Votes per case, per annotator and time per vote (the admin page's figures)."""
        n = self.settings.votes_per_case
        with self.engine.connect() as conn:
            cases = []
            for r in conn.execute(select(cases_t).order_by(cases_t.c.id)):
                rec = json.loads(r.record)
                cases.append({"id": r.id, "kind": r.kind, "position": r.position, "votes": r.votes,
                              "query": str(rec.get("query", ""))[:120], "category": rec.get("category", ""),
                              "intended_safe": rec.get("context_intended_to_be_safe"), "expected": r.expected})
            safe_by_case = {cid: int(k) for cid, k in conn.execute(
                select(votes_t.c.case_id, func.count()).where(votes_t.c.vote == VOTE_SAFE)
                .group_by(votes_t.c.case_id))}
            expected = {c["id"]: c["expected"] for c in cases if c["kind"] == "attention"}
            filled_at = conn.execute(
                select(func.max(votes_t.c.voted_at)).select_from(votes_t.join(cases_t, cases_t.c.id == votes_t.c.case_id))
                .where(cases_t.c.kind == "case")).scalar()
            per: dict[str, dict[str, Any]] = {}
            all_secs: list[float] = []
            for aid, cid, v, shown, voted in conn.execute(
                select(votes_t.c.annotator_id, votes_t.c.case_id, votes_t.c.vote, votes_t.c.shown_at,
                       votes_t.c.voted_at).order_by(votes_t.c.id)
            ):
                a = per.setdefault(aid, {"id": aid, "votes": 0, "attention_answered": 0, "attention_failed": 0,
                                         "seconds": []})
                if cid in expected:
                    a["attention_answered"] += 1
                    a["attention_failed"] += int(v != expected[cid])
                else:
                    a["votes"] += 1
                    a["seconds"].append(voted - shown)
                    all_secs.append(voted - shown)
            for aid, first, last in conn.execute(select(annotators_t.c.id, annotators_t.c.first_seen,
                                                        annotators_t.c.last_seen)):
                a = per.setdefault(aid, {"id": aid, "votes": 0, "attention_answered": 0, "attention_failed": 0,
                                         "seconds": []})
                a["first_seen"], a["last_seen"] = first, last
        annotators = []
        for a in sorted(per.values(), key=lambda x: x["id"]):
            secs = a.pop("seconds")
            a["median_seconds"] = _quantile(secs, 0.5)
            annotators.append(a)
        for c in cases:
            c["safe_votes"] = safe_by_case.get(c["id"], 0)
        real = [c for c in cases if c["kind"] == "case"]
        full = bool(real) and all(c["votes"] >= n for c in real)
        # turned away: annotators with no vote on a real case seen since the vote that filled the
        # study (they were shown the "study is full" page, without a completion code)
        turned_away = 0
        if full and filled_at is not None:
            turned_away = sum(1 for a in annotators if a["votes"] == 0 and (a.get("last_seen") or 0) >= filled_at)
        return {
            "full": full,
            "turned_away": turned_away,
            "votes_per_case": n,
            "cases": len(real),
            "cases_complete": sum(1 for c in real if c["votes"] >= n),
            "votes": sum(c["votes"] for c in real),
            "votes_needed": n * len(real),
            "time_per_vote": {"median_seconds": _quantile(all_secs, 0.5), "p95_seconds": _quantile(all_secs, 0.95),
                              "mean_seconds": (sum(all_secs) / len(all_secs)) if all_secs else None},
            "case_rows": cases,
            "annotators": annotators,
        }

    def case_votes(self) -> list["Vote"]:
        """Every vote on a real case (not attention checks) in the order cast (``votes.id``), as
        ``stats.votes.Vote`` (the votes model's input). Safe is vote 1; an answer study's labels
        (comply 1, refuse 2, partial 3) read comply as the "safe" side."""
        from ..stats.votes import Vote

        with self.engine.connect() as conn:
            rows = conn.execute(
                select(votes_t.c.case_id, cases_t.c.position, votes_t.c.annotator_id, votes_t.c.vote)
                .select_from(votes_t.join(cases_t, cases_t.c.id == votes_t.c.case_id))
                .where(cases_t.c.kind == "case").order_by(votes_t.c.id)).all()
        return [Vote(int(c), int(pos), str(a), int(v) == VOTE_SAFE) for c, pos, a, v in rows]

    def export_data(self) -> ExportData:
        """The cases in dataset order with their votes in the order cast, and attention answers."""
        with self.engine.connect() as conn:
            meta = self._meta(conn)
            kinds: dict[int, tuple[str, int | None, int]] = {}
            cases: dict[int, ExportCase] = {}
            for r in conn.execute(select(cases_t).order_by(cases_t.c.kind, cases_t.c.position)):
                kinds[r.id] = (r.kind, r.expected, r.position)
                if r.kind == "case":
                    cases[r.id] = ExportCase(position=r.position, record=json.loads(r.record))
            attention = []
            for aid, cid, v, shown, voted in conn.execute(
                select(votes_t.c.annotator_id, votes_t.c.case_id, votes_t.c.vote, votes_t.c.shown_at,
                       votes_t.c.voted_at).order_by(votes_t.c.voted_at, votes_t.c.id)
            ):
                kind, exp, pos = kinds[cid]
                if kind == "case":
                    cases[cid].votes.append((aid, int(v), float(shown), float(voted)))
                else:
                    attention.append({"annotator": aid, "check": pos, "expected": exp, "vote": int(v),
                                      "correct": int(v) == exp})
        return ExportData(meta=meta, cases=sorted(cases.values(), key=lambda c: c.position), attention=attention)


def _quantile(xs: Sequence[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
