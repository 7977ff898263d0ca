"""``casebench classify``: re-read a finished respond run with another refusal classifier."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from ._common import BadInput, RegistryCommand, bad_input_errors, classifier_options, refusal_classifier_options


@click.command("classify", cls=RegistryCommand, classifier_flags="prefixed")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("-o", "--out", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="The new run directory (default: RUN_DIR + '_' + the classifier's name).")
@refusal_classifier_options
def classify_cmd(run_dir: Path, out: Path | None, refusal_classifier: str | None, partial_as: str,
                 **registry_flags: Any) -> None:
    """Re-classify the answers of a finished respond run without asking the model again.

    Writes a new run directory that shares the answers; the original run stays as it was. Score
    it like any run (casebench score NEW_RUN).
    """
    from ..classify import DEFAULT_CLASSIFIER, make_classifier
    from ..runs.reclassify import reclassify

    with bad_input_errors():
        try:
            classifier = make_classifier(refusal_classifier, **classifier_options(refusal_classifier, registry_flags))
        except ValueError as e:
            raise BadInput(f"--refusal-classifier: {e}") from None
        if out is None:
            name = re.sub(r"[^A-Za-z0-9._-]+", "-", str(classifier.describe().get("name", refusal_classifier or DEFAULT_CLASSIFIER)))
            out = run_dir.with_name(f"{run_dir.name}_{name.strip('-')}")
        manifest = reclassify(run_dir, out, classifier, partial_as_safe=partial_as == "safe")
    t = manifest.totals
    click.echo(f"re-classified {t.final or t.answered + t.missing} answers: {t.answered} read, {t.missing} missing")
    click.echo(f"run: {out}")
