"""Live reveal conversations (``--context-as reveal-early`` / ``reveal-late``): the context's three CI
groups arrive one per user turn, before or after the query; every assistant turn is the model's own
answer, stored and read; a stop resumes at the next unasked turn.

The chatbot is a loopback OpenAI-compatible server whose reply is a known function of the last user
message (``reply``), so a test can say what every assistant message of a later request must be."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.prompts import REVEAL_WORDING_VERSION, render_reveal, reveal_shards
from casebench.runs.record import final_records, iter_records, read_manifest
from casebench.runs.reveal import iter_turns
from servers.fault_server import FaultServer
from test_cli_run import CASEBENCH, clean_env
from test_runs import write_dataset

REFUSAL = "I'm sorry, but I can't help with that request."
ANSWER = ("Sure. Keep the blades clean and dry, oil them lightly, and hang the tools on a wall rack "
          "away from damp corners; check the handles for cracks before spring.")


def reply(body: Any) -> str:
    """The chatbot: a refusal for a third of the last user messages (by their hash), else a
    helpful answer tagged with that hash, so every reply names the message it answers."""
    last = body["messages"][-1]["content"]
    h = hashlib.sha256(last.encode("utf-8")).hexdigest()
    return REFUSAL if int(h, 16) % 3 == 0 else f"{ANSWER} [{h[:8]}]"


def invoke(*args: Any):
    return CliRunner().invoke(cli, [str(a) for a in args])


def run_args(srv: FaultServer, data: Path, out: Path, placement: str, *more: str) -> list[str]:
    return ["run", "--model", "openai/bot-x", "--mode", "respond", "--context-as", placement, "--data", str(data),
            "--base-url", srv.base_url, "-o", str(out), "--no-progress", "--no-report", *more]


def conversations(srv: FaultServer) -> list[list[dict[str, str]]]:
    return [r.body["messages"] for r in srv.requests if r.body and "messages" in r.body]


def test_reveal_late_sends_live_conversations_whose_assistant_turns_are_the_servers_replies(tmp_path, real_data_path):
    out = tmp_path / "late"
    with FaultServer(answer_fn=reply, latency=0.0) as srv:
        r = invoke(*run_args(srv, real_data_path, out, "reveal-late", "--pairs", "5"))
        assert r.exit_code == 0, r.output
        sent = conversations(srv)
    assert len(sent) == 10 * 4  # ten cases, four user turns each, each asked once
    last_turns = [m for m in sent if sum(x["role"] == "user" for x in m) == 4]
    assert len(last_turns) == 10
    for msgs in sent:
        for i, m in enumerate(msgs):
            if m["role"] == "assistant":  # every assistant turn is the server's reply to the turn before
                assert msgs[i - 1]["role"] == "user"
                assert m["content"] == reply({"messages": msgs[:i]})
    m = read_manifest(out)
    assert m.asked.context_as == "reveal-late" and m.asked.context_wording_version == REVEAL_WORDING_VERSION
    assert m.asked.context_wording_sha256
    finals = final_records(iter_records(out))
    turns = list(iter_turns(out))
    assert len(finals) == 10 and len(turns) == 30
    by_case = {}
    for t in turns:
        by_case.setdefault(t.case, []).append(t)
    for (c, _), rec in finals.items():
        ts = sorted(by_case[c], key=lambda t: t.turn)
        assert [t.holds for t in ts] == ["query", "sender", "recipient"]
        assert rec.detail["turn"] == 4 and rec.detail["turns"] == 4 and rec.detail["holds"] == "query restated"
        for t in ts:  # every earlier turn's answer is stored and read
            assert t.behaviour == ("refuse" if t.text == REFUSAL else "comply")
        assert rec.behaviour == ("refuse" if rec.text == REFUSAL else "comply")
    # the first user turn is the query alone; the last restates it
    first = [msgs for msgs in sent if len(msgs) == 1]
    assert len(first) == 10
    for msgs in last_turns:
        assert msgs[-1]["content"].endswith(msgs[0]["content"]) and "here is my request again" in msgs[-1]["content"]

    # figures by turn: four entries; the headline refusal rate is the final answers' true rate
    r = invoke("score", out, "--json", "--bootstrap", "200", "--no-reference")
    assert r.exit_code == 0, r.output
    s = json.loads(r.output.splitlines()[0])
    true_final = sum(reply({"messages": m}) == REFUSAL for m in last_turns) / 10
    assert s["refusal_rate"] == pytest.approx(true_final)
    assert "final turn" in s["headline"] and "people's votes" in s["headline"]
    assert [t["turn"] for t in s["by_turn"]] == [1, 2, 3, 4]
    assert [t["holds"] for t in s["by_turn"]] == ["query", "sender", "recipient", "query restated"]
    from casebench.data import load_dataset

    ds = load_dataset(real_data_path)
    by_intent: dict[bool, list[list[dict[str, str]]]] = {True: [], False: []}
    for c, _ in finals:  # each case's conversation as the server saw it, found by its user turns
        users = [t.text for t in render_reveal(ds[c].context, ds[c].query, "reveal-late")]
        conv = next(m for m in last_turns if [x["content"] for x in m if x["role"] == "user"] == users)
        by_intent[bool(ds[c].intended_safe)].append(conv)
    for k, t in enumerate(s["by_turn"]):  # each turn's rate: the share of the server's replies there that refuse
        for safe, key in ((True, "refusal_rate_safe_context"), (False, "refusal_rate_unsafe_context")):
            convs = by_intent[safe]
            want = sum(reply({"messages": m[: 2 * k + 1]}) == REFUSAL for m in convs) / len(convs)
            assert t[key] == pytest.approx(want)
            lo, hi = t["ci"][key]
            assert lo <= want <= hi and lo < hi
    assert "single answers" in s["turns"]["reader"]
    table = invoke("score", out, "--bootstrap", "200", "--no-reference").output
    assert "refused by turn" in table and "4 query restated" in table and "final turn's" in table
    assert {f["intent"] for f in s["turns"]["first_refusal"]} == {"safe", "unsafe"}


def test_reveal_early_gives_the_groups_first_then_the_query(tmp_path):
    data = write_dataset(tmp_path / "cases.json", 4)
    out = tmp_path / "early"
    with FaultServer(answer_fn=reply, latency=0.0) as srv:
        r = invoke(*run_args(srv, data, out, "reveal-early"))
        assert r.exit_code == 0, r.output
        sent = conversations(srv)
    whole = [m for m in sent if len(m) == 7]
    assert len(whole) == 4 and len(sent) == 16
    for msgs in whole:
        users = [x["content"] for x in msgs if x["role"] == "user"]
        assert users[0].startswith("About the service") and users[1].startswith("About me:")
        assert users[2].startswith("About this conversation:") and users[3].startswith("[case ")
    assert {r.detail["holds"] for r in final_records(iter_records(out)).values()} == {"query"}
    # the end of a run (the command repeated on the finished run, without --no-report) says what
    # its figures are and its path by turn
    with FaultServer(answer_fn=reply, latency=0.0) as srv:
        args = [a for a in run_args(srv, data, out, "reveal-early") if a != "--no-report"]
        r = invoke(*args)
        assert r.exit_code == 0 and srv.count == 0, r.output
    assert "refused by turn" in r.output and "final turn's, against people's votes" in r.output
    # the report shows the figures by turn with the reader's caveat beside them
    r = invoke("report", out, "-o", tmp_path / "report.html")
    assert r.exit_code == 0, r.output
    html = (tmp_path / "report.html").read_text()
    assert "Context revealed over a conversation, by turn" in html and "single answers" in html
    assert "final turn" in html and "reveal-early" in html


def test_reveal_wording_keeps_every_ci_value_and_leaves_out_an_ablated_group():
    ctx = {"sender": {"platform_type": "A forum.", "nature_of_the_interaction": "Tips."},
           "recipient": {"type": "A nurse.", "background": "Ten years."},
           "transmission_principle": {"sender_purpose": "Care.", "confidentiality": "Private.",
                                      "source_accountability": "Named."},
           "extra": "Something else."}
    shards = reveal_shards(ctx)
    assert [g for g, _ in shards] == ["sender", "recipient", "transmission_principle"]
    text = "\n".join(t for _, t in shards)
    for v in ("A forum.", "Tips.", "A nurse.", "Ten years.", "Care.", "Private.", "Named.", "Something else."):
        assert v in text
    late = render_reveal({k: v for k, v in ctx.items() if k != "recipient"}, "Q?", "reveal-late")
    assert [t.holds for t in late] == ["query", "sender", "query restated"] and late[-1].text.endswith("Q?")


def _turn_key(msgs: list[dict[str, str]]) -> tuple[str, int]:
    """(the conversation's first user message, the 0-based turn a request asks)."""
    users = [m["content"] for m in msgs if m["role"] == "user"]
    return users[0], len(users) - 1


def test_a_kill_mid_conversation_then_a_resume_asks_no_turn_twice(tmp_path):
    import time

    data = write_dataset(tmp_path / "cases.json", 24)
    out = tmp_path / "run"
    with FaultServer(answer_fn=reply, latency=0.05) as srv:
        cmd = [*CASEBENCH, *run_args(srv, data, out, "reveal-late", "--max-connections", "3")]
        proc = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        turns = out / "turns.jsonl"
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if turns.exists() and turns.read_bytes().count(b"\n") >= 12:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before it could be stopped"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        # what was on disk when the kill landed: each (conversation, turn) answered and recorded
        kept = {(t.prompt if t.turn == 0 else None, t.case, t.turn) for t in iter_turns(out)}
        kept_turns = {(t.case, t.turn) for t in iter_turns(out)}
        kept_finals = set(final_records(iter_records(out)))
        assert kept and len(kept_finals) < 24
        n0 = srv.count
        done = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        resumed = [r.body["messages"] for r in srv.requests[n0:]]
    from test_runs import case_of

    asked_again = [(case_of(_turn_key(m)[0]), _turn_key(m)[1]) for m in resumed]
    assert not set(asked_again) & kept_turns  # no turn recorded before the kill is asked again
    assert not {c for c, _ in asked_again} & {c for c, _ in kept_finals}  # nor a finished conversation
    assert len(asked_again) == len(set(asked_again))  # and the resume asks each turn once
    for msgs in resumed:  # the conversations go on from the recorded answers, the server's own
        for i, m in enumerate(msgs):
            if m["role"] == "assistant":
                assert m["content"] == reply({"messages": msgs[:i]})
    finals = final_records(iter_records(out))
    assert sorted(c for c, _ in finals) == list(range(24))
    recorded = list(iter_turns(out))
    assert len({t.key for t in recorded}) == len(recorded) == 24 * 3


def test_a_resume_that_would_change_the_placement_or_the_wording_is_refused(tmp_path):
    data = write_dataset(tmp_path / "cases.json", 3)
    out = tmp_path / "run"
    with FaultServer(answer_fn=reply, latency=0.0) as srv:
        assert invoke(*run_args(srv, data, out, "reveal-late")).exit_code == 0
        r = invoke(*run_args(srv, data, out, "reveal-early"))
        assert r.exit_code != 0 and "context_as" in r.output
        m = json.loads((out / "manifest.json").read_text())
        m["asked"]["context_wording_version"] = REVEAL_WORDING_VERSION + 1  # a run made under other wording
        (out / "manifest.json").write_text(json.dumps(m))
        before, asked = (out / "manifest.json").read_bytes(), srv.count
        r = invoke(*run_args(srv, data, out, "reveal-late"))
        # refused: the records were written under this wording, which the manifest no longer says
        assert r.exit_code != 0 and ("were written" in r.output or "context_wording" in r.output)
        assert (out / "manifest.json").read_bytes() == before and srv.count == asked
    # and the resume check itself names the wording's version
    from casebench.runs.record import Asked

    a = read_manifest(out).asked
    b = Asked(**{**a.__dict__, "context_wording_version": REVEAL_WORDING_VERSION})
    assert [d[0] for d in a.differences(b)] == ["context_wording_version"]


def test_reveal_needs_a_chatbot_and_one_conversation_per_case(tmp_path):
    data = write_dataset(tmp_path / "cases.json", 3)
    with FaultServer(answer_fn=reply, latency=0.0) as srv:
        r = invoke("run", "--model", "openai/x", "--mode", "binary", "--context-as", "reveal-early", "--data", data,
                   "--base-url", srv.base_url, "-o", tmp_path / "a", "--no-progress")
        assert r.exit_code != 0 and "--mode respond" in r.output
        r = invoke(*run_args(srv, data, tmp_path / "b", "reveal-late", "--samples", "2"))
        assert r.exit_code != 0 and "--samples must be 1" in r.output
        assert srv.count == 0


def test_prompts_prints_the_user_turns_of_a_reveal_conversation(tmp_path):
    data = write_dataset(tmp_path / "cases.json", 2)
    r = invoke("prompts", data, "--mode", "respond", "--context-as", "reveal-early")
    assert r.exit_code == 0, r.output
    first = json.loads(r.output.splitlines()[-2])
    assert first["holds"] == ["sender", "recipient", "transmission_principle", "query"]
    assert first["user_turns"][-1] == first["prompt"] and first["prompt"].startswith("[case 0]")
    r = invoke("prompts", data, "--mode", "binary", "--context-as", "reveal-early")
    assert r.exit_code != 0 and "--mode respond" in r.output


def test_classify_rereads_every_turn_of_a_reveal_run(tmp_path):
    """``casebench classify`` of a reveal run reads its earlier turns again too: the new run's
    figures by turn are the new reader's (here an LLM reader served by a script that calls every
    helpful answer partial), the answers untouched."""
    data = write_dataset(tmp_path / "cases.json", 4)
    out, new = tmp_path / "run", tmp_path / "reread"
    with FaultServer(answer_fn=reply, latency=0.0) as srv:
        assert invoke(*run_args(srv, data, out, "reveal-late")).exit_code == 0

    def reader(body: Any) -> str:
        return "refuse" if json.dumps(REFUSAL)[1:-1] in json.dumps(body["messages"]) else "partial"

    with FaultServer(answer_fn=reader, latency=0.0) as cls:
        r = invoke("classify", out, "--refusal-classifier", "llm:openai/reader", "--refusal-base-url", cls.base_url,
                   "-o", new)
        assert r.exit_code == 0, r.output
        assert cls.count == 4 * 4  # every turn of every conversation read again
    old_t, new_t = {t.key: t for t in iter_turns(out)}, {t.key: t for t in iter_turns(new)}
    assert old_t.keys() == new_t.keys() and len(new_t) == 12
    for k, t in new_t.items():
        assert t.text == old_t[k].text and t.behaviour == ("refuse" if t.text == REFUSAL else "partial")
    s = json.loads(invoke("score", new, "--json", "--bootstrap", "0", "--no-reference").output.splitlines()[0])
    for turn in s["by_turn"]:  # partial counts as refusing: every answer of every turn is a refusal now
        assert turn["refusal_rate_safe_context"] == 1.0 and turn["refusal_rate_unsafe_context"] == 1.0
