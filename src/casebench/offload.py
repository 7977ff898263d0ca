"""Plain calls run in a second process beside the main one, where the machine has a second CPU.

Why: the report's figures (matplotlib: about 6 s of CPU over 43 inputs) and the human votes'
statistics need nothing from the work beside them but their arguments, and the report computed
them one after the other on one core. ``Offload`` forks one helper process when the work starts;
the main process hands it calls (``submit``) as their arguments become known and goes on with
its own work, then asks for each result (``result``) when it needs it. A call is run once, by
whichever process claims it first: the helper claims from the front of the list, the main process
from the back when it has nothing else to do (``run_all``), so neither waits while the other has
calls left. The same code runs the same call either way, so the results are the same bytes
whichever process ran them, and the same as with no helper at all.

No helper (every call runs in the main process, when its result is asked for) where it cannot
help or could harm: one CPU available (``os.sched_getaffinity``), no ``fork`` start method (the
helper must start warm, with the main process's modules and sessions, and without pickling them),
or other threads running in the main process (a fork copies their locks, held or not).

Why not ``concurrent.futures.ProcessPoolExecutor``: its queued calls cannot be taken back by the
main process when it is free first, and its workers outlive a killed parent (they wait on a
queue whose writing end they hold themselves); this helper exits when its parent is gone.

Safety: the helper ignores Ctrl-C (the main process stops it: ``close``, always run); an error
in a call is raised again in the main process as the same exception, with the helper's traceback
as a note; warnings raised in a call are raised again in the main process when its result is
taken (so the report tells them as before); if the helper dies, the main process runs what it
had left. Standard library only; no import from the rest of the package.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import pickle
import queue
import signal
import threading
import traceback
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator

log = logging.getLogger("casebench.offload")

#: calls one helper can be handed; any beyond run in the main process
CAPACITY = 512
#: seconds between the main process's checks that the helper still runs, while it waits
POLL_S = 0.5


def helper_possible() -> bool:
    """Whether a helper process can help here: two CPUs or more available to this process,
    the ``fork`` start method, and no other thread running (see the module docstring)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return (cpus >= 2 and "fork" in multiprocessing.get_all_start_methods()
            and threading.active_count() == 1)


def _freeze() -> bool:
    """Leave every object alive now out of the garbage collector's walks (``gc.freeze``); True
    when none was before (the caller then ends it with ``gc.unfreeze``; an outer freeze is kept)."""
    first = gc.get_freeze_count() == 0
    gc.freeze()
    return first


@contextmanager
def long_lived() -> Iterator[None]:
    """The objects alive when the block starts are left out of the garbage collector's walks
    until it ends (``gc.freeze``; an outer freeze is kept).

    Why: a large piece of work (a report over 43 files) holds its inputs until it ends, and each
    full collection walked them all again: about 0.9 s of the report's CPU. A forked helper
    (``Offload``) gains too: a collection writes to each object it walks, and each page written
    is then copied, in whichever process writes it."""
    thawed = _freeze()
    try:
        yield
    finally:
        if thawed:
            gc.unfreeze()


def _call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, Any, list[Any]]:
    """Run one call: (succeeded, its value or exception, the warnings it raised)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return True, fn(*args, **kwargs), list(caught)
        except Exception as e:  # noqa: BLE001 - handed back and raised in the main process
            return False, e, list(caught)


def _pickled_outcome(ok: bool, value: Any, caught: list[Any], tb: str) -> bytes:
    """The helper's answer as bytes: pickled in its loop, so what cannot be pickled is said,
    never lost in the sending thread (the main process would wait for it)."""
    notes = [(w.category, str(w.message)) for w in caught]
    try:
        return pickle.dumps((ok, value, notes, tb))
    except Exception as e:  # noqa: BLE001
        kind = "value" if ok else f"error ({type(value).__name__}: {value})"
        failure = RuntimeError(f"the helper process could not send back a call's {kind}: {e}")
        try:
            return pickle.dumps((False, failure, notes, tb))
        except Exception:  # noqa: BLE001 - a warning category that cannot be pickled
            return pickle.dumps((False, failure, [], tb))


def _serve(jobs: Any, results: Any, claims: Any, parents_ends: tuple[Any, ...]) -> None:
    """The helper's loop: take each call handed over, run it if the main process has not
    claimed it, send back the outcome; stop at ``None`` or when the parent is gone (its end of
    the pipe closes). A thread reads the calls and another sends the outcomes, so neither
    process waits on the pipe while the other computes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for end in parents_ends:  # only the parent holds these: its exit closes the pipes
        end.close()
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def read() -> None:
        try:
            while True:
                inbox.put(jobs.recv_bytes())
        except (EOFError, OSError):
            inbox.put(None)

    def send() -> None:
        try:
            while (data := outbox.get()) is not None:
                results.send_bytes(data)
        except OSError:  # the parent is gone
            pass

    threading.Thread(target=read, daemon=True).start()
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    while (data := inbox.get()) is not None and data:
        k, payload = pickle.loads(data)
        if not _claim(claims, k):
            continue
        caught: list[Any] = []
        try:
            fn, args, kwargs = pickle.loads(payload)
        except Exception as e:  # noqa: BLE001 - said in the main process, as the call's error
            ok, value = False, e
        else:
            ok, value, caught = _call(fn, args, kwargs)
        tb = "" if ok else "".join(traceback.format_exception(value))
        outbox.put(pickle.dumps((k, _pickled_outcome(ok, value, caught, tb))))
    outbox.put(None)
    sender.join()


def _claim(claims: Any, k: int) -> bool:
    """Mark call ``k`` as taken; False when the other process took it first."""
    with claims.get_lock():
        if claims[k]:
            return False
        claims[k] = 1
        return True


Outcome = tuple[bool, Any, list[tuple[type[Warning], str]], str]


def _here(call: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]) -> Outcome:
    ok, value, caught = _call(*call)
    return ok, value, [(w.category, str(w.message)) for w in caught], ""


class Offload:
    """Calls handed to a helper process, or run here (see the module docstring). ``helper``:
    start a helper when ``helper_possible()``; False runs every call here."""

    def __init__(self, helper: bool = True) -> None:
        self._calls: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = []
        self._done: dict[int, Outcome] = {}
        self._sent: set[int] = set()
        self._proc: Any = None
        self._thawed = False
        if helper and helper_possible():
            ctx = multiprocessing.get_context("fork")
            self._claims = ctx.Array("b", CAPACITY)
            jobs_r, self._jobs = ctx.Pipe(duplex=False)
            self._results, results_w = ctx.Pipe(duplex=False)
            self._proc = ctx.Process(target=_serve, name="casebench-offload", daemon=True,
                                     args=(jobs_r, results_w, self._claims, (self._jobs, self._results)))
            self._thawed = _freeze()  # the helper's collections then write to none of the pages it shares
            self._proc.start()
            jobs_r.close()  # the helper's ends: its exit closes the pipes for this process
            results_w.close()

    @property
    def helper(self) -> bool:
        """Whether a helper process runs the calls beside this one."""
        return self._proc is not None

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> int:
        """Hand over ``fn(*args, **kwargs)`` (``fn`` a module-level function, the arguments plain
        data); returns the call's number for ``result``."""
        k = len(self._calls)
        self._calls.append((fn, args, kwargs))
        if self._proc is not None and k < CAPACITY:
            try:
                data = pickle.dumps((k, pickle.dumps((fn, args, kwargs))))
            except Exception:  # noqa: BLE001 - not for the helper: run here when asked
                return k
            try:
                self._jobs.send_bytes(data)
            except OSError:  # the helper is gone: run here
                self._lost()
                return k
            self._sent.add(k)
        return k

    def result(self, k: int) -> Any:
        """The value of call ``k``: run here if the helper has not taken it, else waited for.
        Raises the call's exception, and raises again the warnings it raised."""
        if k not in self._done:
            if k not in self._sent or _claim(self._claims, k):
                self._done[k] = _here(self._calls[k])
            else:
                self._wait(k)
        ok, value, notes, tb = self._done[k]
        for category, message in notes:
            warnings.warn(message, category, stacklevel=2)
        if not ok:
            if tb:
                value.add_note("raised in casebench's helper process:\n" + tb.rstrip())
            raise value
        return value

    def run_all(self) -> None:
        """Run here, from the last, the calls the helper has not taken yet (it takes them from
        the first), so both processes work until none is left; their results wait for
        ``result``."""
        for k in reversed(range(len(self._calls))):
            if k in self._done or (k in self._sent and not _claim(self._claims, k)):
                continue
            self._done[k] = _here(self._calls[k])

    def _wait(self, k: int) -> None:
        """Take the helper's outcomes until call ``k``'s is in; if the helper is gone, run here
        what it took and did not send back."""
        while k not in self._done:
            try:
                if not self._results.poll(POLL_S):
                    if self._proc.is_alive():
                        continue
                    raise EOFError
                j, data = pickle.loads(self._results.recv_bytes())
            except (EOFError, OSError):
                self._lost()
                self._done[k] = _here(self._calls[k])
                return
            self._done[j] = pickle.loads(data)

    def _lost(self) -> None:
        """The helper died: say so, and run here whatever it had taken."""
        proc = self._proc
        self._sent.clear()
        self.close()
        log.warning("casebench's helper process stopped (exit code %s); running its calls here",
                    proc.exitcode if proc is not None else None)

    def close(self) -> None:
        """Stop the helper (its unfinished calls are dropped) and wait for it to exit."""
        if self._proc is None:
            return
        if self._thawed:
            gc.unfreeze()
        proc, self._proc = self._proc, None
        self._jobs.close()  # the helper reads the end of its calls and exits
        self._results.close()
        proc.join(timeout=2 * POLL_S)
        if proc.is_alive():  # in the middle of a long call
            proc.terminate()
            proc.join()


@contextmanager
def offload(helper: bool = True) -> Iterator[Offload]:
    """An ``Offload`` for the block; its helper is stopped when the block ends, however it ends."""
    off = Offload(helper)
    try:
        yield off
    finally:
        off.close()
