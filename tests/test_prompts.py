import json

import pytest

from casebench.data import CI_PARAMETERS, load_dataset
from casebench.modes import MODES, get_mode
from casebench.prompts import (
    BUILTIN_TEMPLATES, TemplateError, load_templates, render, render_chat, render_system_context,
    without_context_block,
)


def render_prompt(case, mode: str, templates=BUILTIN_TEMPLATES) -> str:
    system, user = get_mode(mode).chat(case, templates, "user")
    assert system is None
    return user

PAPER_STYLE = '''
import os  # never executed
judge = """Judge this. Query: {query}
Context: {context}
Answer as {{"judgement": "safe or unsafe", "explanation": "..."}}
"""
judgescore = """Score 1-10. {query} || {context} -> {{"judgement": 7}}"""
judgelogits = """Say safe or unsafe. {query} {context}
Your judgement:
"""
os.system("echo this must not run")
'''


def test_builtin_templates_render_query_and_json_context(small_data_path):
    case = load_dataset(small_data_path)[0]
    for mode in ("binary", "score", "prob"):
        prompt = render_prompt(case, mode)
        assert case.query in prompt
        assert json.dumps(case.context) in prompt  # default json.dumps settings, as published
        assert "{query}" not in prompt and "{context}" not in prompt
    assert '{"judgement"' in render_prompt(case, "binary")
    assert "1 to 10" in render_prompt(case, "score")
    from casebench import modes

    # the public helper (in modes: modes use prompts, never the reverse) gives the same prompt
    assert all(modes.render_prompt(case, m) == render_prompt(case, m) for m in ("binary", "score", "prob"))


def test_template_file_is_parsed_not_executed(tmp_path, small_data_path, capfd):
    f = tmp_path / "template.py"
    f.write_text(PAPER_STYLE)
    t = load_templates(f)
    case = load_dataset(small_data_path)[1]
    out = render(t.get("judge"), case.query, case.context)
    assert out.startswith("Judge this. Query: " + case.query)
    assert '{"judgement": "safe or unsafe"' in out  # doubled braces become literal
    assert t.source == str(f) and t.sha256("judgescore") != BUILTIN_TEMPLATES.sha256("judgescore")
    assert "this must not run" not in capfd.readouterr().out


@pytest.mark.parametrize(
    "text, words",
    [
        ('judge = "{query} {context}"\njudgescore = "{query} {context}"\n', "judgelogits"),
        ('judge = f"{1}"\njudgescore = "{query} {context}"\njudgelogits = "{query} {context}"\n', "string literal"),
        ('judge = "{query} {context} {other}"\njudgescore = "{query} {context}"\njudgelogits = "{query} {context}"\n', "other"),
        ('judge = "{query}"\njudgescore = "{query} {context}"\njudgelogits = "{query} {context}"\n', "missing placeholder"),
        ("judge = '''unterminated\n", "syntax"),
    ],
)
def test_bad_template_files(tmp_path, text, words):
    f = tmp_path / "t.py"
    f.write_text(text)
    with pytest.raises(TemplateError, match=words):
        load_templates(f)


def test_unknown_template_key():
    with pytest.raises(TemplateError, match="no template named 'logits'"):
        BUILTIN_TEMPLATES.get("logits")


# ------------------------------------------------------------------ context placement


def test_system_placement_renders_every_present_parameter_in_plain_english(small_data_path):
    case = load_dataset(small_data_path)[0]
    text = render_system_context(case.context)
    for group, subs in CI_PARAMETERS.items():
        for sub in subs:
            value = case.context.get(group, {}).get(sub)
            if isinstance(value, str):
                assert value.strip() in text
    assert "{" not in text  # not JSON
    assert "What is known and verified about the user" in text


def test_system_placement_leaves_out_removed_parameters(small_data_path):
    case = load_dataset(small_data_path)[0]
    ablated = case.ablated(["sender", "urgency"])
    text = render_system_context(ablated.context)
    assert case.context["sender"]["platform_type"] not in text
    assert "Where you are deployed" not in text and "Urgency" not in text
    assert case.context["recipient"]["background"] in text


def test_object_values_are_rendered_as_phrases():
    text = render_system_context({"recipient": {"type": {"kind": "clinician", "verified_by": "hospital"}}})
    assert "Who the user is: kind: clinician; verified by: hospital" in text


def test_judge_template_drops_its_context_block_in_system_placement(small_data_path):
    case = load_dataset(small_data_path)[0]
    for mode in ("binary", "score", "prob"):
        system, user = get_mode(mode).chat(case, BUILTIN_TEMPLATES, "system")
        assert system == render_system_context(case.context)
        assert case.query in user and json.dumps(case.context) not in user
        assert "Situation (Contextual Integrity" not in user and "\n\n\n" not in user


def test_without_context_block_keeps_a_query_sharing_the_paragraph():
    assert without_context_block("Query: {query}\nContext: {context}\n\nAnswer.") == "Query: {query}\n\nAnswer."
    assert without_context_block("Hi.\n\nCtx:\n{context}\n\nQ: {query}") == "Hi.\n\nQ: {query}"


def test_respond_chat_is_the_query_alone_with_a_system_context(small_data_path):
    case = load_dataset(small_data_path)[0]
    system, user = render_chat(case, None, "system")
    assert user == case.query and system and case.context["recipient"]["background"] in system
    system, user = render_chat(case, None, "user")
    assert system is None and user.startswith(case.query) and json.dumps(case.context) in user


def test_unknown_placement_is_refused(small_data_path):
    case = load_dataset(small_data_path)[0]
    with pytest.raises(ValueError, match="user, system, turns"):
        render_chat(case, None, "assistant")


# ------------------------------------------------------------------------------ context as turns


def _leaves(value):
    """Every scalar value inside a CI value (objects and lists walked): strings as written, other
    scalars (the real data has a few booleans and numbers) as JSON writes them."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    elif value is not None:
        yield json.dumps(value)


def _check_turns_chat(messages, case, removed_values=()):
    """The shape the issue asks for: earlier user/assistant turns, the query exactly as the last
    user message, every CI value present verbatim before it, and no removed value anywhere."""
    assert messages[-1] == {"role": "user", "content": case.query}
    assert messages[-2]["role"] == "assistant"
    roles = [m["role"] for m in messages]
    assert roles == ["user", "assistant"] * ((len(messages) - 1) // 2) + ["user"]
    earlier = "\n".join(m["content"] for m in messages[:-1])
    for group in case.context.values():
        for value in _leaves(group):
            assert value in earlier, (case.index, value[:40])
    for value in removed_values:
        assert value not in earlier, (case.index, value[:40])


def test_prompts_respond_turns_on_every_real_case(real_data_path, real_dataset):
    """`casebench prompts --mode respond --context-as turns` on the 900 real cases."""
    from click.testing import CliRunner

    from casebench.cli import cli

    r = CliRunner().invoke(cli, ["prompts", str(real_data_path), "--mode", "respond", "--context-as", "turns"])
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(lines) == len(real_dataset) == 900
    for line, case in zip(lines, real_dataset):
        assert line["index"] == case.index and line["prompt"] == case.query
        _check_turns_chat(line["messages"], case)


def test_prompts_turns_with_remove_drop_the_removed_values(real_data_path, real_dataset):
    """With --remove, none of the removed parameters' values is said (checked on every real case
    whose removed values do not also occur in what is kept)."""
    from click.testing import CliRunner

    from casebench.cli import cli

    for remove in ("sender", "recipient,urgency", "transmission_principle"):
        r = CliRunner().invoke(cli, ["prompts", str(real_data_path), "--mode", "respond", "--context-as", "turns",
                                     "--remove", remove])
        assert r.exit_code == 0, r.output
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        assert len(lines) == 900
        checked = 0
        for line, case in zip(lines, real_dataset):
            kept = case.ablated(remove.split(","))
            kept_text = json.dumps(kept.context)
            gone = [v for name in remove.split(",") for g, sub in case.context.items() if isinstance(sub, dict)
                    for k, val in sub.items() if name in (g, k) for v in _leaves(val)]
            gone = [v for v in gone if json.dumps(v)[1:-1] not in kept_text and len(v.strip()) > 3]
            _check_turns_chat(line["messages"], kept, gone)  # something is always left to say
            checked += bool(gone)
        assert checked > 700


def test_prompts_turns_with_every_parameter_removed_is_the_query_alone(real_data_path, real_dataset):
    """With every CI parameter removed there is nothing to say before the query: each of the 900
    chats is the query alone."""
    from click.testing import CliRunner

    from casebench.cli import cli

    r = CliRunner().invoke(cli, ["prompts", str(real_data_path), "--mode", "respond", "--context-as", "turns",
                                 "--remove", "sender,recipient,transmission_principle"])
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(lines) == 900
    for line, case in zip(lines, real_dataset):
        assert line["messages"] == [{"role": "user", "content": case.query}]


def test_non_string_ci_values_are_said_verbatim(real_dataset):
    """The real data's few boolean and number values appear as JSON writes them."""
    from casebench.prompts import render_turns

    found = 0
    for case in real_dataset:
        scalars = [v for g in case.context.values() for v in _leaves(g) if v in ("true", "false") or v.isdigit()]
        if not scalars:
            continue
        said = "\n".join(u for u, _ in render_turns(case.context))
        for v in scalars:
            assert v in said, (case.index, v)
            found += 1
    assert found >= 4


def test_turns_render_only_the_parameters_present(small_data_path):
    from casebench.prompts import render_conversation, render_turns

    case = load_dataset(small_data_path)[0]
    full = render_turns(case.context)
    assert len(full) >= 2 and all(isinstance(u, str) and isinstance(a, str) for u, a in full)
    assert render_turns(case.context) == full  # deterministic
    only_recipient = render_turns(case.ablated(["sender", "transmission_principle"]).context)
    assert len(only_recipient) == 1 and only_recipient[0][0].startswith("Some background about me.")
    assert render_turns({}) == ()
    chat = render_conversation(case.ablated(["sender", "recipient", "transmission_principle"]), None, "turns")
    assert chat.history == () and chat.prompt == case.query
    # keys outside the CI schema are said too, under their own names
    extra = render_turns({"recipient": {"type": "Nurse"}, "location": {"country": "Chile"}})
    assert extra[-1][0].splitlines()[1] == "- Location, country: Chile"
    # object values keep their strings verbatim (not stripped)
    (user, _), = render_turns({"recipient": {"background": {"job": " welder ", "age": 40}}})
    assert "- What is known about me: job:  welder ; age: 40" in user


def test_judge_modes_get_the_conversation_in_the_prompt(small_data_path):
    """In judge modes the judge is asked about the conversation's final query: one user message,
    the template without its context block, the transcript ending with the query."""
    from casebench.prompts import render_turns

    case = load_dataset(small_data_path)[0]
    for mode in ("binary", "score", "prob"):
        chat = get_mode(mode).conversation(case, BUILTIN_TEMPLATES, "turns")
        assert chat.system is None and chat.history == ()
        assert "Situation (Contextual Integrity" not in chat.prompt
        assert f"User: {case.query}" in chat.prompt
        for user, assistant in render_turns(case.context):
            assert f"User: {user}\nAssistant: {assistant}" in chat.prompt
        # the two-message form is still there for chats without earlier turns
        assert get_mode(mode).chat(case, BUILTIN_TEMPLATES, "turns") == (None, chat.prompt)
    with pytest.raises(ValueError, match="render_conversation"):
        render_chat(case, None, "turns")


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("placement", ["user", "system", "turns"])
def test_prompts_shows_exactly_what_a_run_sends(tmp_path, small_data_path, fault_server, mode, placement):
    """Issue 37, item 6: `casebench prompts` prints, for every mode and placement and with
    --system, the messages a run sends, to the character: the same case run against a loopback
    server that logs each request sends exactly those messages (--system first in the system
    message, then a system-placed context)."""
    from click.testing import CliRunner

    from casebench.cli import cli

    system = "You answer for the Hillside garden club."
    shown = CliRunner().invoke(cli, ["prompts", str(small_data_path), "--mode", mode, "--context-as", placement,
                                     "--system", system, "--case", "1"])
    assert shown.exit_code == 0, shown.output
    rows = [json.loads(x) for x in shown.stdout.splitlines() if x.startswith("{")]
    assert len(rows) == 1 and rows[0]["index"] == 1
    messages = rows[0]["messages"]
    assert messages[0]["role"] == "system" and messages[0]["content"].startswith(system)
    if placement == "system":  # the context after the operator's prompt, a blank line between
        assert messages[0]["content"].startswith(system + "\n\n") and len(messages[0]["content"]) > len(system) + 50
    else:
        assert messages[0]["content"] == system
    ran = CliRunner().invoke(cli, ["run", "--model", "openai/judge-x", "--mode", mode, "--context-as", placement,
                                   "--system", system, "--data", str(small_data_path), "--base-url",
                                   fault_server.base_url, "--limit", "2", "--samples", "1", "--parse-retries", "0",
                                   "--no-progress", "--no-report", "--min-coverage", "0",
                                   "-o", str(tmp_path / "run")])
    assert ran.exit_code in (0, 3), ran.output
    sent = [r.body["messages"] for r in fault_server.requests if r.path.endswith("/chat/completions")]
    assert messages in sent, (messages, sent)


def test_prompts_pairs_shows_the_cases_a_pairs_run_asks(tmp_path, real_data_path, fault_server):
    """``prompts --pairs N`` prints the messages of exactly the cases ``run --pairs N`` asks (same
    seed), both contexts of each query; a --case beside it is refused."""
    from click.testing import CliRunner

    from casebench.cli import cli
    from casebench.runs.record import read_manifest

    fault_server.answer = json.dumps({"judgement": "safe", "explanation": "-"})
    shown = CliRunner().invoke(cli, ["prompts", str(real_data_path), "--mode", "binary", "--pairs", "3",
                                     "--selection-seed", "2"])
    assert shown.exit_code == 0, shown.output
    rows = [json.loads(x) for x in shown.stdout.splitlines() if x.startswith("{")]
    ran = CliRunner().invoke(cli, ["run", "--model", "openai/judge-x", "--mode", "binary", "--data", str(real_data_path),
                                   "--base-url", fault_server.base_url, "--pairs", "3", "--selection-seed", "2",
                                   "--no-progress", "--no-report", "-o", str(tmp_path / "run")])
    assert ran.exit_code == 0, ran.output
    assert [r["index"] for r in rows] == read_manifest(tmp_path / "run").cases and len(rows) == 6
    sent = sorted(json.dumps(r.body["messages"]) for r in fault_server.requests if r.path.endswith("/chat/completions"))
    assert sorted(json.dumps(r["messages"]) for r in rows) == sent
    bad = CliRunner().invoke(cli, ["prompts", str(real_data_path), "--mode", "binary", "--pairs", "3", "--case", "1"])
    assert bad.exit_code == 2 and "--case or --pairs" in bad.output
