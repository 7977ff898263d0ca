"""Which labelled answers each shipped reader was fitted on, and which it never saw.

Paths are relative to the repository root (files under ``tests/fixtures``). They live here, with
the training scripts and outside the runtime package: using a reader needs only its fitted model
file, and the package names no test file. The labels of these sets are the writers' own intent
(AI writers who labelled the answers they wrote to a brief), or, for the embedded model's own
answers (``refusal_train_small.csv``), AI readers following the guide
(``tests/fixtures/refusal_label_guide.md``), blind of the classifiers; never people's.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------------- learned

#: Our own labelled answers the ``learned`` model is fitted on.
#: ``refusal_train_small.csv`` holds the embedded SmolLM2-135M's own answers (respond mode, greedy, 80
#: tokens, context as user, system and turns) to 100 queries of our own wording, each in a safe and an
#: unsafe context of our own (``refusal_small_cases_1.json``, ``refusal_small_cases_2.json``; made with
#: ``casebench study --model hf/smollm2-135m-instruct --mode respond --max-tokens 80 --data FILE``),
#: labelled by readers who saw neither classifier; ``refusal_train_tiny_voice.csv`` imitates that
#: model's declines and substitutes, which it writes too rarely to learn from its own answers alone.
#: ``refusal_train_v3.csv`` (1,950 answers by eight writers: lectures that never say no, answers
#: with warnings, substitutes and redirections, terse and polite declines, deployed personas,
#: structured answers whose decisive part comes late, partial answers) and ``refusal_own_held_v6.csv``
#: (measured once as a held-aside set, learned 83.2%, then trained on) teach refusals that never say
#: no, which the held-aside set v6 showed the reader had not learned.
LEARNED_TRAIN_SETS: tuple[str, ...] = (
    "tests/fixtures/refusal_train_v1.csv", "tests/fixtures/refusal_train_clarify.csv",
    "tests/fixtures/refusal_train_v2.csv", "tests/fixtures/refusal_train_small.csv",
    "tests/fixtures/refusal_train_tiny_voice.csv", "tests/fixtures/refusal_train_v3.csv",
    "tests/fixtures/refusal_own_held_v6.csv",
)
#: Sets written blind that ``learned`` never sees: its validated error comes from them.
LEARNED_HELD_ASIDE: tuple[str, ...] = (
    "tests/fixtures/refusal_own_held_v3.csv",
    "tests/fixtures/refusal_own_held_v4.csv",
    "tests/fixtures/refusal_own_held_v5.csv",
    "tests/fixtures/refusal_own_held_v7.csv",
    "tests/fixtures/refusal_own_held_v8.csv",
    "tests/fixtures/refusal_own_held_v9.csv",
    "tests/fixtures/refusal_own_held_v10.csv",
    "tests/fixtures/refusal_own_held_v11.csv",
)

# ------------------------------------------------------------------------------- learned-lm

#: What ``learned-lm`` is fitted on beyond ``learned``'s training sets: the three blind sets that
#: measured ``learned`` (v7-v9: measured once each, so they are development data now).
#: ``refusal_own_held_v10.csv`` and ``refusal_own_held_v11.csv`` were written blind after this
#: reader was fixed and are never trained on; v3-v5 stay aside too.
LEARNED_LM_EXTRA_TRAIN_SETS: tuple[str, ...] = (
    "tests/fixtures/refusal_own_held_v7.csv",
    "tests/fixtures/refusal_own_held_v8.csv",
    "tests/fixtures/refusal_own_held_v9.csv",
)
#: Every ``learned-lm`` training set, ``learned``'s first.
LEARNED_LM_TRAIN_SETS: tuple[str, ...] = LEARNED_TRAIN_SETS + LEARNED_LM_EXTRA_TRAIN_SETS
#: Sets written blind that ``learned-lm`` never sees.
LEARNED_LM_HELD_ASIDE: tuple[str, ...] = (
    "tests/fixtures/refusal_own_held_v3.csv",
    "tests/fixtures/refusal_own_held_v4.csv",
    "tests/fixtures/refusal_own_held_v5.csv",
    "tests/fixtures/refusal_own_held_v10.csv",
    "tests/fixtures/refusal_own_held_v11.csv",
)
