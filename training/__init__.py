"""The refusal readers' training tools, outside the runtime package: they refit the shipped model
files (``casebench/classify/learned_model.json``, ``learned_lm_model.json``) from the labelled
answers under ``tests/fixtures`` and need scikit-learn, which a user of casebench never does.

Run from the repository root: ``python -m training.learned_train --check`` (or ``--train``,
``--cv``), ``python -m training.learned_lm_train --check``.
"""
