#!/usr/bin/env bash
# What the daemons really do, against what their systemd units allow (dist/*.service; PID 1
# here need not be systemd, so the units' seccomp filters cannot be applied as such).
# rpcie-exportd and rpcie-hostd run under strace in two network namespaces (tcp) and do their
# work: three attaches (edu with on-demand and mirror DMA, membar), the sample driver's DMA
# and interrupts, BAR reads, lspci, status, detach, SIGTERM. Then every system call either
# made is in its unit's SystemCallFilter= (allow lists minus ~deny lists, groups expanded by
# `systemd-analyze syscall-filter`), every socket() family is in RestrictAddressFamilies=,
# and no mapping is both writable and executable nor made executable later
# (MemoryDenyWriteExecute=yes).
# Not covered: the verbs and efa providers (no RDMA device here), pci-sysfs exports.
#   systemd_syscalls.sh DISTDIR BUILDDIR
. "$(dirname "$0")/lib.sh"
DIST=$(realpath "$1") B=$(realpath "$2")
for tool in strace systemd-analyze python3 lspci; do
  if ! command -v $tool >/dev/null; then
    [ "${CI:-}" = true ] && die "$tool is not installed (scripts/deps)"
    skip "$tool is not installed"
  fi
done
EXPORTD=$B/devexport/rpcie-exportd HOSTD=$B/frontend/rpcie-hostd RPCIE=$B/tools/rpcie
DRIVER=$B/tools/edu-driver/rpcie-edu-driver
[ -e /dev/fuse ] || skip "no /dev/fuse"
netns_pair rpcies 169.254.85
ON_DEV=(nsenter --net="/run/netns/$DEV") ON_CMP=(nsenter --net="/run/netns/$CMP")
HOST=169.254.85.1 MNT=$TMP/mnt SOCK=$TMP/hostd.sock
die() {
  echo "FAIL: $*" >&2
  for l in hostd exportd; do [ -f "$TMP/$l.log" ] && { echo "--- $l.log" >&2; tail -n 25 "$TMP/$l.log" >&2; }; done
  # The fabric's connection set-up as traced (rxm connects on the first send).
  for l in hostd exportd; do
    [ -f "$TMP/$l.st" ] && { echo "--- $l: last connects and accepts" >&2; grep -E ' (connect|accept4?)\(' "$TMP/$l.st" | tail -n 6 >&2; }
  done
  # The daemons are the tracers' children: the cleanup's SIGKILL of a tracer leaves its
  # daemon running, holding this test's output open (meson then waits out its timeout).
  for t in "${EXPORTER:-}" "${HOSTD_TRACER:-}"; do [ -n "$t" ] && pkill -9 -P "$t"; done
  exit 1
}
mkdir -p "$TMP/dev"
"$RPCIE" keygen "$TMP/psk" >/dev/null || die "keygen"
# LeakSanitizer cannot work under ptrace: off for the traced daemons of a sanitizer build.
TRACE=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -o)
# Traced, every system call stops both daemons for strace, on two CPUs that CI shares with a
# build: an attach's set-up (rxm connects on the first message, which takes both sides'
# progress) has taken the exporter's default 5 s. Both sides get 30 s here.
printf 'handshake-timeout = "30s"\n' >"$TMP/exportd.toml"
start_bg "${ON_DEV[@]}" "${TRACE[@]}" "$TMP/exportd.st" "$EXPORTD" --config "$TMP/exportd.toml" --listen "$HOST" \
  --provider tcp --psk-file "$TMP/psk" --export edu0=edu --export edu1=edu,dma=mirror --export mem0=membar,size=1M 2>>"$TMP/exportd.log"
EXPORTER=$LAST_PID
deadline=$((SECONDS + 30))
until grep -q "listening on" "$TMP/exportd.log" 2>/dev/null; do
  [ $SECONDS -ge $deadline ] && die "exporter did not start"
  sleep 0.1
done
start_bg "${ON_CMP[@]}" "${TRACE[@]}" "$TMP/hostd.st" "$HOSTD" --foreground --mount "$MNT" --control "$SOCK" \
  --dev-dir "$TMP/dev" --psk-file "$TMP/psk" --provider tcp --timeout 30 --state-file "$TMP/hostd-state.json" \
  2>>"$TMP/hostd.log"
HOSTD_TRACER=$LAST_PID
CLEANUPS+=("for _ in 1 2 3 4; do grep -q ' $MNT ' /proc/mounts && umount -l $MNT; done")
deadline=$((SECONDS + 30))
until "$RPCIE" status --control "$SOCK" >/dev/null 2>&1; do
  [ $SECONDS -ge $deadline ] && die "hostd did not start"
  sleep 0.1
done
for e in edu0 edu1 mem0; do "$RPCIE" attach --control "$SOCK" -r "$HOST" -e "$e" >/dev/null || die "attach $e"; done
"$DRIVER" "$TMP/dev/rpcie0" >"$TMP/drv0" 2>&1 || die "driver, on-demand DMA: $(cat "$TMP/drv0")"
"$DRIVER" "$TMP/dev/rpcie1" >"$TMP/drv1" 2>&1 || die "driver, mirror DMA: $(cat "$TMP/drv1")"
[ "$(dd if="$TMP/dev/rpcie2/resource0" bs=4096 count=4 status=none | wc -c)" = 16384 ] || die "membar read"
lspci -A linux-sysfs -O "sysfs.path=$MNT/pci" -vv >/dev/null 2>&1 || die "lspci"
"$RPCIE" status --control "$SOCK" >/dev/null || die "status"
"$RPCIE" detach --control "$SOCK" --all >/dev/null || die "detach"
# The daemons are the tracers' children (nsenter and env exec strace); SIGTERM is their
# clean stop.
kill -TERM "$(pgrep -P "$HOSTD_TRACER")" "$(pgrep -P "$EXPORTER")"
wait "$HOSTD_TRACER" || die "hostd's exit status on SIGTERM"
wait "$EXPORTER" || die "exportd's exit status on SIGTERM"
pass "the daemons ran traced: three attaches, both DMA modes, interrupts, lspci, detach, SIGTERM"

python3 - "$DIST" "$TMP" <<'PY' || die "a daemon does what its unit forbids"
import re, subprocess, sys
dist, tmp = sys.argv[1], sys.argv[2]
def expand(items):
    out = set()
    for item in items:
        if not item.startswith("@"):
            out.add(item)
            continue
        text = subprocess.run(["systemd-analyze", "syscall-filter", item], capture_output=True, text=True,
                              check=True).stdout
        lines = [l.strip() for l in text.splitlines()[1:]]
        out |= expand([l for l in lines if l and not l.startswith("#")])
    return out
def unit(name):
    allow, deny, families, wx = set(), set(), set(), False
    for line in open(f"{dist}/{name}.service"):
        key, _, value = line.strip().partition("=")
        if key == "SystemCallFilter":
            (deny if value.startswith("~") else allow).update(expand(value.lstrip("~").split()))
        elif key == "RestrictAddressFamilies":
            families.update(value.split())
        elif key == "MemoryDenyWriteExecute":
            wx = value == "yes"
    return allow - deny, families, wx
def trace(path):
    calls, families, wx = set(), set(), []
    for line in open(path):
        m = re.match(r"^\d+\s+(?:<\.\.\. )?([a-z0-9_]+)(?:\(| resumed>)", line)
        if m:
            calls.add(m.group(1))
        m = re.search(r"\bsocket\((AF_[A-Z0-9]+|\d+)", line)
        if m:
            families.add(m.group(1))
        # What MemoryDenyWriteExecute= refuses: a writable and executable mmap, and any
        # mprotect that makes memory executable.
        if re.match(r"^\d+\s+mmap\(", line) and "PROT_WRITE" in line and "PROT_EXEC" in line:
            wx.append(line.strip())
        if re.match(r"^\d+\s+(mprotect|pkey_mprotect)\(", line) and "PROT_EXEC" in line:
            wx.append(line.strip())
    return calls, families, wx
bad = False
for name, daemon in [("rpcie-hostd", "hostd"), ("rpcie-exportd", "exportd"), ("rpcie-exportd-unprivileged", "exportd")]:
    allowed, fams, no_wx = unit(name)
    calls, used_fams, wx = trace(f"{tmp}/{daemon}.st")
    if not allowed or not fams or len(calls) < 30:
        print(f"FAIL: {name}: nothing to compare (filter {len(allowed)}, families {len(fams)}, calls {len(calls)})")
        bad = True
        continue
    failed = False
    for what, extra in [("system calls outside SystemCallFilter", calls - allowed),
                        ("socket families outside RestrictAddressFamilies", used_fams - fams),
                        ("writable+executable mappings", set(wx) if no_wx else set())]:
        if extra:
            print(f"FAIL: {name} ({daemon}): {what}: {sorted(extra)[:10]}")
            failed = bad = True
    if not failed:
        print(f"{name}: {len(calls)} system calls, families {sorted(used_fams)}: within the unit's filters")
sys.exit(1 if bad else 0)
PY
pass "every system call, socket family and mapping of both daemons is within their units' filters"
