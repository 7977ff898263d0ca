"""Progress of a run on the terminal: a tqdm bar on a terminal, plain lines on a pipe (CI logs),
and, once the first answers are in, one line with the expected duration so a user knows whether
to wait."""

from __future__ import annotations

import sys
import time


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """Counts finished requests. ``enabled``: None (a bar on a terminal, lines every 10% or 30 s
    otherwise), True (a bar), False (quiet)."""

    def __init__(self, total: int, initial: int, enabled: bool | None, unit: str = "req"):
        self.total, self.n = total, initial
        self.enabled = enabled is not False
        self.tty = bool(enabled) or (enabled is None and sys.stderr.isatty())
        self.bar = None
        self.t0 = time.monotonic()
        self.initial = initial
        self.eta_said = False
        self._last_line = (initial, self.t0)
        if self.enabled and self.tty:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, unit=unit, dynamic_ncols=True, smoothing=0.1,
                            file=sys.stderr)

    def expected_seconds(self) -> float | None:
        """Seconds still to go at the rate seen so far (None before the first answer)."""
        done = self.n - self.initial
        if done <= 0:
            return None
        return (self.total - self.n) * (time.monotonic() - self.t0) / done

    def say(self, line: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr, flush=True)

    def update(self, k: int, postfix: str) -> None:
        self.n += k
        if not self.enabled:
            return
        if k and not self.eta_said and self.n < self.total:
            left = self.expected_seconds()
            if left is not None:
                self.eta_said = True
                self.say(f"casebench: expected duration: about {_duration(time.monotonic() - self.t0 + left)} "
                         f"for {self.total - self.initial} requests ({_duration(left)} to go, at the first "
                         "batch's pace)")
        if self.bar is not None:
            self.bar.set_postfix_str(postfix, refresh=False)
            self.bar.update(k)
            return
        now = time.monotonic()
        last_n, last_t = self._last_line
        if self.n - last_n >= max(1, self.total // 10) or now - last_t >= 30 or self.n == self.total:
            rate = (self.n - self.initial) / max(now - self.t0, 1e-9)
            eta = _duration((self.total - self.n) / rate) if rate > 0 else "?"
            print(f"casebench: {self.n}/{self.total} requests, {rate:.2f} req/s, ETA {eta}, {postfix}",
                  file=sys.stderr, flush=True)
            self._last_line = (self.n, now)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
