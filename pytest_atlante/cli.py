"""The ``atlante`` command: init, build, eval, compare, view, benchmark and pack subcommands.

Each subcommand is a thin adapter: parse arguments, call one function of a plain module, turn a
``DiagnosticError`` into readable stderr lines and an exit status.  No traceback reaches the user
for bad input; an unexpected exception is reported as ``atlante-internal-error`` with exit 3.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_atlante.diagnostics import Diagnostic, DiagnosticError, envelope
from pytest_atlante.hosts.names import HOST_NAMES

EXIT_VALIDATION = 2
EXIT_INTERNAL = 3


def _project(named: str | None = None) -> Path:
    """The project a command works on: ``named``, else the nearest directory holding atlante.jsonc
    from the working directory up (as pytest finds its rootdir)."""
    from pytest_atlante.projectroot import project_root

    return project_root(named, Path.cwd())


def _build(args: argparse.Namespace) -> int:
    from pytest_atlante.suite.build import build_command

    return build_command(_project(args.project), args.host)


def _init(args: argparse.Namespace) -> int:
    from pytest_atlante.suite.init import init_project

    for line in init_project(Path(args.dir), args.host).lines():
        print(line)
    return 0


def _schema(args: argparse.Namespace) -> int:
    from pytest_atlante.suite import schemas

    if args.list or args.name is None:
        print("\n".join(schemas.catalogue_lines()))
        return 0
    sys.stdout.write(schemas.shipped_text(args.name))
    return 0


def _eval(args: argparse.Namespace, *, selftest: bool = False) -> int:
    # Reached only when a global option precedes `eval` (main() hands plain `eval ...` to pytest as is).
    from pytest_atlante.run.evalcmd import eval_command

    short = [*(f"--scenario={name}" for name in args.scenario), *([f"--out={args.out}"] if args.out else []),
             *([f"--host={args.host}"] if args.host else []), *(["--keep"] if args.keep else []),
             *(["--scripted"] if args.scripted else []), *(["--full"] if getattr(args, "full", False) else [])]
    return eval_command([*short, *args.pytest_args], selftest=selftest)


def _selftest(args: argparse.Namespace) -> int:
    return _eval(args, selftest=True)


def _bench_validate(args: argparse.Namespace) -> int:
    from pytest_atlante.atlas.e0 import cmd_validate

    return cmd_validate(Path(args.corpus))


def _bench_plan(args: argparse.Namespace) -> int:
    from pytest_atlante.atlas.e0 import cmd_plan

    return cmd_plan(Path(args.corpus), _opt_path(args.out))


def _bench_summarize(args: argparse.Namespace) -> int:
    from pytest_atlante.atlas.e0 import cmd_summarize

    return cmd_summarize(Path(args.receipts), _opt_path(args.out))


def _bench_score(args: argparse.Namespace) -> int:
    from pytest_atlante.atlas.score import cmd_score

    return cmd_score(Path(args.corpus), Path(args.results), _opt_path(args.out))


def _pack_report(args: argparse.Namespace) -> int:
    from pytest_atlante.report.provenance import cmd_pack_report

    return cmd_pack_report(Path(args.path))


def _compare(args: argparse.Namespace) -> int:
    from pytest_atlante.report.compare import compare_command

    return compare_command(Path(args.base), Path(args.new), as_json=args.json,
                           allow_changed=args.allow_changed_scenarios)


def _view(args: argparse.Namespace) -> int:
    from pytest_atlante.report.view import latest_run, view_command

    if args.report:
        target = Path(args.report)
    else:
        target, complete = latest_run(_project())
        chosen = "the newest complete run" if complete else "no complete run; the newest partial run"
        print(f"atlante view: {chosen}, {target.name} (`atlante runs` lists them all; name another as REPORT_OR_RUN_DIR)")
    # --compare names an input (a report or its run directory), not a file to write: no _opt_path.
    return view_command(target, _opt_path(args.out), Path(args.compare) if args.compare else None)


def _runs(args: argparse.Namespace) -> int:
    from pytest_atlante.report.runs import table_lines

    print("\n".join(table_lines(_project())))
    return 0


def _report_merge(args: argparse.Namespace) -> int:
    from pytest_atlante.report.merge import cmd_merge

    return cmd_merge([Path(p) for p in args.reports], Path(args.out))


def _import_evals(args: argparse.Namespace) -> int:
    from pytest_atlante.suite.skillevals import import_evals

    result = import_evals(Path(args.file), _project(args.project), skill=args.skill)
    for line in result.lines():
        print(line)
    print(f"atlante import: {len(result.scenarios)} scenario(s) written; no scripted run (add scripted/<name>.json "
          "from a known-good session): next: atlante build && atlante selftest")
    return 0


def _history(args: argparse.Namespace) -> int:
    from pytest_atlante.report.history import history_command

    return history_command(_project(args.project), args.scenario, args.last, args.json)


def _report_md(args: argparse.Namespace) -> int:
    from pytest_atlante.report.markdown import md_command

    return md_command(Path(args.report), _opt_path(args.out), args.url, Path(args.compare) if args.compare else None)


def _opt_path(value: str | None) -> Path | None:
    """The ``--out`` file, refused before any work when it can only fail at the end."""
    if value is None:
        return None
    path = Path(value)
    problem = None
    if path.is_dir():
        problem = "names a directory; --out takes the path of the file to write"
    elif not next((p for p in path.parents if p.exists()), Path(".")).is_dir():
        problem = "is inside something that is not a directory"
    if problem:
        raise DiagnosticError([Diagnostic(value, "", "atlas-out-invalid", f"--out {problem}",
                                          "pass a file path such as receipts/score.json")])
    return path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="atlante",
        description="Build agent harnesses, run evals through pytest, and score Atlas benchmarks.",
    )
    parser.add_argument(
        "--diagnostics-json",
        action="store_true",
        help="on a validation error, print the machine-readable diagnostics envelope on stderr",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    init = sub.add_parser("init", help="start an eval project here (or adopt the harness already here); "
                                       "never overwrites a file")
    init.add_argument("dir", nargs="?", default=".", help="the project directory (default: the current one)")
    init.add_argument("--host", choices=HOST_NAMES, default=None,
                      help="the host eval.host names (default: the adopted harness's, else claude-code)")
    init.set_defaults(func=_init)

    schema = sub.add_parser("schema", help="print the JSON Schema of atlante.jsonc or of scenario documents")
    schema.add_argument("name", nargs="?", default=None,
                        help="config, scenario, or a versioned name (config-v0.1 … config-v0.4, eval-scenario-v0.1)")
    schema.add_argument("--list", action="store_true", help="each schema's name, the $schema URI it serves and its file")
    schema.set_defaults(func=_schema)

    build = sub.add_parser("build", help="compile harness sources into native host outputs")
    build.add_argument("--project", default=None, metavar="DIR",
                       help="project root holding atlante.jsonc (default: the nearest directory holding it, "
                            "from the working directory up)")
    build.add_argument(
        "--host",
        choices=[*HOST_NAMES, "all"],
        default="all",
        help="which host's native tree to build (default: all)",
    )
    build.set_defaults(func=_build)

    from pytest_atlante.run.evalcmd import PASS_THROUGH_NOTE, add_eval_options, add_selftest_options

    ev = sub.add_parser(
        "eval",
        help="run `pytest --atlante-eval` with the given pytest arguments (exit status 0-3)",
        epilog=PASS_THROUGH_NOTE,
    )
    add_eval_options(ev)
    ev.add_argument("pytest_args", nargs=argparse.REMAINDER, help="arguments passed to pytest")
    ev.set_defaults(func=_eval)

    st = sub.add_parser(
        "selftest",
        help="zero-token self-test of every scenario (`pytest --atlante-eval --atlante-selftest`): "
             "vacuous, unsolvable and erroring checks; exit 0 when all are sound",
        epilog=PASS_THROUGH_NOTE,
    )
    add_eval_options(st)
    add_selftest_options(st)
    st.add_argument("pytest_args", nargs=argparse.REMAINDER, help="arguments passed to pytest")
    st.set_defaults(func=_selftest)

    view = sub.add_parser("view", help="write one self-contained HTML page for an eval report")
    view.add_argument("report", nargs="?", metavar="REPORT_OR_RUN_DIR",
                      help="report.json or its run directory (default: the newest complete run under the "
                           "project's .atlante/eval/, a run of the whole suite whose every trial ran)")
    view.add_argument("--compare", metavar="OTHER", help="a baseline report.json (or its run directory): show `atlante compare "
                                                        "OTHER REPORT` side by side in the page")
    view.add_argument("-o", "--out", metavar="FILE", help="where to write the page (default: report.html beside the report)")
    view.set_defaults(func=_view)

    imp = sub.add_parser("import", help="turn another tool's eval cases into scenario documents")
    isub = imp.add_subparsers(dest="import_command", required=True, metavar="FORMAT")
    evals = isub.add_parser("evals", help="an Agent Skills evals/evals.json (and a trigger file beside it): one "
                                          "scenario per eval and per trigger query, with a skill-used check")
    evals.add_argument("file", metavar="FILE", help="the skill's evals/evals.json")
    evals.add_argument("--project", default=None, metavar="DIR",
                       help="the eval project to write into (default: the nearest directory holding atlante.jsonc, "
                            "from the working directory up, else the working directory)")
    evals.add_argument("--skill", default=None, help="the harness skill the checks name (default: skill_name)")
    evals.set_defaults(func=_import_evals)

    history = sub.add_parser("history", help="each scenario across the project's recent sealed, complete runs: "
                                             "verdicts, pass rate, flip rate, change points; flaky and newly-failing first")
    history.add_argument("scenario", nargs="*", metavar="SCENARIO", help="only these scenarios (default: all)")
    history.add_argument("--last", type=int, default=20, metavar="N", help="how many runs, newest first (default: 20)")
    history.add_argument("--json", action="store_true", help="print the history as JSON (schema atlante/history-v1)")
    history.add_argument("--project", default=None, metavar="DIR",
                         help="the project root holding .atlante/eval/ (default: the nearest directory holding "
                              "atlante.jsonc, from the working directory up)")
    history.set_defaults(func=_history)

    runs = sub.add_parser("runs", help="list the project's runs under .atlante/eval/, newest first: id, start, host, "
                                       "selection, verdicts, exit status, and complete, partial or running")
    runs.set_defaults(func=_runs)

    bench = sub.add_parser("benchmark", help="Atlas evaluation: validate, plan, summarize, score")
    bsub = bench.add_subparsers(dest="bench_command", required=True, metavar="ACTION")
    validate = bsub.add_parser("validate", help="validate an agent-spec/atlas-eval/corpus-v1 file")
    validate.add_argument("--corpus", required=True)
    validate.set_defaults(func=_bench_validate)
    plan = bsub.add_parser("plan", help="compile a corpus into a paired run plan")
    plan.add_argument("--corpus", required=True)
    plan.add_argument("--out", help="atomically write the plan here instead of stdout")
    plan.set_defaults(func=_bench_plan)
    summ = bsub.add_parser("summarize", help="grade and aggregate receipts (JSON array or NDJSON)")
    summ.add_argument("--receipts", required=True)
    summ.add_argument("--out", help="atomically write the summary here instead of stdout")
    summ.set_defaults(func=_bench_summarize)
    score = bsub.add_parser("score", help="score query observations against a query corpus")
    score.add_argument("--corpus", required=True)
    score.add_argument("--results", required=True)
    score.add_argument("--out", help="atomically write the receipt here instead of stdout")
    score.set_defaults(func=_bench_score)

    compare = sub.add_parser(
        "compare",
        help="compare two eval reports scenario by scenario (exit 0 no regression, 1 regressed, 2 invalid or incomparable)",
    )
    compare.add_argument("base", metavar="BASE.json", help="the baseline run's report.json")
    compare.add_argument("new", metavar="NEW.json", help="the new run's report.json")
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON instead of a table")
    compare.add_argument("--allow-changed-scenarios", action="store_true",
                         help="compare scenarios whose definition (scenarioDigest) differs instead of refusing them")
    compare.set_defaults(func=_compare)

    pack = sub.add_parser("pack", help="resource-pack tools")
    psub = pack.add_subparsers(dest="pack_command", required=True, metavar="ACTION")
    preport = psub.add_parser(
        "report", help="print the validated provenance view of a published eval report"
    )
    preport.add_argument("path")
    preport.set_defaults(func=_pack_report)

    report = sub.add_parser("report", help="eval report tools")
    rsub = report.add_subparsers(dest="report_command", required=True, metavar="ACTION")
    merge = rsub.add_parser("merge", help="merge the reports of a sharded run (--atlante-shard K/N) into one; "
                                          "exit 0/1 as the run, 2 mixed suites or run groups, 3 a missing or "
                                          "duplicated shard or trial")
    merge.add_argument("reports", nargs="+", metavar="SHARD_REPORT", help="each shard's report.json")
    merge.add_argument("-o", "--out", required=True, help="where to write the merged report.json")
    merge.set_defaults(func=_report_merge)
    md = rsub.add_parser("md", help="the report as GitHub-flavoured Markdown (verdict line, scenario table, "
                                    "regressions first; at most 65,536 characters) for a step summary or a PR comment")
    md.add_argument("report", metavar="REPORT_OR_RUN_DIR", help="report.json or its run directory")
    md.add_argument("-o", "--out", metavar="FILE", help="write the Markdown here (atomically) instead of stdout")
    md.add_argument("--url", metavar="URL", help="where the report's HTML view is published: the text links to it "
                                                 "and each scenario to its section")
    md.add_argument("--compare", metavar="BASELINE", help="a baseline report.json (or run directory): add "
                                                          "`atlante compare BASELINE REPORT`'s labels, regressions first")
    md.set_defaults(func=_report_md)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["eval"], ["selftest"]) and not {"-h", "--help"} & set(argv[1:2]):
        # Everything after `eval` belongs to pytest, options included; argparse would claim them.
        from pytest_atlante.run.evalcmd import eval_command

        return eval_command(argv[1:], selftest=argv[0] == "selftest")
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except DiagnosticError as exc:
        for diag in sorted(set(exc.diagnostics)):
            print(diag.render(), file=sys.stderr)
        if args.diagnostics_json:
            print(json.dumps(envelope(exc.diagnostics), indent=2), file=sys.stderr)
        return EXIT_VALIDATION
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
        print(f"atlante-internal-error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
