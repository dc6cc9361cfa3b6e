"""The shard split (pure): deterministic, scenarios kept whole where the balance allows, every
trial on exactly one shard; and the run group's default."""

from __future__ import annotations

from pytest_atlante.run.shard import default_run_group, split


def trials(spec: dict[str, int], allocated: int = 10**6) -> list[tuple[tuple[str, int], bool]]:
    refs = [(name, t) for name, count in spec.items() for t in range(1, count + 1)]
    return [(ref, index < allocated) for index, ref in enumerate(refs)]


def shards_of(assignment: dict[tuple[str, int], int]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for (name, _), shard in assignment.items():
        out.setdefault(name, set()).add(shard)
    return out


def test_every_trial_lands_on_exactly_one_shard_for_any_count() -> None:
    items = trials({"a": 5, "b": 3, "c": 1, "d": 4})
    for count in range(1, 20):
        assignment = split(items, {}, count)
        assert set(assignment) == {ref for ref, _ in items}
        assert set(assignment.values()) <= set(range(1, count + 1))
        assert split(list(items), {}, count) == assignment  # a pure function of its inputs


def test_scenarios_stay_whole_when_the_count_balances() -> None:
    assignment = split(trials({"a": 3, "b": 3, "c": 3, "d": 3}), {}, 4)
    assert all(len(s) == 1 for s in shards_of(assignment).values())
    assert sorted(assignment.values()) == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]


def test_fewer_scenarios_than_shards_splits_the_largest() -> None:
    assignment = split(trials({"a": 2, "b": 2, "c": 2}), {}, 4)
    assert set(assignment.values()) == {1, 2, 3, 4}
    assert sum(len(s) > 1 for s in shards_of(assignment).values()) == 1


def test_durations_balance_and_unallocated_trials_cost_nothing() -> None:
    # slow weighs as much as the three others together: it gets a shard to itself, whole.
    assignment = split(trials({"slow": 2, "x": 2, "y": 2, "z": 2}), {"slow": 3_000, "x": 1_000, "y": 1_000, "z": 1_000}, 2)
    homes = shards_of(assignment)
    assert len(homes["slow"]) == 1 and homes["slow"].isdisjoint(homes["x"] | homes["y"] | homes["z"])
    # Ten times as slow: halving it shortens the slowest shard, so it is split.
    heavy = split(trials({"slow": 2, "x": 2, "y": 2, "z": 2}), {"slow": 10_000, "x": 1_000, "y": 1_000, "z": 1_000}, 2)
    assert shards_of(heavy)["slow"] == {1, 2}
    # maxSessions left z and y unallocated: by count, x and slow weigh the same and separate.
    skipped = split(trials({"slow": 2, "x": 2, "y": 2, "z": 2}, allocated=4), {}, 2)
    assert shards_of(skipped)["slow"] != shards_of(skipped)["x"]


def test_default_run_group_uses_the_ci_run_ids_present() -> None:
    digest = "sha256:" + "ab" * 32
    assert default_run_group(digest, {}) == "ab" * 8
    assert default_run_group(digest, {"GITHUB_RUN_ID": "77", "GITHUB_RUN_ATTEMPT": "2"}) == "ab" * 8 + "-77-2"
    assert default_run_group(digest, {"CI_PIPELINE_ID": "9"}) == "ab" * 8 + "-9"
