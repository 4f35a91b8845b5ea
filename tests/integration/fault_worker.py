#!/usr/bin/env python3
"""One workload of the fault matrix and the soak (fault_matrix.sh, scripts/soak): it drives a
device directory of rpcie-hostd as a program would, with only open/pread/pwrite/fsync (or the
sample driver), and keeps the books on what was acknowledged.

  fault_worker.py KIND DEVICE EVENTS SECONDS [DRIVER]

KIND:
  mmio    edu: bursts of 8 posted register writes to the liveness register, then a read; the
          read must show the last write (a posted write lost silently shows here).
  membar  membar with doorbell=on: 64 KiB slots written with seeded bytes, each acknowledged
          by fsync; on SIGUSR1 and at the end every acknowledged slot is hashed by the device
          itself (its BAR2 doorbell) and must match what was written.
  edu     edu: the sample driver (DRIVER --json) in a loop: identify, liveness, factorial with
          an interrupt through `events`, DMA both ways through `dma`.

Runs until SIGTERM or SECONDS. EVENTS receives one JSON object per line, flushed at once:
  {"ev":"ok","t":T,"dur":D,"ops":N}  an operation that worked (at most one per 20 ms, and
                                      always the first after an error or a slow one); N so far
  {"ev":"err","t":T,"errno":"EIO","what":...}   an operation that failed: the program was told
  {"ev":"reopen","t":T,"generation":G}          the files opened again (after an error)
  {"ev":"lost","t":T,"what":...}      acknowledged data gone without an error to say so
  {"ev":"verified","t":T,"slots":N,"lost":L}    (membar) the device's hash of every slot
  {"ev":"end","t":T,"ops":N,"errors":E,"lost":L,"reopens":R,"bytes":B}  B: bytes checked
T is CLOCK_MONOTONIC in seconds (time.monotonic(), the same clock in every process).
An acknowledged write is one whose call returned (pwrite; pwrite + fsync for membar; a
driver run that passed). "Lost" counts those gone while no later call on the same open file
failed: a reset the program was told of by EIO is not a loss, a silent one is.
"""
import errno
import json
import os
import random
import signal
import subprocess
import sys
import time

from hostd_check import fnv1a, rd  # the device's hash of membar memory; one register read

SLOT = 64 << 10
SLOTS = 32
SLOW = 0.1  # an operation slower than this is always logged


class Log:
    def __init__(self, path):
        self.f = open(path, "a", buffering=1)
        self.last_ok = 0.0
        self.force = True
        self.ops = self.errors = self.lost = self.reopens = 0
        self.bytes = 0  # checked against what was written: read back, hashed by the device

    def ev(self, kind, **kw):
        kw.update(ev=kind, t=round(time.monotonic(), 4))
        self.f.write(json.dumps(kw) + "\n")

    def ok(self, started):
        now = time.monotonic()
        self.ops += 1
        dur = now - started
        if self.force or dur > SLOW or now - self.last_ok >= 0.02:
            self.ev("ok", dur=round(dur, 4), ops=self.ops)
            self.last_ok = now
            self.force = False

    def err(self, e, what):
        self.errors += 1
        self.force = True
        name = errno.errorcode.get(e.errno, str(e.errno)) if isinstance(e, OSError) else "none"
        self.ev("err", errno=name, what=what)

    def loss(self, what):
        self.lost += 1
        self.ev("lost", what=what)


stop = False
verify_now = False


def on_term(*_):
    global stop
    stop = True


def on_usr1(*_):
    global verify_now
    verify_now = True


def generation(dev):
    """The device's generation from its `remote` file, None while it cannot be read."""
    try:
        with open(dev + "/remote") as f:
            for line in f:
                if line.startswith("generation "):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def wait_usable(dev, until):
    """Until the device's files open again (hostd back, device connected) or `until`."""
    while not stop and time.monotonic() < until:
        try:
            with open(dev + "/remote") as f:
                if "state connected" in f.read():
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


# A short write raises, as any failed call does here (hostd_check's wr ends the process).
def wr(fd, off, value, width=4):
    if os.pwrite(fd, value.to_bytes(width, "little"), off) != width:
        raise OSError(errno.EIO, "short register write")


class Mmio:
    """Posted liveness writes, then a read that must show the last one."""

    def __init__(self, dev, log):
        self.dev, self.log, self.fd, self.n = dev, log, None, 0

    def open(self):
        self.fd = os.open(self.dev + "/resource0", os.O_RDWR)

    def close(self):
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass  # an old generation's file fails its close too: it was told already
            self.fd = None

    def step(self):
        last = 0
        for _ in range(8):
            self.n += 1
            last = (self.n * 0x9E3779B1) & 0xFFFFFFFF
            wr(self.fd, 0x04, last)
        got = rd(self.fd, 0x04)
        self.log.bytes += 4
        if got != (~last & 0xFFFFFFFF):
            self.log.loss(f"liveness read {got:#x} after writing {last:#x} (expected {~last & 0xFFFFFFFF:#x})")

    def verify(self):
        pass


class Membar:
    """Seeded 64 KiB slots acknowledged by fsync; the device hashes them to check."""

    def __init__(self, dev, log):
        self.dev, self.log, self.fd, self.regs, self.n = dev, log, None, None, 0
        self.acked = {}  # slot -> (op number, generation of the file it went through)
        self.gen = None

    def open(self):
        gen = generation(self.dev)
        if self.gen is not None and gen != self.gen:
            # A new device: the program was told (the error that made it reopen), so what
            # the old one held is not lost.
            self.acked.clear()
        self.gen = gen
        self.fd = os.open(self.dev + "/resource0", os.O_RDWR)
        self.regs = os.open(self.dev + "/resource2", os.O_RDWR)

    def close(self):
        for fd in (self.fd, self.regs):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.fd = self.regs = None

    @staticmethod
    def data(n):
        return random.Random(n).randbytes(SLOT)

    def step(self):
        self.n += 1
        slot = self.n % SLOTS
        self.acked.pop(slot, None)  # unknown until this write is acknowledged
        if os.pwrite(self.fd, self.data(self.n), slot * SLOT) != SLOT:
            raise OSError(errno.EIO, "short write")
        os.fsync(self.fd)
        self.acked[slot] = self.n

    def device_hash(self, off, n):
        wr(self.regs, 0x08, off, 8)
        wr(self.regs, 0x10, n, 8)
        wr(self.regs, 0x18, 1)
        until = time.monotonic() + 10
        while rd(self.regs, 0x28) & 1:
            if time.monotonic() > until:
                raise OSError(errno.ETIMEDOUT, "membar doorbell busy for 10 s")
            time.sleep(0.001)
        if rd(self.regs, 0x28) & 2:
            raise OSError(errno.EINVAL, "membar doorbell refused the range")
        return rd(self.regs, 0x20, 8)

    def verify(self):
        # Through the files this program holds: if the device was replaced they fail (told);
        # if they answer, the device must hold every acknowledged slot.
        lost = 0
        for slot, n in sorted(self.acked.items()):
            self.log.bytes += SLOT
            if self.device_hash(slot * SLOT, SLOT) != fnv1a(self.data(n)):
                lost += 1
                self.log.loss(f"slot {slot} (write {n}) differs at the device")
        self.log.ev("verified", slots=len(self.acked), lost=lost)


class Edu:
    """The sample driver, run after run."""

    def __init__(self, dev, log, driver):
        self.dev, self.log, self.driver = dev, log, driver

    def open(self):
        pass

    def close(self):
        pass

    def step(self):
        try:
            p = subprocess.run([self.driver, "--json", "--timeout", "3", self.dev], capture_output=True, text=True,
                               timeout=30)
        except subprocess.TimeoutExpired:
            raise OSError(errno.ETIMEDOUT, "driver run past 30 s")
        if p.returncode == 0:
            self.log.bytes += 2 * 4096  # the driver compared both DMA directions
            return
        try:
            report = json.loads(p.stdout)
        except ValueError:
            raise OSError(errno.EIO, f"driver exit {p.returncode}: {p.stderr.strip()[:200]}")
        for s in report.get("steps", []):
            if s.get("result") == "fail":
                if "errno" in s:  # a file operation failed: the driver was told
                    raise OSError(s["errno"], f"{s['step']}: {s['detail']}")
                # Every call worked and the device still did not do what was asked.
                self.log.loss(f"driver step {s['step']}: {s['detail']}")
                return
        raise OSError(errno.EIO, f"driver exit {p.returncode} without a failed step")

    def verify(self):
        pass


def main():
    global verify_now
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    kind, dev, events, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGUSR1, on_usr1)
    log = Log(events)
    if kind == "mmio":
        w = Mmio(dev, log)
    elif kind == "membar":
        w = Membar(dev, log)
    elif kind == "edu" and len(sys.argv) > 5:
        w = Edu(dev, log, sys.argv[5])
    else:
        print(f"fault_worker: unknown kind '{kind}' (or edu without DRIVER)", file=sys.stderr)
        sys.exit(2)
    end = time.monotonic() + seconds
    opened = False
    while not stop and time.monotonic() < end:
        try:
            if not opened:
                w.open()
                opened = True
            if verify_now:
                verify_now = False
                w.verify()
            started = time.monotonic()
            w.step()
            log.ok(started)
        except OSError as e:
            log.err(e, e.strerror or str(e))
            w.close()
            opened = False
            log.reopens += 1
            wait_usable(dev, end)
            log.ev("reopen", generation=generation(dev))
    if opened:
        try:
            w.verify()
        except OSError as e:
            log.err(e, "final verification: " + (e.strerror or str(e)))
        w.close()
    log.ev("end", ops=log.ops, errors=log.errors, lost=log.lost, reopens=log.reopens, bytes=log.bytes)


if __name__ == "__main__":
    main()
