"""Harness variants: the arms of one run (configuration 0.4, ``variants``).

The unmodified configuration is the arm ``control``; each named variant is a JSON Merge Patch
(RFC 7396) of the ``harness`` section and of the eval section's ``host`` / ``model``, or a
replicate of another arm (``replicateOf``: the same harness run again, whose disagreement with its
twin is the run's noise floor).  Only the harness, the host and the model differ between arms: the
budget, scenarios, isolation and network are the run's, so a pass-rate difference between two arms
is the change and chance, nothing else.

Everything is checked here, before any build or session, with diagnostics located in
``atlante.jsonc``: a reserved or unknown name, a replicate that also patches, a patch whose result
is not a valid harness or that removes what the control does not define, and a variant that
changes nothing (equal harness, host and model) without saying it is a replicate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from pytest_atlante.diagnostics import Diagnostic, json_path
from pytest_atlante.hosts.names import HostName
from pytest_atlante.suite.config import EvalSection, Harness, ProjectConfig, Variant
from pytest_atlante.suite.documents import validation_diagnostics

CONTROL = "control"
CODE = "eval-variant-invalid"
HINT = "see Variants under Configuration in docs/reference.md"


@dataclass(frozen=True)
class Arm:
    """One arm of a run: the harness it builds and runs, under which host and model."""

    name: str
    harness: Harness
    host: HostName
    model: str | None
    # The arm this one repeats unchanged (an A/A replicate), else None.
    replicate_of: str | None = None
    # The variant whose patched harness this arm runs (its own name, or its replicated arm's);
    # None when it runs the control's harness, whose build it then shares.
    harness_of: str | None = None

    @property
    def is_control(self) -> bool:
        return self.name == CONTROL


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396: ``patch`` applied to ``target`` (neither is modified); ``null`` removes a member."""
    if not isinstance(patch, Mapping):
        return patch
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _removals_of_nothing(target: Any, patch: Mapping[str, Any], path: list[str]) -> list[list[str]]:
    """Paths a patch sets to ``null`` that the target does not hold: most likely a misspelt name,
    which would otherwise leave the variant silently equal to the control."""
    found: list[list[str]] = []
    here = target if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None and key not in here:
            found.append([*path, key])
        elif isinstance(value, Mapping) and isinstance(here.get(key), Mapping):
            found.extend(_removals_of_nothing(here[key], value, [*path, key]))
    return found


def resolve_arms(config: ProjectConfig, control: EvalSection, file: str) -> tuple[list[Arm], list[Diagnostic]]:
    """The control and every declared variant, in document order, with every problem located."""
    arms = [Arm(CONTROL, config.harness, control.host, control.model)]
    variants = config.variants or {}
    problems: list[Diagnostic] = []
    if CONTROL in variants:
        problems.append(Diagnostic(file, json_path(["variants", CONTROL]), CODE,
                                   "'control' is the reserved name of the unmodified configuration",
                                   "give the variant another name; the control always runs"))
    base = config.harness.model_dump(mode="json", exclude_unset=True)
    patched: dict[str, Arm] = {}
    for name, variant in variants.items():
        if name == CONTROL or variant.replicateOf is not None:
            continue
        arm, found = _patched_arm(name, variant, base, arms[0], file)
        problems.extend(found)
        if arm is not None:
            patched[name] = arm
    for name, variant in variants.items():
        if name == CONTROL:
            continue
        if variant.replicateOf is None:
            if name in patched:
                arms.append(patched[name])
            continue
        replica, found = _replicate(name, variant, arms[0], patched, variants, file)
        problems.extend(found)
        if replica is not None:
            arms.append(replica)
    return arms, problems


def _patched_arm(name: str, variant: Variant, base: dict[str, Any], control: Arm, file: str
                 ) -> tuple[Arm | None, list[Diagnostic]]:
    where = ["variants", name]
    problems = [Diagnostic(file, json_path([*where, "harness", *path]), CODE,
                           f"the patch removes {'.'.join(path)!r}, which the control's harness does not define",
                           "fix the name (a removal names a part of the harness section)")
                for path in _removals_of_nothing(base, variant.harness or {}, [])]
    try:
        harness = Harness.model_validate(merge_patch(base, variant.harness or {}))
    except ValidationError as exc:
        located = validation_diagnostics(exc, file, CODE, "the patched harness must be a valid harness section")
        return None, problems + [Diagnostic(d.file, d.location.replace("$", json_path([*where, "harness"]), 1),
                                            d.code, d.message, d.hint) for d in located]
    given = variant.eval.model_fields_set if variant.eval is not None else set()
    host = variant.eval.host if variant.eval is not None and variant.eval.host is not None else control.host
    model = variant.eval.model if variant.eval is not None and "model" in given else control.model
    if "host" in given and variant.eval is not None and variant.eval.host is None:
        problems.append(Diagnostic(file, json_path([*where, "eval", "host"]), CODE, "a variant cannot remove the host",
                                   "name the host this arm runs under, or leave eval.host out"))
    if harness == control.harness and host == control.host and model == control.model:
        problems.append(Diagnostic(file, json_path(where), CODE,
                                   f"variant {name!r} changes nothing: the same harness, host and model as the control",
                                   f"change its harness, host or model, or declare \"replicateOf\": \"{CONTROL}\" for an A/A run"))
    own = name if harness != control.harness else None
    return Arm(name, harness, host, model, None, own), problems


def _replicate(name: str, variant: Variant, control: Arm, patched: dict[str, Arm], variants: Mapping[str, Variant],
               file: str) -> tuple[Arm | None, list[Diagnostic]]:
    where = ["variants", name]
    target = variant.replicateOf
    assert target is not None
    problems: list[Diagnostic] = []
    if variant.harness is not None or variant.eval is not None:
        problems.append(Diagnostic(file, json_path(where), CODE,
                                   f"replicate {name!r} also patches the harness or eval section",
                                   f"a replicate runs {target!r} again unchanged: drop its patch, or drop replicateOf"))
    if target == name or (target != CONTROL and target not in variants):
        known = ", ".join([CONTROL, *(n for n in variants if n != name)])
        problems.append(Diagnostic(file, json_path([*where, "replicateOf"]), CODE,
                                   f"replicateOf names {target!r}, which is not another arm of this configuration",
                                   f"name one of: {known}"))
        return None, problems
    if target != CONTROL and variants[target].replicateOf is not None:
        problems.append(Diagnostic(file, json_path([*where, "replicateOf"]), CODE,
                                   f"{target!r} is itself a replicate", "replicate the arm it repeats instead"))
        return None, problems
    original = control if target == CONTROL else patched.get(target)
    if original is None:  # the target's own patch is invalid, and reported
        return None, problems
    arm = Arm(name, original.harness, original.host, original.model, target, original.harness_of)
    return (arm if not problems else None), problems


def arms_named(arms: list[Arm], wanted: str | None) -> tuple[list[Arm], list[str]]:
    """The arms ``--atlante-variants`` selects (``all`` or a comma-separated list; the control
    always runs) and the names it gives that no arm has."""
    if not wanted:
        return arms[:1], []
    if wanted.strip() == "all":
        return list(arms), []
    names = [n.strip() for n in wanted.split(",") if n.strip()]
    known = {arm.name for arm in arms}
    unknown = [n for n in names if n not in known]
    chosen = {CONTROL, *names}
    return [arm for arm in arms if arm.name in chosen], unknown
