# Faults against the real stack, and four programs that keep the books on what was
# acknowledged meanwhile: shared by the fault matrix (fault_matrix.sh) and the soak
# (scripts/soak). Sourced after lib.sh.
#
# faults_start BUILDDIR PREFIX SUBNET SECONDS: the stack of lib.sh (exportd and hostd in two
# namespaces, tcp) with four devices attached, and on them the workers of fault_worker.py for
# at most SECONDS:
#   rpcie0 mmio    edu: posted register writes, then a read that must show the last one
#   rpcie1 edu     edu (DMA on-demand): the sample driver — factorial with an interrupt
#                  through `events`, DMA both ways through `dma`
#   rpcie2 edu     edu (DMA mirror): the same
#   rpcie3 membar  membar: 64 KiB slots acknowledged by fsync, hashed by the device on demand
# Their event logs are $TMP/ev.0 .. ev.3, their pids WPIDS.
FAULT_WORKER=$(dirname "${BASH_SOURCE[0]}")/fault_worker.py
FAULT_KINDS=(mmio edu edu membar)

faults_start() {
  local b=$1 prefix=$2 subnet=$3 seconds=$4 i
  command -v python3 >/dev/null || skip "python3 is not installed"
  command -v tc >/dev/null || skip "tc (iproute2) is not installed"
  command -v ss >/dev/null || skip "ss (iproute2) is not installed"
  stack_start "$b" "$prefix" "$subnet" edu0=edu edu1=edu edu2=edu,dma=mirror mem0=membar,size=16M,doorbell=on
  stack_attach edu0 edu1 edu2 mem0
  WPIDS=()
  for i in 0 1 2 3; do
    start_bg python3 "$FAULT_WORKER" "${FAULT_KINDS[$i]}" "$DEVDIR/rpcie$i" "$TMP/ev.$i" "$seconds" \
      "$b/tools/edu-driver/rpcie-edu-driver"
    WPIDS+=("$LAST_PID")
  done
}

# now: CLOCK_MONOTONIC in seconds, the workers' clock.
now() { python3 -c 'import time; print(f"{time.monotonic():.4f}")'; }

# resumes: the resumptions hostd's attachments counted (rpcie status), summed; 0 when hostd
# does not answer.
resumes() {
  "$RPCIE" status -o json 2>/dev/null |
    python3 -c 'import json, sys; print(sum(a.get("counters", {}).get("resumes", 0) for a in json.load(sys.stdin)["attachments"]))' 2>/dev/null ||
    echo 0
}

# generations: the four devices' generations, one line ("?" where unreadable).
generations() {
  local i g
  for i in 0 1 2 3; do
    g=$(sed -n 's/^generation //p' "$DEVDIR/rpcie$i/remote" 2>/dev/null)
    printf '%s ' "${g:-?}"
  done
}

# measure T0 TEND: what the workers logged since T0, as a JSON list (one object per worker):
# errors (errno names) and the first three with their text, losses, seconds from TEND to the
# first success after it (null: none yet), the last device verification.
measure() {
  python3 - "$TMP" "$1" "$2" <<'EOF'
import json, os, sys
tmp, t0, tend = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])

def lines_since(f, t0):
    """The lines of `f` from the first whose time may be >= t0: the records are in time order,
    so a binary search over byte offsets skips what came before (a soak's logs grow to MBs,
    and recovery is polled every 0.2 s)."""
    lo, hi = 0, os.fstat(f.fileno()).st_size
    while hi - lo > 65536:
        mid = (lo + hi) // 2
        f.seek(mid)
        f.readline()  # the rest of a line cut at mid
        line = f.readline()
        if line.endswith("\n") and json.loads(line)["t"] < t0:
            lo = mid
        else:
            hi = mid
    f.seek(lo)
    if lo:
        f.readline()  # a line cut at lo: older than t0
    for line in f:
        if line.endswith("\n"):  # the last one may be half written
            yield line

out = []
for i in range(4):
    w = {"errors": [], "why": [], "lost": [], "recovered": None, "verified": None}
    with open(f"{tmp}/ev.{i}") as f:
        for line in lines_since(f, t0):
            e = json.loads(line)
            if e["t"] < t0:
                continue
            if e["ev"] == "err":
                w["errors"].append(e["errno"])
                if len(w["why"]) < 3:
                    w["why"].append(e["errno"] + ": " + e["what"])
            elif e["ev"] == "lost":
                w["lost"].append(e["what"])
            elif e["ev"] == "ok" and e["t"] >= tend and w["recovered"] is None:
                w["recovered"] = round(e["t"] - tend, 2)
            elif e["ev"] == "verified":
                w["verified"] = e
    out.append(w)
print(json.dumps(out))
EOF
}

# hung: worker processes (and their children) left in state D: in it at each of ten looks
# over a second (a process waiting for a FUSE reply is in D for as long as that takes), as
# "PID:comm" words.
hung() {
  local p c i
  declare -A seen=()
  for ((i = 0; i < 10; i++)); do
    for p in "${WPIDS[@]}"; do
      for c in "$p" $(pgrep -P "$p"); do
        [ "$(awk '{print $3}' "/proc/$c/stat" 2>/dev/null)" = D ] && seen[$c]=$((${seen[$c]:-0} + 1))
      done
    done
    sleep 0.1
  done
  for c in "${!seen[@]}"; do
    [ "${seen[$c]}" -ge 10 ] && printf '%s ' "$c:$(cat "/proc/$c/comm" 2>/dev/null)"
  done
  return 0
}

# recovered NAME T0 TEND: waits (at most 40 s) until every workload has worked since TEND,
# then has the membar worker hash its acknowledged slots at the device (at most 20 s more).
# Sets MEASURE (measure T0 TEND) and HUNG (hung). Fails the test when either wait ends.
recovered() {
  local name=$1 t0=$2 tend=$3 deadline tv
  deadline=$((SECONDS + 40))
  until python3 -c 'import json,sys; sys.exit(0 if all(w["recovered"] is not None for w in json.loads(sys.argv[1])) else 1)' \
    "$(measure "$t0" "$tend")"; do
    [ $SECONDS -ge $deadline ] &&
      die "$name: not every workload works again 40 s after the fault: $(measure "$t0" "$tend"); in state D: $(hung)"
    sleep 0.2
  done
  tv=$(now)
  kill -USR1 "${WPIDS[3]}"
  deadline=$((SECONDS + 20))
  until python3 -c 'import json,sys; sys.exit(0 if json.loads(sys.argv[1])[3]["verified"] else 1)' \
    "$(measure "$tv" "$tv")"; do
    [ $SECONDS -ge $deadline ] && die "$name: the membar worker did not verify its slots at the device within 20 s"
    sleep 0.1
  done
  MEASURE=$(measure "$t0" "$tend")
  HUNG=$(hung)
}

# workers_end: asks the workers to end (SIGTERM; they verify once more) and checks their
# books: each ended within 30 s, worked, and lost nothing. Sets WORKER_TOTALS (JSON: ops,
# lost, bytes verified).
workers_end() {
  local deadline p i end
  kill -TERM "${WPIDS[@]}"
  deadline=$((SECONDS + 30))
  for p in "${WPIDS[@]}"; do
    while kill -0 "$p" 2>/dev/null; do
      [ $SECONDS -ge $deadline ] && die "a worker did not end within 30 s of SIGTERM; in state D: $(hung)"
      sleep 0.1
    done
  done
  for i in 0 1 2 3; do
    end=$(grep '"ev": "end"' "$TMP/ev.$i") || die "worker $i (${FAULT_KINDS[$i]}) wrote no end record"
    python3 -c 'import json,sys; e=json.loads(sys.argv[1]); sys.exit(0 if e["lost"] == 0 and e["ops"] > 0 else 1)' \
      "$end" || die "worker $i (${FAULT_KINDS[$i]}): $end"
  done
  WORKER_TOTALS=$(cat "$TMP"/ev.[0-3] | python3 -c 'import json,sys
ends = [json.loads(l) for l in sys.stdin if "\"end\"" in l]
print(json.dumps({k: sum(e[k] for e in ends) for k in ("ops", "lost", "bytes")}))')
}

# stack_stop: ends hostd and the exporter as an operator would (SIGTERM; SIGKILL after 10 s)
# and reaps them, so that no "Killed" notice of the shell follows the caller's last line.
stack_stop() {
  local p deadline
  for p in "$HOSTD_PID" "$EXPORTD_PID"; do
    kill -TERM "$p" 2>/dev/null
    deadline=$((SECONDS + 10))
    while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
}

# The faults. A link fault brings the veth down on both ends and tears down every
# established TCP connection in both namespaces (bootstrap and the fabric's), as a loss that
# outlasts TCP's patience would: a real connection loss, not a pause that retransmission
# rides out. The listening socket stays.
link_down() {
  ip -n "$CMP" link set "vc$$" down && ip -n "$DEV" link set "vd$$" down || die "veth down"
  "${ON_CMP[@]}" ss -K -t state established >/dev/null
  "${ON_DEV[@]}" ss -K -t state established >/dev/null
}
link_up() { ip -n "$DEV" link set "vd$$" up && ip -n "$CMP" link set "vc$$" up || die "veth up"; }
# shaped RATE: both ends of the veth limited to RATE (tc tbf); shaped off: removed.
shaped() {
  local ns
  for ns in "$CMP:vc$$" "$DEV:vd$$"; do
    if [ "$1" = off ]; then
      tc -n "${ns%%:*}" qdisc del dev "${ns#*:}" root || die "tc qdisc del"
    else
      tc -n "${ns%%:*}" qdisc add dev "${ns#*:}" root tbf rate "$1" burst 32kb latency 400ms || die "tc tbf"
    fi
  done
}
exportd_kill_restart() {
  kill -9 "$EXPORTD_PID"
  wait "$EXPORTD_PID" 2>/dev/null
  shm_regions_drop "$EXPORTD_PID"
  stack_exportd_start
}
hostd_kill_restart() {
  kill -9 "$HOSTD_PID"
  wait "$HOSTD_PID" 2>/dev/null
  stack_hostd_start
}
# mapper_killed: a program maps 4 MiB of the memory BAR (beyond the membar worker's slots),
# dirties every page and is SIGKILLed with them dirty; hostd must stay.
mapper_killed() {
  local mapper
  rm -f "$TMP/mapped"
  python3 - "$DEVDIR/rpcie3/resource0" "$TMP/mapped" <<'EOF' &
import mmap, os, sys, time
f = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(f, 4 << 20, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=8 << 20)
for off in range(0, 4 << 20, 4096):
    m[off:off + 8] = b"dirtypg!"
open(sys.argv[2], "w").write("mapped\n")
time.sleep(60)
EOF
  mapper=$!
  PIDS+=("$mapper")
  wait_file "$TMP/mapped" 20 || die "the mapping program did not map the memory BAR"
  kill -9 "$mapper"
  wait "$mapper" 2>/dev/null
  kill -0 "$HOSTD_PID" || die "hostd died with a program SIGKILLed while it held a mapping"
}
