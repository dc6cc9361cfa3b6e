"""What the runner believes when the host's stream and the metering proxy disagree (docs/design.md §10)."""

from __future__ import annotations

import pytest

from pytest_atlante.hosts.base import SessionOutcome
from pytest_atlante.records import Usage
from pytest_atlante.sandbox.process import RunResult
from pytest_atlante.sandbox.redact import Secrets
from pytest_atlante.trial.budget import TokenGate
from pytest_atlante.trial.proxy import Metering
from pytest_atlante.trial.runner import session_facts, verdict
from pytest_atlante.trial.session import HostSession, disagreement
from pytest_atlante.trial.transcript import Redactor, StreamCapture


def session(*, returncode: int = 0, stream_error: bool = False, stream_tokens: int = 100,
            metering: Metering | None = None) -> HostSession:
    process = RunResult(returncode=returncode, stdout="", stderr="", timed_out=False, aborted=False, start_error=None,
                        duration_s=1.0, orphans_killed=0)
    outcome = SessionOutcome(usage=Usage(inputTokens=stream_tokens), cost_usd=None, model_identity=None,
                             is_error=stream_error, error_message="Not logged in" if stream_error else None,
                             usage_events=1, budget_unmonitored=False)
    capture = StreamCapture(Redactor(Secrets([]), [], []))
    return HostSession(process, outcome, TokenGate(10_000), {}, capture, metering)


def seen(*, answered: int = 2, failed: int = 0, tokens: int = 100, tripped_at: int | None = None) -> Metering:
    return Metering(Usage(inputTokens=tokens), None, answered + failed, answered, failed, 0, 0, tripped_at, ())


@pytest.mark.parametrize(("returncode", "metering", "believed"), [
    (0, seen(), False),                 # the model answered everything: a forged login failure
    (0, seen(failed=1), True),          # the proxy saw a failure too
    (0, seen(answered=0), True),        # the proxy saw no answer at all
    (0, None, True),                    # metered from the stream: nothing contradicts it
    (1, seen(), True),                  # the process's own status always counts
])
def test_a_stream_error_is_believed_unless_the_proxy_saw_the_model_answer(
        returncode: int, metering: Metering | None, believed: bool) -> None:
    trial = session(returncode=returncode, stream_error=True, metering=metering)
    assert trial.host_failed is believed
    facts = session_facts(trial, [], [])
    assert verdict(facts) == ("infra-error" if believed else "pass")
    if not believed:
        assert "the model answered all 2 request(s)" in (disagreement(trial) or "")


def test_a_disagreement_in_tokens_is_recorded_and_agreement_is_not() -> None:
    assert disagreement(session(metering=seen(tokens=100))) is None
    said = disagreement(session(stream_tokens=0, metering=seen(tokens=2020)))
    assert said == "the host's stream reported 0 tokens, the proxy metered 2020"
    assert disagreement(session(metering=None)) is None


def test_the_proxy_crossing_is_budget_exceeded_even_when_the_session_ended_on_its_own() -> None:
    trial = session(metering=seen(tokens=5000, tripped_at=5000))
    assert trial.over_budget and trial.tripped_at == 5000
    assert verdict(session_facts(trial, [], [])) == "budget-exceeded"


def test_an_estimated_cost_is_priced_from_the_counts_the_record_keeps() -> None:
    # A Codex session ended at maxTokens: no turn.completed, so no streamed usage; the proxy's
    # counts are the record's, and the price table prices them.
    from pytest_atlante.trial.session import session_totals

    ended = session(metering=seen(tokens=1_000_000))
    ended.outcome.usage, ended.outcome.model_identity, ended.outcome.cost_basis = None, "gpt-5.5", "price-table v1 (x)"
    totals = session_totals(ended)
    assert totals.usage == Usage(inputTokens=1_000_000) and totals.cost_usd == pytest.approx(5.0)
    assert totals.cost_basis == "price-table v1 (x)"
    unpriced = session(metering=seen())
    unpriced.outcome.model_identity, unpriced.outcome.cost_basis = "gpt-unknown", "price-table v1 (x)"
    assert (session_totals(unpriced).cost_usd, session_totals(unpriced).cost_basis) == (None, None)
