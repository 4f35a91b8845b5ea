#!/usr/bin/env bash
# Register BARs mapped by unchanged programs, end to end: rpcie-exportd in one network
# namespace, rpcie-hostd (a real FUSE mount) in another, joined by a veth pair; programs run
# under `rpcie run` map resource0 and drive the device with plain loads and stores.
#   mmio.sh BUILDDIR EDU_DRIVER DOORBELL_O0 DOORBELL_O2
# (the programs run under `rpcie run` are built without sanitizers: see tests/meson.build)
. "$(dirname "$0")/lib.sh"
B=$1 DRIVER=$2 DOORBELL_PROGRAMS=("$3" "$4")
command -v python3 >/dev/null || skip "python3 is not installed"
stack_start "$B" rpciem 169.254.81 edu0=edu edu1=edu,dma=mirror mem0=membar,size=1M,doorbell=on
stack_attach edu0 edu1 mem0
EDU0=$DEVDIR/rpcie0 EDU1=$DEVDIR/rpcie1 MEM0=$DEVDIR/rpcie2

# Outside `rpcie run` a register BAR does not map: the driver says what to do.
expect_rc 1 "--mmap without rpcie run" "$DRIVER" --mmap "$EDU0"
grep -q 'mmap resource0 (run the driver under `rpcie run`): No such device' "$TMP/err" ||
  die "--mmap without rpcie run: $(cat "$TMP/err")"
pass "outside rpcie run, mmap of a register BAR is ENODEV and the driver says so"

# The sample driver through the mapping: identify, liveness, factorial (interrupt on events)
# and DMA both ways with 8-byte registers, on-demand and mirror DMA; through hostd's ring.
rings_before=$(grep -c 'MMIO ring for process' "$TMP/hostd.log")
for dev in "$EDU0" "$EDU1"; do
  expect_rc 0 "edu-driver --mmap $dev" "$RPCIE" run -- "$DRIVER" --mmap --timeout 5 "$dev"
  grep -q '^result: pass' "$TMP/out" || die "edu-driver --mmap $dev: $(cat "$TMP/out")"
  [ ! -s "$TMP/err" ] || die "edu-driver --mmap $dev wrote to stderr: $(cat "$TMP/err")"
done
[ "$(grep -c 'MMIO ring for process' "$TMP/hostd.log")" -ge $((rings_before + 2)) ] ||
  die "the runs did not use hostd's ring: $(grep -i ring "$TMP/hostd.log")"
pass "rpcie-edu-driver --mmap under rpcie run passes every step (ring; on-demand and mirror DMA)"

# The same through the file port (no ring).
RPCIE_MMIO_RING=off expect_rc 0 "edu-driver --mmap, file port" "$RPCIE" run -- "$DRIVER" --mmap "$EDU0"
grep -q '^result: pass' "$TMP/out" || die "edu-driver --mmap, file port: $(cat "$TMP/out")"
pass "rpcie-edu-driver --mmap passes through the file port too (RPCIE_MMIO_RING=off)"

# Python's mmap module on resource0: the ID register (0x00) and the liveness register (0x04).
py='import mmap, os, struct, sys
fd = os.open(sys.argv[1] + "/resource0", os.O_RDWR)
m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
ident = struct.unpack("<I", m[0:4])[0]
m[4:8] = struct.pack("<I", 0x12345678)
live = struct.unpack("<I", m[4:8])[0]
print("%08x %08x" % (ident, live))'
expect_rc 0 "python mmap" "$RPCIE" run python3 -c "$py" "$EDU0"
[ "$(cat "$TMP/out")" = "010000ed edcba987" ] || die "python mmap: $(cat "$TMP/out") $(cat "$TMP/err")"
pass "Python's mmap module reads the ID and the liveness inverse through the mapping"

# Ordering across BARs: a pattern stored through a page-cache mapping of membar's memory BAR,
# then OFFSET, LENGTH and DOORBELL stored through a mapping of its register BAR, no msync in
# the program: the device's hash must be the pattern's. Built at -O0 and -O2; through the ring
# and through the file port. The exporter's access log must show the register accesses as
# the program made them: widths, offsets, values, in order.
seed=1
for program in "${DOORBELL_PROGRAMS[@]}"; do
  for ring in on off; do
    seed=$((seed + 1))
    : >"$ACCESS"
    RPCIE_MMIO_RING=$ring expect_rc 0 "$(basename "$program") ring $ring" "$RPCIE" run -- "$program" "$MEM0" 65536 $seed
    grep -q '^ok 0x' "$TMP/out" || die "$(basename "$program") ring $ring: $(cat "$TMP/out") $(cat "$TMP/err")"
    got=$(grep ' bar=2 ' "$ACCESS" | sed 's/^mem0 //')
    want="read bar=2 offset=0x0 width=4 value=0x4d420001
read bar=2 offset=0x2c width=4 value=0x$(printf %x $((seed - 2)))
write bar=2 offset=0x8 width=8 value=0x100
write bar=2 offset=0x10 width=8 value=0x10000
write bar=2 offset=0x18 width=4 value=0x1
read bar=2 offset=0x28 width=4 value=0x0
read bar=2 offset=0x2c width=4 value=0x$(printf %x $((seed - 1)))
read bar=2 offset=0x20 width=8 value=$(awk '{print $2}' "$TMP/out" | sed 's/^0x0*/0x/')"
    [ "$got" = "$want" ] || die "$(basename "$program") ring $ring: the device saw
$got
instead of
$want"
  done
done
pass "membar doorbell through mapped BARs (-O0, -O2; ring and file port): RESULT is the pattern's hash, the device saw each register access once, in order"

# /sys/bus/pci/devices paths written into programs (rpcie functions have domains >= 0x10000).
export RPCIE_MOUNT=$MNT
BDF0=$(basename "$(readlink -f "$EDU0")")
case $BDF0 in 1????:??:??.?) ;; *) die "edu0's address $BDF0 is not an rpcie one" ;; esac
expect_rc 0 "cat vendor" "$RPCIE" run cat "/sys/bus/pci/devices/$BDF0/vendor" "/sys/bus/pci/devices/$BDF0/device"
[ "$(cat "$TMP/out")" = "$(printf '0x1234\n0x11e8')" ] || die "vendor/device through /sys: $(cat "$TMP/out")"
expect_rc 0 "ls /sys/bus/pci/devices" "$RPCIE" run ls /sys/bus/pci/devices
real=$(ls /sys/bus/pci/devices | sort) ours=$(ls "$MNT/pci/devices" | sort)
[ "$(sort "$TMP/out")" = "$(printf '%s\n%s\n' "$real" "$ours" | sort)" ] ||
  die "listing: $(cat "$TMP/out") (want the real functions and $ours)"
expect_rc 0 "python listdir" "$RPCIE" run python3 -c 'import os; print(" ".join(sorted(os.listdir("/sys/bus/pci/devices"))))'
for b in $ours; do grep -qw "$b" "$TMP/out" || die "os.listdir lacks $b: $(cat "$TMP/out")"; done
expect_rc 0 "edu-driver via /sys" "$RPCIE" run -- "$DRIVER" --mmap "/sys/bus/pci/devices/$BDF0"
grep -q '^result: pass' "$TMP/out" || die "edu-driver via /sys/bus/pci/devices: $(cat "$TMP/out")"
if command -v lspci >/dev/null; then
  expect_rc 0 "lspci" "$RPCIE" run lspci -n -s "$BDF0"
  grep -q "$BDF0 00ff: 1234:11e8" "$TMP/out" || die "lspci through /sys: $(cat "$TMP/out") $(cat "$TMP/err")"
fi
expect_rc 0 "no rpcie run" cat "/sys/bus/pci/devices/0000:00:00.0/vendor"  # real functions are untouched
test ! -e "/sys/bus/pci/devices/$BDF0" || die "/sys/bus/pci/devices/$BDF0 exists outside rpcie run"
pass "under rpcie run, /sys/bus/pci/devices/$BDF0/... is the rpcie device (cat, ls, os.listdir, the driver, lspci)"
expect_rc 0 "--sysfs-env" "$RPCIE" run --sysfs-env sh -c 'echo "$SYSFS_PCI_DEVICES"'
[ "$(cat "$TMP/out")" = "$MNT/pci/devices" ] || die "--sysfs-env: $(cat "$TMP/out")"
expect_rc 0 "no --sysfs-env" "$RPCIE" run sh -c 'echo "${SYSFS_PCI_DEVICES-unset}"'
[ "$(cat "$TMP/out")" = unset ] || die "without --sysfs-env: $(cat "$TMP/out")"
pass "--sysfs-env sets SYSFS_PCI_DEVICES to the rpcie devices directory, and only with it"

# Names relative to a descriptor of /sys/bus/pci/devices on the real mount: Python's dir_fd
# opens resource0, maps it and reads edu's ID register; find lists the function (fdopendir).
expect_rc 0 "python dir_fd" "$RPCIE" run python3 -c '
import mmap, os, struct, sys
d = os.open("/sys/bus/pci/devices", os.O_RDONLY | os.O_DIRECTORY)
m = mmap.mmap(os.open(sys.argv[1] + "/resource0", os.O_RDWR, dir_fd=d), 4096)
print(hex(struct.unpack_from("<I", m, 0)[0]), os.stat(sys.argv[1] + "/vendor", dir_fd=d).st_size > 0)' "$BDF0"
[ "$(cat "$TMP/out")" = "0x10000ed True" ] || die "dir_fd: $(cat "$TMP/out" "$TMP/err")"
expect_rc 0 "find" "$RPCIE" run find /sys/bus/pci/devices/ -maxdepth 1 -name "$BDF0"
[ "$(cat "$TMP/out")" = "/sys/bus/pci/devices/$BDF0" ] || die "find: $(cat "$TMP/out" "$TMP/err")"
pass "relative to a descriptor of /sys/bus/pci/devices: Python dir_fd open+mmap+stat; find -maxdepth 1 lists $BDF0"
