#!/usr/bin/env bash
# Slurm's `rpcie` GRES (docs/slurm.md) on one node with Debian's munged, slurmctld and
# slurmd, started by hand: dist/slurm/rpcie-slurm as Prolog, Epilog and TaskProlog attaches a
# job's devices through rpcie-hostd, hands the task RPCIE_DEVICE, and detaches them when the
# job ends, also when it is cancelled; a job without the GRES gets no device.
#   slurm.sh SOURCEDIR BUILDDIR
#
#   namespace rpcies-dev-PID            namespace rpcies-cmp-PID
#   ┌─────────────────────────┐  veth   ┌──────────────────────────────────────────────┐
#   │ rpcie-exportd :7385     │<------->│ rpcie-hostd (FUSE at $TMP/mnt, $TMP/hostd.sock)│
#   │   edu0 edu1             │         │ munged ($TMP/munge/sock)                      │
#   │ 169.254.96.1            │         │ slurmctld :6817, slurmd :6818 (node rpcienode, │
#   └─────────────────────────┘         │   Gres=rpcie:2, $TMP/slurm/*.conf)            │
#                                       │ srun / sbatch / scancel      169.254.96.2     │
#                                       └──────────────────────────────────────────────┘
# Slurm's ports are those of the test's own namespace; every file is under $TMP (SLURM_CONF,
# munged's options): nothing under /etc is read for rpcie or written.
. "$(dirname "$0")/lib.sh"
SRC=$(realpath "$1") B=$(realpath "$2")
DRIVER=$B/tools/edu-driver/rpcie-edu-driver SCRIPT=$SRC/dist/slurm/rpcie-slurm
[ -x "$DRIVER" ] || die "sample driver $DRIVER not built"
[ -x "$SCRIPT" ] || die "$SCRIPT is missing or not executable"
command -v jq >/dev/null || skip "jq is not installed"
for p in munged slurmctld slurmd srun sbatch scancel scontrol sinfo; do
  command -v $p >/dev/null || skip "$p is not installed (Debian: munge slurmctld slurmd slurm-client)"
done

stack_start "$B" rpcies 169.254.96 edu0=edu edu1=edu
# Slurm resolves even numeric addresses with AI_ADDRCONFIG, which needs an address other
# than loopback: the veth's 169.254.96.2 is the node's and the controller's.
ADDR=169.254.96.2 NODE=rpcienode
SL=$TMP/slurm STATE=$TMP/rpcie-slurm
export SLURM_CONF=$SL/slurm.conf
# Processes left in the compute namespace (slurmstepd of a job, a task) go before it does.
CLEANUPS+=("ip netns pids $CMP | xargs -r kill -9")
# die with Slurm's and munged's logs too (stack_start's die shows the rpcie daemons').
die() {
  echo "FAIL: $*" >&2
  for l in "$TMP/rpcie-slurm.log" "$SL/slurmctld.log" "$SL/slurmd.log" "$TMP/munge/log"; do
    [ -f "$l" ] && { echo "--- $(basename "$l")" >&2; tail -n 20 "$l" >&2; }
  done
  stack_report
  exit 1
}

# --- munged with its own key and socket -----------------------------------------------------
mkdir -p "$TMP/munge" "$SL/spool" "$SL/state" "$SL/gres" "$TMP/jobs"
chmod 0755 "$TMP" "$TMP/munge" "$TMP/jobs" # the socket and job output, as in /run/munge
dd if=/dev/urandom of="$TMP/munge/key" bs=1024 count=1 status=none
chmod 0600 "$TMP/munge/key"
# --force: as root, and with its files under /tmp (munged checks the directories above them).
start_bg "${ON_CMP[@]}" munged --foreground --force --socket="$TMP/munge/sock" --key-file="$TMP/munge/key" \
  --pid-file="$TMP/munge/pid" --log-file="$TMP/munge/log" --seed-file="$TMP/munge/seed" >/dev/null 2>&1
wait_file "$TMP/munge/pid" 10 && [ -S "$TMP/munge/sock" ] || die "munged did not start"

# --- Slurm: one node with two rpcie GRES (index 0: edu0, index 1: edu1) ---------------------
touch "$SL/gres/rpcie0" "$SL/gres/rpcie1" # File= placeholders: they number the GRES
cat >"$SL/slurm.conf" <<EOF
ClusterName=rpcietest
SlurmctldHost=localhost($ADDR)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$TMP/munge/sock
StateSaveLocation=$SL/state
SlurmdSpoolDir=$SL/spool
SlurmctldPidFile=$SL/slurmctld.pid
SlurmdPidFile=$SL/slurmd.pid
SlurmctldLogFile=$SL/slurmctld.log
SlurmdLogFile=$SL/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
GresTypes=rpcie
PrologFlags=Alloc
Prolog=$SCRIPT
Epilog=$SCRIPT
TaskProlog=$SCRIPT
NodeName=$NODE NodeAddr=$ADDR CPUs=2 Gres=rpcie:2 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=10 State=UP
EOF
echo "Name=rpcie File=$SL/gres/rpcie[0-1]" >"$SL/gres.conf"
# rpcie.conf beside slurm.conf, where rpcie-slurm looks for it (from SLURM_CONF).
cat >"$SL/rpcie.conf" <<EOF
# the test's hostd and state directory
control = $SOCK
state-dir = $STATE
rpcie = $RPCIE
timeout = 20
log = $TMP/rpcie-slurm.log
device 0 $HOST edu0
device 1 $HOST:7385 edu1
EOF
cp "$SL/rpcie.conf" "$TMP/rpcie.conf.good"
chmod 0644 "$SL/rpcie.conf"
# Both log to their files (-D also copies the log to stderr).
start_bg "${ON_CMP[@]}" slurmctld -D 2>/dev/null
start_bg "${ON_CMP[@]}" slurmd -D -N "$NODE" 2>/dev/null
on_cmp() { "${ON_CMP[@]}" "$@"; }
node_state() { on_cmp scontrol show node "$NODE" | sed -n 's/.* State=\([^ ]*\).*/\1/p'; }
deadline=$((SECONDS + 30))
until [ "$(on_cmp sinfo -h -n "$NODE" -o %T 2>/dev/null)" = idle ]; do
  [ $SECONDS -ge $deadline ] && die "the node is not idle 30 s after start: $(on_cmp sinfo -N 2>&1)"
  sleep 0.1
done
pass "munged, slurmctld and slurmd up in $SECONDS s, node $NODE idle"

# attached: the number of hostd's attachments.
attached() { "$RPCIE" status -o json | jq '.attachments | length'; }
# holders EXPORT: the exporter's holder of EXPORT ("" when free).
holder() {
  "${ON_CMP[@]}" "$RPCIE" list -r "$HOST" --psk-file "$TMP/psk" -o json |
    jq -r --arg e "$1" '.exports[] | select(.name == $e) | .holder'
}
# all_free WHAT: within 15 s, hostd holds nothing, the exporter has edu0 and edu1 free and no
# job record is left.
all_free() {
  local deadline=$((SECONDS + 15))
  until [ "$(attached)" = 0 ]; do
    [ $SECONDS -ge $deadline ] && die "$1: still attached 15 s later: $("$RPCIE" status 2>&1)"
    sleep 0.1
  done
  until [ -z "$(holder edu0)$(holder edu1)" ]; do
    [ $SECONDS -ge $deadline ] && die "$1: the exporter still holds edu0 '$(holder edu0)' / edu1 '$(holder edu1)'"
    sleep 0.1
  done
  [ -z "$(ls "$STATE" 2>/dev/null)" ] || die "$1: job records left in $STATE: $(ls "$STATE")"
}

# --- srun --gres=rpcie:1: the driver passes on RPCIE_DEVICE, then the device is detached ----
# sh -c: RPCIE_DEVICE is the task's (the TaskProlog's), expanded there, not in this shell.
on_cmp timeout 60 srun --gres=rpcie:1 sh -c 'echo "RPCIE_DEVICE=$RPCIE_DEVICE"; exec "$0" "$RPCIE_DEVICE"' \
  "$DRIVER" >"$TMP/srun.out" 2>&1 || die "srun --gres=rpcie:1 rpcie-edu-driver: exit $?: $(cat "$TMP/srun.out")"
grep -qx "RPCIE_DEVICE=$DEVDIR/rpcie0" "$TMP/srun.out" ||
  die "RPCIE_DEVICE in the task is not $DEVDIR/rpcie0: $(cat "$TMP/srun.out")"
grep -q '^factorial *pass *12! = 479001600' "$TMP/srun.out" && grep -q '^dma *pass' "$TMP/srun.out" &&
  grep -qx 'result: pass' "$TMP/srun.out" || die "the driver did not pass: $(cat "$TMP/srun.out")"
pass "srun --gres=rpcie:1 rpcie-edu-driver \"\$RPCIE_DEVICE\": RPCIE_DEVICE=$DEVDIR/rpcie0, factorial and dma pass"
all_free "after the srun job"
pass "after the srun job: no attachment in rpcie status, edu0 and edu1 free at the exporter"

# --- a job without the GRES: no device, and none from the submitting shell -------------------
RPCIE_DEVICE=/dev/not-this-one on_cmp timeout 60 srun sh -c \
  'echo "RPCIE_DEVICE=${RPCIE_DEVICE-unset}"; "$0" status -o json' "$RPCIE" >"$TMP/nogres.out" 2>&1 ||
  die "srun without --gres: exit $?: $(cat "$TMP/nogres.out")"
grep -qx 'RPCIE_DEVICE=unset' "$TMP/nogres.out" || die "a job without the GRES got a device: $(cat "$TMP/nogres.out")"
[ "$(tail -n 1 "$TMP/nogres.out" | jq '.attachments | length')" = 0 ] ||
  die "a job without the GRES had an attachment while it ran: $(cat "$TMP/nogres.out")"
pass "srun without --gres: RPCIE_DEVICE unset in the task (the submitter's too), nothing attached"
# node_idle: within 15 s, the node is IDLE: no job on it, and no Epilog running (a job's
# end leaves it IDLE+COMPLETING until then; srun may return before the job ends).
node_idle() {
  local deadline=$((SECONDS + 15))
  until [ "$(node_state)" = IDLE ]; do
    [ $SECONDS -ge $deadline ] && die "the node is not idle 15 s later: $(on_cmp scontrol show node "$NODE")"
    sleep 0.1
  done
}
# A broken rpcie.conf fails no job without the GRES; the TaskProlog says what is wrong.
node_idle
echo "frobnicate = 1" >>"$SL/rpcie.conf"
bad_line=$(wc -l <"$SL/rpcie.conf")
on_cmp timeout 60 srun sh -c 'echo "RPCIE_DEVICE=${RPCIE_DEVICE-unset}"' >"$TMP/nogres.out" 2>&1 ||
  die "srun without --gres, rpcie.conf broken: exit $?: $(cat "$TMP/nogres.out")"
grep -qx 'RPCIE_DEVICE=unset' "$TMP/nogres.out" &&
  grep -qx "rpcie-slurm: error: $SL/rpcie.conf:$bad_line: unknown key 'frobnicate'" "$TMP/nogres.out" ||
  die "srun without --gres, rpcie.conf broken: $(cat "$TMP/nogres.out")"
# Its Epilog too reads the broken file: the job must end, its Epilog over, the node not drained.
deadline=$((SECONDS + 15))
until [ "$(node_state)" = IDLE ]; do
  [[ $(node_state) == *DRAIN* ]] &&
    die "a job without --gres drained the node with rpcie.conf broken: $(on_cmp scontrol show node "$NODE")"
  [ $SECONDS -ge $deadline ] && die "the node is not idle 15 s after srun: $(on_cmp scontrol show node "$NODE")"
  sleep 0.1
done
cp "$TMP/rpcie.conf.good" "$SL/rpcie.conf"
pass "rpcie.conf broken: a job without --gres still runs and ends, the node stays up; the TaskProlog prints 'rpcie.conf:$bad_line: unknown key' to it"

# --- a Prolog that cannot attach: the node drains, the job is held, nothing stays attached ---
# Index 1 names an export the exporter does not have: index 0's attach is undone.
sed -i 's/^device 1 .*/device 1 '"$HOST"' no-such-export/' "$SL/rpcie.conf"
printf '#!/bin/bash\necho "RPCIE_DEVICES=$RPCIE_DEVICES"\n' >"$TMP/jobs/short.sh"
job=$(on_cmp sbatch --parsable --gres=rpcie:2 -o "$TMP/jobs/%j.out" "$TMP/jobs/short.sh" 2>"$TMP/err") ||
  die "sbatch: $(cat "$TMP/err")"
job_state() { on_cmp scontrol show job "$job" | sed -n 's/.* JobState=\([^ ]*\).*/\1/p'; }
deadline=$((SECONDS + 30))
until [[ $(node_state) == *DRAIN* ]]; do
  [ $SECONDS -ge $deadline ] && die "a failing Prolog did not drain the node within 30 s: $(on_cmp scontrol show node "$NODE")"
  sleep 0.1
done
grep -q "prolog: job $job: error: GRES rpcie index 1: rpcie attach -r $HOST -e no-such-export: " "$TMP/rpcie-slurm.log" ||
  die "the Prolog's error is not in rpcie.conf's log: $(cat "$TMP/rpcie-slurm.log")"
all_free "after the failed Prolog"
on_cmp scontrol show job "$job" | grep -q 'Reason=launch_failed_requeued_held' ||
  die "job $job after a failed Prolog: $(on_cmp scontrol show job "$job")"
reason=$(on_cmp scontrol show node "$NODE" | sed -n 's/^ *Reason=//p')
pass "a Prolog that cannot attach (index 1: no-such-export) drains the node (Reason=$reason), holds job $job, detaches index 0 again; error in the log"
cp "$TMP/rpcie.conf.good" "$SL/rpcie.conf"
on_cmp scontrol update NodeName="$NODE" State=RESUME || die "scontrol update State=RESUME"
# Release the held job; a requeued job also waits 2 minutes (its BeginTime) unless told
# otherwise. Both again while it is pending: slurmctld may finish the requeue (and its hold)
# after the first release.
deadline=$((SECONDS + 30)) nudged=0
until [ "$(job_state)" = COMPLETED ]; do
  [ $SECONDS -ge $deadline ] && die "job $job not completed 30 s after the node's resume: $(on_cmp scontrol show job "$job"; on_cmp scontrol show node "$NODE")"
  [[ $(node_state) == *DRAIN* ]] && die "the node drained again: $(on_cmp scontrol show node "$NODE")"
  if [ "$(job_state)" = PENDING ] && [ $SECONDS -ge $nudged ]; then
    # Either may find the job started already: not an error.
    on_cmp scontrol release "$job" 2>/dev/null
    on_cmp scontrol update JobId="$job" StartTime=now 2>/dev/null
    nudged=$((SECONDS + 2))
  fi
  sleep 0.1
done
grep -qx "RPCIE_DEVICES=$DEVDIR/rpcie[01],$DEVDIR/rpcie[01]" "$TMP/jobs/$job.out" ||
  die "job $job after its release: $(cat "$TMP/jobs/$job.out")"
all_free "after job $job"
pass "configuration fixed, node resumed, job released: it ran with both devices, all free after it"

# --- sbatch --gres=rpcie:2, cancelled while it runs -----------------------------------------
# The batch script runs the driver on each device with srun, as a user's would, then sleeps
# until it is cancelled.
cat >"$TMP/jobs/job.sh" <<EOF
#!/bin/bash
echo "RPCIE_DEVICES=\$RPCIE_DEVICES"
for d in \${RPCIE_DEVICES//,/ }; do srun --overlap "$DRIVER" "\$d" || exit 1; done
echo drivers-passed
sleep 120
EOF
job=$(on_cmp sbatch --parsable --gres=rpcie:2 -o "$TMP/jobs/%j.out" "$TMP/jobs/job.sh" 2>"$TMP/err") ||
  die "sbatch: $(cat "$TMP/err")"
deadline=$((SECONDS + 60))
until grep -q drivers-passed "$TMP/jobs/$job.out" 2>/dev/null; do
  [ $SECONDS -ge $deadline ] && die "batch job $job: the drivers did not pass within 60 s: $(cat "$TMP/jobs/$job.out" 2>&1)"
  [ -z "$(on_cmp squeue -h -j "$job" -t PD,R,CG -o %T 2>/dev/null)" ] && die "batch job $job ended early: $(cat "$TMP/jobs/$job.out")"
  sleep 0.1
done
grep -qx "RPCIE_DEVICES=$DEVDIR/rpcie[01],$DEVDIR/rpcie[01]" "$TMP/jobs/$job.out" ||
  die "batch job $job: RPCIE_DEVICES: $(cat "$TMP/jobs/$job.out")"
[ "$(grep -cx 'result: pass' "$TMP/jobs/$job.out")" = 2 ] || die "batch job $job: $(cat "$TMP/jobs/$job.out")"
[ "$("$RPCIE" status -o json | jq -r '[.attachments[].export] | sort | join(",")')" = edu0,edu1 ] ||
  die "batch job $job running: hostd's attachments: $("$RPCIE" status 2>&1)"
[ -n "$(holder edu0)" ] && [ -n "$(holder edu1)" ] || die "batch job $job running: the exporter does not hold edu0 and edu1"
pass "sbatch --gres=rpcie:2: edu0 and edu1 attached, RPCIE_DEVICES has both, the driver passes on each"
on_cmp scancel "$job" || die "scancel $job"
deadline=$((SECONDS + 30))
until [ -z "$(on_cmp squeue -h -j "$job" -t PD,R,CG -o %T 2>/dev/null)" ]; do
  [ $SECONDS -ge $deadline ] && die "batch job $job still listed 30 s after scancel"
  sleep 0.1
done
all_free "after scancel of batch job $job"
pass "scancel of the running job: no attachment in rpcie status, edu0 and edu1 free at the exporter"

# --- an Epilog that did not finish: the next Prolog for the index detaches the leftover ------
# As if job 999's Epilog never ran: edu0 attached, its record in the state directory.
"${ON_CMP[@]}" "$RPCIE" attach -r "$HOST" -e edu0 >"$TMP/out" 2>"$TMP/err" || die "attach edu0 by hand: $(cat "$TMP/err")"
read -r dev path _ <"$TMP/out"
mkdir -p "$STATE" && echo "0 $dev $path edu0" >"$STATE/job-999"
on_cmp timeout 60 srun --gres=rpcie:1 sh -c 'exec "$0" "$RPCIE_DEVICE"' "$DRIVER" >"$TMP/srun.out" 2>&1 ||
  die "srun --gres=rpcie:1 over job 999's leftover: exit $?: $(cat "$TMP/srun.out")"
grep -q "GRES rpcie index 0: job-999 still holds it ($dev; its Epilog did not finish): detaching it" "$TMP/rpcie-slurm.log" &&
  grep -q "prolog: job [0-9]*: detached $dev (edu0)" "$TMP/rpcie-slurm.log" ||
  die "the Prolog did not say it detached job 999's leftover: $(cat "$TMP/rpcie-slurm.log")"
all_free "after the job that found job 999's leftover"
pass "a leftover of a job whose Epilog did not finish ($dev, edu0) is detached by the next Prolog for its index; the job runs"
