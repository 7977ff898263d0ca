"""The earlier turns of live reveal conversations (``--context-as reveal-early`` / ``reveal-late``).

A reveal conversation is asked one user turn at a time (``prompts.render_reveal``); every
assistant message is the model's own answer to the turn before. Why it is kept this way:

* **The final turn is an ordinary record.** The answer to the last user turn, the one people's
  votes judge, is the (case, sample)'s final record in ``records.jsonl``, like any run's: every
  reader of runs (scoring, export, repair, reclassify) sees a reveal run as a run. Its
  ``detail`` says which turn it answered (``turn``, 1-based, of ``turns``).
* **Every earlier turn has its own line** in ``turns.jsonl`` (``TurnRecord``: the user turn, the
  model's answer, the reader's verdict), appended with one ``write`` the moment the answer is
  read, before the next turn is asked. A stop (kill, Ctrl-C) loses only the turn in flight: a
  resume rebuilds each conversation from its recorded turns and asks the next unasked turn, never
  a finished one again. This module is the one that names ``turns.jsonl`` (``record`` owns the
  other run files).
* **A conversation ends early only for want of an answer.** An earlier turn the model left
  empty after the re-asks cannot be carried into the next turn: the conversation's final record
  is then a missing value saying which turn had no answer.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from ..jsonutil import append_line, jsonl_objects

if TYPE_CHECKING:
    from ..predictions import TurnReadings

log = logging.getLogger("casebench.runs")

#: the earlier turns of a reveal run's conversations, one JSON line per answered turn
TURNS_FILE = "turns.jsonl"


@dataclass(frozen=True)
class TurnRecord:
    """One answered earlier turn of a reveal conversation (``turn`` 0-based of ``turns``):
    the user turn as asked (``prompt``, and what it holds: a CI group or the query), the model's
    answer (``text``), and the reader's reading (``behaviour``, ``label``; ``error`` when the
    reader gave none)."""

    case: int
    sample: int
    turn: int
    turns: int
    holds: str
    prompt: str
    text: str
    behaviour: str | None = None
    label: str | None = None
    error: str | None = None
    usage: Mapping[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    attempts: int = 1
    detail: Mapping[str, Any] = field(default_factory=dict)
    producer: str | None = None

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.case, self.sample, self.turn)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["usage"], d["detail"] = dict(self.usage), dict(self.detail)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TurnRecord":
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in names})


def turns_path(run_path: str | Path) -> Path:
    return Path(run_path) / TURNS_FILE


def repair_turns(run_path: str | Path) -> int:
    """Truncate a torn last line of ``turns.jsonl`` (a write cut short by a kill: that turn is
    asked again); the bytes removed. Called under the run's lock before anything is appended."""
    p = turns_path(run_path)
    if not p.exists():
        return 0
    data = p.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    keep = data.rfind(b"\n") + 1
    with open(p, "r+b") as f:
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    log.warning("%s: repaired a torn last line (%d bytes removed; that turn will be asked again)", p,
                len(data) - keep)
    return len(data) - keep


def append_turn(run_path: str | Path, rec: TurnRecord) -> None:
    """Append one turn as one line with one ``write``."""
    data = (json.dumps(rec.to_dict(), ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    fd = os.open(turns_path(run_path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        append_line(fd, data)
    finally:
        os.close(fd)


def iter_turns(run_path: str | Path) -> Iterator[TurnRecord]:
    """Every recorded earlier turn, in file order; a torn last line is skipped, any other bad line
    is an error naming the file and line."""
    from .record import RunError

    p = turns_path(run_path)
    if not p.exists():
        return
    lineno = 0
    try:
        for lineno, obj in jsonl_objects(p.read_bytes()):  # a torn last line is left out
            rec = TurnRecord.from_dict(obj)
            if not all(isinstance(x, int) for x in rec.key):
                raise ValueError("'case', 'sample' and 'turn' must be integers")
            yield rec
    except (ValueError, TypeError) as e:
        where, why = (e.args if len(e.args) == 2 and isinstance(e.args[0], int) else (lineno, e))
        raise RunError(f"{p}, line {where}: not a valid turn record ({why})") from None


def finished_turns(run_path: str | Path) -> dict[tuple[int, int], tuple[TurnRecord, ...]]:
    """Per (case, sample), its recorded earlier turns from the first on, without a gap (the first
    record of a turn wins): the conversation a resume goes on from."""
    by_key: dict[tuple[int, int, int], TurnRecord] = {}
    for r in iter_turns(run_path):
        by_key.setdefault(r.key, r)
    out: dict[tuple[int, int], tuple[TurnRecord, ...]] = {}
    for (c, s, _t) in sorted(by_key):
        if (c, s) in out:
            continue
        run: list[TurnRecord] = []
        while (c, s, len(run)) in by_key:
            run.append(by_key[(c, s, len(run))])
        out[(c, s)] = tuple(run)
    return out


def turn_readings(run_path: str | Path, cases: list[int], finals: Mapping[tuple[int, int], Any],
                  placement: str, partial_as_safe: bool) -> "TurnReadings":
    """The readings by turn of a reveal run's cases (``TurnReadings``): the recorded earlier turns
    and the final record's reading. A conversation not finished has its final turn unread."""
    from ..predictions import TurnReadings

    earlier = finished_turns(run_path)
    behaviours, holds = [], []
    for c in cases:
        turns = earlier.get((c, 0), ())
        final = finals.get((c, 0))
        n = int((final.detail or {}).get("turns", 0)) if final is not None else 0
        n = n or (turns[0].turns if turns else 0)
        b: list[str | None] = [t.behaviour for t in turns[: max(0, n - 1)]]
        h: list[str] = [t.holds for t in turns[: max(0, n - 1)]]
        b += [None] * (max(0, n - 1) - len(b))
        h += [""] * (max(0, n - 1) - len(h))
        if n:
            b.append(final.behaviour if final is not None and (final.detail or {}).get("turn") == n else None)
            h.append(str((final.detail or {}).get("holds", "")) if final is not None else "")
        behaviours.append(tuple(b))
        holds.append(tuple(h))
    return TurnReadings(tuple(behaviours), tuple(holds), placement, partial_as_safe)


def reader_prompt(turn: int, turns: int, query_last: bool, said: str, query: str) -> str:
    """What the reader reads a turn's answer against (0-based ``turn`` of ``turns``): in a
    conversation whose query comes last (reveal-early), a turn before it is read against what
    the user said in it (there is no request yet); every other turn against the query."""
    return said if query_last and turn < turns - 1 else query


async def reread_turns(src: str | Path, dst: str | Path, classifier: Any, mode: Any, queries: Mapping[int, str],
                       query_last: bool, partial_as_safe: bool, producer: str, batch: int = 64) -> int:
    """``casebench classify`` of a reveal run: every recorded earlier turn of ``src`` read again
    by ``classifier`` into ``dst``'s ``turns.jsonl`` (answers untouched, readings new, stamped
    with the new run's ``producer``); ``query_last``: the run is reveal-early (``reader_prompt``);
    how many turns were read."""
    from dataclasses import replace

    from ..backends.base import Answer
    from ..classify import Item
    turns = [t for ts in finished_turns(src).values() for t in ts]
    verdicts: list[Any] = []
    for i in range(0, len(turns), batch):
        chunk = turns[i:i + batch]
        verdicts.extend(await classifier.aclassify([
            Item(reader_prompt(t.turn, t.turns, query_last, t.prompt, queries[t.case]), t.text) for t in chunk]))
    for t, v in zip(turns, verdicts):
        reading = mode.read_behaviour(Answer(text=t.text), v, partial_as_safe=partial_as_safe)
        append_turn(dst, replace(t, behaviour=reading.behaviour, label=reading.label, error=reading.error,
                                 detail={**{k: x for k, x in t.detail.items() if k != "classifier_reason"},
                                         **reading.detail}, producer=producer))
    return len(turns)


class RevealSteps:
    """The runner's steps of a live reveal conversation (``execute.Runner`` inherits them): where
    each conversation resumes, and what follows a turn's answer. The runner provides
    ``job_type`` (its job class), ``prep``, ``rundir`` and its token and cost counters."""

    job_type: Any
    prep: Any
    rundir: Any
    prompt_tokens: int
    completion_tokens: int
    spent: float

    def _recorded_turns(self) -> dict[tuple[int, int], tuple[TurnRecord, ...]]:
        """Each conversation's recorded earlier turns (a torn last line repaired first), their
        tokens and cost counted as the run's."""
        from .record import usage_tokens

        repair_turns(self.rundir.path)
        earlier = finished_turns(self.rundir.path)
        for turns in earlier.values():
            for t in turns:
                p, c = usage_tokens(t.usage)
                self.prompt_tokens += p
                self.completion_tokens += c
                self.spent += self.prep.price.price.cost(p, c)
        return earlier

    def _turn_job(self, ci: int, s: int, asked: Any, recorded: Sequence[TurnRecord]) -> Any:
        """The job of the next unasked turn of a reveal conversation: the user turns before it
        with the model's own recorded answers as the history."""
        from ..prompts import render_reveal

        turns = render_reveal(asked.context, asked.query, self.prep.context_as)
        done = list(recorded)[: len(turns) - 1]
        history = tuple((turns[i].text, r.text) for i, r in enumerate(done))
        k = len(done)
        return self.job_type(ci, s, self.prep.settings.system or None, turns[k].text, history=history,
                             query=asked.query, context=asked.context, reveal=turns, turn=k)

    def _go_on(self, job: Any, ans: Any, rec: Any) -> tuple[Any, Any]:
        """After a reveal turn's answer was read (``rec``: its record as a final one would be):
        (the next turn's job, or None when this answer ends the conversation; the record to keep
        if it ends). An earlier turn's answer goes to ``turns.jsonl`` at once; one left empty
        ends the conversation with a missing value naming the turn."""
        from dataclasses import replace

        n, k = len(job.reveal), job.turn
        where = {"turn": k + 1, "turns": n, "holds": job.reveal[k].holds}
        if k == n - 1:
            return None, replace(rec, detail={**rec.detail, **where})
        if not (ans.text or "").strip():
            return None, replace(rec, label=None, score=None, p_safe=None, behaviour=None,
                                 error=f"turn {k + 1} of {n} had no answer ({rec.error or 'empty answer'}); "
                                       "the conversation could not go on",
                                 detail={**rec.detail, **where})
        append_turn(self.rundir.path, TurnRecord(
            case=job.case, sample=job.sample, turn=k, turns=n, holds=job.reveal[k].holds, prompt=job.prompt,
            text=ans.text or "", behaviour=rec.behaviour, label=rec.label, error=rec.error, usage=dict(job.usage),
            latency_s=round(job.latency_s, 4), attempts=job.asks, detail=dict(rec.detail),
            producer=self.rundir.producer))
        nxt = replace(job, prompt=job.reveal[k + 1].text, history=(*job.history, (job.prompt, ans.text or "")),
                      turn=k + 1, asks=0, usage={}, latency_s=0.0, unread=None)
        return nxt, rec
