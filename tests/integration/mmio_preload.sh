#!/usr/bin/env bash
# librpcie-mmio.so and `rpcie run` in real processes, without the emulator or a FUSE mount:
# exit status and signals pass through, the program's own SIGSEGV handlers still get their
# faults, fork+exec keeps the preload, ordinary mappings are untouched. The register BAR is a
# stand-in: a sysfs attribute (4 KiB, mmap answers ENODEV as rpcie-hostd does) bind-mounted
# as DIR/resource0 beside DIR/remote, in a private mount namespace.
# The /sys/bus/pci/devices paths are checked against a stand-in RPCIE_MOUNT directory.
#   mmio_preload.sh RPCIE PRELOAD_CHECK PATHS_CHECK
. "$(dirname "$0")/lib.sh"
RPCIE=$1 CHECK=$2 PATHS=$3

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

# /sys/bus/pci/devices/<rpcie address> beyond open(): relative to directory descriptors, after
# chdir, scandir/fdopendir listings, the __xstat family; Python's dir_fd forms; find; ls -l.
FAKE=$TMP/mount/pci/devices
mkdir -p "$FAKE/10000:00:00.0" "$FAKE/10001:00:01.0" && printf '0x1234\n' >"$FAKE/10000:00:00.0/vendor" &&
  head -c 4096 /dev/zero >"$FAKE/10000:00:00.0/resource0" || die "stand-in mount"
export RPCIE_MOUNT=$TMP/mount
expect_rc 0 "paths_check" "$RPCIE" run "$PATHS"
grep -q "^paths: ok$" "$TMP/out" || die "paths_check: $(cat "$TMP/out" "$TMP/err")"
expect_rc 1 "paths_check without the library" "$PATHS"
expect_rc 0 "python dir_fd" "$RPCIE" run python3 -c '
import os
fd = os.open("/sys/bus/pci/devices", os.O_RDONLY | os.O_DIRECTORY)
print(*sorted(n for n in os.listdir(fd) if n.startswith("1000")))
print(*sorted(e.name for e in os.scandir(fd) if e.name.startswith("1000")))
print(os.stat("10000:00:00.0/resource0", dir_fd=fd).st_size)
print(os.read(os.open("10000:00:00.0/vendor", os.O_RDONLY, dir_fd=fd), 16).decode().strip())
print(os.access("10000:00:00.0/vendor", os.R_OK, dir_fd=fd), os.readlink("10000:00:00.0", dir_fd=fd))'
want=$(printf '%s\n' "10000:00:00.0 10001:00:01.0" "10000:00:00.0 10001:00:01.0" 4096 0x1234 "True $FAKE/10000:00:00.0")
[ "$(cat "$TMP/out")" = "$want" ] || die "python dir_fd: $(cat "$TMP/out" "$TMP/err")"
expect_rc 0 "find" "$RPCIE" run find /sys/bus/pci/devices/ -maxdepth 1 -name '1000*'
[ "$(sort "$TMP/out")" = "$(printf '%s\n' /sys/bus/pci/devices/10000:00:00.0 /sys/bus/pci/devices/10001:00:01.0)" ] ||
  die "find -maxdepth 1: $(cat "$TMP/out" "$TMP/err")"
expect_rc 0 "find in a function" "$RPCIE" run find /sys/bus/pci/devices/10000:00:00.0/ -name vendor
[ "$(cat "$TMP/out")" = /sys/bus/pci/devices/10000:00:00.0/vendor ] || die "find in a function: $(cat "$TMP/out")"
expect_rc 0 "ls -l" "$RPCIE" run ls -l /sys/bus/pci/devices/ /sys/bus/pci/devices/10000:00:00.0/
[ ! -s "$TMP/err" ] && grep -q " 10001:00:01.0$" "$TMP/out" && grep -q " 4096 .* resource0$" "$TMP/out" ||
  die "ls -l: $(cat "$TMP/out" "$TMP/err")"
unset RPCIE_MOUNT
pass "/sys/bus/pci/devices paths: dirfd-relative, chdir, scandir, fdopendir, __xstat, Python dir_fd, find, ls -l"

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
