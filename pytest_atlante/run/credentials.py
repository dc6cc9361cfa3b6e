"""Whether a run's agents can read a real credential, said before any session and after the last.

A real-provider trial's agent holds only per-trial stand-ins when its session's model traffic goes
through the metering proxy, inside namespace isolation (docs/integrity.md, "Credentials"; the
trial's ``credentialExposed`` says what it really held).  Where it cannot — a provider mode the proxy
does not carry (Claude Code's cloud modes, Codex's ChatGPT login, Gemini CLI's Login with Google, an
OpenCode provider the proxy does not serve), a credential variable the host sends elsewhere, or no
namespace isolation (the agent then runs as the runner's user, beside it) — the run says so once,
in the summary, with the number of trials; and ``eval.credentials: "stand-in-only"`` refuses the run
before any session (:data:`CODE`, exit 3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pytest_atlante.diagnostics import Diagnostic
from pytest_atlante.hosts import host_for
from pytest_atlante.hosts.names import HostName
from pytest_atlante.records import TrialRecord
from pytest_atlante.sandbox.isolation import IsolationRecord

__all__ = ["CODE", "exposure_reason", "exposure_warning", "run_exposures", "stand_in_only_problem"]

#: The diagnostic of a ``stand-in-only`` run that would expose a credential.
CODE = "eval-credentials-exposed"
#: Said of an exposed trial whose host the run did not expect to expose (the record is the truth).
UNFORESEEN = "a credential of its session holds no stand-in"


def exposure_reason(host: HostName, parent_env: Mapping[str, str], model: str | None, *,
                    confined: bool) -> str | None:
    """Why a real-provider trial of ``host`` (and ``model``) would hold a real credential; None when
    every credential it gets is a stand-in."""
    adapter = host_for(host)
    if not confined:
        return "no namespace isolation: the agent runs as the runner's user, beside it"
    if adapter.provider_endpoint(parent_env, model) is None:
        return "its provider mode does not go through the metering proxy (a cloud mode, a ChatGPT or Google login, " \
               "or an OpenCode provider the proxy does not serve)"
    passed = [name for name in adapter.credential_env if parent_env.get(name) and name not in adapter.stand_in_env]
    if passed:
        return f"{', '.join(passed)} reach{'es' if len(passed) == 1 else ''} the session as set"
    return None


def run_exposures(arms: Iterable[tuple[HostName, str | None]], parent_env: Mapping[str, str],
                  isolation: IsolationRecord | None) -> dict[str, str]:
    """Each (host, model) of the run's arms whose trials would expose a credential → why."""
    confined = isolation is not None and isolation.mode == "namespace"
    found: dict[str, str] = {}
    for host, model in arms:
        reason = exposure_reason(host, parent_env, model, confined=confined)
        if reason is not None:
            found.setdefault(host, reason)
    return found


def stand_in_only_problem(exposures: Mapping[str, str]) -> Diagnostic | None:
    if not exposures:
        return None
    named = "; ".join(f"{host}: {reason}" for host, reason in sorted(exposures.items()))
    return Diagnostic(
        "atlante.jsonc", "$.eval.credentials", CODE,
        f"eval.credentials is \"stand-in-only\", and this run's agents could read a real credential ({named})",
        "run with namespace isolation and a provider mode the metering proxy stands in for (an API key, or a "
        "login docs/integrity.md lists as stood in), or remove eval.credentials",
    )


def exposure_warning(records: Iterable[TrialRecord], exposures: Mapping[str, str],
                     host_of: Mapping[str | None, str]) -> str | None:
    """The one summary line for the trials whose agent could read a real credential (None: none).
    ``host_of``: each record's arm (its ``variant``, None for a run without variants) → its host."""
    hosts: dict[str, int] = {}
    for record in records:
        if record.credentialExposed:
            host = host_of.get(record.variant, host_of.get(None, "?"))
            hosts[host] = hosts.get(host, 0) + 1
    if not hosts:
        return None
    total = sum(hosts.values())
    named = "; ".join(f"{host} ({count}): {exposures.get(host, UNFORESEEN)}" for host, count in sorted(hosts.items()))
    return (f"atlante: warning: in {total} trial(s) the agent could read a real credential — {named}; "
            "eval.credentials \"stand-in-only\" refuses such a run (docs/integrity.md, \"Credentials\")")
