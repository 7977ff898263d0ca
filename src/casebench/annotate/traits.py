"""Annotator traits, by consent: an optional short form whose questions the study's owner chooses
(``annotate serve --traits-form FORM.json``), every answer optional, stored apart from the votes
(``db.traits_t``), read by ``annotate stats --by TRAIT`` and exported only when asked
(``annotate export --with-traits``).

A form file is a JSON object::

    {"purpose": "optional words shown above the questions",
     "fields": [{"name": "age_group", "label": "Your age group", "choices": ["18-29", "30-49", "50+"]},
                {"name": "country", "label": "Country you live in"}]}

A field with ``choices`` is a choice among them; one without is a short free text (at most
``MAX_TEXT`` characters). Names are 1 to 32 lower-case letters, digits or '_'. Why traits matter:
PluriHarms and DICES found that who the annotators are explains much of their disagreement.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from .db import VoteStore

#: the longest free-text answer kept
MAX_TEXT = 64
#: the most questions a form may ask (it is meant to be short)
MAX_FIELDS = 10
#: the store's meta key holding the form in force
META_KEY = "traits_form"
DEFAULT_PURPOSE = ("These questions are optional: leave any of them blank. Your answers are kept apart from "
                   "your votes and used only to compare how groups of annotators vote.")
_NAME = re.compile(r"^[a-z0-9_]{1,32}$")


class TraitsError(ValueError):
    """A form file or a submitted answer that cannot be used (the message names where and why)."""


@dataclass(frozen=True)
class TraitField:
    """One question: its key, the words shown, and its choices (empty: a short free text)."""

    name: str
    label: str
    choices: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "choices": list(self.choices)}


@dataclass(frozen=True)
class TraitsForm:
    """The questions of a study's optional form."""

    fields: tuple[TraitField, ...]
    purpose: str = DEFAULT_PURPOSE
    names: frozenset[str] = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", frozenset(f.name for f in self.fields))

    def to_dict(self) -> dict[str, Any]:
        return {"purpose": self.purpose, "fields": [f.to_dict() for f in self.fields]}

    @classmethod
    def read(cls, path: str | Path) -> "TraitsForm":
        """The form in a JSON file; ``TraitsError`` naming the file, the field and the problem."""
        p = Path(path)
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise TraitsError(f"{p}: cannot read the traits form ({e})") from None
        return cls.from_dict(doc, str(p))

    @classmethod
    def from_dict(cls, doc: Any, where: str = "traits form") -> "TraitsForm":
        if not isinstance(doc, dict) or not isinstance(doc.get("fields"), list) or not doc["fields"]:
            raise TraitsError(f"{where}: must be an object with a non-empty list 'fields'")
        if len(doc["fields"]) > MAX_FIELDS:
            raise TraitsError(f"{where}: at most {MAX_FIELDS} fields (the form is meant to be short)")
        purpose = doc.get("purpose", DEFAULT_PURPOSE)
        if not isinstance(purpose, str) or not purpose.strip():
            raise TraitsError(f"{where}: 'purpose' must be a non-empty string")
        out: list[TraitField] = []
        for i, f in enumerate(doc["fields"]):
            at = f"{where}: fields[{i}]"
            if not isinstance(f, dict):
                raise TraitsError(f"{at}: must be an object")
            name, label, choices = f.get("name"), f.get("label", f.get("name")), f.get("choices", [])
            if not isinstance(name, str) or not _NAME.match(name):
                raise TraitsError(f"{at}.name: 1 to 32 lower-case letters, digits or '_', found {name!r}")
            if name in {x.name for x in out}:
                raise TraitsError(f"{at}.name: {name!r} is asked twice")
            if not isinstance(label, str) or not label.strip():
                raise TraitsError(f"{at}.label: must be a non-empty string")
            if not isinstance(choices, list) or not all(isinstance(c, str) and c.strip() and len(c) <= MAX_TEXT
                                                        for c in choices) or len(set(choices)) != len(choices):
                raise TraitsError(f"{at}.choices: must be a list of distinct non-empty strings of at most "
                                  f"{MAX_TEXT} characters")
            out.append(TraitField(name, label.strip(), tuple(choices)))
        return cls(tuple(out), purpose.strip())

    def clean(self, answers: Mapping[str, str]) -> dict[str, str]:
        """The answers worth keeping: known questions, blanks dropped (nothing is required); a
        choice that is not offered, or an over-long text, is refused (``TraitsError``)."""
        kept: dict[str, str] = {}
        for f in self.fields:
            value = str(answers.get(f.name, "")).strip()
            if not value:
                continue
            if f.choices and value not in f.choices:
                raise TraitsError(f"{f.label}: choose one of the answers offered, or leave it blank")
            if len(value) > MAX_TEXT or not value.isprintable():
                raise TraitsError(f"{f.label}: at most {MAX_TEXT} printable characters")
            kept[f.name] = value
        return kept


def form_of(store: "VoteStore") -> TraitsForm | None:
    """The form in force for the store's study (None: no form)."""
    text = store.meta().get(META_KEY)
    return TraitsForm.from_dict(json.loads(text)) if text else None


def save_traits(store: "VoteStore", annotator: str, traits: Mapping[str, str]) -> None:
    """Keep (or replace) what an annotator told; registers them on their first visit. An empty
    answer removes what they told before (consent can be withdrawn)."""
    from sqlalchemy import select

    from .db import annotators_t, traits_t, valid_annotator_id

    if not valid_annotator_id(annotator):
        raise ValueError("invalid annotator id")
    now = time.time()
    with store._tx() as conn:
        if conn.execute(select(annotators_t.c.id).where(annotators_t.c.id == annotator)).first() is None:
            conn.execute(annotators_t.insert().values(id=annotator, first_seen=now, last_seen=now))
        conn.execute(traits_t.delete().where(traits_t.c.annotator_id == annotator))
        if traits:
            conn.execute(traits_t.insert().values(annotator_id=annotator, traits=json.dumps(dict(traits)),
                                                  given_at=now))


def read_traits(store: "VoteStore") -> dict[str, dict[str, str]]:
    """Every annotator's told traits, by annotator id."""
    from sqlalchemy import select

    from .db import traits_t

    with store.engine.connect() as conn:
        return {str(a): dict(json.loads(t)) for a, t in conn.execute(select(traits_t.c.annotator_id,
                                                                             traits_t.c.traits))}
