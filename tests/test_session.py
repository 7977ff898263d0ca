"""The scoring session (``casebench.session``): what one piece of work computes once it reads again;
nothing is kept outside a session or after it; a nested piece of work joins the session open."""

from __future__ import annotations

from click.testing import CliRunner

from casebench.session import ScoringSession, current_session, in_session, memo_by_key, memo_by_object, scoring_session


class Thing:
    pass


def test_memo_inside_a_session_only() -> None:
    made: list[int] = []

    def make() -> int:
        made.append(1)
        return len(made)

    obj = Thing()
    assert memo_by_object("k", obj, 1, make) == 1 and memo_by_object("k", obj, 1, make) == 2  # no session: afresh
    with scoring_session() as s:
        assert current_session() is s
        first = memo_by_object("k", obj, 1, make)
        assert memo_by_object("k", obj, 1, make) == first and memo_by_object("k", obj, 2, make) == first + 1
        assert memo_by_key("d", "x", make) == memo_by_key("d", "x", make)
        with scoring_session() as inner:  # nested work joins the open session
            assert inner is s and memo_by_object("k", obj, 1, make) == first
    assert current_session() is None
    assert memo_by_object("k", obj, 1, make) != first  # nothing outlives the session


def test_a_reused_identity_is_not_mistaken_for_the_object_that_is_gone() -> None:
    s = ScoringSession()
    obj = Thing()
    assert s.by_object("k", obj, None, lambda: "old") == "old"
    ident = id(obj)
    del obj
    fresh = [Thing() for _ in range(50)]
    same = [t for t in fresh if id(t) == ident]
    for t in same or fresh[:1]:
        assert s.by_object("k", t, None, lambda: "new") == "new"


def test_an_api_entry_point_and_a_command_open_their_own_session() -> None:
    seen: list[ScoringSession | None] = []

    @in_session
    def work() -> None:
        seen.append(current_session())

    work()
    work()
    assert seen[0] is not None and seen[1] is not None and seen[0] is not seen[1]
    with scoring_session() as s:
        work()
    assert seen[2] is s
    from casebench.cli import cli

    r = CliRunner().invoke(cli, ["--help"])
    assert r.exit_code == 0 and current_session() is None


def test_a_held_object_keeps_its_value_for_the_session_and_is_held() -> None:
    """``by_held`` is for objects without weak references (a dict: a case's context): the session
    holds the object, so its identity is not reused while the value is kept."""
    from casebench.session import memo_by_held

    made: list[int] = []

    def make() -> int:
        made.append(1)
        return len(made)

    ctx: dict[str, str] = {"a": "b"}
    assert memo_by_held("j", ctx, 1, make) == 1 and memo_by_held("j", ctx, 1, make) == 2  # no session: afresh
    with scoring_session() as s:
        first = memo_by_held("j", ctx, 1, make)
        assert memo_by_held("j", ctx, 1, make) == first and memo_by_held("j", ctx, 2, make) == first + 1
        assert memo_by_held("j", {"a": "b"}, 1, make) == first + 2  # an equal dict is another object
        assert any(held is ctx for held, _ in s._held.values())
