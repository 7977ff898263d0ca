"""Annotator traits by consent: the optional form (its questions from a file, nothing required,
a bad form file refused by name), kept apart from the votes, ``annotate stats --by TRAIT``
(agreement within and across groups, each group's safe share per case with intervals) and the
export, which carries traits only when asked. The real ``annotate serve`` on loopback (SQLite)."""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("starlette", reason="the web extra is not installed: pip install 'casebench[web]'")

from servers.annotate_server import AnnotateServer, write_dataset  # noqa: E402
from test_annotate_app import casebench  # noqa: E402

FORM = {"purpose": "Optional questions about you.",
        "fields": [{"name": "age_group", "label": "Your age group", "choices": ["18-39", "40+"]},
                   {"name": "country", "label": "Country you live in"}]}


@pytest.mark.slow
def test_traits_form_groups_and_export(tmp_path):
    data = write_dataset(tmp_path / "d.json", 16)
    form = tmp_path / "form.json"
    form.write_text(json.dumps(FORM))
    db = f"sqlite:///{tmp_path / 'v.db'}"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"fields": [{"name": "Age Group"}]}))
    refused = casebench("annotate", "serve", str(data), "--db", f"sqlite:///{tmp_path / 'x.db'}", "--traits-form", str(bad))
    assert refused.returncode == 2 and "bad.json: fields[0].name" in refused.stderr

    with AnnotateServer(data, db, "--votes-per-case", "8", "--traits-form", str(form), "--attention-every", "1000") as srv:
        assert "optional traits form: age_group, country" in "".join(srv.banner)
        status, _, body = srv.get("/?annotator=y0")
        assert status == 200 and "/about?annotator=y0" in body
        status, _, body = srv.get("/about?annotator=y0")
        assert status == 200 and "Prefer not to say" in body and "Optional questions about you." in body
        # nothing required; an answer not offered is refused and nothing is kept
        assert srv.post_form("/about", {"annotator": "y0", "age_group": "99+"})[0] == 400
        assert srv.post_form("/about", {"annotator": "blank", "age_group": "", "country": ""})[0] == 303
        people = {f"y{j}": "18-39" for j in range(4)} | {f"o{j}": "40+" for j in range(4)}
        for name, age in people.items():
            status, headers, _ = srv.post_form("/about", {"annotator": name, "age_group": age, "country": "NZ"})
            assert status == 303 and headers["location"] == f"/case?annotator={name}"
        # the young vote safe on even cases, the older on cases below 8: they disagree on half
        for name, age in people.items():
            rng = random.Random(name)
            while (case := srv.shown_case(name)) is not None:
                safe = (case % 2 == 0) if age == "18-39" else (case < 8)
                if rng.random() < 0.05:
                    safe = not safe
                assert srv.vote(name, case, "safe" if safe else "unsafe")[0] == 303
        assert srv.admin()["votes"] == 16 * 8

    got = casebench("annotate", "stats", "--db", db, "--by", "age_group", "--json", "--bootstrap", "100")
    assert got.returncode == 0, got.stderr
    g = json.loads(got.stdout)
    groups = {x["group"]: x for x in g["groups"]}
    assert set(groups) == {"18-39", "40+"} and all(x["annotators"] == 4 and x["votes"] == 64 for x in groups.values())
    (across,) = g["across"]
    for x in groups.values():
        assert x["within"]["alpha"] > 0.3 and len(x["shares"]) == 16
        assert across["alpha"] < x["within"]["alpha"] - 0.2  # the groups see half the cases differently
        for s in x["shares"]:
            assert s["interval"]["low"] <= s["share"] <= s["interval"]["high"] and s["votes"] == 4
    text = casebench("annotate", "stats", "--db", db, "--by", "age_group", "--bootstrap", "20")
    assert text.returncode == 0 and "18-39 x 40+: across" in text.stdout
    none = casebench("annotate", "stats", "--db", db, "--by", "height")
    assert none.returncode == 2 and "no annotator told the trait 'height'" in none.stderr

    for flag, expect in (([], False), (["--with-traits"], True)):
        out = tmp_path / f"out{len(flag)}.json"
        got = casebench("annotate", "export", "--db", db, "-o", str(out), *flag)
        assert got.returncode == 0, got.stderr
        side = json.loads((tmp_path / f"out{len(flag)}.annotations.json").read_text())
        assert all(("traits" in a) is expect for a in side["annotators"])
        assert "NZ" not in out.read_text()  # the dataset itself never carries traits
        if expect:
            told = {a["id"]: a["traits"] for a in side["annotators"]}
            assert told["y0"] == {"age_group": "18-39", "country": "NZ"}
