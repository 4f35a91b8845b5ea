#!/usr/bin/env bash
# librpcie-mmio.so and `rpcie run` in real processes, without the emulator or a FUSE mount:
# exit status and signals pass through, the program's own SIGSEGV handlers still get their
# faults, fork+exec keeps the preload, ordinary mappings are untouched. The register BAR is a
# stand-in: a sysfs attribute (4 KiB, mmap answers ENODEV as rpcie-hostd does) bind-mounted
# as DIR/resource0 beside DIR/remote, in a private mount namespace.
#   mmio_preload.sh RPCIE PRELOAD_CHECK
. "$(dirname "$0")/lib.sh"
RPCIE=$1 CHECK=$2

expect_rc 0 "rpcie run true" "$RPCIE" run true
[ ! -s "$TMP/out" ] && [ ! -s "$TMP/err" ] || die "rpcie run true wrote: $(cat "$TMP/out" "$TMP/err")"
expect_rc 7 "exit 7" "$RPCIE" run sh -c 'exit 7'
expect_rc 143 "SIGTERM" bash -c "\"$RPCIE\" run sh -c 'kill -TERM \$\$'; exit \$?"
expect_rc 0 "-- before PROGRAM" "$RPCIE" run -- sh -c 'test "$1" = --x' sh --x
pass "exit status and signals are the program's; nothing written"

expect_rc 127 "missing program" "$RPCIE" run /nonexistent/program
grep -q "^rpcie: error: /nonexistent/program: No such file or directory" "$TMP/err" || die "message: $(cat "$TMP/err")"
expect_rc 2 "no program" "$RPCIE" run
grep -q "^rpcie: error: " "$TMP/err" || die "usage message: $(cat "$TMP/err")"
RPCIE_MMIO_LIBRARY=/nonexistent/lib.so expect_rc 1 "missing library" "$RPCIE" run true
grep -q "cannot find librpcie-mmio.so (looked at /nonexistent/lib.so)" "$TMP/err" || die "library message: $(cat "$TMP/err")"
pass "errors: 127 for a missing program, 2 for usage, 1 for a missing library"

expect_rc 0 "LD_PRELOAD" "$RPCIE" run sh -c 'echo "$LD_PRELOAD"'
grep -q "^/.*/librpcie-mmio.so$" "$TMP/out" || die "LD_PRELOAD: $(cat "$TMP/out")"
LIB=$(cat "$TMP/out")
LIBC=$(ldd /bin/true | awk '/libc.so/ {print $3}')
LD_PRELOAD=$LIBC expect_rc 0 "LD_PRELOAD kept" "$RPCIE" run sh -c 'echo "$LD_PRELOAD"'
[ "$(cat "$TMP/out")" = "$LIB:$LIBC" ] || die "existing LD_PRELOAD: $(cat "$TMP/out")"
want=$(grep SigIgn /proc/self/status)
expect_rc 0 "SIGPIPE" "$RPCIE" run grep SigIgn /proc/self/status
[ "$(cat "$TMP/out")" = "$want" ] || die "ignored signals differ under rpcie run: $(cat "$TMP/out") vs $want"
RPCIE_MMIO_ERRORS=bogus expect_rc 0 "bad RPCIE_MMIO_ERRORS" "$RPCIE" run true
grep -q "^rpcie-mmio: RPCIE_MMIO_ERRORS=bogus: expected all-ones or sigbus" "$TMP/err" || die "$(cat "$TMP/err")"
pass "LD_PRELOAD prepended, signal dispositions inherited, a bad RPCIE_MMIO_ERRORS named"

for mode in sigaction signal loaded fork-exec plain; do
  expect_rc 0 "$mode" "$RPCIE" run "$CHECK" "$mode"
done
expect_rc 139 "NULL load" bash -c "\"$RPCIE\" run \"$CHECK\" null 2>/dev/null; exit \$?"
expect_rc 139 "raise(SIGSEGV)" bash -c "\"$RPCIE\" run \"$CHECK\" raise 2>/dev/null; exit \$?"
pass "own SIGSEGV handlers (sigaction, signal) get their faults; NULL still kills with SIGSEGV; fork+exec; plain mmap"

[ "$(id -u)" = 0 ] || skip "the stand-in register BAR needs root (a bind mount)"
command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
ATTR=/sys/devices/system/cpu/online
[ -r "$ATTR" ] || skip "no $ATTR"
mkdir "$TMP/dev" && : >"$TMP/dev/remote" && : >"$TMP/dev/resource0"
unshare -m bash -c "mount --bind $ATTR $TMP/dev/resource0 && \"$CHECK\" bar $TMP/dev" >"$TMP/out" 2>"$TMP/err"
[ $? = 1 ] && grep -q "beyond the BAR: got 0xffffffffffffffff errno 19," "$TMP/err" || die "without the library: $(cat "$TMP/err")"
unshare -m bash -c "mount --bind $ATTR $TMP/dev/resource0 && \"$RPCIE\" run \"$CHECK\" bar $TMP/dev" >"$TMP/out" 2>"$TMP/err" ||
  die "register BAR under rpcie run: $(cat "$TMP/out" "$TMP/err")"
pass "register BAR stand-in: $(cat "$TMP/out")"
