#!/usr/bin/env bash
# rpcie-edu-driver's command line and its file handling, without rpcie-hostd:
#
#   usage errors ............................ exit 2
#   a directory that does not exist ......... exit 1, "error: open: ...: No such file..."
#   a fake directory of plain files ......... identify passes (it only reads), liveness
#                                             fails (a plain file returns what was written,
#                                             not its inverse), exit 1, valid JSON
#
# Usage: edu_driver_cli.sh RPCIE_EDU_DRIVER
set -u
. "$(dirname "$0")/lib.sh"
DRIVER=$1

json_valid() {
  if command -v jq >/dev/null; then jq -e . >/dev/null
  else python3 -c 'import json, sys; json.load(sys.stdin)'
  fi
}
command -v jq >/dev/null || command -v python3 >/dev/null || skip "neither jq nor python3 to check JSON"

expect_rc 2 "no argument" "$DRIVER"
grep -q '^rpcie-edu-driver: error: ' "$TMP/err" || die "no argument: stderr is '$(cat "$TMP/err")'"
expect_rc 2 "unknown option" "$DRIVER" --bogus /tmp
expect_rc 2 "two devices" "$DRIVER" /tmp /tmp
expect_rc 2 "timeout 0" "$DRIVER" --timeout 0 /tmp
expect_rc 2 "timeout not a number" "$DRIVER" --timeout soon /tmp
expect_rc 0 "--help" "$DRIVER" --help
grep -q 'device' "$TMP/out" || die "--help prints no usage"
pass "usage errors exit 2, --help exits 0"

missing=$TMP/no-such-device
expect_rc 1 "missing directory" "$DRIVER" "$missing"
grep -qx "rpcie-edu-driver: error: open: open $missing: No such file or directory" "$TMP/err" ||
  die "missing directory: stderr is '$(cat "$TMP/err")'"
expect_rc 1 "missing directory, --json" "$DRIVER" --json "$missing"
json_valid <"$TMP/out" || die "missing directory: --json output is not JSON: $(cat "$TMP/out")"
grep -q '"passed":false' "$TMP/out" || die "missing directory: JSON does not say passed false"
pass "a missing directory exits 1 with a clear error"

# A directory of plain files shaped like hostd's: every file the driver opens exists.
dev=$TMP/dev
mkdir "$dev"
printf '0x1234\n' >"$dev/vendor"
printf '0x11e8\n' >"$dev/device"
printf '\x34\x12\xe8\x11' >"$dev/config"
truncate -s 1M "$dev/resource0"
printf '\xed\x00\x00\x01' | dd of="$dev/resource0" conv=notrunc status=none  # ID 0x010000ed, little-endian
: >"$dev/events"
truncate -s 64K "$dev/window"
ln -s "$dev/window" "$dev/dma"
expect_rc 1 "plain files" "$DRIVER" --json --timeout 0.2 "$dev"
json_valid <"$TMP/out" || die "plain files: output is not JSON: $(cat "$TMP/out")"
grep -q '"step":"identify","result":"pass"' "$TMP/out" || die "plain files: identify did not pass: $(cat "$TMP/out")"
grep -q '"step":"liveness","result":"fail"' "$TMP/out" || die "plain files: liveness did not fail: $(cat "$TMP/out")"
grep -q '^rpcie-edu-driver: error: liveness: wrote 0x' "$TMP/err" || die "plain files: stderr is '$(cat "$TMP/err")'"
pass "a plain-file directory: identify passes, liveness fails, exit 1"

# The same through a symbolic link, as /dev/rpcieN is one; text output.
ln -s "$dev" "$TMP/rpcie0"
expect_rc 1 "plain files via a link" "$DRIVER" --timeout 0.2 "$TMP/rpcie0"
grep -q '^identify *pass ' "$TMP/out" || die "via a link: $(cat "$TMP/out")"
grep -q '^result: FAIL' "$TMP/out" || die "via a link: no result line: $(cat "$TMP/out")"
pass "the directory may be reached through a symbolic link"

# --mmap: the registers through a mapping of resource0. A plain file maps, so identify reads
# the ID by a load and liveness fails as above (the file keeps what the store wrote); the
# store is seen in the file at the liveness register's offset (0x04), so it was one store
# of the value, not a pwrite.
expect_rc 1 "plain files, --mmap" "$DRIVER" --mmap --json --timeout 0.2 "$dev"
grep -q '"step":"identify","result":"pass"' "$TMP/out" || die "--mmap: identify did not pass: $(cat "$TMP/out")"
grep -q '^rpcie-edu-driver: error: liveness: wrote 0x' "$TMP/err" || die "--mmap: stderr is '$(cat "$TMP/err")'"
written=$(sed -n 's/^rpcie-edu-driver: error: liveness: wrote \(0x[0-9a-f]*\).*/\1/p' "$TMP/err")
stored=0x$(od -An -tx4 -j4 -N4 "$dev/resource0" | tr -d ' ')
[ $((written)) -eq $((stored)) ] || die "--mmap: liveness wrote $written but the file holds $stored"
pass "--mmap: loads and stores on the mapping (identify by a load, the liveness store in the file)"

# A resource0 that cannot be mapped (a FIFO has no size): a clear error, no crash.
fifo_dev=$TMP/fifo-dev
mkdir "$fifo_dev"
cp "$dev/vendor" "$dev/device" "$dev/config" "$dev/events" "$fifo_dev/"
mkfifo "$fifo_dev/resource0"
exec 9<>"$fifo_dev/resource0"  # keeps the FIFO's O_RDWR open from blocking
expect_rc 1 "--mmap on an unmappable resource0" "$DRIVER" --mmap --timeout 0.2 "$fifo_dev"
exec 9>&-
grep -q '^rpcie-edu-driver: error: open: resource0 has no size' "$TMP/err" || die "--mmap unmappable: stderr is '$(cat "$TMP/err")'"
pass "--mmap on a file that cannot be mapped fails with a clear error"
