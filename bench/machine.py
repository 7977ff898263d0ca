"""The machine line every local-model bench prints with its figures (machines differ: say which)."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_line() -> str:
    import torch
    import transformers

    return (f"CPU: {cpu_model()}, {os.cpu_count()} logical CPUs; torch {torch.__version__} with "
            f"{torch.get_num_threads()} threads; transformers {transformers.__version__}; "
            f"load average {os.getloadavg()[0]:.2f}")
