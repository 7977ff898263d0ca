"""Whether an input is whole: the one account of a run or inspect log that is not finished.

A run stopped part way (Ctrl-C, a refused connection, a budget) or an inspect eval that errored
scores like a finished one: its missing answers are missing, its figures rest on what was asked.
A reader must not take them for the model's figures over the cases it was meant to answer, so
every scoring command (``score``, ``compare``, ``report``, ``diff``, ``study``) says, in its first
lines, which inputs are incomplete, how much is still to ask and the command that resumes them,
and marks each figure of such an input as partial (its name, ``naming.display_names``; a
``state`` block in JSON). This module is that account: what the loaders (``runs.results``,
``inspect_log``) find, carried by ``Predictions.state`` and ``Score.state``.

It depends on nothing in casebench, so the data side and the statistics both read it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

#: the word every output uses for a figure of an incomplete input
PARTIAL = "partial"


@dataclass(frozen=True)
class InputState:
    """How far an input got. ``requests``: what it planned (cases x samples, epochs in an
    inspect log); ``pending``: requests never asked (or not in the log yet); ``failed``: requests
    asked whose every attempt failed (transport errors, an errored sample) and that a resume asks
    again; ``cases_to_ask``: the cases with at least one such request. ``status``: where the
    input says it stands (a run's manifest state: ``interrupted``, ``failed``, ...; an inspect
    log's ``error``, ``cancelled``, ...). ``reason``: what stopped it, in its own words, when it
    says. ``resume``: the exact command that finishes it (None: none known, ``resume_hint``
    says what to do instead). ``source``: the run directory or log."""

    source: str
    complete: bool
    status: str
    requests: int
    cases: int
    pending: int = 0
    failed: int = 0
    cases_to_ask: int = 0
    reason: str | None = None
    resume: str | None = None
    resume_hint: str | None = None
    schema_version: int = 1

    @property
    def to_ask(self) -> int:
        """Requests a resume asks: never asked plus failed."""
        return self.pending + self.failed

    def headline(self) -> str:
        """One line: ``INCOMPLETE (interrupted): RUN: 35 of 40 cases still to ask (35 requests not
        asked, 0 failed)``; for a complete input, ``RUN: complete``."""
        if self.complete:
            return f"{self.source}: complete"
        return (f"INCOMPLETE ({self.status}): {self.source}: {self.cases_to_ask} of {self.cases} cases still to ask "
                f"({self.pending} request{'' if self.pending == 1 else 's'} not asked, {self.failed} failed)")

    @property
    def why(self) -> str | None:
        """What stopped the input, in its own words, without repeating its status or the advice
        to resume (the resume line gives the command)."""
        text = " ".join((self.reason or "").split())
        for lead in (f"{self.status}:", self.status):
            if text.lower().startswith(lead):
                text = text[len(lead):].strip()
        for tail in ("; re-run the same command to resume", "re-run the same command to resume"):
            text = text.removesuffix(tail).strip()
        return text or None

    def lines(self) -> list[str]:
        """The headline, what stopped it (when it says) and the command that resumes it (or
        what to do when no command is known)."""
        if self.complete:
            return [self.headline()]
        out = [self.headline()]
        if self.why:
            out.append(f"  why: {self.why}")
        out.append(f"  resume: {self.resume}" if self.resume else f"  resume: {self.resume_hint or 'not known'}")
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the ``state`` block of ``score --json`` and the report's inputs."""
        return {"complete": self.complete, "status": self.status, "requests": self.requests, "cases": self.cases,
                "pending": self.pending, "failed": self.failed, "cases_to_ask": self.cases_to_ask,
                "reason": self.reason, "resume": self.resume, "resume_hint": self.resume_hint,
                "schema_version": self.schema_version}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "InputState":
        """The state of its ``to_dict``."""
        return cls(source=str(d.get("source", "")), complete=bool(d["complete"]), status=str(d["status"]),
                   requests=int(d["requests"]), cases=int(d["cases"]), pending=int(d.get("pending", 0)),
                   failed=int(d.get("failed", 0)), cases_to_ask=int(d.get("cases_to_ask", 0)),
                   reason=d.get("reason"), resume=d.get("resume"), resume_hint=d.get("resume_hint"),
                   schema_version=int(d.get("schema_version", 1)))


def incomplete(states: Sequence["InputState | None"]) -> list[InputState]:
    """The incomplete ones among ``states`` (None: an input that cannot be incomplete, a
    published file)."""
    return [s for s in states if s is not None and not s.complete]


def state_lines(states: Sequence["InputState | None"]) -> list[str]:
    """What a scoring command prints first when any input is incomplete: per such input its
    headline and the command that resumes it, then what that means for the figures; [] when
    every input is complete."""
    bad = incomplete(states)
    if not bad:
        return []
    out: list[str] = []
    for s in bad:
        out += s.lines()
    which = "its" if len(bad) == 1 else "their"
    out.append(f"  every figure of {'this input' if len(bad) == 1 else 'these inputs'} below is {PARTIAL}: it rests "
               f"on the cases answered so far, not on all {which} cases (marked '({PARTIAL})')")
    return out


def shell_command(argv: Sequence[str], cwd: str | None = None, here: str | None = None) -> str:
    """``argv`` as one shell line (``casebench run ...``), prefixed with ``cd CWD &&`` when it was
    run from another directory than ``here`` (its relative paths are relative to that one)."""
    line = shlex.join(list(argv))
    if cwd and here is not None and cwd != here:
        line = f"cd {shlex.quote(cwd)} && {line}"
    return line
