"""What the runner believes when the host's stream and the metering proxy disagree (docs/design.md §10)."""

from __future__ import annotations

import json

import pytest

from pytest_atlante.hosts.base import SessionOutcome
from pytest_atlante.provider.meter import MAX_EVENT_BYTES, ResponseMeter
from pytest_atlante.provider.proxy import Metering, requester_error
from pytest_atlante.provider.wire.anthropic import anthropic_message, anthropic_stream
from pytest_atlante.provider.wire.gemini import gemini_response, gemini_stream
from pytest_atlante.provider.wire.openai_chat import openai_completion, openai_stream
from pytest_atlante.provider.wire.openai_responses import responses_stream
from pytest_atlante.provider.wire.shared import Reply, ReplyUsage, ToolCall
from pytest_atlante.records import Usage
from pytest_atlante.sandbox.process import RunResult
from pytest_atlante.sandbox.redact import Secrets
from pytest_atlante.trial.budget import TokenGate, TrialBudget
from pytest_atlante.trial.runner import session_facts, verdict
from pytest_atlante.trial.session import HostSession, disagreement, session_error
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


def seen(*, answered: int = 2, failed: int = 0, tokens: int = 100, tripped_at: int | None = None,
         empty: int = 0, requester: int = 0, models: tuple[str | None, ...] = (),
         split: tuple[int, ...] = ()) -> Metering:
    """``models``: the model each response named; ``split``: each response's input tokens (default:
    ``tokens`` shared evenly)."""
    shares = split or tuple(tokens // len(models) for _ in models)
    return Metering(Usage(inputTokens=tokens), None, answered + failed, answered, failed, 0, 0, tripped_at, (),
                    responses=tuple(Usage(inputTokens=share) for share in shares),
                    empty=empty, requester_errors=requester, response_models=models)


@pytest.mark.parametrize(("returncode", "metering", "believed"), [
    (0, seen(), False),                 # the model answered everything: a forged login failure
    (0, seen(failed=1), True),          # the proxy saw a failure too
    (0, seen(failed=1, requester=1), False),  # a malformed request the agent sent: not the provider's failure
    (0, seen(failed=2, requester=1), True),   # ... beside one the provider failed
    (0, seen(answered=0), True),        # the proxy saw no answer at all
    (0, seen(empty=1), True),           # the model answered once with nothing: the provider failed
    (0, None, True),                    # metered from the stream: nothing contradicts it
    (1, seen(), True),                  # the process's own status always counts
])
def test_a_stream_error_is_believed_unless_the_proxy_saw_the_model_answer(
        returncode: int, metering: Metering | None, believed: bool) -> None:
    trial = session(returncode=returncode, stream_error=True, metering=metering)
    assert trial.host_failed is believed
    facts = session_facts(trial, [], [])
    assert verdict(facts) == ("infra-error" if believed else "pass")
    if not believed and not metering.requester_errors:  # type: ignore[union-attr]
        assert "the model answered all 2 request(s)" in (disagreement(trial) or "")
    elif not believed:
        assert "the provider failed none (it refused 1 as the requester's own error" in (disagreement(trial) or "")


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


def test_an_empty_answer_is_named_in_the_trials_error() -> None:
    budget = TrialBudget(timeoutMs=1000, maxTokens=10_000, maxSessions=1, trials=1, allocated=True)
    error = session_error(session(stream_error=True, metering=seen(empty=1)), budget)
    assert error == ("host session failed (exit 0): Not logged in; the provider answered 1 model request with an "
                     "empty response (no text, thinking or tool call)")
    assert "empty" not in (session_error(session(stream_error=True, metering=seen(failed=1)), budget) or "")


SAYS = Reply("m1", "scripted-model", "Hi.", (), ReplyUsage(10, 2))
CALLS = Reply("m1", "scripted-model", "", (ToolCall("c1", "write", {"path": "a"}),), ReplyUsage(10, 2))
EMPTY = Reply("m1", "scripted-model", "", (), ReplyUsage(10, 2))
RENDERINGS = {
    "anthropic-stream": ("text/event-stream", anthropic_stream),
    "anthropic-whole": ("application/json", lambda reply: json.dumps(anthropic_message(reply)).encode()),
    "openai-stream": ("text/event-stream", lambda reply: openai_stream(reply, 0, True)),
    "openai-whole": ("application/json", lambda reply: json.dumps(openai_completion(reply, 0)).encode()),
    "responses-stream": ("text/event-stream", lambda reply: responses_stream(reply, frozenset())),
    "gemini-stream": ("text/event-stream", gemini_stream),
    "gemini-whole": ("application/json", lambda reply: json.dumps(gemini_response(reply)).encode()),
}


def metered(content_type: str, payload: bytes) -> ResponseMeter:
    meter = ResponseMeter(content_type, len(payload) if content_type == "application/json" else None)
    meter.feed(payload)
    meter.finish()
    return meter


@pytest.mark.parametrize("rendering", list(RENDERINGS))
def test_the_meter_tells_an_empty_answer_from_text_and_tool_calls(rendering: str) -> None:
    content_type, render = RENDERINGS[rendering]
    assert metered(content_type, render(EMPTY)).empty
    assert metered(content_type, render(EMPTY)).reported  # the empty answer still reports its usage
    assert not metered(content_type, render(SAYS)).empty
    assert not metered(content_type, render(CALLS)).empty


def test_gemini_thinking_alone_is_not_an_empty_answer_and_an_unread_response_is_not_called_empty() -> None:
    thought = {"candidates": [{"content": {"role": "model", "parts": [{"text": "hmm", "thought": True}]}}]}
    assert not metered("application/json", json.dumps(thought).encode()).empty
    blank = {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}}]}
    assert metered("application/json", json.dumps(blank).encode()).empty
    meter = ResponseMeter("text/event-stream")
    meter.feed(b"data: " + b"x" * (MAX_EVENT_BYTES + 1))  # one event too long to read
    meter.finish()
    assert not meter.empty


@pytest.mark.parametrize(("status", "credentialed", "requesters"), [
    (400, True, True), (404, True, True), (413, True, True), (422, True, True),  # the request itself
    (401, True, False), (403, True, False),   # the provider refused the trial's own credential
    (401, False, True), (403, False, True),   # a request without it: whoever sent it caused that
    (408, True, False), (429, True, False), (500, True, False), (502, False, False), (200, True, False),
])
def test_a_failed_status_is_the_requesters_own_only_where_any_client_could_cause_it(
        status: int, credentialed: bool, requesters: bool) -> None:
    assert requester_error(status, credentialed=credentialed) is requesters


def test_the_model_identity_and_the_estimate_come_from_the_providers_responses() -> None:
    from pytest_atlante.trial.session import session_totals

    # The host's file named an unlisted model (a rewritten rollout, a forged result): the provider's
    # responses name the one that answered, and the estimate is priced at it.
    trial = session(metering=seen(tokens=1_000_000, models=("gpt-5.5-2026-03-05",)))
    trial.outcome.model_identity = "forged-unlisted-model"
    totals = session_totals(trial)
    assert totals.model_identity == "gpt-5.5-2026-03-05"
    assert totals.cost_usd == pytest.approx(5.0) and totals.cost_basis is not None
    assert "the host named the model 'forged-unlisted-model'" in (disagreement(trial) or "")
    # Two models answered, and the record's usage is more than the proxy's (the stream reported
    # traffic that bypassed it): the whole is priced at the dearer.
    both = session(stream_tokens=2_000_000, metering=seen(tokens=1_000_000, models=("gpt-5.4-mini", "gpt-5.5")))
    assert session_totals(both).cost_usd == pytest.approx(10.0)
    # A provider model the table does not list stays unpriced (the cost cap charges its ceiling).
    assert session_totals(session(metering=seen(models=("unlisted",)))).cost_usd is None


def test_the_identity_is_the_main_model_and_each_response_is_priced_at_its_own() -> None:
    from pytest_atlante.trial.session import session_totals

    # A side request to a small model first (Claude Code's quota check, Gemini CLI's router): the
    # identity is the model that answered the most tokens; each response is priced at its own model.
    metering = seen(tokens=1_000_000, models=("gpt-5.4-mini", "gpt-5.5"), split=(200_000, 800_000))
    totals = session_totals(session(metering=metering))
    assert totals.model_identity == "gpt-5.5"
    assert totals.cost_usd == pytest.approx(0.2 * 0.75 + 0.8 * 5.0)
    # The host's own name for a model the provider names (its dated snapshot) is kept, no note.
    named = session(metering=seen(models=("gpt-5.5-2026-03-05",)))
    named.outcome.model_identity = "openai/gpt-5.5"
    assert session_totals(named).model_identity == "openai/gpt-5.5" and disagreement(named) is None


@pytest.mark.parametrize(("rendering", "model"), [(name, "scripted-model") for name in RENDERINGS])
def test_the_meter_reads_the_model_each_wire_format_names(rendering: str, model: str) -> None:
    content_type, render = RENDERINGS[rendering]
    assert metered(content_type, render(SAYS)).model == model
