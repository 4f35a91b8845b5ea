#!/usr/bin/env python3
"""File-level checks of an rpcie-hostd device directory (used by hostd.sh).

Each subcommand takes the device directory and exits 0 when every check holds, 1 with a
"FAIL: ..." line otherwise. Only open/pread/pwrite/mmap/poll/read on the files, as a driver.
"""
import errno
import hashlib
import math
import mmap
import os
import select
import struct
import sys
import time


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def expect_errno(code, fn, what):
    try:
        fn()
    except OSError as e:
        if e.errno != code:
            fail(f"{what}: errno {e.errno} ({os.strerror(e.errno)}), expected {errno.errorcode[code]}")
        return
    fail(f"{what}: succeeded, expected {errno.errorcode[code]}")


def rd(fd, off, width=4):
    return int.from_bytes(os.pread(fd, width, off), "little")


def wr(fd, off, value, width=4):
    n = os.pwrite(fd, value.to_bytes(width, "little"), off)
    if n != width:
        fail(f"short write at {off:#x}: {n}")


def badinput(d):
    r = os.open(d + "/resource0", os.O_RDWR)
    size = os.fstat(r).st_size
    if rd(r, 0) != 0x010000ED:
        fail(f"edu ID {rd(r, 0):#x}")
    for n, off in [(3, 0), (16, 0), (4, 2), (2, 1), (8, 4)]:
        expect_errno(errno.EINVAL, lambda: os.pread(r, n, off), f"register pread of {n} at {off:#x}")
        expect_errno(errno.EINVAL, lambda: os.pwrite(r, b"\0" * n, off), f"register pwrite of {n} at {off:#x}")
    if os.pread(r, 4, size) != b"":
        fail("a read beyond the BAR returned data")
    expect_errno(errno.EFBIG, lambda: os.pwrite(r, b"\0" * 4, size), "write beyond the BAR")
    expect_errno(errno.ENODEV, lambda: mmap.mmap(r, 4096), "mmap of a register BAR")
    if rd(r, 0x1000) != 0xFFFFFFFF:
        fail("an undefined register did not read all-ones")
    for name in ["vendor", "device", "class", "resource", "remote", "irq"]:
        expect_errno(errno.EACCES, lambda: os.open(d + "/" + name, os.O_WRONLY), f"opening {name} for writing")
    c = os.open(d + "/config", os.O_RDWR)
    if os.pread(c, 4, 0) != struct.pack("<HH", 0x1234, 0x11E8):
        fail("config bytes 0-3")
    if os.pread(c, 8, 0x100) != b"":
        fail("config read beyond 256 bytes returned data")
    expect_errno(errno.EFBIG, lambda: os.pwrite(c, b"\0", 0x100), "config write beyond the end")
    ev = os.open(d + "/events", os.O_RDWR)
    expect_errno(errno.EINVAL, lambda: os.read(ev, 3), "events read of 3 bytes")
    expect_errno(errno.EINVAL, lambda: os.write(ev, b"\x01\0"), "events write of 2 bytes")
    expect_errno(errno.EINVAL, lambda: os.write(ev, struct.pack("<I", 7)), "events write of 7")
    os.set_blocking(ev, False)
    expect_errno(errno.EAGAIN, lambda: os.read(ev, 4), "non-blocking events read without news")
    # Still alive and well after all that.
    wr(r, 0x04, 0x5A5A0F0F)
    if rd(r, 0x04) != (~0x5A5A0F0F & 0xFFFFFFFF):
        fail("liveness after bad input")
    print("ok: bad input refused with the right errno, device unharmed")


def events(d):
    r = os.open(d + "/resource0", os.O_RDWR)
    ev = os.open(d + "/events", os.O_RDWR)
    p = select.poll()
    p.register(ev, select.POLLIN)
    t = time.monotonic()
    if p.poll(200):
        fail("a fresh events file polled readable")
    if time.monotonic() - t < 0.19:
        fail("poll returned early")
    wr(r, 0x20, 0x80)  # factorial interrupt on
    wr(r, 0x08, 6)
    got = p.poll(3000)
    if not got or not got[0][1] & select.POLLIN:
        fail(f"no interrupt within 3 s: {got}")
    count = struct.unpack("<I", os.read(ev, 4))[0]
    if count < 1:
        fail(f"count {count}")
    if rd(r, 0x08) != 720:
        fail(f"6! read {rd(r, 0x08)}")
    wr(r, 0x64, rd(r, 0x24))
    if p.poll(0):
        fail("readable again without a new interrupt")
    # A second file counts from its open; mask holds the count, unmask delivers.
    ev2 = os.open(d + "/events", os.O_RDWR)
    os.write(ev2, struct.pack("<I", 0))  # mask
    wr(r, 0x08, 3)
    time.sleep(0.3)
    if p.poll(0):
        fail("an interrupt got through the mask")
    p2 = select.poll()
    p2.register(ev2, select.POLLIN)
    if p2.poll(0):
        fail("a second events file opened after an interrupt polled readable without a new one")
    os.write(ev2, struct.pack("<I", 1))  # unmask: the pending one arrives
    if not p.poll(2000):
        fail("unmask did not deliver the pending interrupt")
    c2 = struct.unpack("<I", os.read(ev, 4))[0]
    if c2 != count + 1:
        fail(f"count after unmask {c2}, expected {count + 1}")
    if not p2.poll(2000):
        fail("the second events file did not become readable on the interrupt after its open")
    c3 = struct.unpack("<I", os.read(ev2, 4))[0]
    if c3 != count + 1:
        fail(f"the second events file read {c3}, expected {count + 1} (the count now)")
    if p.poll(0) or p2.poll(0):
        fail("an events file readable again after reading the count")
    wr(r, 0x64, rd(r, 0x24))
    print("ok: events: fresh file not readable for 200 ms, interrupt wakes poll and read, mask/unmask,"
          " a second file reports only the interrupt after its open")


def fnv1a(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def device_hash(d, off, n):
    """The exporter's view of membar's BAR0 [off, off+n): the device hashes its own memory
    when its doorbell (BAR2, doorbell=on) rings, core/include/rpcie/membar_registers.hpp."""
    r = os.open(d + "/resource2", os.O_RDWR)
    if rd(r, 0x00) != 0x4D420001:
        fail(f"membar BAR2 ID {rd(r, 0x00):#x}")
    wr(r, 0x08, off, 8)
    wr(r, 0x10, n, 8)
    wr(r, 0x18, 1)
    deadline = time.monotonic() + 10
    while rd(r, 0x28) & 1:
        if time.monotonic() > deadline:
            fail("membar doorbell still busy after 10 s")
        time.sleep(0.001)
    if rd(r, 0x28) & 2:
        fail(f"membar doorbell: range {off:#x}+{n:#x} refused")
    h = rd(r, 0x20, 8)
    os.close(r)
    return h


def membar_read_back(d, size, data, how):
    """What the device holds after a write through `how`: read through a new open after the
    page cache is dropped (so not from the pages the write left), and hashed by the device
    itself at the start, middle and end of BAR0."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1\n")
    f = os.open(d + "/resource0", os.O_RDONLY)
    back = b"".join(os.pread(f, 1 << 20, off) for off in range(0, size, 1 << 20))
    os.close(f)
    if hashlib.sha256(back).digest() != hashlib.sha256(data).digest():
        fail(f"{how} round trip differs (read after drop_caches and a reopen)")
    n = 64 << 10
    for off in (0, size // 2 + 4096 + 8, size - n):
        want = fnv1a(data[off:off + n])
        got = device_hash(d, off, n)
        if got != want:
            fail(f"{how}: the device's hash of [{off:#x}, +{n:#x}) is {got:#x}, the bytes written hash to {want:#x}")


def membar(d, mb):
    size = mb << 20
    f = os.open(d + "/resource0", os.O_RDWR)
    if os.fstat(f).st_size < size:
        fail("membar smaller than the test")
    data = os.urandom(size)
    for off in range(0, size, 1 << 20):
        if os.pwrite(f, data[off:off + (1 << 20)], off) != 1 << 20:
            fail("short pwrite")
    os.fsync(f)
    os.close(f)
    membar_read_back(d, size, data, "pwrite")
    # mmap + msync, read back the same ways.
    f = os.open(d + "/resource0", os.O_RDWR)
    m = mmap.mmap(f, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    data2 = os.urandom(size)
    m[:] = data2
    m.flush()
    m.close()
    os.close(f)
    membar_read_back(d, size, data2, "mmap+msync")
    print(f"ok: membar {mb} MiB through pwrite and through mmap+msync, read back after drop_caches"
          " and hashed by the device at three places")


def loop_until_error(d, seconds):
    """Reads the ID register until an error; prints the errno and how long the last call took."""
    r = os.open(d + "/resource0", os.O_RDONLY)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.monotonic()
        try:
            os.pread(r, 4, 0)
        except OSError as e:
            print(f"errno {errno.errorcode[e.errno]} after {time.monotonic() - t:.2f} s")
            return
    fail("no error while the exporter was gone")


def events_block(d):
    """A blocked events read; prints how it ended."""
    ev = os.open(d + "/events", os.O_RDONLY)
    print("blocked", flush=True)
    try:
        os.read(ev, 4)
        print("read returned")
    except OSError as e:
        print(f"errno {errno.errorcode[e.errno]}")


def after_detach(d):
    """An events file open across the device's detach: poll() reports POLLERR and read()
    fails with ENODEV, both at once (they used to wait for counts that never move again)."""
    ev = os.open(d + "/events", os.O_RDONLY)
    print("opened", flush=True)
    deadline = time.monotonic() + 20
    while os.path.exists(d + "/config"):
        if time.monotonic() > deadline:
            fail("the device was not detached within 20 s")
        time.sleep(0.05)
    p = select.poll()
    p.register(ev, select.POLLIN)
    t0 = time.monotonic()
    ready = p.poll(2000)
    if not ready or not ready[0][1] & select.POLLERR:
        fail(f"poll after detach: {ready} after {time.monotonic() - t0:.1f} s, expected POLLERR at once")
    expect_errno(errno.ENODEV, lambda: os.read(ev, 4), "events read after detach")
    os.close(ev)
    print("ok", flush=True)


def interrupted(d):
    """A blocked events read ends with EINTR when a signal arrives (FUSE interrupt)."""
    import signal

    class Alarm(Exception):
        pass

    def on_alarm(signum, frame):
        raise Alarm()

    ev = os.open(d + "/events", os.O_RDONLY)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    t = time.monotonic()
    try:
        os.read(ev, 4)
        fail("a blocked events read returned without an interrupt")
    except Alarm:
        pass
    took = time.monotonic() - t
    if not 0.25 <= took < 2:
        fail(f"the interrupted read took {took:.2f} s")
    os.close(ev)
    print(f"ok: a blocked events read is interrupted by a signal ({took:.2f} s)")


def irqlat(d, n):
    """edu factorial interrupt: from the pwrite that starts it to poll() on events returning,
    n times after a 20 ms pause and n times back to back; prints median/p10/p90 in us."""
    r = os.open(d + "/resource0", os.O_RDWR)
    ev = os.open(d + "/events", os.O_RDWR)
    p = select.poll()
    p.register(ev, select.POLLIN)
    wr(r, 0x20, 0x80)
    for gap in (0.02, 0.0):
        res = []
        for _ in range(n):
            time.sleep(gap)
            t = time.perf_counter()
            wr(r, 0x08, 5)
            if not p.poll(2000):
                fail("no interrupt within 2 s")
            res.append((time.perf_counter() - t) * 1e6)
            os.read(ev, 4)
            wr(r, 0x64, rd(r, 0x24))
        res.sort()
        print(f"gap {gap * 1000:.0f} ms: median {res[n // 2]:.0f} us, p10 {res[n // 10]:.0f} us, p90 {res[n * 9 // 10]:.0f} us")


def stale(d, go):
    """Files of a memory BAR opened (and mapped) before the device server was lost, used after
    it came back reset: every call fails with EIO for good, new faults of the mapping SIGBUS,
    and only a new open sees the device, fresh (zeroed). Prints "ready" once the files are
    open, then waits (up to 60 s) for the file `go` to appear."""
    pattern = os.urandom(8192)
    rw = os.open(d + "/resource0", os.O_RDWR)
    ro = os.open(d + "/resource0", os.O_RDONLY)
    os.pwrite(rw, pattern, 0)
    os.fsync(rw)
    m = mmap.mmap(rw, 16384, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    if m[0:8192] != pattern:
        fail("the mapping does not show what was written")
    print("ready", flush=True)
    end = time.monotonic() + 60
    while not os.path.exists(go):
        if time.monotonic() > end:
            fail(f"{go} did not appear")
        time.sleep(0.05)
    expect_errno(errno.EIO, lambda: os.pread(rw, 16, 0), "pread of a file opened before the reset")
    expect_errno(errno.EIO, lambda: os.pwrite(rw, b"x" * 16, 0), "pwrite of a file opened before the reset")
    expect_errno(errno.EIO, lambda: os.fsync(rw), "fsync of a file opened before the reset")
    expect_errno(errno.EIO, lambda: os.pread(ro, 16, 4096), "pread (read-only file) before the reset")
    expect_errno(errno.EIO, lambda: os.pread(rw, 16, 0), "a second pread (EIO for good)")
    expect_errno(errno.EIO, m.flush, "msync of a mapping made before the reset")
    pid = os.fork()
    if pid == 0:  # a fault on the invalidated mapping
        _ = m[100]
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if not os.WIFSIGNALED(status) or os.WTERMSIG(status) != 7:  # SIGBUS
        fail(f"touching the old mapping after the reset: wait status {status:#x}, expected SIGBUS")
    m.close()
    expect_errno(errno.EIO, lambda: os.close(rw), "close (flush) of a writable file opened before the reset")
    expect_errno(errno.EIO, lambda: os.close(ro), "close of a read-only file opened before the reset")
    fresh = os.open(d + "/resource0", os.O_RDWR)
    if os.pread(fresh, 8192, 0) != bytes(8192):
        fail("a new open does not see the fresh (zeroed) device")
    os.pwrite(fresh, pattern, 0)
    os.fsync(fresh)
    os.close(fresh)
    if device_hash(d, 0, 8192) != fnv1a(pattern):
        fail("the device does not hold what the new open wrote")
    print("ok: files opened before the reset fail with EIO for good (pread, pwrite, fsync, msync, close); "
          "a new fault of the old mapping is SIGBUS; a new open sees the fresh device")


def events_stream(d, n):
    """n factorials back to back, each awaited by a blocking events read (the read is parked
    in hostd and answered by the thread that receives the interrupt) and each followed by a
    register read: every read returns the count one higher, every result is right."""
    r = os.open(d + "/resource0", os.O_RDWR)
    ev = os.open(d + "/events", os.O_RDWR)
    wr(r, 0x20, 0x80)
    count = None
    for i in range(n):
        wr(r, 0x08, 4 + i % 6)
        c = struct.unpack("<I", os.read(ev, 4))[0]
        if count is not None and c != count + 1:
            fail(f"events read {c} after {count} (factorial {i})")
        count = c
        wr(r, 0x64, 1)
        want = math.factorial(4 + i % 6)
        if rd(r, 0x08) != want:
            fail(f"factorial {i}: {rd(r, 0x08)}, expected {want}")
    os.close(ev)
    print(f"ok: {n} interrupts awaited by blocking events reads, counts consecutive")


def liveness(d):
    r = os.open(d + "/resource0", os.O_RDWR)
    wr(r, 0x04, 0x12345678)
    if rd(r, 0x04) != (~0x12345678 & 0xFFFFFFFF):
        fail("liveness")
    print(f"ok: liveness as uid {os.getuid()}")


COMMANDS = {  # name: (function, type of the optional third argument)
    "badinput": (badinput, None),
    "events": (events, None),
    "eventsstream": (events_stream, int),
    "membar": (membar, int),
    "loop": (loop_until_error, float),
    "block": (events_block, None),
    "interrupted": (interrupted, None),
    "afterdetach": (after_detach, None),
    "irqlat": (irqlat, int),
    "liveness": (liveness, None),
    "stale": (stale, str),
}

if __name__ == "__main__":
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd not in COMMANDS:
        fail("unknown command " + cmd)
    fn, arg = COMMANDS[cmd]
    if arg:
        fn(d, arg(sys.argv[3]))
    else:
        fn(d)
