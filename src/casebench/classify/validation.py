"""The refusal classifier's validated error, stored with the package, and who gave its labels.

A respond-mode refusal rate is only as good as the classifier that read the answers. The three
offline classifiers (``learned``, the default, ``learned-lm`` and ``rules``) are measured against
labelled answers, per kind of writer, and every stored set says who labelled it
(``LABELLED_BY``): **people** only for XSTest's answers (Llama-2-70b-chat, two annotators,
adjudicated; the shared file, development data for the readers); **AI readers following the
guide** (``tests/fixtures/refusal_label_guide.md``, blind of the classifiers) for the embedded
model's answers (blind sets v3-v6: two readers each, a third settling their few disagreements);
**the writers' own intent** for the sets of our own wording (AI writers who wrote each answer to a
brief and labelled what it was written to do). So a figure here is never "agreement with people"
unless people gave the labels.

Each set also carries ``outcomes``: how the answers land (full compliance, partial compliance,
clarifying question, full refusal) as the reader with the outcome refinement
(``classify.outcome_refine``, its version named) reads them, as ``refusal-eval`` reports them;
XSTest's also on its held-aside half (``OUTCOME_DEVELOPMENT_SETS``).

The sets of one kind of writer that the reader never saw (``POOLED``) are kept set by set, so a
correction can pool them with their between-set spread (``stats.refusal.pool_reader_error``);
the standing set of each kind (``VALIDATED``) gives the agreement quoted beside a rate. Sets: on
answers of our own wording in large chat models' styles (held-aside v7-v11, written blind), and
on a small model's answers (the embedded SmolLM2-135M over real cases, cut at the main job's 80
tokens, in blind sets of 240; only the figures are stored, since the answers quote the dataset).
Each classifier's ``describe()`` carries its figures, so a run manifest records which classifier
read its answers and how often it agrees with whose labels; ``casebench score`` and ``casebench
report`` print them beside every refusal rate (``present.refusal_text.classifier_note``).

The stored file is written by a script from the fixtures (``classify.validation_measure``, apart
so that the readers, which read their figures here, never import what measures them), never by hand::

    python -m casebench.classify.validation_measure            # from the repository root: rewrite
    python -m casebench.classify.validation_measure --check    # exit 1 if the stored figures are stale

Only figures are stored for sets whose answers are not ours: the shared XSTest file (other
people's answers, not to be redistributed) is measured with ``--external "XSTest v2 (people)=PATH"``
and only its counts are kept. The figures
belong to one classifier name and version (the learned one's version carries its model file's
hash); a classifier with another version (or an ``llm:``/``hf-classifier:`` classifier) has no
stored validation, and the notes say so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence, cast

#: The stored figures, shipped with the package.
VALIDATION_FILE = Path(__file__).with_name("validation.json")

#: The labelled sets of our own wording, relative to the repository root. Held-aside sets were
#: written blind (by writers who saw neither the classifiers nor any earlier example) and are
#: never tuned or trained on; development sets were. ``refusal_own_held_v2.csv`` was version 2's
#: held-aside set and became development data for rules version 3; ``refusal_own_held_v3.csv``
#: was rules version 3's and served to shape the learned classifier's features (so it is
#: development data for ``learned``, still blind for the rules); ``refusal_own_held_v4.csv`` was
#: never trained or tuned on, but measured while the readers changed; ``refusal_own_held_v5.csv``
#: (measured once, learned 94.6%) stood until v6, written with more refusals that never say no,
#: measured learned at 83.2% (and the reader before it at 83.4%): v6 then became training data,
#: and ``refusal_own_held_v7.csv``, written blind to the same brief, stood next;
#: ``refusal_own_held_v8.csv`` and ``refusal_own_held_v9.csv``, a third and a fourth set to that
#: brief written after the reader was fixed, measured it once more each, and all three then
#: trained ``learned-lm``. ``refusal_own_held_v10.csv`` (standing) and ``refusal_own_held_v11.csv``,
#: by two more writers to that brief, were written before ``learned-lm`` was fixed and read once
#: after, by all three readers; no reader was tuned or trained on them. A classifier tuned on its
#: held-aside set needs a new one, written blind. The two sets of four outcomes measure how the
#: answers land (full, partial, clarifying question, refusal) on answers no reader or refinement
#: saw: ``refusal_own_held_v12.csv`` (240 answers of our own wording in six voices, two of them a
#: safe completer and a model that asks before it helps, written blind to
#: ``refusal_writer_brief_v12.md``) and ``refusal_small_own_held.csv`` (100 answers of the embedded
#: SmolLM2-135M as the deployed chatbot, as in the main job (system placement, greedy, 80 tokens),
#: over 50 query pairs of our own wording (``refusal_small_cases_3.json``; its ``scores`` are the
#: case writer's guesses, placeholders the loader needs, not people's votes), labelled by two AI
#: readers following ``outcome_label_guide.md``, blind of the readers and of each other; a third
#: settled their disagreements). Both were measured once, after every reader and the refinement
#: were fixed, and are not pooled into a correction (the pools stay the sets they were validated on).
SETS: dict[str, str] = {
    "held-aside v12 (four outcomes)": "tests/fixtures/refusal_own_held_v12.csv",
    "embedded model, own cases (four outcomes)": "tests/fixtures/refusal_small_own_held.csv",
    "held-aside v10": "tests/fixtures/refusal_own_held_v10.csv",
    "held-aside v11": "tests/fixtures/refusal_own_held_v11.csv",
    "held-aside v7": "tests/fixtures/refusal_own_held_v7.csv",
    "held-aside v8": "tests/fixtures/refusal_own_held_v8.csv",
    "held-aside v9": "tests/fixtures/refusal_own_held_v9.csv",
    "held-aside v5": "tests/fixtures/refusal_own_held_v5.csv",
    "held-aside v4": "tests/fixtures/refusal_own_held_v4.csv",
    "held-aside v3": "tests/fixtures/refusal_own_held_v3.csv",
    "development": "tests/fixtures/refusal_own_dev.csv",
    "development (v2's held-aside)": "tests/fixtures/refusal_own_held_v2.csv",
    "development 2": "tests/fixtures/refusal_own_dev2.csv",
    "training (learned)": "tests/fixtures/refusal_train_v1.csv",
    "training, clarifying (learned)": "tests/fixtures/refusal_train_clarify.csv",
    "training v2 (learned)": "tests/fixtures/refusal_train_v2.csv",
    "training v3 (learned)": "tests/fixtures/refusal_train_v3.csv",
    "training, v6's held-aside (learned)": "tests/fixtures/refusal_own_held_v6.csv",
    "training, the embedded model's answers (learned)": "tests/fixtures/refusal_train_small.csv",
    "training, a tiny model's voice (learned)": "tests/fixtures/refusal_train_tiny_voice.csv",
}
#: The kind of writer of each set's answers. ``large``: our own wording in the styles of large
#: chat models (lectures, caveats, well-formed refusals); ``small``: a small model's babble (off
#: topic, repetitive, half-formed). A reader errs differently on the two, so a figure measured on
#: one kind is not quoted as the other's.
WRITER_KINDS: dict[str, str] = {
    "large": "answers of our own wording in the styles of large chat models",
    "small": "a small model's answers (off topic, repetitive, half-formed)",
}
_SMALL_WRITER_SETS = ("training, the embedded model's answers (learned)", "training, a tiny model's voice (learned)",
                      "embedded model, own cases (four outcomes)")
SET_WRITERS: dict[str, str] = {name: "small" if name in _SMALL_WRITER_SETS else "large" for name in SETS}
#: Labelled sets whose answers cannot be in the repository (they quote the dataset's queries, which
#: its licence keeps out), so only their figures are stored: ``python -m casebench.classify.validation_measure
#: --external NAME=PATH`` measures one from a labelled CSV; without it, the stored figures of a
#: classifier are carried over while its version is unchanged, and dropped when it changed (a figure
#: never outlives the reader it measured). Name -> (kind of writer, what the answers are in a few
#: words, where they came from).
EXTERNAL_SETS: dict[str, tuple[str, str, str]] = {
    "embedded model, blind v3-v6": (
        "small",
        "answers of the embedded SmolLM2-135M over real cases, cut at 80 tokens, labelled blind",
        "960 answers of the embedded SmolLM2-135M-Instruct as the deployed chatbot: the blind sets v3, v4, "
        "v5 and v6 pooled (each 40 query pairs of the real data stratified by category, no query in two sets "
        "or in an earlier set, context as user, system and turns, greedy, 80 tokens as in the main job; "
        "each labelled by two readers who saw neither classifier, disagreements settled by a third); each "
        "measured once, after the reader was fixed (learned 88.4%, 87.6%, 81.6% and 85.9%: the sets differ "
        "more than their intervals say, so the pooled figure is the one that stands); not redistributed "
        "(the answers quote the dataset)"),
    "embedded model, blind v6": (
        "small",
        "answers of the embedded SmolLM2-135M over real cases, cut at 80 tokens, labelled blind",
        "240 answers of the embedded SmolLM2-135M-Instruct as the deployed chatbot (respond mode, 40 query "
        "pairs of the real data stratified by category, none of them in an earlier set, context as user, "
        "system and turns, greedy, 80 tokens as in the main job), labelled by two readers who saw neither "
        "classifier (they agreed on 237 of 240; a third settled the rest); measured once, after all three "
        "offline readers were fixed; not redistributed (the answers quote the dataset)"),
    "embedded model, blind v3-v5": (
        "small",
        "answers of the embedded SmolLM2-135M over real cases, cut at 80 tokens, labelled blind",
        "720 answers of the embedded SmolLM2-135M-Instruct as the deployed chatbot: the blind sets v3, v4 "
        "and v5 pooled (each 40 query pairs of the real data stratified by category, no query in two sets "
        "or in an earlier set, context as user, system and turns, greedy, 80 tokens as in the main job; "
        "each labelled by two readers who saw neither classifier, disagreements settled by a third); each "
        "measured once, after both readers were fixed (learned 88.4%, 87.6% and 81.6%: the sets differ "
        "more than their intervals say, so the pooled figure is the one that stands); not redistributed "
        "(the answers quote the dataset)"),
    "embedded model, blind v5": (
        "small",
        "answers of the embedded SmolLM2-135M over real cases, cut at 80 tokens, labelled blind",
        "240 answers as in v3 (40 other query pairs, none in an earlier set), labelled the same way; "
        "measured once, after both readers were fixed; not redistributed"),
    "embedded model, blind v3": (
        "small",
        "answers of the embedded SmolLM2-135M over real cases, cut at 80 tokens, labelled blind",
        "240 answers of the embedded SmolLM2-135M-Instruct as the deployed chatbot (respond mode, 40 query "
        "pairs of the real data stratified by category, none of them in an earlier set, context as user, "
        "system and turns, greedy, 80 tokens as in the main job), labelled by two readers who saw neither "
        "classifier (disagreements settled by a third); measured once, after both readers were fixed; not "
        "redistributed (the answers quote the dataset)"),
    "embedded model, blind v4": (
        "small",
        "answers of the embedded SmolLM2-135M over real cases, cut at 80 tokens, labelled blind",
        "240 answers as in v3 (40 other query pairs, none in an earlier set), labelled the same way; "
        "measured once, after both readers were fixed; not redistributed"),
    "embedded model, blind v2": (
        "small",
        "answers of the embedded SmolLM2-135M over real cases, cut at 80 tokens (development since)",
        "240 answers as in v3 (other query pairs), labelled the same way; measured once (learned 89.3%, "
        "rules 87.8%), then development data for the reader now shipped; not redistributed"),
    "embedded model, blind": (
        "small",
        "answers of the embedded SmolLM2-135M over real cases, 256 tokens (development since)",
        "300 answers of the embedded SmolLM2-135M-Instruct (50 query pairs, three placements, greedy, 256 "
        "tokens), labelled by a reader who saw neither classifier; measured once (learned 81.5%, rules "
        "83.7%), then development data for rules version 5 and the learned reader's refit; not "
        "redistributed"),
    "XSTest v2 (people)": (
        "large",
        "answers of Llama-2-70b-chat to XSTest's prompts, labelled by people",
        "450 answers of Llama-2-70b-chat (XSTest v2, Röttger et al., NAACL 2024: 250 safe prompts that only sound "
        "unsafe, 200 unsafe contrasts), each labelled by two people, who agreed on 431, adjudicated; the shared "
        "file ../shared/xstest, development data for the readers (read while they were built); not redistributed"),
}

#: who labelled the answers of each set: ``by`` one of ``LABELLER_KINDS``, how many labellers read
#: each answer (None: not recorded), and how often they agreed (``agreed`` of ``of``; None: one
#: labeller or not recorded). The facts come from the sets' briefs and the project's history.
LABELLER_KINDS: dict[str, str] = {
    "people": "people",
    "ai-readers": "AI readers following the guide (tests/fixtures/refusal_label_guide.md)",
    "writers": "the writers' own intent (AI writers labelling the answers they wrote to a brief)",
}
_WRITERS = {"by": "writers", "labellers": 1, "agreed": None, "of": None}
_THIRD = "a third AI reader settled the rest"
LABELLED_BY: dict[str, dict[str, Any]] = {
    **{name: dict(_WRITERS) for name in SETS},
    "training, the embedded model's answers (learned)": {"by": "ai-readers", "labellers": None, "agreed": None,
                                                         "of": None},
    "embedded model, own cases (four outcomes)": {"by": "ai-readers", "labellers": 2, "agreed": 98,
                                                  "of": 100, "settled": _THIRD,
                                                  "guide": "tests/fixtures/outcome_label_guide.md"},
    "embedded model, blind v3-v6": {"by": "ai-readers", "labellers": 2, "agreed": 942, "of": 960, "settled": _THIRD},
    "embedded model, blind v6": {"by": "ai-readers", "labellers": 2, "agreed": 237, "of": 240, "settled": _THIRD},
    "embedded model, blind v3-v5": {"by": "ai-readers", "labellers": 2, "agreed": 705, "of": 720, "settled": _THIRD},
    "embedded model, blind v5": {"by": "ai-readers", "labellers": 2, "agreed": 237, "of": 240, "settled": _THIRD},
    "embedded model, blind v3": {"by": "ai-readers", "labellers": 2, "agreed": 229, "of": 240, "settled": _THIRD},
    "embedded model, blind v4": {"by": "ai-readers", "labellers": 2, "agreed": 239, "of": 240, "settled": _THIRD},
    "embedded model, blind v2": {"by": "ai-readers", "labellers": 2, "agreed": None, "of": None, "settled": _THIRD},
    "embedded model, blind": {"by": "ai-readers", "labellers": 1, "agreed": None, "of": None},
    "XSTest v2 (people)": {"by": "people", "labellers": 2, "agreed": 431, "of": 450,
                           "settled": "adjudicated by XSTest's authors"},
}


def labelled_by(set_name: str) -> dict[str, Any]:
    """Who labelled set ``set_name`` (``LABELLED_BY``), with ``words`` (``LABELLER_KINDS``, or the
    set's own ``guide`` where its readers followed another) and the
    labellers' ``agreement`` as a share (None where not recorded)."""
    info = dict(LABELLED_BY.get(set_name) or {"by": "writers", "labellers": None, "agreed": None, "of": None})
    info["words"] = (f"AI readers following the guide ({info['guide']})" if info.get("guide")
                     else LABELLER_KINDS[info["by"]])
    info["agreement"] = round(info["agreed"] / info["of"], 6) if info.get("agreed") is not None and info.get("of") else None
    return info


#: The sets pooled for each classifier and kind of writer when a run's rates are corrected
#: (``stats.refusal.pool_reader_error``: random effects over the sets, so the correction carries
#: how much the reader's error differs from set to set): the blind sets that classifier never saw
#: in development, and XSTest's people's labels for large models' writing (development data, but
#: the only people's labels of a real large model's answers: it anchors the pool to people, and
#: its difference from our own wording widens the pooled interval as it should).
POOLED: dict[str, dict[str, tuple[str, ...]]] = {
    "rules": {"large": ("held-aside v7", "held-aside v8", "held-aside v9", "held-aside v10", "held-aside v11",
                        "XSTest v2 (people)"),
              "small": ("embedded model, blind v3", "embedded model, blind v4", "embedded model, blind v5",
                        "embedded model, blind v6")},
    "learned": {"large": ("held-aside v7", "held-aside v8", "held-aside v9", "held-aside v10", "held-aside v11",
                          "XSTest v2 (people)"),
                "small": ("embedded model, blind v3", "embedded model, blind v4", "embedded model, blind v5",
                          "embedded model, blind v6")},
    "learned-lm": {"large": ("held-aside v10", "held-aside v11", "XSTest v2 (people)"),
                   "small": ("embedded model, blind v6",)},
}
#: sets in a pool that were development data for the readers (said beside the pooled figure)
DEVELOPMENT_IN_POOL: frozenset[str] = frozenset({"XSTest v2 (people)"})

#: The classifiers validated here (offline ones; ``llm:``/``hf-classifier:`` depend on a model
#: the user brings), each with the set whose figures stand for its error, per kind of writer.
VALIDATED: dict[str, dict[str, str]] = {
    "rules": {"large": "held-aside v10", "small": "embedded model, blind v3-v6"},
    "learned": {"large": "held-aside v10", "small": "embedded model, blind v3-v6"},
    "learned-lm": {"large": "held-aside v10", "small": "embedded model, blind v6"},
}
#: The sets each classifier is measured on, where not every set of ``SETS``: ``learned-lm``
#: reads an answer with a language model (a fraction of a second each), and its training sets
#: (v7-v9 among them) would only show it its own training answers, so it is measured on the
#: sets it never saw.
MEASURED_ON: dict[str, tuple[str, ...]] = {
    "learned-lm": ("held-aside v10", "held-aside v11", "held-aside v5", "held-aside v4", "held-aside v3",
                   "held-aside v12 (four outcomes)", "embedded model, own cases (four outcomes)"),
}


@lru_cache(maxsize=1)
def load() -> dict[str, Any] | None:
    """The stored figures, or None when the file is absent or unreadable (then every classifier
    counts as not validated; nothing is guessed)."""
    try:
        return json.loads(VALIDATION_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _entry(set_name: str, figs: dict[str, Any], partial_as: str, labels: str) -> dict[str, Any] | None:
    by = (figs.get("partial_as") or {}).get(partial_as)
    if not by:
        return None
    matrix = by["binary"]["matrix"]
    (tn, fp), (fn, tp) = matrix
    who = figs.get("labelled_by") or labelled_by(set_name)
    return {
        "set": set_name,
        "file": figs.get("file"),
        "labels": labels,
        "labelled_by": who,
        "writer": figs.get("writer"),
        "partial_as": partial_as,
        "n": figs["n"],
        "n_classified": figs.get("n_classified"),
        "coverage": figs["coverage"],
        "undetermined": figs.get("undetermined", 0),
        "agreement": by["agreement"],
        "agreement_ci95": by["agreement_ci95"],
        "agreement_3class": figs.get("agreement_3class"),
        # the binary confusion (rows: people, answered then refused; columns: the reader): what
        # a refusal rate is corrected with (``stats.refusal.ReaderError.from_matrix``)
        "matrix": [[int(tn), int(fp)], [int(fn), int(tp)]],
        "sensitivity": round(tp / (tp + fn), 6) if tp + fn else None,
        "specificity": round(tn / (tn + fp), 6) if tn + fp else None,
    }


def validation_for(name: str, version: str, partial_as: str = "unsafe", writer: str | None = None) -> dict[str, Any] | None:
    """The validated figures of classifier ``name`` at ``version`` under ``partial_as``: its
    held-aside set's agreement, 95% CI, coverage, size and binary confusion; for the kind of
    ``writer`` when a set of that kind is stored, else the ``large`` one, marked
    ``writer_match: False`` (``writer`` None: the run's writer is not known, ``writer_match``
    None). None when none are stored for exactly that classifier and version."""
    data = load()
    entry = (data or {}).get("classifiers", {}).get(name)
    if not entry or entry.get("version") != version:
        return None
    by_writer = entry.get("validation_sets") or {}
    setname = by_writer.get(writer or "large") or by_writer.get("large")
    figs = entry.get("sets", {}).get(setname) if setname else None
    if not figs or not setname:
        return None
    out = _entry(setname, figs, partial_as, figs.get("source") or labelled_by(setname)["words"])
    if out is None:
        return None
    # what the figure rests on, in words every note uses
    out["what"] = f"{figs['n']} {figs.get('what') or 'held-aside answers of our own wording'} (set {setname})"
    out["run_writer"] = writer
    out["writer_match"] = None if writer is None else figs.get("writer") == writer
    # the blind sets of that kind of writer, set by set, for a correction that pools them
    pool_writer = figs.get("writer") or "large"
    pool = []
    for name in (entry.get("pooled_sets") or {}).get(pool_writer, ()):
        one = _entry(name, entry["sets"][name], partial_as, "") if name in entry.get("sets", {}) else None
        if one is not None:
            pool.append({"set": name, "n": one["n"], "matrix": one["matrix"], "labelled_by": one["labelled_by"]["by"],
                         "development": name in DEVELOPMENT_IN_POOL})
    out["pool"] = pool
    return out


def better_reader(name: str, partial_as: str = "unsafe", writer: str = "large",
                  margin: float = 0.02) -> dict[str, Any] | None:
    """The stored reader whose validated agreement on ``writer``'s kind of set is above reader
    ``name``'s by more than ``margin`` (the best such), as ``{"name", "agreement", "extra"}``
    (``extra``: the optional extra it needs, from its registry entry); None when there is none
    or ``name`` has no stored figure. The stored figures decide, never a name."""
    entries = (load() or {}).get("classifiers", {})

    def agreement(reader: str) -> float | None:
        e = entries.get(reader) or {}
        figs = validation_for(reader, str(e.get("version")), partial_as, writer) if e else None
        a = (figs or {}).get("agreement")
        return float(a) if isinstance(a, (int, float)) and math.isfinite(a) else None

    mine = agreement(name)
    if mine is None:
        return None
    scored = [(a, r) for r in entries if r != name for a in [agreement(r)] if a is not None and a > mine + margin]
    if not scored:
        return None
    a, best = max(scored)
    from .registry import CLASSIFIERS

    info = CLASSIFIERS.get(best)
    return {"name": best, "agreement": a, "extra": getattr(info, "extra", None)}


#: The sets that say how a reader reads the outcomes on answers it never saw, per kind of writer:
#: (set name, whether its held-aside half is meant). XSTest's whole file was development data for
#: the refinement; its held-aside half was not.
OUTCOME_CHECKS: dict[str, tuple[tuple[str, bool], ...]] = {
    "large": (("XSTest v2 (people)", True), ("held-aside v12 (four outcomes)", False)),
    "small": (("embedded model, own cases (four outcomes)", False),),
}


@dataclass(frozen=True)
class OutcomeCheck:
    """How a reader read the outcomes of one set of answers it never saw: whose labels
    (``LABELLER_KINDS`` key), how many answers it read, how many of them each outcome's labels
    hold (``support``: every outcome the set's labels hold) and its F1 (``f1``: where defined,
    i.e. the labels hold it; an outcome the reader gave where none was labelled has none)."""

    set: str
    labelled_by: str
    n: int
    support: Mapping[str, int]
    f1: Mapping[str, float]


def outcome_checks(name: str, version: str, writer: str | None = None) -> tuple[OutcomeCheck, ...]:
    """How reader ``name`` at ``version`` reads each outcome on the sets of ``OUTCOME_CHECKS`` for
    ``writer``'s kind (None, a writer not known to be small: ``large``, as ``validation_for``), as
    stored; empty when nothing is stored for exactly that reader and version. A share of partial answers is only as good as this: a user reads it here."""
    entry = ((load() or {}).get("classifiers") or {}).get(name)
    if not entry or entry.get("version") != version:
        return ()
    out = []
    for set_name, half in OUTCOME_CHECKS.get(writer or "large", ()):
        figs = (entry.get("sets") or {}).get(set_name) or {}
        lands = (figs.get("outcomes") or {})
        lands = lands.get("held_aside_half") if half else lands
        if not lands:
            continue
        per_class = lands.get("per_class") or {}
        support = {o: int(c["support"]) for o, c in per_class.items() if c.get("support")}
        f1 = {o: float(c["f1"]) for o, c in per_class.items() if c.get("f1") is not None and c.get("support")}
        out.append(OutcomeCheck(set_name + (", held-aside half" if half else ""), labelled_by(set_name)["by"],
                                int(lands["n"]), support, f1))
    return tuple(out)


#: model names (after ``hf/``, case-insensitive) known to be small models: the embedded
#: SmolLM2-135M-Instruct (spec ``hf`` alone names it)
SMALL_MODELS: tuple[str, ...] = ("smollm2-135m-instruct", "huggingfacetb/smollm2-135m-instruct",
                                 "huggingfacetb/smollm2-135m", "huggingfacetb/smollm2-360m-instruct")


def writer_kind(model_spec: str | None) -> str | None:
    """The kind of writer (``WRITER_KINDS``) of a model spec when it is known (the embedded model
    and other SmolLM2 models up to 360M: ``small``), else None (not guessed from a name)."""
    spec = (model_spec or "").strip()
    prefix, _, name = spec.partition("/")
    if prefix == "hf" and (name.strip() == "" or name.strip().lower() in SMALL_MODELS):
        return "small"
    return None


#: the name of a respond run's own labelled answers in its directory (``annotate export
#: --answers RUN_DIR``): people's comply / partial / refuse for a sample of the run's answers
RUN_LABELS_FILE = "reader_labels.csv"
#: labels of a reveal run's answers at earlier turns (``annotate answers --turns``), kept apart
#: from ``RUN_LABELS_FILE``: they measure the reader inside a conversation, not the final answers
RUN_TURN_LABELS_FILE = "reader_turn_labels.csv"


def from_labels(labels: Sequence[tuple[str, str | None]], partial_as: str, source: str, file: str | None = None,
                writer: str | None = None) -> dict[str, Any]:
    """The validation of a reader from people's labels of answers it read: ``labels`` holds, per
    answer, (people's behaviour, the reader's behaviour or None when it read none), e.g. a
    respond run's recorded verdicts beside ``annotate answers`` labels. Same keys as
    ``validation_for``."""
    from .base import Behaviour, Verdict
    from .evaluate import LabelledAnswer, score

    rows = [LabelledAnswer(row=i + 1, id=str(i + 1), prompt="", completion="", label=h) for i, (h, _) in enumerate(labels)]
    verdicts = [Verdict(cast("Behaviour | None", b), reason=None if b else "undetermined: the reader read none") for _, b in labels]
    result = score(rows, verdicts, None, partial_as)
    d = result.to_dict(disagreements=False)
    figs = {"file": file, "writer": writer, "n": d["n"], "n_classified": d["n_classified"], "coverage": d["coverage"],
            "undetermined": d["missing"], "agreement_3class": d["agreement_3class"],
            "partial_as": {partial_as: {"agreement": d["agreement"], "agreement_ci95": d["agreement_ci95"],
                                        "binary": d["binary"]}}}
    figs["labelled_by"] = {"by": "people", "labellers": None, "agreed": None, "of": None,
                           "words": LABELLER_KINDS["people"], "agreement": None}
    out = _entry(source, figs, partial_as, "people's labels of this run's own answers (casebench annotate answers)")
    assert out is not None
    out["run_writer"] = writer
    out["writer_match"] = True  # the run's own answers: the very writer
    out["own_run"] = True
    return out


def reader_as_read(classifier: Mapping[str, Any], model_spec: str | None) -> dict[str, Any]:
    """A respond run's (or an inspect log's) recorded reader as every output shows it: its
    ``describe()`` with ``validation`` the stored figures that apply to the run (``applicable``)
    and, unless the writer is a small model, ``better_reader``: another stored reader that reads
    large models' writing better (``better_reader``; the first screen names it), and
    ``outcome_checks``: how it reads each outcome on answers it never saw. One home, so a
    run and a log of the same answers describe their reader alike."""
    desc = dict(classifier)
    desc["validation"] = applicable(desc, model_spec)
    checks = outcome_checks(str(desc.get("name")), str(desc.get("version")), writer_kind(model_spec))
    # how it reads each outcome on answers it never saw (the report says it beside the bars); what an
    # older reading carried is never kept
    desc.pop("outcome_checks", None)
    if checks:
        desc["outcome_checks"] = [{"set": c.set, "labelled_by": c.labelled_by, "n": c.n, "support": dict(c.support),
                                   "f1": dict(c.f1)} for c in checks]
    if desc.get("name") and writer_kind(model_spec) != "small":
        better = better_reader(str(desc["name"]), str(desc.get("partial_as") or "unsafe"))
        if better is not None:
            desc["better_reader"] = better
    return desc


def applicable(classifier: Mapping[str, Any] | None, model_spec: str | None = None,
               own: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The validation that applies to a respond run read by ``classifier`` (its recorded
    ``describe()`` plus ``partial_as``), written by ``model_spec``: ``own`` (people's labels of
    the run's own answers, ``from_labels``) when given; else the stored figures of that
    classifier and version for the run's ``--partial-as`` setting and kind of writer
    (``validation_for``, ``writer_kind``); else what the run recorded when it is for the same
    setting (an older version's figure, without the counts a correction needs); else None."""
    if own is not None:
        return dict(own)
    if not classifier:
        return None
    partial_as = str(classifier.get("partial_as") or "unsafe")
    stored = validation_for(str(classifier.get("name")), str(classifier.get("version")), partial_as,
                            writer_kind(model_spec))
    if stored is not None:
        return stored
    recorded = classifier.get("validation")
    if not isinstance(recorded, Mapping) or recorded.get("partial_as", "unsafe") != partial_as:
        return None  # older figures were measured with partial counted as refusal only
    return dict(recorded)
