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
    with pytest.raises(ValueError, match="user, system"):
        render_chat(case, None, "assistant")
