#!/usr/bin/env bash
# `rpcie fabric`: the JSON lists tcp (tcp;ofi_rxm, present wherever libfabric is) as
# supported; -p narrows the list; usage errors exit 2; no usable provider exits 1 (made
# deterministic by FI_PROVIDER, which hides the others from libfabric).
#
# Usage: rpcie_fabric.sh RPCIE
set -u
. "$(dirname "$0")/lib.sh"
RPCIE=$1
command -v jq >/dev/null || skip "jq is not installed"
# An FI_PROVIDER of the caller's would hide providers from libfabric and from this test.
unset FI_PROVIDER

run() { local want=$1 what=$2; shift 2; expect_rc "$want" "$what" "$RPCIE" "$@"; }  # run WANT DESCRIPTION ARGS...

run 0 "fabric -o json" fabric -o json
jq -e . "$TMP/out" >/dev/null || die "fabric -o json is not JSON: $(cat "$TMP/out")"
jq -e '.providers | type == "array"' "$TMP/out" >/dev/null || die "no providers array"
jq -e '[.providers[] | select(.provider == "tcp" and .libfabric == "tcp;ofi_rxm" and .supported)] | length > 0' \
  "$TMP/out" >/dev/null || die "tcp is not listed as supported: $(cat "$TMP/out")"
jq -e 'all(.providers[]; has("provider") and has("fabric") and has("domain") and has("addr_format") and has("supported"))' \
  "$TMP/out" >/dev/null || die "a row lacks a field: $(cat "$TMP/out")"
[ ! -s "$TMP/err" ] || die "fabric -o json wrote to stderr: $(cat "$TMP/err")"
pass "fabric -o json lists tcp as supported"

run 0 "-o json before the command" -o json fabric -p tcp
jq -e 'all(.providers[]; .provider == "tcp") and (.providers | length > 0)' "$TMP/out" >/dev/null ||
  die "-p tcp lists other providers: $(cat "$TMP/out")"
run 0 "fabric (text)" fabric
head -n 1 "$TMP/out" | grep -q '^PROVIDER ' || die "text output has no header: $(cat "$TMP/out")"
grep -q '^tcp .*tcp;ofi_rxm .* yes$' "$TMP/out" || die "text output lacks a supported tcp line: $(cat "$TMP/out")"
run 0 "fabric --all" fabric --all -o json
jq -e . "$TMP/out" >/dev/null || die "fabric --all -o json is not JSON"
pass "-p, text output and --all"

run 2 "fabric --bogus" fabric --bogus
grep -q '^rpcie: error: ' "$TMP/err" || die "fabric --bogus: stderr is '$(cat "$TMP/err")'"
[ ! -s "$TMP/out" ] || die "fabric --bogus wrote to stdout"
run 2 "fabric -p nonsense" fabric -p nonsense
grep -q '^rpcie: error: unknown provider "nonsense"' "$TMP/err" || die "-p nonsense: stderr is '$(cat "$TMP/err")'"
run 2 "fabric -o yaml" fabric -o yaml
pass "usage errors exit 2"

FI_PROVIDER=shm run 1 "tcp hidden by FI_PROVIDER=shm" fabric -p tcp -o json
grep -q '^rpcie: error: no usable libfabric provider' "$TMP/err" || die "no provider: stderr is '$(cat "$TMP/err")'"
jq -e '.providers == []' "$TMP/out" >/dev/null || die "no provider: stdout is $(cat "$TMP/out")"
pass "no usable provider exits 1"
