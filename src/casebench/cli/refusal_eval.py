"""``casebench refusal-eval``: score a refusal classifier on labelled answers (agreement with whoever labelled them).

    casebench refusal-eval FILE.csv [--refusal-classifier X] [--partial-as unsafe|safe] [--json]

FILE.csv is in XSTest's format (columns ``prompt``, ``completion``, ``final_label`` with
``1_full_compliance``, ``2_full_refusal``, ``3_partial_refusal``). Without
``--refusal-classifier`` the offline default (``learned``) is scored.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import click

from ..present.numbers import fmt_num
from ._common import HELP, BadInput, RegistryCommand, classifier_options, refusal_classifier_help


#: how the text writes a figure it has no value for (kept as it always was)
NA = "n/a"

#: who gave the file's labels (``--labelled-by``), in words: only people's labels are called people's
LABELLED_BY_WORDS = {
    "people": "people",
    "ai-readers": "AI readers following a guide (not people)",
    "writers": "the answers' own writers (not people)",
    "developers-ai": "written and labelled by the project's developers (AI; not people)",
    "unsaid": "not said (--labelled-by); agreement is with whoever labelled the file",
}

#: how the binary figures read a partial answer, per ``--partial-as``
_PARTIAL_WORDS = {"unsafe": "partial = refusal", "safe": "partial = answer "}


def _table(d: dict[str, Any], show: int) -> str:
    lines = [
        f"refusal-eval: {d['source']}",
        f"classifier:   {d['classifier'].get('name')} (version {d['classifier'].get('version')})",
        f"labelled by:  {LABELLED_BY_WORDS[d.get('labelled_by') or 'unsaid']}",
        f"answers:      {d['n']}  (the file's labels: "
        + ", ".join(f"{k} {v}" for k, v in d["human_counts"].items())
        + ")",
        f"classified:   {d['n_classified']}  coverage {fmt_num(d['coverage'], 1, NA, percent=True)}"
        + (f"  ({d['missing']} missing"
           + (f", {d['undetermined']} of them undetermined (the reading was unsure)" if d.get("undetermined") else "")
           + ": not counted below, never guessed)" if d["missing"] else ""),
        "",
        f"agreement (binary, {_PARTIAL_WORDS[d.get('partial_as', 'unsafe')]}): {fmt_num(d['agreement'], 1, NA, percent=True)}"
        + (f"  95% CI {fmt_num(d['agreement_ci95'][0], 1, NA, percent=True)}-{fmt_num(d['agreement_ci95'][1], 1, NA, percent=True)}" if d["agreement_ci95"] else ""),
        f"agreement (3 classes):                 {fmt_num(d['agreement_3class'], 1, NA, percent=True)}",
        f"Cohen's kappa (binary):                {fmt_num(d['kappa'], 3, NA)}",
        f"Cohen's kappa (3 classes):             {fmt_num(d['kappa_3class'], 3, NA)}",
        f"reading of refusals (binary):          sensitivity {fmt_num(d['binary']['refusal_recall'], 1, NA, percent=True)}, "
        f"specificity {fmt_num(d['binary']['compliance_recall'], 1, NA, percent=True)}",
        "",
        "confusion (rows: the file's labels, columns: classifier)",
    ]
    labels = d["confusion"]["labels"]
    lines.append("            " + "".join(f"{lab:>10}" for lab in labels) + f"{'missing':>10}")
    for lab, row in zip(labels, d["confusion"]["matrix"]):
        lines.append(f"  {lab:<10}" + "".join(f"{v:>10}" for v in row) + f"{d['confusion']['missing'][lab]:>10}")
    lines += ["", "per class      precision   recall      f1"]
    for lab, m in d["per_class"].items():
        lines.append(f"  {lab:<10}{fmt_num(m['precision'], 1, NA, percent=True):>12}{fmt_num(m['recall'], 1, NA, percent=True):>9}{fmt_num(m['f1'], 1, NA, percent=True):>8}")
    o = d.get("outcomes")
    if o:
        lines += ["", "outcomes (how the answers land; a clarifying question counts as compliance in 3 classes)",
                  f"  agreement (3 classes): {fmt_num(o['agreement_3class'], 1, NA, percent=True)}   kappa {fmt_num(o['kappa_3class'], 3, NA)}",
                  f"  agreement (4 classes): {fmt_num(o['agreement_4class'], 1, NA, percent=True)}   kappa {fmt_num(o['kappa_4class'], 3, NA)}"
                  + ("" if o["labels_have_clarify"] else "   (the file labels no clarifying question)"),
                  "  per outcome   precision   recall      f1   labelled  read"]
        for lab, m in o["per_class"].items():
            lines.append(f"  {lab:<10}{fmt_num(m['precision'], 1, NA, percent=True):>12}{fmt_num(m['recall'], 1, NA, percent=True):>9}{fmt_num(m['f1'], 1, NA, percent=True):>8}"
                         f"{m['support']:>11}{m['predicted']:>6}")
    dis = [x for x in d.get("disagreements", []) if x["binary_disagrees"]]
    if show and dis:
        lines += ["", f"binary disagreements (first {min(show, len(dis))} of {len(dis)}):"]
        for x in dis[:show]:
            lines.append(f"  {x['id']}: labelled {x['human']}, classifier {x['classifier']} ({x['reason']})")
    return "\n".join(lines) + "\n"


@click.command("refusal-eval", cls=RegistryCommand, classifier_flags="plain")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--refusal-classifier", "spec", default=None, metavar="SPEC",
              help="The classifier to score (default: learned). " + refusal_classifier_help())
@click.option("--partial-as", "partial_as", type=click.Choice(["unsafe", "safe"]), default="unsafe", show_default=True,
              help="How the binary figures count a partial answer, on both sides: as refusing (unsafe, XSTest's "
                   "reading) or as answering (safe), as respond runs read them with --partial-as.")
@click.option("--json", "as_json", is_flag=True, help=HELP["--json"])
@click.option("--show", type=click.IntRange(min=0), default=10, show_default=True,
              help="Table output: how many binary disagreements to list.")
@click.option("--labelled-by", "labelled_by", type=click.Choice([k for k in LABELLED_BY_WORDS if k != "unsaid"]),
              default=None, help=HELP["--labelled-by"])
def refusal_eval_cmd(file: str, spec: str | None, partial_as: str, as_json: bool, show: int,
                     labelled_by: str | None = None, **registry_flags: Any) -> None:
    """Score a refusal classifier on labelled answers in XSTest's CSV format (agreement with whoever labelled them).

    FILE has the columns prompt, completion and final_label (1_full_compliance,
    2_full_refusal, 3_partial_refusal, and 4_clarifying_question where the labels give the fourth
    outcome); `casebench annotate export --answers` writes one from
    people's labels of a respond run's answers. Agreement is binary (partial counts as refusal,
    as in XSTest; --partial-as safe counts it as answering) and over three classes; answers the classifier could not label are reported as
    missing, never guessed. Each classifier's options (--base-url, --refusal-labels, ...) come from
    its description and apply to the classifiers named in their help.

    Exit codes: 0 scored; 1 nothing could be classified; 2 bad input (file, row and column named).
    """
    from ..classify import ClassifierError, make_classifier
    from ..classify.evaluate import RefusalDataError, arefusal_eval, load_labelled_csv

    options = classifier_options(spec, registry_flags, prefixed=False)
    try:
        rows = load_labelled_csv(file)
    except RefusalDataError as e:
        raise BadInput(str(e)) from None
    try:
        classifier = make_classifier(spec, **options)
    except ClassifierError as e:
        raise BadInput(str(e)) from None

    async def go() -> Any:
        try:
            return await arefusal_eval(rows, classifier, partial_as)
        finally:
            await classifier.aclose()

    result = asyncio.run(go())
    result.source = file
    d = result.to_dict()
    d["labelled_by"] = labelled_by or "unsaid"
    if as_json:
        click.echo(json.dumps(d, indent=2, ensure_ascii=False))
    else:
        click.echo(_table(d, show), nl=False)
    if result.n_classified == 0:
        reasons = sorted({x["reason"] for x in d["disagreements"] if x["reason"]})[:3]
        raise click.ClickException(
            f"no answer could be classified by {classifier.name}" + (f" (e.g. {'; '.join(reasons)})" if reasons else "")
        )
