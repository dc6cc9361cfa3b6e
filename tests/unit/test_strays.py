"""suite/strays.py: a project nested inside another (its own atlante.jsonc) keeps its scenarios to
itself; the outer project's walk names no file of it (the example project's selftest-demo/ and
trigger-suite/ made 72 warning lines of scripts/demo's output)."""

from __future__ import annotations

from pathlib import Path

from pytest_atlante.suite.strays import unmatched_scenarios


def test_a_nested_project_is_not_walked_but_a_stray_beside_it_is_named(tmp_path: Path) -> None:
    (tmp_path / "atlante.jsonc").write_text("{}")
    nested = tmp_path / "trigger-suite"
    (nested / "eval").mkdir(parents=True)
    (nested / "atlante.jsonc").write_text("{}")
    (nested / "eval" / "query.eval.json").write_text("{}")
    stray = tmp_path / "eval" / "second.eval.jsonc"
    stray.parent.mkdir()
    stray.write_text("{}")
    assert unmatched_scenarios(tmp_path, loaded=[]) == [stray]
