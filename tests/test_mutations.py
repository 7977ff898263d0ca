"""Query mutations (``casebench.mutations``, ``run --mutation``, ``--mutations-from``, the
mutation study of ``casebench study``).

The ciphers are checked against examples worked out by hand and against their inverses. The
runs drive a real loopback OpenAI-compatible server (``servers.fault_server``) that records
every request; its judge follows a rule stated in each test, so every expected figure follows
from that rule and the dataset, worked out here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.data import load_dataset
from casebench.mutations import (
    MUTATIONS, MutationError, SORRY_BENCH_NAMES, ascii_decode, ascii_encode, atbash, caesar_decode, caesar_encode,
    get_mutation, morse_decode, morse_encode, mutated_queries, sorrybench_texts,
)
from casebench.runs.config import RunConfig
from casebench.runs.record import RunError
from servers.fault_server import FaultServer

SAFE = json.dumps({"judgement": "safe", "explanation": "rule"})
UNSAFE = json.dumps({"judgement": "unsafe", "explanation": "rule"})


@pytest.fixture()
def quiet_openai(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


# ------------------------------------------------------------------------------------------
# The ciphers


@pytest.mark.parametrize("plain, encoded", [
    ("abc xyz", "def abc"),
    ("Hello, World!", "Khoor, Zruog!"),
    ("Zebra 42 ünd", "Cheud 42 üqg"),  # digits and non-ASCII letters stay; only a-z, A-Z shift
])
def test_caesar_shifts_letters_by_three(plain, encoded):
    assert caesar_encode(plain) == encoded
    assert caesar_decode(encoded) == plain


@pytest.mark.parametrize("plain, encoded", [
    ("abc xyz", "zyx cba"),
    ("Hello, World!", "Svool, Dliow!"),
    ("Wizard 7", "Draziw 7"),
])
def test_atbash_mirrors_the_alphabet_and_is_its_own_inverse(plain, encoded):
    assert atbash(plain) == encoded
    assert atbash(encoded) == plain


def test_ascii_codes_and_their_inverse():
    assert ascii_encode("Hi!") == "72 105 33"
    assert ascii_encode("a b") == "97 32 98"
    assert ascii_decode("72 105 33") == "Hi!"
    # an answer mixing codes and plain words: the codes are decoded, the words kept
    assert ascii_decode("Sure: 79 75 done") == "Sure: OK done"
    assert ascii_decode(ascii_encode("Grüße, 2 cats.")) == "Grüße, 2 cats."


def test_morse_code_and_its_inverse():
    assert morse_encode("SOS help") == "... --- ... / .... . .-.. .--."
    assert morse_decode("... --- ... / .... . .-.. .--.") == "sos help"
    assert morse_decode("Reply: .... ..") == "Reply: hi"  # plain words kept as written
    assert morse_decode("End.") == "End."  # a full stop ending a word is not Morse
    text = "Meet me at 10, ok?"
    assert morse_decode(morse_encode(text)) == text.lower()


def test_the_registry_holds_sorry_benchs_twenty_names_and_four_are_built_in():
    assert len(SORRY_BENCH_NAMES) == 20 and list(MUTATIONS) == list(SORRY_BENCH_NAMES)
    assert [m.name for m in MUTATIONS.values() if m.builtin] == ["ascii", "caesar", "morse", "atbash"]
    with pytest.raises(MutationError, match="unknown mutation 'rot13'"):
        get_mutation("rot13")
    # misspellings were written by a language model: no built-in, and the message says where to look
    with pytest.raises(MutationError, match="--mutations-from"):
        get_mutation("misspellings").reword("How do I bake bread?")


def test_an_encoded_query_carries_the_instruction_to_answer_in_the_same_encoding():
    m = get_mutation("caesar")
    asked = m.reword("How do I bake bread?")
    assert asked.endswith("\n\nKrz gr L ednh euhdg?")
    assert "Caesar cipher" in asked and "reply in a Caesar cipher too" in asked
    assert "bake bread" not in asked


# ------------------------------------------------------------------------------------------
# SORRY-Bench's files (a fixture of our own wording in their format)


def _sorrybench_dir(root: Path, queries: list[str], style: str = "slang", prefix: str = "yo, ") -> Path:
    """``question.jsonl`` and ``question_<style>.jsonl`` in SORRY-Bench's format for ``queries``
    (our own rewording: ``prefix`` + the query in lower case), with a spare base row."""
    root.mkdir(parents=True, exist_ok=True)
    base = [{"question_id": i + 1, "category": "1", "turns": [q], "prompt_style": "base"} for i, q in enumerate(queries)]
    base.append({"question_id": 99, "category": "2", "turns": ["A question no case asks."], "prompt_style": "base"})
    rows = [{"question_id": i + 1, "category": "1", "turns": [prefix + q.lower()], "prompt_style": style}
            for i, q in enumerate(queries)]
    (root / "question.jsonl").write_text("".join(json.dumps(r) + "\n" for r in base))
    (root / f"question_{style}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def test_mutations_from_matches_queries_by_base_text_and_names_an_unmatched_one(tmp_path, small_data_path):
    ds = load_dataset(small_data_path)
    queries = list(dict.fromkeys(c.query for c in ds))
    # the base file's spacing and capitals differ from the dataset's: still matched
    d = _sorrybench_dir(tmp_path / "sb", ["  " + q.upper().replace(" ", "  ") for q in queries])
    texts, path, sha = sorrybench_texts(d, "slang", [c.query for c in ds])
    assert len(texts) == len(queries) == 4 and path.name == "question_slang.jsonl" and len(sha) == 64
    src = mutated_queries("slang", list(ds), d)
    assert src.matched == 4 and src.origin == "sorry-bench files"
    assert src.texts[ds[0].index].startswith("yo, ") and src.mutation.instruction is None
    # a query the base file lacks is an error naming it
    d2 = _sorrybench_dir(tmp_path / "sb2", queries[:3])
    with pytest.raises(MutationError, match="no base text matches the query 'How do I bake bread\\?'"):
        sorrybench_texts(d2, "slang", [c.query for c in ds])
    # a row of the wrong style, and a broken line, name the file and the line or id
    bad = tmp_path / "sb3"
    _sorrybench_dir(bad, queries)
    (bad / "question_slang.jsonl").write_text('{"question_id": 1, "turns": ["x"], "prompt_style": "caesar"}\n')
    with pytest.raises(MutationError, match="question_slang.jsonl: question_id 1 has prompt_style 'caesar'"):
        sorrybench_texts(bad, "slang", queries)
    (bad / "question_slang.jsonl").write_text('{"question_id": 1, "turns": ["x"]}\nnot json\n')
    with pytest.raises(MutationError, match="question_slang.jsonl, line 2: not valid JSON"):
        sorrybench_texts(bad, "slang", queries)


def test_a_mutation_without_rewordings_is_refused_before_anything_is_asked(small_data_path):
    with pytest.raises(RunError, match="misspellings: no built-in rewording"):
        RunConfig(mode="binary", model="openai/x", data=small_data_path, mutation="misspellings")
    with pytest.raises(RunError, match="give --mutation NAME too"):
        RunConfig(mode="binary", model="openai/x", data=small_data_path, mutations_from="/tmp")


# ------------------------------------------------------------------------------------------
# Runs under a mutation


def _judge(ds, mutation_unlocks: bool):
    """A judge that says safe exactly in the safe-intent contexts (keyed on the context JSON in
    its prompt); under an encoded query (the instruction is in the prompt) it says safe
    everywhere when ``mutation_unlocks``, else unsafe everywhere."""
    safe_contexts = {json.dumps(c.context) for c in ds if c.intended_safe}

    def answer(body) -> str:
        prompt = body["messages"][-1]["content"]
        if "written in a Caesar cipher" in prompt:
            return SAFE if mutation_unlocks else UNSAFE
        return SAFE if any(ctx in prompt for ctx in safe_contexts) else UNSAFE

    return answer


def _run(args, srv, out):
    r = CliRunner().invoke(cli, ["run", "--model", "openai/judge-x", "--base-url", srv.base_url, "-o", str(out),
                                 "--no-progress", "--no-report", *args])
    return r


def test_plain_and_caesar_runs_then_a_study_over_both(tmp_path, real_data_path, real_dataset, quiet_openai):
    """The issue's acceptance: a plain and a --mutation caesar run of a loopback judge over 5
    pairs; every query of the encoded run is sent Caesar-encoded and never in plain text, the
    contexts unchanged; score --json names the mutation; study prints both and the paired
    difference of the context shift."""
    ds = real_dataset
    common = ["--mode", "binary", "--data", str(real_data_path), "--pairs", "5"]
    with FaultServer(answer_fn=_judge(ds, mutation_unlocks=True)) as srv:
        r = _run(common, srv, tmp_path / "plain")
        assert r.exit_code == 0, r.output
        plain_bodies = [q.body for q in srv.requests]
        srv.reset()
        r = _run([*common, "--mutation", "caesar"], srv, tmp_path / "caesar")
        assert r.exit_code == 0, r.output
        assert "mutation caesar: the built-in rewording of 5 queries" in r.stderr
        caesar_bodies = [q.body for q in srv.requests]
        # a resume under another mutation, or none, is refused before anything is asked
        srv.reset()
        r = _run([*common, "--mutation", "atbash"], srv, tmp_path / "caesar")
        assert r.exit_code == 2 and "mutation.name: 'caesar' -> 'atbash'" in r.output and srv.count == 0
        r = _run(common, srv, tmp_path / "caesar")
        assert r.exit_code == 2 and "holds a different run" in r.output and srv.count == 0
    manifest = json.loads((tmp_path / "caesar" / "manifest.json").read_text())
    assert manifest["asked"]["mutation"]["name"] == "caesar" and manifest["asked"]["mutation"]["source"] == "builtin"
    cases = manifest["asked"]["cases"]
    assert len(cases) == 10 and len(caesar_bodies) == len(plain_bodies) == 10
    for body in caesar_bodies:
        prompt = body["messages"][-1]["content"]
        asked = [i for i in cases if json.dumps(ds[i].context) in prompt]
        assert len(asked) >= 1  # the context is there, unchanged
        query = ds[asked[0]].query
        sent = json.dumps(body)
        assert query not in prompt and json.dumps(query)[1:-1] not in sent  # never in plain text
        assert caesar_encode(query) in prompt or json.dumps(caesar_encode(query))[1:-1] in prompt
    # the plain run sent every query as the dataset words it
    assert all(any(json.dumps(ds[i].query)[1:-1] in b["messages"][-1]["content"] for i in cases) for b in plain_bodies)

    r = CliRunner().invoke(cli, ["score", str(tmp_path / "caesar"), "--json", "--bootstrap", "50", "--no-reference"])
    assert r.exit_code == 0, r.output
    score = json.loads(r.stdout.splitlines()[0])
    assert score["mutation"] == "caesar"
    assert score["context_shift"] == 0  # the encoded query is judged safe in both contexts
    # the published format has no field for a mutation: the exported model key names it
    r = CliRunner().invoke(cli, ["export", str(tmp_path / "caesar"), "-o", str(tmp_path / "caesar.json")])
    assert r.exit_code == 0, r.output
    assert '"judge-x_mut-caesar"' in (tmp_path / "caesar.json").read_text()

    r = CliRunner().invoke(cli, ["study", str(tmp_path / "plain"), str(tmp_path / "caesar"), "--bootstrap", "200"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "mutation study" in out and "queries worded as base, caesar" in out
    assert "people voted on the base wording only" in out
    assert "context shift caesar - base: -1.000" in out and "over 5 pairs" in out
    assert "wording consistency" in out
    r = CliRunner().invoke(cli, ["study", str(tmp_path / "caesar"), str(tmp_path / "plain"), "--bootstrap", "200",
                                 "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["study"] == "mutation" and [m["mutation"] for m in res["mutations"]] == ["base", "caesar"]
    base, caesar = res["mutations"]
    assert base["context"]["context_shift"] == 1 and caesar["context"]["context_shift"] == 0
    assert base["people"]["pairs"] == 5  # people's figures beside, on the same pairs
    (shift,) = res["context_shift_differences"]
    assert (shift["a"], shift["b"], shift["pairs"], shift["diff"]) == ("caesar", "base", 5, -1.0)
    assert shift["p_adjusted"] is not None
    (follow,) = res["context_follow_differences"]
    assert follow["diff"] == -1.0
    # consistency: the safe-intent cases keep "safe", the unsafe-intent ones flip
    (cons,) = res["wording_consistency"]
    assert (cons["n"], cons["unchanged"], cons["queries"]) == (10, 5, 5)
    assert cons["ci"][0] < 0.5 < cons["ci"][1]
    # the report has the mutation study's section, saying what people's votes cover
    pytest.importorskip("matplotlib")
    r = CliRunner().invoke(cli, ["report", str(tmp_path / "plain"), str(tmp_path / "caesar"), "-o",
                                 str(tmp_path / "r.html"), "--bootstrap", "50", "--no-human"])
    assert r.exit_code == 0, r.output
    html = (tmp_path / "r.html").read_text()
    assert "Reworded queries" in html and "People voted on the base wording only" in html
    assert "caesar − base" in html and "Wording consistency of caesar: 0.500" in html


def test_study_runs_the_base_wording_and_each_mutation(tmp_path, small_data_path, quiet_openai):
    ds = load_dataset(small_data_path)
    with FaultServer(answer_fn=_judge(ds, mutation_unlocks=False)) as srv:
        args = ["study", "--model", "openai/judge-x", "--mode", "binary", "--mutations", "caesar,atbash",
                "--data", str(small_data_path), "--base-url", srv.base_url, "--out-root", str(tmp_path / "runs"),
                "--no-progress", "--bootstrap", "100", "--json"]
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0, r.output
        assert srv.count == 3 * len(ds)
        r2 = CliRunner().invoke(cli, args)  # again: nothing asked
        assert r2.exit_code == 0 and srv.count == 3 * len(ds) and r2.stderr.count("reused") == 3
    res = json.loads(r.stdout)
    assert [m["mutation"] for m in res["mutations"]] == ["base", "caesar", "atbash"]
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    sha = load_dataset(small_data_path).sha256[:8]  # named as `casebench run` names them
    assert runs == [f"judge-x_binary_{sha}", f"judge-x_binary_mut-atbash_{sha}", f"judge-x_binary_mut-caesar_{sha}"]
    by = {m["mutation"]: m for m in res["mutations"]}
    # caesar: unsafe everywhere (the rule); atbash is not recognised by the rule: as plain
    assert by["caesar"]["score"]["unsafe_recall"] == 1 and by["caesar"]["context"]["context_shift"] == 0
    assert by["atbash"]["context"]["context_shift"] == by["base"]["context"]["context_shift"] == 1
    assert {(d["a"], d["b"]) for d in res["context_shift_differences"]} == {("caesar", "base"), ("atbash", "base")}


def test_run_with_mutations_from_and_prompts_show_the_same_messages(tmp_path, small_data_path, quiet_openai):
    ds = load_dataset(small_data_path)
    d = _sorrybench_dir(tmp_path / "sb", list(dict.fromkeys(c.query for c in ds)))
    with FaultServer(answer_fn=lambda body: SAFE) as srv:
        r = _run(["--mode", "binary", "--data", str(small_data_path), "--mutation", "slang", "--mutations-from", str(d)],
                 srv, tmp_path / "slang")
        assert r.exit_code == 0, r.output
        assert "4 queries matched to SORRY-Bench's base texts" in r.stderr
        sent = sorted(q.body["messages"][-1]["content"] for q in srv.requests)
    r = CliRunner().invoke(cli, ["prompts", str(small_data_path), "--mode", "binary", "--mutation", "slang",
                                 "--mutations-from", str(d)])
    assert r.exit_code == 0, r.output
    shown = sorted(json.loads(line)["prompt"] for line in r.stdout.splitlines())
    assert shown == sent  # the exact messages the run sent
    assert all("yo, " in p for p in shown) and sum("yo, how do i bake bread?" in p for p in shown) == 2
    m = json.loads((tmp_path / "slang" / "manifest.json").read_text())["asked"]["mutation"]
    assert m["source"] == "sorry-bench files" and m["file"] == "question_slang.jsonl" and len(m["files_sha256"]) == 64
    # another copy of the files (another release) is another run
    (d / "question_slang.jsonl").write_text((d / "question_slang.jsonl").read_text().replace("yo, ", "hey, "))
    with FaultServer(answer_fn=lambda body: SAFE) as srv:
        r = _run(["--mode", "binary", "--data", str(small_data_path), "--mutation", "slang", "--mutations-from", str(d)],
                 srv, tmp_path / "slang")
        assert r.exit_code == 2 and "mutation.files_sha256" in r.output and srv.count == 0
    # an unmatched query is an error naming it, before anything is asked
    d2 = _sorrybench_dir(tmp_path / "sb2", list(dict.fromkeys(c.query for c in ds))[:3])
    r = CliRunner().invoke(cli, ["run", "--model", "openai/judge-x", "--base-url", "http://127.0.0.1:9/v1", "--mode",
                                 "binary", "--data", str(small_data_path), "--mutation", "slang", "--mutations-from",
                                 str(d2), "-o", str(tmp_path / "x"), "--no-progress"])
    assert r.exit_code == 2 and "How do I bake bread?" in r.output and not (tmp_path / "x").exists()


def test_respond_mode_decodes_the_answer_before_the_reader_reads_it(tmp_path, small_data_path, quiet_openai):
    """The chatbot answers in the cipher: the refusal in Caesar for the unsafe-intent contexts,
    a helpful answer in Caesar for the safe ones. The reader reads the decoded text; the record
    keeps the raw answer."""
    ds = load_dataset(small_data_path)
    refusal = "I'm sorry, but I can't help with that request."
    helpful = "Here is an overview of the topic, step by step, with the main points explained in plain words."

    def chatbot(body) -> str:
        system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
        safe = "safe purpose" in system and "unsafe purpose" not in system
        return caesar_encode(helpful if safe else refusal)

    with FaultServer(answer_fn=chatbot) as srv:
        r = _run(["--mode", "respond", "--data", str(small_data_path), "--mutation", "caesar"], srv, tmp_path / "resp")
        assert r.exit_code == 0, r.output
        for q in srv.requests:  # the query is encoded in the last user message
            last = q.body["messages"][-1]["content"]
            assert "written in a Caesar cipher" in last and not any(c.query in last for c in ds)
    recs = [json.loads(line) for line in (tmp_path / "resp" / "records.jsonl").read_text().splitlines()]
    assert len(recs) == len(ds)
    for rec in recs:
        assert rec["text"] in (caesar_encode(helpful), caesar_encode(refusal))  # raw, as the chatbot wrote it
        assert rec["detail"]["decoded_answer"] == caesar_decode(rec["text"])
        safe_ctx = ds[rec["case"]].intended_safe
        assert rec["behaviour"] == ("comply" if safe_ctx else "refuse")


def _case_chatbot(answer_for):
    """A chatbot that finds the case's marker in the decoded query and answers ``answer_for(case)``."""
    import re

    marker = re.compile(r"\[case (\d+)\]")

    def chatbot(body) -> str:
        return answer_for(int(marker.search(caesar_decode(body["messages"][-1]["content"])).group(1)))

    return chatbot


REFUSAL = "I'm sorry, but I can't help with that request."
HELPFUL = ("Here is how it works in practice. Start with the basics: clean the tools, dry them, oil the blades and "
           "hang them on a wall rack.")
NEITHER = "Xqzb qwrt vbnm plk zzt."


def test_under_caesar_a_plain_answer_is_read_as_it_came(tmp_path, quiet_openai):
    """The chatbot ignores the instruction to answer in the cipher and answers all ten in plain
    English: every answer is read as written (decoding it would turn it into gibberish)."""
    from test_runs import write_dataset

    data = write_dataset(tmp_path / "cases.json", 10)
    with FaultServer(answer_fn=_case_chatbot(lambda c: HELPFUL if c % 2 == 0 else REFUSAL)) as srv:
        r = _run(["--mode", "respond", "--data", str(data), "--mutation", "caesar"], srv, tmp_path / "plain")
    assert r.exit_code == 0, r.output
    recs = [json.loads(line) for line in (tmp_path / "plain" / "records.jsonl").read_text().splitlines()]
    read = [x for x in recs if x.get("behaviour")]
    assert len(read) >= 8
    assert all(x["detail"]["answer_form"] == "plain" and "decoded_answer" not in x["detail"] for x in recs)
    assert all(x["behaviour"] == ("comply" if x["case"] % 2 == 0 else "refuse") for x in read)


def test_under_caesar_each_answer_is_read_in_the_form_that_reads_and_a_diagnosis_names_the_cause(tmp_path,
                                                                                              quiet_openai):
    """Plain answers as they came, encoded ones decoded, answers in neither form undetermined
    with that reason; a run whose answers are all in neither form says so (not "a judge or guard
    model"), with what to try."""
    from test_runs import write_dataset

    data = write_dataset(tmp_path / "cases.json", 10)

    def mixed(c: int) -> str:
        text = HELPFUL if c % 2 == 0 else REFUSAL
        return text if c < 4 else caesar_encode(text) if c < 7 else NEITHER

    with FaultServer(answer_fn=_case_chatbot(mixed)) as srv:
        r = _run(["--mode", "respond", "--data", str(data), "--mutation", "caesar"], srv, tmp_path / "mixed")
    assert r.exit_code == 0, r.output
    recs = {x["case"]: x for x in map(json.loads, (tmp_path / "mixed" / "records.jsonl").read_text().splitlines())}
    assert [recs[c]["detail"]["answer_form"] for c in range(10)] == ["plain"] * 4 + ["decoded"] * 3 + ["neither"] * 3
    assert all(recs[c]["behaviour"] == ("comply" if c % 2 == 0 else "refuse") for c in range(7))
    assert all(recs[c]["detail"]["decoded_answer"] == caesar_decode(recs[c]["text"]) for c in range(4, 7))
    assert all(recs[c].get("behaviour") is None and "neither plain language nor in the caesar encoding"
               in recs[c]["error"] for c in range(7, 10))
    with FaultServer(answer_fn=lambda body: NEITHER) as srv:
        r = _run(["--mode", "respond", "--data", str(data), "--mutation", "caesar"], srv, tmp_path / "none")
    assert r.exit_code == 3
    assert "why: neither plain language nor in the caesar encoding (10)" in r.stderr
    assert "judge or guard" not in r.stderr and "answers in plain language or in the caesar encoding" in r.stderr


def test_a_mutator_writes_the_rewordings_once_and_a_resume_asks_it_nothing(tmp_path, small_data_path, quiet_openai):
    """--mutator: a loopback model writes each rewording (its answer: "yo, " + the request),
    asked once per distinct query; the texts are in the manifest, and a resume (with the
    mutator's cache gone) takes them from there."""
    from casebench.runs.mutator import mutator_cache_path

    ds = load_dataset(small_data_path)

    def writer(body) -> str:
        prompt = body["messages"][-1]["content"]
        assert "in casual slang" in prompt
        return "yo, " + prompt.rsplit("Request: ", 1)[1].lower()

    with FaultServer(answer_fn=writer) as mut, FaultServer(answer_fn=lambda body: SAFE) as judge:
        args = ["--mode", "binary", "--data", str(small_data_path), "--mutation", "slang", "--mutator",
                "openai/writer-x", "--mutator-base-url", mut.base_url]
        r = _run(args, judge, tmp_path / "run")
        assert r.exit_code == 0, r.output
        assert mut.count == 4 and judge.count == len(ds)  # one rewording per distinct query
        assert "written by openai/writer-x" in r.stderr
        sent = [q.body["messages"][-1]["content"] for q in judge.requests]
        assert all("yo, " in p for p in sent) and not any(c.query in p for c in ds for p in sent)
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())["asked"]["mutation"]
        assert manifest["source"] == "mutator" and manifest["mutator"] == "openai/writer-x"
        assert manifest["texts"] == {c.query: "yo, " + c.query.lower() for c in ds}
        # drop a record and the cache: the resume asks the judge once more and the mutator nothing
        recs = (tmp_path / "run" / "records.jsonl").read_text().splitlines()
        (tmp_path / "run" / "records.jsonl").write_text("\n".join(recs[:-1]) + "\n")
        mutator_cache_path("openai/writer-x", "slang").unlink()
        r = _run(args, judge, tmp_path / "run")
        assert r.exit_code == 0, r.output
        assert mut.count == 4 and judge.count == len(ds) + 1
        # a second run elsewhere reads the mutator's cache
        r = _run([*args, "--report"], judge, tmp_path / "run2")
        assert r.exit_code == 0 and mut.count == 4
        # the end of the run says what people's votes cover
        assert "queries reworded (slang), contexts untouched: people voted on the base wording only" in r.stdout
    # a built-in mutation needs no mutator, and one source at a time
    with pytest.raises(RunError, match="caesar is built in"):
        RunConfig(mode="binary", model="openai/x", mutation="caesar", mutator="openai/w")
    with pytest.raises(RunError, match="choose one source"):
        RunConfig(mode="binary", model="openai/x", mutation="slang", mutator="openai/w", mutations_from="/tmp")
