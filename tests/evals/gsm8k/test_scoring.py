"""Scoring on real-looking completions: SGLang's rule, lm-eval strict-match and flexible-extract."""

from __future__ import annotations

import pytest

from pdctl.evals.gsm8k.scoring import (
    INVALID,
    LM_EVAL_INVALID,
    flexible_extract,
    get_answer_value,
    label_value,
    normalize,
    score,
    strict_extract,
)

JANET = (
    "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n"
    "She makes 9 * 2 = $<<9*2=18>>18 every day at the farmer\u2019s market.\n#### 18"
)
GPT_OSS = (
    "analysisWe need to compute eggs: 16 per day, eats 3, bakes 4, so remaining 16-3-4=9. "
    "Sells at $2 each, so 9*2=18. So answer 18 dollars.assistantfinal**Answer: $18**\n\n"
    "Janet has 9 eggs left, which she sells for $2 each, earning **$18** per day."
)


def test_label_is_the_number_after_hashes() -> None:
    assert label_value(JANET) == 18
    assert label_value("... so 1,000 + 234 = 1,234\n#### 1,234") == 1234


def test_gsm8k_style_answer_is_right_on_all_three() -> None:
    s = score(" " + JANET, JANET)
    assert (s.pred, s.correct, s.invalid) == (18, True, False)
    assert (s.strict_pred, s.strict_correct) == ("18", True)
    assert (s.flexible_pred, s.flexible_correct) == ("18", True)


def test_reasoning_model_is_zero_on_strict_and_right_on_flexible() -> None:
    s = score(GPT_OSS, JANET)
    assert s.strict_pred == LM_EVAL_INVALID and not s.strict_correct
    assert s.flexible_correct  # last number-like token: "$18" -> "18"
    assert s.correct  # SGLang: last integer is 18


def test_commas_in_numbers() -> None:
    answer = "1,000 * 12 = 12,000\n#### 12000"
    out = " Each month is $1,000, so the year costs 1,000 * 12 = $12,000.\n#### 12,000"
    s = score(out, answer)
    assert s.pred == 12000 and s.correct
    assert s.strict_pred == "12,000" and s.strict_correct
    assert s.flexible_pred == "12,000" and s.flexible_correct  # lm-eval strips ','


def test_dollar_and_trailing_period_in_flexible() -> None:
    s = score(" She earns 5 * 4 = 20 per week, so in total she earns $20.", "#### 20")
    assert s.flexible_pred == "$20." and normalize(s.flexible_pred) == "20" and s.flexible_correct
    assert s.correct and not s.strict_correct


def test_decimals_follow_sglang_bug_for_bug() -> None:
    # SGLang's rule takes the last run of digits: "12.50" -> 50, so a decimal answer never matches 12.
    s = score(" The price is 25 / 2 = 12.50 dollars.", "#### 12")
    assert s.pred == 50 and not s.correct
    # lm-eval compares strings: "12.50" != "12" on flexible as well.
    assert s.flexible_pred == "12.50" and not s.flexible_correct
    # "12.0" is wrong for both too; "12." is right for flexible (trailing '.' dropped).
    assert score(" It is 12.", "#### 12").flexible_correct


def test_negative_numbers() -> None:
    s = score(" The temperature dropped to -5 degrees.\n#### -5", "x\n#### -5")
    assert s.pred == 5 and s.label == 5 and s.correct  # SGLang ignores the sign on both sides
    assert s.strict_pred == "-5" and s.strict_correct
    assert s.flexible_pred == "-5" and s.flexible_correct
    # A sign mismatch is invisible to SGLang's rule but caught by lm-eval's string match.
    s = score(" The answer is 5.", "x\n#### -5")
    assert s.correct and not s.flexible_correct


def test_no_number_at_all() -> None:
    s = score(" I am not sure how to solve this problem.", JANET)
    assert s.pred == INVALID and s.invalid and not s.correct
    assert s.strict_pred == LM_EVAL_INVALID and s.flexible_pred == LM_EVAL_INVALID
    assert not s.strict_correct and not s.flexible_correct
    assert score("", JANET).invalid


def test_leading_zero_is_invalid_like_sglang() -> None:
    # ast.literal_eval("007") is a SyntaxError in Python 3; SGLang returns INVALID.
    assert get_answer_value("agent 007") == INVALID
    assert get_answer_value("0") == 0


@pytest.mark.parametrize(
    ("text", "strict", "flexible"),
    [
        ("#### 42", "42", "42"),
        ("so #### 3.5 and later 7", "3.5", "7"),
        ("x = 1, y = 22", LM_EVAL_INVALID, "22"),
        ("costs $1,234.56 total", LM_EVAL_INVALID, "$1,234.56"),
    ],
)
def test_extractors(text: str, strict: str, flexible: str) -> None:
    assert strict_extract(text) == strict
    assert flexible_extract(text) == flexible


def test_first_strict_match_wins() -> None:
    # lm-eval take_first: the first "#### N" (a model that keeps generating shots is scored on its first).
    assert strict_extract(" #### 18\n\nQuestion: ...\nAnswer: ... #### 7") == "18"


CROSS_CHECK = [
    JANET,
    GPT_OSS,
    " The answer is $1,234.",
    " so #### 3.5 and later 7",
    " -12 and then -3.",
    " nothing numeric here",
    " 12.",
    " The total is 1,000,000 dollars.\n#### 1,000,000",
]


@pytest.mark.parametrize("output", CROSS_CHECK)
@pytest.mark.parametrize("answer", [JANET, "x\n#### 1234", "x\n#### -3", "x\n#### 1000000"])
def test_strict_and_flexible_agree_with_lm_eval_itself(output: str, answer: str) -> None:
    """Our re-implementation against lm-eval's own filters and exact_match (when lm-eval is installed)."""
    pytest.importorskip("lm_eval")
    from lm_eval.api.metrics import exact_match_hf_evaluate
    from lm_eval.filters.extraction import RegexFilter

    ignore = [",", "\\$", "(?s).*#### ", "\\.$"]
    s = score(output, answer)
    for pattern, group, ours, ours_ok in [
        (r"#### (\-?[0-9\.\,]+)", 0, s.strict_pred, s.strict_correct),
        (r"(-?[$0-9.,]{2,})|(-?[0-9]+)", -1, s.flexible_pred, s.flexible_correct),
    ]:
        theirs = next(iter(RegexFilter(regex_pattern=pattern, group_select=group).apply([[output]], [{}])))[0]
        em = exact_match_hf_evaluate([theirs], [answer], regexes_to_ignore=ignore, ignore_case=True)
        assert ours == theirs
        assert ours_ok == bool(em["exact_match"])


def test_response_parsing_of_each_api() -> None:
    """SGLang-shaped responses of the three APIs (pure parsing; the e2e tests use the real engine)."""
    from pdctl.evals.client import parse_response

    native = {"text": " 18", "meta_info": {"completion_tokens": 2, "prompt_tokens": 9,
                                           "finish_reason": {"type": "stop", "matched": "Question"}}}
    assert parse_response("generate", native) == (" 18", 2, 9, "stop", None)
    chat = {"choices": [{"index": 0, "message": {"content": "**18**", "reasoning_content": "9*2=18"},
                         "finish_reason": "stop"}], "usage": {"completion_tokens": 40, "prompt_tokens": 7}}
    assert parse_response("chat", chat) == ("**18**", 40, 7, "stop", "9*2=18")
    with pytest.raises(ValueError):
        parse_response("completion", {"choices": []})
    with pytest.raises(TypeError):
        parse_response("generate", ["not", "an", "object"])
