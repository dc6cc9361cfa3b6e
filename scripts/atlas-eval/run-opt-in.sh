#!/usr/bin/env bash
# Opt-in Atlas evaluation runner: hands a run plan to ONE external agent executable and saves its
# stdout, byte for byte, as a receipt candidate.
#
#   run-opt-in.sh PLAN RECEIPTS [-- AGENT_ARG...]
#
# Required environment:
#   ATLAS_EVAL_AGENT_COMMAND  one executable: an explicit path, or a name that PATH resolves to a
#                             path containing "/". Never a builtin, function or command string; it
#                             is never evaluated as shell source.
#   ATLAS_EVAL_D4_MODE        "direct" or "worker"
#   ATLAS_EVAL_D4_RECEIPT     readable D4 concurrent-query receipt file
#
# The executable runs as:  AGENT PLAN [AGENT_ARG...]  with these exported:
#   ATLAS_EVAL_D4_MODE, ATLAS_EVAL_D4_RECEIPT (as given), ATLAS_EVAL_D4_RECEIPT_SHA256 (computed).
# Its stdout goes to a temporary file beside RECEIPTS that is renamed onto RECEIPTS only when the
# executable exits 0; otherwise RECEIPTS is left untouched and the executable's status is returned.
# The bytes are not parsed, completed or checked against the plan: `atlante benchmark summarize`
# is the validating boundary.
#
# Every rejection happens before the executable starts; each prints
# "run-opt-in: atlas-runner-<reason>: <message>" on stderr and exits 2.
set -euo pipefail

readonly PLAN_SCHEMA="agent-spec/atlas-eval/run-plan-v1"

reject() {
    printf 'run-opt-in: atlas-runner-%s: %s\n' "$1" "$2" >&2
    exit 2
}

usage() {
    printf 'usage: run-opt-in.sh PLAN RECEIPTS [-- AGENT_ARG...]\n' >&2
    exit 2
}

[[ $# -ge 2 ]] || usage
plan=$1
receipts=$2
shift 2
if [[ $# -gt 0 ]]; then
    [[ $1 == "--" ]] || usage
    shift
fi
agent_args=("$@")

# --- the agent command: exactly one external executable -------------------------------------
command_value=${ATLAS_EVAL_AGENT_COMMAND-}
[[ -n $command_value ]] ||
    reject command-missing "ATLAS_EVAL_AGENT_COMMAND is not set; export the path of one executable"
[[ $command_value != *$'\n'* && $command_value != *$'\r'* ]] ||
    reject command-newline "ATLAS_EVAL_AGENT_COMMAND contains a newline; give one executable path"
# Whitespace means arguments unless the whole value is itself an executable file path.
if [[ $command_value =~ [[:space:]] && ! ($command_value == */* && -f $command_value && -x $command_value) ]]; then
    reject command-arguments "ATLAS_EVAL_AGENT_COMMAND contains arguments ('$command_value'); pass agent arguments after --"
fi
kind=$(type -t -- "$command_value" 2>/dev/null || true)
case $kind in
    builtin | keyword)
        reject command-builtin "ATLAS_EVAL_AGENT_COMMAND '$command_value' is a shell $kind, not an external executable" ;;
    function)
        reject command-function "ATLAS_EVAL_AGENT_COMMAND '$command_value' is a shell function, not an external executable" ;;
    alias)
        reject command-alias "ATLAS_EVAL_AGENT_COMMAND '$command_value' is an alias, not an external executable" ;;
esac
if [[ $command_value == */* ]]; then
    executable=$command_value
else
    executable=$(type -P -- "$command_value" 2>/dev/null || true)
    [[ $executable == */* ]] ||
        reject command-unavailable "ATLAS_EVAL_AGENT_COMMAND '$command_value' does not resolve through PATH to an executable path"
fi
[[ -f $executable && -x $executable ]] ||
    reject command-unavailable "ATLAS_EVAL_AGENT_COMMAND '$command_value' is not an executable file"

# --- tools and inputs ------------------------------------------------------------------------
command -v jq >/dev/null 2>&1 ||
    reject jq-missing "jq is required to check the run plan; install jq"

[[ -f $plan && -r $plan ]] || reject plan-invalid "run plan '$plan' is not a readable file"
# --slurp: jq 1.6 `-e` exits 0 on empty input, so a zero-byte plan would pass a plain check; slurped,
# it is `[]` and fails `length == 1` (as do several JSON documents in one file).
plan_check='length == 1 and (.[0] | type == "object" and .schema == $schema and (.runs | type == "array" and length > 0))'
if ! jq -e --slurp --arg schema "$PLAN_SCHEMA" "$plan_check" "$plan" >/dev/null 2>&1; then
    reject plan-invalid "run plan '$plan' is malformed or empty: expected a $PLAN_SCHEMA object with a non-empty runs array"
fi

mode=${ATLAS_EVAL_D4_MODE-}
[[ $mode == direct || $mode == worker ]] ||
    reject d4-mode-invalid "ATLAS_EVAL_D4_MODE must be 'direct' or 'worker' (got '$mode')"

d4_receipt=${ATLAS_EVAL_D4_RECEIPT-}
[[ -n $d4_receipt && -f $d4_receipt && -r $d4_receipt ]] ||
    reject d4-receipt-missing "ATLAS_EVAL_D4_RECEIPT '$d4_receipt' is not a readable file"

if command -v sha256sum >/dev/null 2>&1; then
    d4_hash=$(sha256sum -- "$d4_receipt")
elif command -v shasum >/dev/null 2>&1; then
    d4_hash=$(shasum -a 256 -- "$d4_receipt")
else
    reject sha256-missing "no SHA-256 utility found; install sha256sum (coreutils) or shasum"
fi
d4_hash=${d4_hash%% *}
[[ $d4_hash =~ ^[0-9a-f]{64}$ ]] ||
    reject sha256-missing "the SHA-256 utility produced no usable digest for '$d4_receipt'"

receipts_dir=$(dirname -- "$receipts")
[[ -d $receipts_dir && -w $receipts_dir ]] ||
    reject receipts-dir "directory '$receipts_dir' for RECEIPTS does not exist or is not writable"

# --- run ---------------------------------------------------------------------------------------
# The temp file lives beside RECEIPTS so the final mv is a same-filesystem atomic rename.
tmp=$(mktemp "$receipts_dir/.$(basename -- "$receipts").XXXXXX")
trap 'rm -f -- "$tmp"' EXIT
# mktemp creates 0600; give the receipt the permissions a plain redirect would have.
chmod -- "$(printf '%04o' $((0666 & ~0$(umask))))" "$tmp"
trap 'exit 130' INT
trap 'exit 143' TERM

export ATLAS_EVAL_D4_MODE=$mode
export ATLAS_EVAL_D4_RECEIPT=$d4_receipt
export ATLAS_EVAL_D4_RECEIPT_SHA256=$d4_hash

status=0
"$executable" "$plan" "${agent_args[@]}" >"$tmp" || status=$?
if [[ $status -ne 0 ]]; then
    printf 'run-opt-in: agent exited with status %d; %s left unchanged\n' "$status" "$receipts" >&2
    exit "$status"
fi
mv -f -- "$tmp" "$receipts"
trap - EXIT
