"""What inspect_ai loads through casebench's ``inspect_ai`` entry point (pyproject.toml).

Importing the task registers it with inspect under the package's name, so
``inspect eval casebench/case_bench`` resolves without a file path.
"""

from .inspect_task import case_bench, case_bench_epochs, case_bench_metrics, judge_prompt, verdict

__all__ = ["case_bench", "case_bench_epochs", "case_bench_metrics", "judge_prompt", "verdict"]
