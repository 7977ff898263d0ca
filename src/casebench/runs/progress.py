"""Progress of a run on the terminal: a tqdm bar on a terminal, plain lines on a pipe (CI logs).

From the first second: the bar (or a first line) appears when asking starts, tokens per second
are shown as the backend reports them (local models report every decoding step, before any
answer is complete), the count and the ETA move as each answer is recorded, and once enough has
been measured one line states the expected duration, with what it was measured on.

The expected duration is only ever a measurement of this run: the throughput of its own first
answers, never a guess made before them (the first line says it will follow them). It waits
for a full round of the requests in flight (``in_flight``: the connections, or a batch), since
answers asked together come back together: extrapolating from the first of eight concurrent
answers over-estimated a run fifteen- to twenty-fold.

A local model generating long answers in batches may give no answer for a minute while its tokens
flow: there the token rate measures the pace first. With ``token_budget`` (the most tokens the
requests still to ask may generate: each one's token cap), as soon as tokens have flowed for
``TOKEN_RATE_AFTER_S`` the ETA is the budget left at the measured token rate (an upper bound on
the generation still to do: an answer may end before its cap), said once, until answers measure it.
"""

from __future__ import annotations

import sys
import time

#: Plain-line mode: a line at least every this many seconds, answers or not.
LINE_EVERY_S = 30.0
#: Bar mode: the postfix (tokens per second) is refreshed at most this often.
REFRESH_S = 0.5
#: Tokens must have flowed this long before their rate gives an ETA (the first steps of a batch
#: include its prefill).
TOKEN_RATE_AFTER_S = 3.0


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """Counts finished requests and processed tokens.

    ``enabled``: None (a bar on a terminal, lines every 10% or 30 s otherwise), True (a bar),
    False (quiet). ``work_total``: the work still to do in the caller's unit (e.g. prompt bytes,
    when time grows with prompt length); each ``update`` says how much of it was done, and the
    expected duration is extrapolated from work, not from counts (None: counts).
    ``from_answers``: whether single answers measure the pace (True for one-by-one answers and
    prob batches; False when answers arrive staggered within a long batch, whose pace is only
    known when a call ends: ``call_done``).
    """

    def __init__(self, total: int, initial: int, enabled: bool | None, unit: str = "req",
                 work_total: float | None = None, from_answers: bool = True, in_flight: int = 1,
                 token_budget: float | None = None):
        self.total, self.n = total, initial
        self.enabled = enabled is not False
        self.tty = bool(enabled) or (enabled is None and sys.stderr.isatty())
        self.bar = None
        self.t0 = time.monotonic()
        self.initial = initial
        self.eta_said = False
        self.work_total = float(work_total) if work_total is not None else float(total - initial)
        self.work_done = 0.0
        self.from_answers = from_answers
        #: answers measured before the expected duration is said: a full round of the requests
        #: asked together (at least 2, at most what is left to ask)
        self.measure_after = max(1, min(max(2, int(in_flight)), total - initial))
        self.calls_done = 0
        self.token_count = 0
        #: the most tokens the requests still to ask may generate (None: not known)
        self.token_budget = token_budget
        #: when tokens were first reported (None: not yet), and how many since
        self.tokens_from: float | None = None
        self.rate_tokens = 0
        self.token_eta_said = False
        self._postfix = ""
        self._refreshed = self.t0
        self._last_line = (initial, self.t0)
        #: (count, counters) of the last plain line (None: none printed yet)
        self._last_said: tuple[int, str] | None = None
        if self.enabled and self.tty:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, unit=unit, dynamic_ncols=True, smoothing=0.1,
                            file=sys.stderr)
        if self.enabled and total > initial:
            self.say(f"casebench: asking {total - initial} requests ({initial} of {total} already on disk); the "
                     f"expected duration follows, measured on this run's "
                     + ("token rate, then its first " if token_budget is not None else "first ")
                     + ("answers" if from_answers else "batch"))

    # -- measures
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def tokens_per_s(self) -> float:
        return self.token_count / max(self.elapsed(), 1e-9)

    def measured(self) -> bool:
        """Whether this run's own answers measure its pace yet: a full round of the requests in
        flight came back (``measure_after`` answers), or a whole call (a batch) ended."""
        if self.n - self.initial <= 0 or self.work_done <= 0:
            return False
        return bool(self.calls_done and not self.from_answers) or self.n - self.initial >= self.measure_after

    def expected_seconds(self) -> float | None:
        """Seconds still to go at the throughput measured so far on this run's answers (None
        until ``measured``), else at the token rate (``token_seconds``)."""
        if not self.measured():
            return self.token_seconds()
        left = max(0.0, self.work_total - self.work_done)
        return left * self.elapsed() / self.work_done

    def token_seconds(self) -> float | None:
        """Seconds still to go at the token rate measured since tokens began to flow: the token
        budget left over that rate (None without a budget, or before tokens have flowed for
        ``TOKEN_RATE_AFTER_S``)."""
        rate = self.token_rate()
        if self.token_budget is None or rate is None:
            return None
        return max(0.0, self.token_budget - self.token_count) / rate

    def token_rate(self) -> float | None:
        """Tokens per second since they began to flow (None before ``TOKEN_RATE_AFTER_S`` of them)."""
        if self.tokens_from is None or not self.rate_tokens:
            return None
        flowing = time.monotonic() - self.tokens_from
        return self.rate_tokens / flowing if flowing >= TOKEN_RATE_AFTER_S else None

    # -- output
    def say(self, line: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr, flush=True)

    def _full_postfix(self) -> str:
        rate = f"{self.tokens_per_s():.0f} tok/s" if self.token_count else ""
        return ", ".join(x for x in (rate, self._postfix) if x)

    def tokens(self, n: int, postfix: str | None = None) -> None:
        """``n`` more tokens processed (local models report them as they decode)."""
        if self.tokens_from is None and n:
            # the rate is counted from the first report on (the tokens it reports came before it)
            self.tokens_from = time.monotonic()
        elif n:
            self.rate_tokens += n
        self.token_count += n
        if postfix is not None:
            self._postfix = postfix
        if not self.enabled:
            return
        self._maybe_say_token_eta()
        now = time.monotonic()
        if self.bar is not None:
            if now - self._refreshed >= REFRESH_S:
                self._refreshed = now
                self.bar.set_postfix_str(self._full_postfix(), refresh=True)
            return
        if now - self._last_line[1] >= LINE_EVERY_S:
            self._line(now)

    def _maybe_say_token_eta(self) -> None:
        """Once, before answers measure the pace: the expected duration from the token rate."""
        if self.token_eta_said or self.eta_said or not self.enabled or self.measured():
            return
        left = self.token_seconds()
        if left is None:
            return
        self.token_eta_said = True
        rate = self.token_rate() or 0.0
        self.say(f"casebench: expected duration: at most about {_duration(self.elapsed() + left)} for "
                 f"{self.total - self.initial} requests ({_duration(left)} to go; measured on this run's token rate, "
                 f"{rate:.1f} tok/s, with up to {max(0, int(self.token_budget or 0) - self.token_count)} tokens still "
                 "to generate; the answers will measure it again)")

    def call_done(self) -> None:
        """A backend call (a whole batch) ended: its pace is a fair measure."""
        self.calls_done += 1
        self._maybe_say_expected()

    def _maybe_say_expected(self) -> None:
        if self.eta_said or not self.enabled or self.n >= self.total:
            return
        left = self.expected_seconds()
        if left is None:
            return
        self.eta_said = True
        done = self.n - self.initial
        self.say(f"casebench: expected duration: about {_duration(self.elapsed() + left)} for "
                 f"{self.total - self.initial} requests ({_duration(left)} to go; measured on this run's first "
                 f"{done} answer{'s' if done != 1 else ''}: {done / max(self.elapsed(), 1e-9):.2f} answers/s "
                 f"over {_duration(self.elapsed())})")

    def update(self, k: int, postfix: str, work: float | None = None) -> None:
        """``k`` more requests finished, ``work`` of the work total with them (default ``k``)."""
        self.n += k
        self.work_done += k if work is None else work
        self._postfix = postfix
        if not self.enabled:
            return
        if k:
            self._maybe_say_expected()
        if self.bar is not None:
            self._refreshed = time.monotonic()
            # no request finished (a transport failure): the counters changed, show them now
            self.bar.set_postfix_str(self._full_postfix(), refresh=not k)
            self.bar.update(k)
            return
        now = time.monotonic()
        last_n, last_t = self._last_line
        if (k and (self.n - last_n >= max(1, self.total // 10) or self.n == self.total
                   or last_n == self.initial)) or now - last_t >= LINE_EVERY_S:
            self._line(now)

    def _line(self, now: float) -> None:
        rate = (self.n - self.initial) / max(now - self.t0, 1e-9)
        left = self.expected_seconds()
        eta = ((_duration(left) if self.measured() else f"<= {_duration(left)} (token rate)") if left is not None
               else "measuring")
        print(f"casebench: {self.n}/{self.total} requests, {rate:.2f} req/s, ETA {eta}, {self._full_postfix()}",
              file=sys.stderr, flush=True)
        self._last_line = (self.n, now)
        self._last_said = (self.n, self._postfix)

    def close(self) -> None:
        """End the output; on a pipe, a last line when the counts changed since the last one (so
        the last counters printed are the ones the summary counts: ``fail=2`` for two requests
        that failed in transport, not the ``fail=1`` of the line before the second)."""
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self._postfix and self._last_said != (self.n, self._postfix):
            self._line(time.monotonic())
