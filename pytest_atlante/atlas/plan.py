"""Compile a validated corpus into the paired ``agent-spec/atlas-eval/run-plan-v1`` run plan.

The plan records only what makes paired runs comparable: every case gets an ``atlas`` and a
``baseline`` run for each trial ``1..trials_per_arm``, with the corpus-wide model and prompt held
constant.  It executes nothing and claims no result.
"""

from __future__ import annotations

from typing import Any

from pytest_atlante.atlas.corpus import Corpus

RUN_PLAN_SCHEMA = "agent-spec/atlas-eval/run-plan-v1"
ARMS = ("atlas", "baseline")


def compile_plan(corpus: Corpus) -> dict[str, Any]:
    """Return the plan object with runs ordered case, then trial, then arm.

    Interleaving the arms per trial keeps the two runs of a pair next to each other, so a runner
    that walks the plan in order exposes both arms to the same drift (cache, load, time of day).
    """
    runs: list[dict[str, Any]] = []
    for case in corpus.cases:
        for trial in range(1, case.trials_per_arm + 1):
            for arm in ARMS:
                runs.append(
                    {
                        "case_id": case.id,
                        "arm": arm,
                        "trial": trial,
                        "model": corpus.model,
                        "prompt": corpus.prompt,
                        "repository": case.repository,
                        "revision": case.revision,
                        "permissions": case.permissions,
                        "cache_condition": case.cache_condition,
                    }
                )
    return {"schema": RUN_PLAN_SCHEMA, "runs": runs}
