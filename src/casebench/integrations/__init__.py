"""Bridges from casebench to other evaluation frameworks.

Each bridge lives in its own module and imports its framework only when loaded, so
``import casebench`` never pulls one in. Today there is one: ``inspect_task`` runs CASE-Bench
inside inspect_ai (``pip install 'casebench[inspect]'``, then
``inspect eval casebench/case_bench --model ...``); inspect finds it through the
``inspect_ai`` entry point, which loads ``_inspect_registry``. Its logs are read back by
``casebench.inspect_log`` (beside the loader), so every scoring command reads them.
"""
