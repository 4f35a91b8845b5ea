#!/usr/bin/env python3
"""Timed checks of a stalled exporter and of hostd's watchdog (used by hostd_stall.sh).

  hostd_stall.py short EDU_DIR EXPORTER_PID TIMEOUT_S STOP_S
  hostd_stall.py long EDU_DIR EXPORTER_PID TIMEOUT_S STOP_S LEASE_S
  hostd_stall.py watchdog EDU_DIR STALL_FILE TIMEOUT_S STALL_S

Each stops the exporter (SIGSTOP) itself, so that every time is measured from the stop, and
resumes it (SIGCONT) from a timer; exit 0 with "ok: ..." when every check holds, 1 with
"FAIL: ..." otherwise. Times in milliseconds since the stop.
"""
import errno
import os
import signal
import sys
import threading
import time

ID = 0x010000ED
LIVE = 0x04  # edu liveness: reads back the bitwise NOT of what was written


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def rd(fd, off):
    return int.from_bytes(os.pread(fd, 4, off), "little")


def ms_since(t0):
    return int((time.monotonic() - t0) * 1000)


def read_eio(fd, off, t0, lo, hi, what):
    """A read that must fail with EIO between lo and hi ms after t0; returns when it did."""
    try:
        v = rd(fd, off)
    except OSError as e:
        at = ms_since(t0)
        if e.errno != errno.EIO:
            fail(f"{what}: errno {errno.errorcode.get(e.errno, e.errno)} after {at} ms, expected EIO")
        if not lo <= at <= hi:
            fail(f"{what}: EIO after {at} ms, expected {lo}..{hi} ms")
        return at
    fail(f"{what}: read {v:#x} after {ms_since(t0)} ms, expected EIO")


def remote(d):
    with open(d + "/remote") as f:
        return dict(line.split(" ", 1) for line in f.read().splitlines())


def stopped(pid):
    """Whether every thread of `pid` has stopped (state T/t, or gone)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in "TtZX":
            return False
    return True


def stop_for(pid, seconds):
    """SIGSTOP now, SIGCONT after `seconds`; the time (monotonic) at which every thread of the
    process had stopped: kill() returns before a busy multithreaded process has (an exporter
    was seen to answer a request 0.2-0.9 ms after it returned)."""
    os.kill(pid, signal.SIGSTOP)
    until = time.monotonic() + 5
    while not stopped(pid):
        if time.monotonic() > until:
            fail(f"process {pid} has not stopped 5 s after SIGSTOP")
        time.sleep(0.0005)
    t0 = time.monotonic()
    threading.Timer(seconds, os.kill, (pid, signal.SIGCONT)).start()
    return t0


def short(d, pid, timeout_s, stop_s):
    """A stall shorter than the lease: one request past its deadline fails alone."""
    r = os.open(d + "/resource0", os.O_RDWR)
    os.pwrite(r, (0x12345678).to_bytes(4, "little"), LIVE)
    if rd(r, LIVE) != 0xEDCBA987 or rd(r, 0) != ID:
        fail("edu before the stall")
    deadline_ms = timeout_s * 900
    t0 = stop_for(pid, stop_s)
    # A: its deadline (9/10 of the timeout) passes while the exporter is stopped.
    a = read_eio(r, 0, t0, deadline_ms, timeout_s * 1000 + 1000, "read with the exporter stopped")
    if a >= stop_s * 1000:
        fail(f"the first read ended after {a} ms, not before the exporter resumed ({stop_s} s): test premise")
    # B: sent while the exporter is still stopped; the late answer to A (the ID) comes first
    # and must be dropped, not taken for B's.
    try:
        v = rd(r, LIVE)
    except OSError as e:
        fail(f"the read sent after a timed-out one failed ({errno.errorcode.get(e.errno, e.errno)} at {ms_since(t0)} ms):"
             " one request past its deadline must fail alone")
    b = ms_since(t0)
    if v != 0xEDCBA987:
        fail(f"the read after a timed-out one got {v:#x}, expected 0xedcba987 (the late reply to the first was {ID:#x})")
    if not stop_s * 1000 <= b <= stop_s * 1000 + 1000:
        fail(f"the second read was answered after {b} ms, expected once the exporter resumed ({stop_s} s .. +1 s)")
    info = remote(d)
    if info.get("state") != "connected" or info.get("generation") != "1":
        fail(f"remote after a stall of {stop_s} s: {info}")
    if rd(r, 0) != ID:
        fail("edu ID after the stall")
    os.close(r)
    print(f"ok: exporter stopped {stop_s} s: the read past its deadline got EIO at {a} ms (timeout {timeout_s} s),"
          f" the next one its own answer at {b} ms, same attachment (generation 1)")


def long(d, pid, timeout_s, stop_s, lease_s):
    """A stall longer than the lease and the resume after it: requests fail alone until the
    heartbeats find the link lost; the resume cannot reach the stopped exporter and gives up."""
    r = os.open(d + "/resource0", os.O_RDONLY)
    if rd(r, 0) != ID:
        fail("edu before the stall")
    t0 = stop_for(pid, stop_s)
    a = read_eio(r, 0, t0, timeout_s * 900, timeout_s * 1000 + 1000, "read with the exporter stopped")
    # Still the same attachment after a request failed: only the heartbeats may end it.
    info = remote(d)
    if info.get("state") != "connected" or info.get("generation") != "1":
        fail(f"remote {ms_since(t0)} ms into the stall, after a request timed out: {info}")
    # The heartbeat that finds no echo within a lease was sent at most a third of a lease
    # after the stop: the link is lost between lease and 4/3 lease (+ the supervisor's 200 ms).
    lo, hi = lease_s * 1000, lease_s * 1000 * 4 // 3 + 700
    while remote(d).get("state") == "connected":
        if ms_since(t0) > hi:
            fail(f"still connected {ms_since(t0)} ms into a {stop_s} s stall (lease {lease_s} s)")
        time.sleep(0.02)
    lost = ms_since(t0)
    if lost < lo:
        fail(f"the link was found lost {lost} ms into the stall, before the lease ({lease_s} s)")
    # Then the client tries to resume the attachment for a lease; the exporter still stopped,
    # it gives up and the attachment ends.
    info = remote(d)
    if info.get("state") == "resuming" and "heartbeat" not in info.get("error", ""):
        fail(f"remote while resuming: {info}")
    while remote(d).get("state") == "resuming":
        if ms_since(t0) > lost + lease_s * 1000 + 1000:
            fail(f"still resuming {ms_since(t0) - lost} ms after the link was found lost (lease {lease_s} s)")
        time.sleep(0.02)
    ended = ms_since(t0)
    info = remote(d)
    if info.get("state") not in ("reconnecting", "failed") or "heartbeat" not in info.get("error", ""):
        fail(f"remote after the link ended: {info}")
    # A request now fails at once (no attachment), not at its deadline.
    t1 = time.monotonic()
    read_eio(r, 0, t1, 0, 300, "read while reconnecting")
    # Opened before the link ended: even its close says the device it was opened on is gone.
    try:
        os.close(r)
        fail("close of a file opened before the link ended succeeded")
    except OSError as e:
        if e.errno != errno.EIO:
            fail(f"close of a file opened before the link ended: {os.strerror(e.errno)}, expected EIO")
    print(f"ok: exporter stopped {stop_s} s: EIO at {a} ms, attachment kept past the failed request, link"
          f" found lost by the heartbeats at {lost} ms, not resumed, ended at {ended} ms (lease {lease_s} s)")


def watchdog(d, stall_file, timeout_s, stall_s):
    """A request that ignores its deadline (the stall hook): only the watchdog answers it."""
    r = os.open(d + "/resource0", os.O_RDWR)
    if rd(r, 0) != ID:
        fail("edu before the stall")
    with open(stall_file, "w") as f:
        f.write(f"{stall_s * 1000}\n")
    t0 = time.monotonic()
    # The deadline (9/10) is ignored by the stalled request: the watchdog answers once the
    # request is older than the timeout, on its next 100 ms tick.
    at = read_eio(r, 0, t0, timeout_s * 1000, timeout_s * 1000 + 400, "read stalled past its deadline")
    os.unlink(stall_file)
    # The stalled thread wakes at stall_s and must not answer again (libfuse would abort or
    # answer another request): wait it out, then the device works.
    time.sleep(max(0.0, stall_s - (time.monotonic() - t0)) + 0.5)
    if rd(r, 0) != ID:
        fail("edu ID after the watchdog answered")
    os.close(r)
    print(f"ok: watchdog answered EIO at {at} ms (timeout {timeout_s} s) a request stalled {stall_s} s;"
          " the device works afterwards")


if __name__ == "__main__":
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "short":
        short(d, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif cmd == "long":
        long(d, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    elif cmd == "watchdog":
        watchdog(d, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        fail("unknown command " + cmd)
