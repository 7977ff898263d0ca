"""The CPU policy of local torch work: glibc keeps the memory a forward pass frees, and idle
OpenMP threads sleep on a busy machine. Process-wide settings, each measured (see the docstrings),
each changing no result, only time; apart from the HF backend so the CLI can settle the OpenMP
policy before torch is imported without loading the backend's module.
"""

from __future__ import annotations

import os
from typing import Any


#: glibc mallopt parameters (malloc.h) and the values set by ``keep_freed_memory``.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 32 * 1024 * 1024  # the largest glibc accepts on 64-bit (HEAP_MAX_SIZE / 2)
_TRIM_THRESHOLD = 512 * 1024 * 1024
_MALLOC_STATE: dict[str, Any] = {}


def keep_freed_memory() -> str | None:
    """Make glibc keep the memory a forward pass frees, instead of handing it back to the kernel.

    Why (found by profiling prob mode at batch 1, issue 13): a forward pass allocates and frees
    tens of megabytes of activations. glibc's default thresholds adapt as it goes: blocks above
    a moving mmap threshold are mapped and unmapped on every call, and free memory at the top
    of a heap is trimmed back to the kernel, so the next pass touches fresh pages and takes a
    page fault for each 4 KiB. How many depends on the thread and on the history (0 to ~46,000
    faults per 512-token pass measured on one machine, ~3 us each in a VM, i.e. up to ~130 ms
    of system time per pass), more where faults cost more. One of the two causes of the
    prob-mode overhead (the other: torch work split across two threads, see ``__init__``).
    Fixing both thresholds ends the churn: after the first pass, a pass takes no page faults.

    Process-wide and done once, on Linux with glibc only; ``CASEBENCH_MALLOC_TUNING=0`` leaves
    malloc alone. Returns what was done (for the manifest), None when nothing was.
    """
    if "done" in _MALLOC_STATE:
        return _MALLOC_STATE["done"]
    result = None
    if os.environ.get("CASEBENCH_MALLOC_TUNING", "1") != "0":
        try:
            import ctypes
            import platform

            if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
                libc = ctypes.CDLL("libc.so.6")
                if libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) and libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD):
                    result = f"glibc mmap threshold {_MMAP_THRESHOLD >> 20} MiB, trim threshold {_TRIM_THRESHOLD >> 20} MiB"
        except (OSError, AttributeError):
            result = None
    _MALLOC_STATE["done"] = result
    return result


def settle_omp_wait_policy() -> str | None:
    """On a busy CPU, let torch's idle OpenMP threads sleep instead of spin; call before torch is
    imported (the CLI does, first thing). Returns the policy set, None when left alone.

    Why (measured on a 2-core box at load average 12-14, the embedded model, greedy decoding of 2
    rows): with OpenMP's default spinning, each decoding step took about 10 s, because a thread
    spinning at a barrier holds a core the others need; with ``OMP_WAIT_POLICY=PASSIVE``, 0.2-0.4
    s. So when the 1-minute load average is at least the number of cores, and the user has set
    no policy, it is set to PASSIVE. It changes no result: only what idle threads do.
    """
    import sys

    if "OMP_WAIT_POLICY" in os.environ or "torch" in sys.modules:
        return None
    try:
        busy = os.getloadavg()[0] >= (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        return None
    if not busy:
        return None
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return "PASSIVE"
