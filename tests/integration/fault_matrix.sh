#!/usr/bin/env bash
# The fault matrix (issue 13 point 5): real faults against the real stack while four programs
# work through hostd's files, each checking what was acknowledged.
#
#   netns rpcief-dev-PID                      netns rpcief-cmp-PID
#   ┌─────────────────────────────┐ veth/tcp ┌────────────────────────────────────────┐
#   │ rpcie-exportd               │<────────>│ rpcie-hostd --timeout 2 (FUSE $MNT)    │
#   │  edu0 edu1 (DMA on-demand)  │169.254.92│  rpcie0..3                              │
#   │  edu2 (DMA mirror) mem0     │          │                                        │
#   └─────────────────────────────┘          └────────────────────────────────────────┘
#   workloads (fault_worker.py, in the root namespace, on $DEVDIR/rpcieN):
#     rpcie0 mmio: posted register writes, then a read that must show the last one
#     rpcie1 edu (on-demand DMA), rpcie2 edu (mirror DMA): the sample driver in a loop —
#            factorial with an interrupt through `events`, DMA both ways through `dma`
#     rpcie3 membar: 64 KiB writes acknowledged by fsync, hashed by the device after each fault
#
# Faults, one after another: the link down 1 s and 8 s (veth down on both ends and every
# established TCP connection torn down with `ss -K`: a real connection loss), the link shaped
# to 1 Mbit/s (tc tbf) for 5 s, the exporter SIGKILLed mid write and restarted, SIGSTOPped
# 2 s and 10 s, hostd SIGKILLed mid I/O and restarted (it re-attaches from its state file),
# and a program SIGKILLed with dirty pages of a mapped memory BAR.
# Every row must show: no acknowledged write lost (a reset the program was told of by an error
# is not a loss), no process hung (state D, or a worker that does not end when asked), every
# workload working again within 40 s of the fault's end; and each row what it must (the
# attachment kept through a short stall, a fresh device after the lease, ENOTCONN/EIO when
# hostd dies, ...). The table goes to stdout, and into FAULT_MATRIX_DOC (docs/reliability.md)
# between its fault-matrix markers when that variable names it.
#   fault_matrix.sh BUILDDIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/faults.sh"
B=$1
faults_start "$B" rpcief 169.254.92 900

# row NAME EXPECTED CHECK T0 TEND: waits until every workload works again and the device has
# hashed the membar slots (recovered), then asserts the row — nothing lost, nothing hung, and
# CHECK, a python expression over `w` (the workers' measures) and `gen_before`/`gen_after`
# (the generations) — and records it in $TMP/rows.jsonl.
row() {
  local name=$1 expected=$2 check=$3 t0=$4 tend=$5
  recovered "$name" "$t0" "$tend"
  python3 - "$name" "$expected" "$check" "$MEASURE" "$GEN_BEFORE" "$(generations)" "$HUNG" "$TMP/rows.jsonl" <<'EOF' ||
import json, sys
name, expected, check, m, gb, ga, hung, rows = sys.argv[1:9]
w = json.loads(m)
gen_before, gen_after = gb.split(), ga.split()
lost = sum(len(x["lost"]) for x in w)
errors = sorted({e for x in w for e in x["errors"]})
recovery = max(x["recovered"] for x in w)
seen = ("told " + "/".join(errors) if errors else "no error (a delay at most)") + (
    f"; generation {' '.join(gen_before)} -> {' '.join(gen_after)}" if gen_after != gen_before else "; same generation")
row = {"fault": name, "expected": expected, "lost": lost, "hung": len(hung.split()), "recovery_s": recovery,
       "seen": seen, "slots_verified": w[3]["verified"]["slots"] if w[3]["verified"] else 0}
print(f"row: {json.dumps(row)}")
bad = []
if lost:
    bad.append(f"{lost} acknowledged writes lost: " + "; ".join(l for x in w for l in x["lost"]))
if hung:
    bad.append(f"processes in state D: {hung}")
if w[3]["verified"] is None:
    bad.append("the membar slots were not verified at the device after the fault")
if not eval(check, {}, {"w": w, "gen_before": gen_before, "gen_after": gen_after}):
    bad.append(f"expected {expected}: {check} does not hold (generations {gb}-> {ga}, errors {errors}; first errors"
               f" of each workload: {[x['why'] for x in w]})")
if bad:
    print(f"FAIL: {name}: " + "; ".join(bad))
    sys.exit(1)
with open(rows, "a") as f:
    f.write(json.dumps(row) + "\n")
EOF
    die "$name: see above"
  pass "$name: $(tail -n 1 "$TMP/rows.jsonl")"
}
begin() { GEN_BEFORE=$(generations) T0=$(now); }
# Let the workloads run a little between faults (and warm up before the first).
settle() { sleep 1; }
settle

# A short link loss: client and exporter resume the attachment over a new connection (device
# state, windows and mirrors kept; what was not performed sent again once): the programs see
# a delay, not an error, and hostd counts the resumption.
begin
RESUMES_BEFORE=$(resumes)
link_down
sleep 1
link_up
row "link down 1 s (veth + ss -K)" "< lease: resumed, nothing lost, no error" \
  'gen_after == gen_before and not any(x["errors"] for x in w)' "$T0" "$(now)"
[ "$(resumes)" -gt "$RESUMES_BEFORE" ] || die "link down 1 s: rpcie status counts no resumption ($(resumes))"
settle

begin
link_down
sleep 8
link_up
row "link down 8 s (veth + ss -K)" "> lease: EIO on old files, fresh device on reopen" \
  'gen_after != gen_before and "EIO" in w[0]["errors"] and "EIO" in w[3]["errors"] and all(x["errors"] for x in w)' \
  "$T0" "$(now)"
settle

begin
shaped 1mbit
sleep 5
shaped off
row "tc tbf 1 Mbit/s for 5 s" "completes or times out cleanly" 'True' "$T0" "$(now)"
settle

begin
exportd_kill_restart
row "exporter SIGKILL mid write, restarted" "EIO on old files, fresh device on reopen" \
  'gen_after != gen_before and all(x["errors"] for x in w)' "$T0" "$(now)"
settle

begin
stop_wait "$EXPORTD_PID" || die "the exporter did not stop"
sleep 2
kill -CONT "$EXPORTD_PID"
row "exporter SIGSTOP 2 s" "< lease: late or lone EIO, attachment and memory kept" \
  'gen_after == gen_before' "$T0" "$(now)"
settle

# Longer than the lease: the client finds the link lost (no heartbeat echo within a lease)
# and tries to resume for a lease more. An exporter that continues within that (it kept the
# device: it could not even notice) resumes the attachment; later, the client has given up
# and gets a fresh device. Either way every program was told (its requests timed out).
begin
RESUMES_BEFORE=$(resumes)
stop_wait "$EXPORTD_PID" || die "the exporter did not stop"
sleep 10
kill -CONT "$EXPORTD_PID"
row "exporter SIGSTOP 10 s" "> lease: EIO while stopped; then resumed, or a fresh device" \
  'all(x["errors"] for x in w)' "$T0" "$(now)"
[ "$(generations)" != "$GEN_BEFORE" ] || [ "$(resumes)" -gt "$RESUMES_BEFORE" ] ||
  die "exporter SIGSTOP 10 s: neither resumed nor a fresh device (generations $GEN_BEFORE)"
settle

begin
kill -9 "$HOSTD_PID"
wait "$HOSTD_PID" 2>/dev/null
h=$(hung)
[ -z "$h" ] || die "hostd SIGKILL: processes left in state D: $h"
stack_hostd_start
row "hostd SIGKILL mid I/O, restarted" "ENOTCONN/EIO to callers, none in D, re-attached from the state file" \
  'all(x["errors"] and set(x["errors"]) <= {"ENOTCONN", "ECONNABORTED", "EIO", "ENOENT"} for x in w)' "$T0" "$(now)"
settle

begin
mapper_killed
row "program SIGKILL with a mapped memory BAR" "hostd and the other programs unaffected" \
  'not any(x["errors"] for x in w) and gen_after == gen_before' "$T0" "$(now)"

workers_end

TABLE=$TMP/table.md
python3 - "$TMP/rows.jsonl" >"$TABLE" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| fault | expected | acknowledged writes lost | processes hung | time to recovery (s) | seen |")
print("|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['fault']} | {r['expected']} | {r['lost']} | {r['hung']} | {r['recovery_s']:.2f} | {r['seen']} |")
EOF
cat "$TABLE"
if [ -n "${FAULT_MATRIX_DOC:-}" ]; then
  python3 - "$FAULT_MATRIX_DOC" "$TABLE" "$(git -C "$(dirname "$0")" describe --always --dirty 2>/dev/null)" <<'EOF' ||
import sys
doc, table, rev = sys.argv[1:4]
text = open(doc).read()
begin, end = "<!-- fault-matrix:begin -->", "<!-- fault-matrix:end -->"
if begin not in text or end not in text:
    sys.exit(f"{doc} has no fault-matrix markers")
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
block = (f"{begin}\nMeasured at `{rev}` (release build, this 2-core VM) by\n"
         f"`FAULT_MATRIX_DOC=docs/reliability.md bash tests/integration/fault_matrix.sh build/gcc-release`:\n\n")
open(doc, "w").write(head + block + open(table).read() + end + tail)
EOF
    die "could not write the table into $FAULT_MATRIX_DOC"
fi
pass "fault matrix: $(wc -l <"$TMP/rows.jsonl") rows, nothing lost, nothing hung, every workload back; $WORKER_TOTALS"
