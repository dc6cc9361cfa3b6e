"""The run plan: both arms, trials 1..N, model and prompt held constant, fields as the example."""

from __future__ import annotations

import json
from collections import Counter

from pytest_atlante.atlas.corpus import parse_corpus
from pytest_atlante.atlas.plan import compile_plan

from ._builders import BASE_CASE, make_corpus

RUN_FIELDS = [
    "case_id",
    "arm",
    "trial",
    "model",
    "prompt",
    "repository",
    "revision",
    "permissions",
    "cache_condition",
]


def plan_for(*cases: dict[str, object]) -> dict[str, object]:
    return compile_plan(parse_corpus(json.dumps(make_corpus(*cases)).encode(), file="c.json"))


def test_first_run_matches_reference_example_exactly() -> None:
    plan = plan_for()
    assert list(plan) == ["schema", "runs"]
    assert plan["schema"] == "agent-spec/atlas-eval/run-plan-v1"
    runs = plan["runs"]
    assert isinstance(runs, list)
    assert runs[0] == {
        "case_id": "symbol-lookup",
        "arm": "atlas",
        "trial": 1,
        "model": "offline-fixture-model",
        "prompt": "Produce an evidence-backed answer.",
        "repository": "fixtures/atlas/basic",
        "revision": "a2d4282",
        "permissions": "read-only",
        "cache_condition": "cold",
    }
    assert all(list(run) == RUN_FIELDS for run in runs)


def test_both_arms_for_every_trial_of_every_case() -> None:
    other = dict(
        BASE_CASE,
        id="flow-case",
        trials_per_arm=5,
        repository="fixtures/other",
        revision="b33f",
        permissions="workspace-write",
        cache_condition="warm",
    )
    runs = plan_for(BASE_CASE, other)["runs"]
    assert isinstance(runs, list)
    counts = Counter((r["case_id"], r["arm"]) for r in runs)
    assert counts == {
        ("symbol-lookup", "atlas"): 3,
        ("symbol-lookup", "baseline"): 3,
        ("flow-case", "atlas"): 5,
        ("flow-case", "baseline"): 5,
    }
    flow = [(r["trial"], r["arm"]) for r in runs if r["case_id"] == "flow-case"]
    assert flow == [(t, a) for t in range(1, 6) for a in ("atlas", "baseline")]
    assert {(r["model"], r["prompt"]) for r in runs} == {
        ("offline-fixture-model", "Produce an evidence-backed answer.")
    }
    flow_run = next(r for r in runs if r["case_id"] == "flow-case")
    assert (flow_run["repository"], flow_run["revision"]) == ("fixtures/other", "b33f")
    assert (flow_run["permissions"], flow_run["cache_condition"]) == ("workspace-write", "warm")
