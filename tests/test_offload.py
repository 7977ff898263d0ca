"""The helper process (``casebench.offload``): each call runs once, in either process, with the same
result; an error or a warning in the helper reaches the main process as itself; the helper never
outlives the work (closed, interrupted, or its parent killed), and if it dies its calls run here.

Each check runs in a fresh interpreter (``_script``): a helper is only started where no other
thread runs, which the test process does not promise. The scripts wait for each other through
files (``started``, ``go``), never for a length of time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from casebench.offload import Offload, helper_possible, offload

SRC = Path(__file__).resolve().parents[1] / "src"
pytestmark = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="a helper process is only started with two CPUs or more")

#: what every script starts with: ``hold`` (the helper's call that says it started and waits for
#: ``go``) and ``wait_for`` (a file to appear; it gives up when its own parent is gone, so a
#: script the test stopped waiting for leaves no process behind)
PRELUDE = '''
import os, sys, time, warnings
from pathlib import Path
from casebench.offload import Offload, offload
TMP = Path(sys.argv[1])

def wait_for(path):
    parent = os.getppid()
    while not path.exists():
        if os.getppid() != parent:  # whoever waits on this process gave up on it (its timeout)
            sys.exit(f"{path} never appeared")
        time.sleep(0.01)

def hold(value):
    (TMP / "started").write_text(str(os.getpid()))
    wait_for(TMP / "go")
    return value, os.getpid()

def bad(record):
    raise ValueError(f"record {record}: field 'x' is not a number")

def warns(x):
    warnings.warn(f"careful with {x}", UserWarning)
    return x
'''


def _script(body: str, tmp: Path, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body), str(tmp)], env=env,
                          capture_output=True, text=True, timeout=300, **kw)


def test_calls_give_the_same_values_in_either_process_and_the_helper_is_really_another(tmp_path) -> None:
    r = _script('''
        with offload() as off:
            assert off.helper
            first = off.submit(hold, "held")
            wait_for(TMP / "started")           # the helper holds call 0 ...
            mine = off.submit(os.getpid)
            assert off.result(mine) == os.getpid()  # ... so call 1 runs here, when asked
            calls = [off.submit(pow, 3, k) for k in range(40)]
            (TMP / "go").write_text("")
            off.run_all()                        # the rest, by whichever process is free
            assert [off.result(c) for c in calls] == [3 ** k for k in range(40)]
            value, pid = off.result(first)
            assert value == "held" and pid != os.getpid()
            proc = off._proc
        assert proc.exitcode == 0 and not __import__("multiprocessing").active_children()
        print("ok")
    ''', tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_an_error_or_a_warning_in_the_helper_reaches_the_main_process_as_itself(tmp_path) -> None:
    r = _script('''
        with offload() as off:
            off.submit(hold, None)
            wait_for(TMP / "started")
            failing = off.submit(bad, 7)    # queued behind the held call: the helper takes it ...
            warned = off.submit(warns, 5)
            pending = off.submit(pow, 2, 10)
            (TMP / "go").write_text("")
            off.result(0)                   # ... once it is free, before the main process asks
            try:
                off.result(failing)
            except ValueError as e:
                assert str(e) == "record 7: field 'x' is not a number", e
                notes = "".join(getattr(e, "__notes__", []))
                print("helper's traceback" if "in bad" in notes else "ran here")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                assert off.result(warned) == 5
            assert [str(w.message) for w in caught] == ["careful with 5"], caught
            assert off.result(pending) == 1024
        print("ok")
    ''', tmp_path)
    assert r.returncode == 0 and r.stdout.split()[-1] == "ok", r.stderr
    assert "Traceback" not in r.stderr


def test_a_helper_that_dies_leaves_its_calls_to_the_main_process(tmp_path) -> None:
    r = _script('''
        import logging, signal
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
        with offload() as off:
            held = off.submit(hold, "x")
            wait_for(TMP / "started")
            rest = [off.submit(pow, 2, k) for k in range(5)]
            os.kill(int((TMP / "started").read_text()), signal.SIGKILL)
            (TMP / "go").write_text("")
            value, pid = off.result(held)            # run here again: same value
            assert value == "x" and pid == os.getpid()
            assert [off.result(c) for c in rest] == [2 ** k for k in range(5)]
            assert not off.helper
        print("ok")
    ''', tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    assert "helper process stopped" in r.stderr


def test_ctrl_c_stops_both_processes_and_the_helper_says_nothing(tmp_path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", PRELUDE + textwrap.dedent('''
        try:
            with offload() as off:
                off.submit(hold, None)
                wait_for(TMP / "started")
                (TMP / "ready").write_text("")
                off.result(0)                 # waits for the held call: "go" never comes
        except KeyboardInterrupt:
            import multiprocessing
            print("interrupted", multiprocessing.active_children())
    '''), str(tmp_path)], env={**os.environ, "PYTHONPATH": str(SRC)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for(tmp_path / "ready", proc)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to both processes
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert out.strip() == "interrupted []", (out, err)
    assert "Traceback" not in err
    helper = int((tmp_path / "started").read_text())
    assert _gone(helper)


def test_a_helper_whose_parent_is_killed_exits(tmp_path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", PRELUDE + textwrap.dedent('''
        import signal
        off = Offload()
        off.submit(hold, None)
        wait_for(TMP / "started")
        os.kill(os.getpid(), signal.SIGKILL)   # no cleanup at all
    '''), str(tmp_path)], env={**os.environ, "PYTHONPATH": str(SRC)}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)  # (the helper holds its parent's pipes: nothing to wait on)
    proc.wait(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    helper = int((tmp_path / "started").read_text())
    (tmp_path / "go").write_text("")  # its call returns; the closed pipe then ends it
    deadline_polls = 12000
    while not _gone(helper) and deadline_polls:
        deadline_polls -= 1
        threading.Event().wait(0.01)
    assert _gone(helper)


def test_without_a_helper_every_call_runs_here_when_asked() -> None:
    ran: list[int] = []

    def note(k: int) -> int:
        ran.append(k)
        return k * k

    off = Offload(helper=False)
    calls = [off.submit(note, k) for k in range(3)]
    assert not off.helper and ran == []
    assert off.result(calls[2]) == 4 and ran == [2]
    off.run_all()
    assert [off.result(c) for c in calls] == [0, 1, 4] and sorted(ran) == [0, 1, 2]


def test_no_helper_beside_other_threads_nor_for_a_call_that_cannot_be_sent() -> None:
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not helper_possible()
        with offload() as off:
            assert not off.helper
    finally:
        stop.set()
        t.join()


def test_no_helper_on_one_cpu(tmp_path) -> None:
    r = _script('''
        from casebench.offload import helper_possible
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})   # as under taskset -c 0
        with offload() as off:
            assert not helper_possible() and not off.helper
            assert off.result(off.submit(os.getpid)) == os.getpid()
        print("ok")
    ''', tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_a_call_that_cannot_be_pickled_runs_here(tmp_path) -> None:
    r = _script('''
        with offload() as off:
            assert off.helper
            k = off.submit(lambda: os.getpid())
            off.run_all()
            assert off.result(k) == os.getpid()
        print("ok")
    ''', tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(proc.communicate())
        threading.Event().wait(0.01)


def _gone(pid: int) -> bool:
    """The process has exited (it may stay a zombie until whoever adopted it reaps it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")
