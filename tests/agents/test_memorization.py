"""The memorization probe: the answer parser, the month draw, the scoring, and a full probe against a
scripted chat-completions server on loopback through ``make_backend``."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from planted.agents.backend import FatalBackendError
from planted.agents.memorization import (DATASET_FF3, DATASET_FF5, SYSTEM_PROMPT, ParsedAnswer,
                                         ProbeNotApplicableError, draw_months, knowledge_cutoff,
                                         no_knowledge_guess, parse_answer, probe_series, probe_table, question,
                                         run_probe, save_probe, score_answers)
from planted.agents.registry import make_backend
from planted.agents.transcript import EventLog, read_events
from planted.config import ConfigError, conf_dir
from planted.worlds.data import FactorDataError, FactorSeries, embedded_hml

from .fakes import FakeServer, Fault, ScriptedModel, Truncate

KEY = "probe-test-key-123"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
                 "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PROBE_TEST_KEY", KEY)


# ------------------------------------------------------------------------------------------ parser

@pytest.mark.parametrize(("text", "value", "kind"), [
    ("-1.23", -1.23, "number"),
    ("-1.23%", -1.23, "number"),
    ("+0.45%", 0.45, "number"),
    ("**0.45 %**", 0.45, "number"),
    ("\u22122.10%", -2.10, "number"),
    (".5%", 0.5, "number"),
    ("In March 1987 the HML return was -0.82%.", -0.82, "number"),
    ("1987-03: -0.82", -0.82, "number"),
    ("03/1987 -0.82%", -0.82, "number"),
    ("About 1.1% (the exact vintage is unknown)", 1.1, "number"),
    ("<think>It might be 3.0 or so</think>\n-0.50", -0.50, "number"),
    ("long reasoning 3.0 ... </think> -0.50", -0.50, "number"),
    ("between -1.5% and -1.0%", -1.25, "range"),
    ("-1.5 to -1.0", -1.25, "range"),
    ("-1.5% \u2013 -1.0%", -1.25, "range"),
    ("1.2-1.6%", 1.4, "range"),
    ("I don't know", None, "refusal"),
    ("I don\u2019t know.", None, "refusal"),
    ("I do not know the HML return for March 1987.", None, "refusal"),
    ("I'm not sure; the long-run mean is about 0.3% a month.", None, "refusal"),
    ("I cannot recall that figure.", None, "refusal"),
    ("Unknown", None, "refusal"),
    ("N/A", None, "refusal"),
    ("-0.4% (I am not certain)", -0.4, "number"),
    ("It was positive.", None, "unparsed"),
    ("In March 1987.", None, "unparsed"),
    ("2020%", None, "unparsed"),
    ("", None, "empty"),
    ("   \n", None, "empty"),
    (None, None, "empty"),
])
def test_parse_answer(text, value, kind):
    parsed = parse_answer(text)
    assert parsed.kind == kind and parsed.answered == (kind in ("number", "range"))
    if value is None:
        assert parsed.value is None
    else:
        assert parsed.value == pytest.approx(value)


def test_question_is_fixed_and_names_the_file():
    text = question("HML", pd.Period("1987-03", freq="M"))
    assert text == (
        "What was the return of the Fama-French HML factor (High Minus Low, the value factor) in March 1987, as "
        "published in the Fama/French 5 Factors (2x3) monthly file of Kenneth French's data library? Answer from "
        "memory. Reply with the monthly return in percent as a single number (for example -1.23), or reply "
        "\"I don't know\" if you do not know it."
    )
    assert "RMW factor (Robust Minus Weak" in question("RMW", pd.Period("2001-12", freq="M"), dataset=DATASET_FF3)
    with pytest.raises(ValueError, match="unknown factor"):
        question("SMB", pd.Period("2001-12", freq="M"))


# ------------------------------------------------------------------------------------------ months and scoring

def test_draw_months_is_reproducible_and_respects_the_cutoff():
    months = pd.period_range("2000-01", "2010-12", freq="M")
    cutoff = pd.Period("2009-06", freq="M")
    first = draw_months(months, cutoff=cutoff, n_before=40, rng=np.random.default_rng(5))
    second = draw_months(months, cutoff=cutoff, n_before=40, rng=np.random.default_rng(5))
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    before, after = first
    assert before.size == 40 and np.unique(before).size == 40 and np.all(np.diff(before) > 0)
    assert np.all(months[before] < cutoff) and before.min() >= 12
    assert list(months[after].astype(str)) == [str(p) for p in pd.period_range("2009-07", "2010-12", freq="M")]
    _, three = draw_months(months, cutoff=cutoff, n_before=1, n_after=3, rng=np.random.default_rng(1))
    assert three.size == 3 and np.all(months[three] > cutoff)
    with pytest.raises(ValueError, match="fewer than the 200"):
        draw_months(months, cutoff=cutoff, n_before=200, rng=np.random.default_rng(1))


def test_no_knowledge_guess_is_the_mean_of_earlier_months():
    returns = np.array([0.01, -0.02, 0.03, 0.005, -0.01])
    expected = [np.mean(returns[:i]) for i in (1, 3, 4)]
    assert no_knowledge_guess(returns, np.array([1, 3, 4])) == pytest.approx(expected)
    with pytest.raises(ValueError):
        no_knowledge_guess(returns, np.array([0]))


def test_scores_against_a_hand_computation():
    truth = np.array([1.0, -2.0, 0.5, 3.0, -1.0, 0.2])
    answer = np.array([1.1, -1.5, np.nan, 2.0, 0.2, -0.3])
    guess = np.array([0.3, 0.3, 0.4, 0.3, 0.35, 0.3])
    score = score_answers(truth, answer, guess, period="before")
    assert (score.asked, score.answered) == (6, 5)
    # answered months: answers 1.1, -1.5, 2.0, 0.2, -0.3 -> ranks 4, 1, 5, 3, 2;
    # published 1.0, -2.0, 3.0, -1.0, 0.2 -> ranks 4, 1, 5, 2, 3; d^2 = 0+0+0+1+1 = 2
    assert score.spearman == pytest.approx(1 - 6 * 2 / (5 * (25 - 1)))
    reference = stats.spearmanr([1.1, -1.5, 2.0, 0.2, -0.3], [1.0, -2.0, 3.0, -1.0, 0.2])
    assert score.spearman == pytest.approx(reference.statistic) and score.spearman_pvalue == pytest.approx(reference.pvalue)
    assert score.correct_sign == 3  # 0.2 vs -1.0 and -0.3 vs 0.2 have the wrong sign
    assert score.mae == pytest.approx((0.1 + 0.5 + 1.0 + 1.2 + 0.5) / 5)
    assert score.mae_guess == pytest.approx((0.7 + 2.3 + 2.7 + 1.35 + 0.1) / 5)
    assert (score.answered_low, score.answered_high) == pytest.approx(proportion_confint(5, 6, method="wilson"))
    assert (score.sign_low, score.sign_high) == pytest.approx(proportion_confint(3, 5, method="wilson"))
    assert score.answered_share == pytest.approx(5 / 6) and score.correct_sign_share == pytest.approx(0.6)


def test_scores_without_enough_answers_are_nan_without_warnings():
    truth, guess = np.array([1.0, -2.0, 0.5]), np.zeros(3)
    none = score_answers(truth, np.full(3, np.nan), guess, period="after")
    assert none.answered == 0 and math.isnan(none.mae) and math.isnan(none.spearman)
    assert math.isnan(none.sign_low) and none.answered_high == pytest.approx(proportion_confint(0, 3, method="wilson")[1])
    constant = score_answers(truth, np.array([0.5, 0.5, 0.5]), guess)
    assert math.isnan(constant.spearman) and constant.mae == pytest.approx((0.5 + 2.5 + 0.0) / 3)
    two = score_answers(truth, np.array([1.0, -2.0, np.nan]), guess)
    assert math.isnan(two.spearman) and two.correct_sign == 2
    empty = score_answers(np.array([]), np.array([]), np.array([]))
    assert empty.asked == 0 and math.isnan(empty.answered_share)
    with pytest.raises(ValueError, match="one length"):
        score_answers(truth, np.zeros(2), guess)


# ------------------------------------------------------------------------------------------ the probe end to end

class RecallModel(ScriptedModel):
    """Chat completions that answer each month's question from a table (no tools, one turn)."""

    path = "/v1/chat/completions"
    served_model = "recall-model"
    usage = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}

    def __init__(self, script: list[Any], *, api_key: str, answers: dict[str, str]):
        super().__init__(script, api_key=api_key)
        self.answers = answers
        self.asked: list[str] = []
        self.current = ""

    def handle(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Any:
        """As the base class, except that a truncated request need not be resent (truncation_retries 0)."""
        item = self.script[0] if self.script else None
        answer = super().handle(path, headers, body)
        if isinstance(item, Truncate):
            self.resend = None
        return answer

    def check(self, body: dict[str, Any]) -> None:
        assert not body.get("tools"), "the probe must offer no tools"
        messages = body["messages"]
        assert [m["role"] for m in messages] == ["system", "user"] and messages[0]["content"] == SYSTEM_PROMPT
        assert body["model"] == "recall-model" and body["temperature"] == 0.0
        self.current = messages[1]["content"]

    def reply(self, item: Any) -> dict[str, Any]:
        month = re.search(r" in (\w+ \d{4}), as published", self.current).group(1)
        self.asked.append(month)
        if isinstance(item, Truncate):
            message, finish = {"role": "assistant", "content": "Let me think about March", "reasoning_content": "..."}, "length"
        else:
            message = {"role": "assistant", "content": self.answers.get(month, "I don't know."),
                       "reasoning_content": f"recalling {month}"}
            finish = "stop"
        return {"id": f"chatcmpl-{self.n}", "object": "chat.completion", "model": self.served_model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": self.usage}


def compat_config(url: str) -> dict[str, Any]:
    return {
        "backend": "openai_compat", "model_id": "recall-model", "base_url": f"{url}/v1", "api_key_env": "PROBE_TEST_KEY",
        "strict_tools": False, "sampling": {"temperature": 0.0},
        "prices": {"input_per_mtok": 1.0, "output_per_mtok": 10.0, "as_of": "2026-11-30"},
        "retry": {"max_attempts": 3, "base_delay_s": 0.01, "max_delay_s": 0.02, "truncation_retries": 0},
    }


@pytest.fixture
def compat_backend():
    """``make_backend`` for the fake at a URL; the SDK clients are closed after the test."""
    backends = []

    def build(url: str):
        backends.append(make_backend(compat_config(url)))
        return backends[-1]

    yield build
    for backend in backends:
        backend.client.close()


def month_name(period: pd.Period) -> str:
    return f"{period.strftime('%B')} {period.year}"


def scripted_answers(series: FactorSeries, cutoff: pd.Period) -> tuple[dict[str, str], dict[str, float]]:
    """Exact recall in even years, a range around the truth in years divisible by 3, refusals otherwise
    and after the cutoff; returns the answer texts and the values they should parse to (percent)."""
    texts, values = {}, {}
    for month, r in zip(series.months, series.returns * 100):
        if month > cutoff:
            continue
        if month.year % 2 == 0:
            texts[month_name(month)] = f"{r:.2f}%"
            values[month_name(month)] = round(r, 2)
        elif month.year % 3 == 0:
            texts[month_name(month)] = f"Between {r - 0.2:.2f}% and {r + 0.2:.2f}%."
            values[month_name(month)] = (round(r - 0.2, 2) + round(r + 0.2, 2)) / 2
    return texts, values


def test_full_probe_against_a_fake_server(tmp_path, compat_backend):
    series = embedded_hml()
    cutoff = pd.Period("2016-06", freq="M")
    texts, values = scripted_answers(series, cutoff)
    n_before, n_after = 60, 3
    script = [Fault(429, {"error": {"type": "rate_limit_error", "message": "slow down"}}, {"retry-after": "0"})]
    script += ["answer"] * (n_before + n_after)
    with FakeServer(RecallModel(script, api_key=KEY, answers=texts)) as server, \
            EventLog(tmp_path / "probe.jsonl") as log:
        backend = compat_backend(server.url)
        result = run_probe(backend, series, cutoff="2016-06", seed=11, log=log, n_before=n_before, n_after=n_after,
                           dataset=DATASET_FF3)
    fake = server.model
    assert fake.failures == []
    rows = result.rows
    assert len(rows) == n_before + n_after and fake.asked == [month_name(pd.Period(m, freq="M")) for m in rows["month"]]
    assert (rows["period"] == "before").sum() == n_before and (rows["period"] == "after").sum() == n_after
    assert all(pd.Period(m, freq="M") > cutoff for m in rows.loc[rows["period"] == "after", "month"])
    truth = {str(m): r * 100 for m, r in zip(series.months, series.returns)}
    assert rows["truth_pct"].to_numpy() == pytest.approx([truth[m] for m in rows["month"]])
    expected = [values.get(month_name(pd.Period(m, freq="M")), np.nan) for m in rows["month"]]
    np.testing.assert_allclose(rows["answer_pct"].to_numpy(float), expected, equal_nan=True)
    assert set(rows.loc[rows["answer_pct"].isna(), "kind"]) == {"refusal"}

    before = result.scores["before"]
    answered = rows[(rows["period"] == "before") & rows["answer_pct"].notna()]
    assert before.answered == len(answered) > 10
    assert before.spearman == pytest.approx(stats.spearmanr(answered["answer_pct"], answered["truth_pct"]).statistic)
    assert before.spearman > 0.99 and before.mae < 0.006 and before.mae_guess > 10 * before.mae
    assert before.correct_sign == int((np.sign(answered["answer_pct"]) == np.sign(answered["truth_pct"])).sum())
    after = result.scores["after"]
    assert after.asked == 3 and after.answered == 0
    assert result.served_models == ["recall-model"]
    assert result.cost_usd == pytest.approx((n_before + n_after) * (120 * 1.0 + 30 * 10.0) / 1e6)

    events = read_events(tmp_path / "probe.jsonl")
    kinds = [e["event"] for e in events]
    assert kinds[0] == "probe_start" and kinds[-1] == "probe_end" and kinds.count("retry") == 1
    assert kinds.count("api_request") == kinds.count("api_response") == n_before + n_after  # the retry is one request
    answers = [e for e in events if e["event"] == "probe_answer"]
    assert [e["text"] for e in answers] == list(rows["text"])
    saved = save_probe(result, tmp_path / "saved", model_config={"model_id": "recall-model"})
    answers = pd.read_csv(saved / "answers.csv")
    assert len(answers) == len(rows) and set(answers["seed"]) == {11} and set(answers["data_sha256"]) == {series.sha256}
    assert (saved / "summary.txt").read_text().strip() == result.summary()
    assert "probe.json" in {p.name for p in saved.iterdir()} and "scores.csv" in {p.name for p in saved.iterdir()}
    summary = result.summary()
    assert "knowledge cutoff 2016-06, seed 11" in summary and "recall-model" in summary and str(tmp_path) not in summary
    table = probe_table([result])
    assert list(table.index) == [("HML", "before"), ("HML", "after")]


def test_probe_is_reproducible_and_independent_of_concurrency(tmp_path, compat_backend):
    series = embedded_hml()
    texts, _ = scripted_answers(series, pd.Period("2016-06", freq="M"))
    frames = []
    for concurrency in (1, 3):
        with FakeServer(RecallModel(["answer"] * 29, api_key=KEY, answers=texts)) as server, \
                EventLog(tmp_path / f"probe{concurrency}.jsonl") as log:
            result = run_probe(compat_backend(server.url), series, cutoff="2016-06", seed=3, log=log,
                               n_before=20, n_after=None, concurrency=concurrency)
        assert server.model.failures == []
        frames.append(result.rows.drop(columns="cost_usd"))
    assert len(frames[0]) == 20 + 9  # 2016-07 .. 2017-03 follow the cutoff
    pd.testing.assert_frame_equal(frames[0], frames[1])


def test_truncated_answer_is_an_error_row_and_fatal_errors_stop(tmp_path, compat_backend):
    series = embedded_hml()
    with FakeServer(RecallModel([Truncate(), "answer", "answer"], api_key=KEY, answers={})) as server, \
            EventLog(tmp_path / "probe.jsonl") as log:
        result = run_probe(compat_backend(server.url), series, cutoff="2016-06", seed=1, log=log,
                           n_before=3, n_after=0)
    assert list(result.rows["kind"]) == ["error", "refusal", "refusal"]
    assert result.scores["before"].answered == 0
    fault = Fault(401, {"error": {"type": "authentication_error", "message": "bad key"}})
    with FakeServer(RecallModel([fault], api_key=KEY, answers={})) as server, EventLog(tmp_path / "fatal.jsonl") as log:
        with pytest.raises(FatalBackendError, match="authentication"):
            run_probe(compat_backend(server.url), series, cutoff="2016-06", seed=1, log=log, n_before=3)


def test_scripted_backend_is_not_applicable(tmp_path):
    backend = make_backend(yaml.safe_load((conf_dir() / "model" / "scripted.yaml").read_text()))
    with EventLog(tmp_path / "probe.jsonl") as log, pytest.raises(ProbeNotApplicableError, match="needs a language model"):
        run_probe(backend, embedded_hml(), cutoff="2016-06", seed=1, log=log, n_before=3)


def test_cutoff_and_series_selection(tmp_path, monkeypatch):
    assert knowledge_cutoff({"knowledge_cutoff": "2026-06"}) == pd.Period("2026-06", freq="M")
    assert knowledge_cutoff({"knowledge_cutoff": "2026-06"}, "2025-01") == pd.Period("2025-01", freq="M")
    with pytest.raises(ConfigError, match="--cutoff"):
        knowledge_cutoff({})
    with pytest.raises(ProbeNotApplicableError):
        knowledge_cutoff({"backend": "scripted"}, "2026-06")
    with pytest.raises(ConfigError, match="YYYY-MM"):
        knowledge_cutoff({}, "June 2026")
    series, dataset = probe_series("HML")
    assert series.source.startswith("embedded") and dataset == DATASET_FF3
    monkeypatch.setenv("PLANTED_DATA_DIR", str(tmp_path))
    with pytest.raises(FactorDataError, match="planted data fetch"):
        probe_series("RMW")
    with pytest.raises(FactorDataError, match="unknown factor"):
        probe_series("SMB")


def test_rmw_from_the_five_factor_file(ff5_file):
    series, dataset = probe_series("RMW", ff5_file)
    assert series.name == "RMW" and dataset == DATASET_FF5 and str(series.months[0]) == "1963-07"
    assert isinstance(parse_answer("0.1"), ParsedAnswer)
