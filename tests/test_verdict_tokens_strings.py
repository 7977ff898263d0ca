"""Which first tokens count as "safe" / "unsafe" in prob mode, and how their mass adds up."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casebench.backends.verdict_tokens import classify, normalise, tally

# Token strings as real tokenizers print them. The SmolLM2 pieces were read from its GGUF
# vocabulary (see tests/servers/llama_server.py): "unsafe" -> "uns"+"afe", "Unsafe" -> "Un"+"safe",
# " Unsafe" -> " Un"+"safe", "UNSAFE" -> "UN"+"SA"+"FE".
SAFE_STARTS = ["safe", " safe", "Safe", " Safe", "SAFE", "\u0120safe", "\u2581Safe", "saf", "Saf", "sa",
               "SA", "safe.", "safe,", 'safe"', "safe\n", '"safe', "**Safe", "\u201csafe"]
UNSAFE_STARTS = ["unsafe", " unsafe", "Unsafe", " Unsafe", "UNSAFE", "\u0120unsafe", "\u2581unsafe", "uns",
                 "Uns", "Un", " Un", "UN", "un", "unsa", "unsaf", "unsafe.", 'unsafe"}', "\u2581Un", "`unsafe"]
NEITHER = ["", " ", "s", "S", "u", "U", "I", "The", "sure", "Sure", "sorry", "safety", "Safety", "safely",
           "safer", "unclear", "unknown", "unsure", "understood", "Yes", "No", '"', "**", "\u0120", "\u2581",
           "afe", "fe", "<0x73>", "safeguard", "unsafely", "12"]


@pytest.mark.parametrize("token", SAFE_STARTS)
def test_safe_variants_count_as_safe(token: str) -> None:
    assert classify(token) == "safe"


@pytest.mark.parametrize("token", UNSAFE_STARTS)
def test_unsafe_variants_count_as_unsafe(token: str) -> None:
    assert classify(token) == "unsafe"


@pytest.mark.parametrize("token", NEITHER)
def test_other_tokens_count_for_neither(token: str) -> None:
    assert classify(token) is None


def test_min_prefix_makes_short_pieces_stricter() -> None:
    assert classify("un") == "unsafe"
    assert classify("un", min_prefix=3) is None
    assert classify("uns", min_prefix=3) == "unsafe"
    # The whole word counts at any strictness, also with trailing punctuation.
    assert classify("Safe.", min_prefix=10) == "safe"
    # A single letter only counts when asked for explicitly; a silly value is clamped.
    assert classify("s", min_prefix=1) == "safe"
    assert classify("", min_prefix=0) is None


def test_normalise_strips_decoration_and_case() -> None:
    assert normalise('\u0120"**SAFE') == "safe"
    assert normalise("\u2581Unsafe ") == "unsafe "


def test_tally_sums_variants_and_renormalises() -> None:
    # Worked by hand: safe side 0.30 + 0.05, unsafe side 0.10 + 0.05; the rest is off-script.
    alts = [("Safe", math.log(0.30)), (" safe", math.log(0.05)), ("Un", math.log(0.10)),
            ("uns", math.log(0.05)), ("I", math.log(0.40)), ("The", math.log(0.10))]
    t = tally(alts)
    assert t.safe_mass == pytest.approx(0.35)
    assert t.unsafe_mass == pytest.approx(0.15)
    assert t.covered == pytest.approx(1.0)
    assert t.p_safe == pytest.approx(0.35 / 0.50)
    assert t.safe_tokens == ["Safe", " safe"] and t.unsafe_tokens == ["Un", "uns"]
    detail = t.to_detail()
    assert detail["safe_mass"] == pytest.approx(0.35) and detail["unsafe_tokens"] == ["Un", "uns"]


def test_tally_without_either_side_is_missing_not_zero() -> None:
    t = tally([("I", math.log(0.6)), ("The", math.log(0.3))])
    assert t.p_safe is None
    assert t.safe_mass == 0.0 and t.unsafe_mass == 0.0


def test_tally_one_side_only_gives_certainty() -> None:
    assert tally([("unsafe", math.log(0.2)), ("I", math.log(0.7))]).p_safe == 0.0
    assert tally([("safe", math.log(0.2))]).p_safe == 1.0


def test_tally_skips_garbage_logprobs() -> None:
    t = tally([("safe", float("nan")), ("safe", float("inf")),
               ("safe", "x"), ("unsafe", None),  # type: ignore[list-item]
               ("unsafe", -math.inf), ("Safe", math.log(0.5)), ("Un", 1e-9)])
    # -inf is probability 0 (counted, no mass); a logprob a hair above 0 is clipped to 1.
    assert t.safe_mass == pytest.approx(0.5)
    assert t.unsafe_mass == pytest.approx(1.0)
    assert t.p_safe == pytest.approx(0.5 / 1.5)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=20), st.integers(min_value=-3, max_value=8))
def test_classify_never_raises_and_never_both(token: str, min_prefix: int) -> None:
    side = classify(token, min_prefix)
    assert side in (None, "safe", "unsafe")
    norm = normalise(token)
    # Independent reading of "never both": a safe start begins with "s", an unsafe one with "u".
    if side == "safe":
        assert norm.startswith("s")
    if side == "unsafe":
        assert norm.startswith("u")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=12), st.floats(allow_nan=True, allow_infinity=True)), max_size=25))
def test_tally_never_raises_and_p_safe_is_a_probability(alts: list[tuple[str, float]]) -> None:
    t = tally(alts)
    assert t.safe_mass >= 0.0 and t.unsafe_mass >= 0.0
    # Each alternative lands on at most one side.
    assert len(t.safe_tokens) + len(t.unsafe_tokens) <= len(alts)
    assert all(classify(x) == "safe" for x in t.safe_tokens)
    assert all(classify(x) == "unsafe" for x in t.unsafe_tokens)
    if t.p_safe is not None:
        assert 0.0 <= t.p_safe <= 1.0
