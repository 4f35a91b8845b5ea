#!/usr/bin/env python3
"""Checks what the device saw against what mmio_classes says it did.

    mmio_classes_check.py PROGRAM_STDOUT ACCESS_LOG EXPORT

The access log is rpcie-exportd's --access-log ("NAME read|write bar=B offset=0xO width=W
value=0xV"). The program marks each case by storing its number into BAR2's OFFSET register
(write bar=2 offset=0x8 width=8); the lines between two markers are the case's. Every BAR4
line is also replayed onto a model of the scratch BAR (4 KiB, zero at attach): each read must
return what the model holds (plain registers read back what was stored), each access must be
naturally aligned of width 1, 2, 4 or 8. Per case (see mmio_classes.c):
  want ...      the case's BAR4 accesses are exactly these, in this order
  image O L H   after the case, FNV-1a of model bytes [O, O+L) is H
  cover O L     the case's reads cover every byte of [O, O+L)
  within O L    no access of the case outside [O, O+L)
  readonly      no BAR4 store in the case
Prints one line per failing case (and exits 1), or "checked N cases, M accesses".
"""
import re
import sys

LINE = re.compile(r"^(\S+) (read|write) bar=(\d+) offset=0x([0-9a-f]+) width=(\d+)(?: value=0x([0-9a-f]+))?(?: error=(\S+))?$")
SIZE = 4096


def fnv(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def program_cases(path):
    cases, current = {}, None
    for line in open(path):
        words = line.split()
        if not words:
            continue
        if words[0] == "case":
            current = {"name": words[2], "want": [], "image": [], "cover": [], "within": [], "readonly": False}
            cases[int(words[1])] = current
        elif words[0] == "want":
            current["want"].append((words[1], int(words[2]), int(words[3]), int(words[4])))
        elif words[0] in ("image", "cover", "within"):
            current[words[0]].append(tuple(int(w) for w in words[1:]))
        elif words[0] == "readonly":
            current["readonly"] = True
    return cases


def log_segments(path, export, problems):
    """The BAR4 accesses between markers, per case number, with the model's image after each."""
    model = bytearray(SIZE)
    segments, current, total = {}, None, 0
    for n, line in enumerate(open(path), 1):
        m = LINE.match(line.rstrip("\n"))
        if not m:
            problems.append(f"access log line {n} unparsed: {line!r}")
            continue
        name, kind, bar, offset, width, value, error = m.groups()
        if name != export:
            continue
        bar, offset, width = int(bar), int(offset, 16), int(width)
        value = int(value, 16) if value is not None else None
        if bar == 2 and offset == 8 and width == 8 and kind == "write":
            current = segments.setdefault(value, {"accesses": [], "image": None})
            continue
        if bar != 4:
            continue
        total += 1
        if error is not None or width not in (1, 2, 4, 8) or offset % width or offset + width > SIZE:
            problems.append(f"line {n}: not a plain register access: {line.strip()}")
            continue
        held = int.from_bytes(model[offset : offset + width], "little")
        if kind == "write":
            model[offset : offset + width] = value.to_bytes(width, "little")
        elif value != held:
            problems.append(f"line {n}: read 0x{value:x}, but the register holds 0x{held:x}: {line.strip()}")
        if current is None:
            problems.append(f"line {n}: BAR4 access before the first case marker")
            continue
        current["accesses"].append((kind, offset, width, value))
        current["image"] = bytes(model)
    return segments, total


def case_check(case, segment):
    accesses, image = segment["accesses"], segment["image"]
    if case["want"] and accesses != case["want"]:
        fmt = lambda a: "%s 0x%x/%d=0x%x" % a
        return "saw [%s], want [%s]" % (", ".join(map(fmt, accesses)), ", ".join(map(fmt, case["want"])))
    for offset, length, hashed in case["image"]:
        if image is None or fnv(image[offset : offset + length]) != hashed:
            return f"BAR4 [{offset}, {offset + length}) does not hold what the program stored"
    for offset, length in case["cover"]:
        seen = bytearray(length)
        for kind, o, w, _ in accesses:
            if kind == "read":
                for i in range(max(o, offset), min(o + w, offset + length)):
                    seen[i - offset] = 1
        if not all(seen):
            return f"reads do not cover [{offset}, {offset + length}) (first missing byte {offset + seen.index(0)})"
    for offset, length in case["within"]:
        outside = [a for a in accesses if a[1] < offset or a[1] + a[2] > offset + length]
        if outside:
            return f"access outside [{offset}, {offset + length}): {outside[0]}"
    if case["readonly"] and any(a[0] == "write" for a in accesses):
        return "a store in a case that only loads"
    if not accesses:
        return "the device saw nothing"
    return None


def main():
    stdout, log, export = sys.argv[1:4]
    problems = []
    cases = program_cases(stdout)
    segments, total = log_segments(log, export, problems)
    checked = 0
    for number, case in sorted(cases.items()):
        if case["name"] == "end":
            continue
        if number not in segments:
            problems.append(f"case {number} {case['name']}: its marker is not in the access log")
            continue
        why = case_check(case, segments[number])
        if why:
            problems.append(f"case {number} {case['name']}: {why}")
        checked += 1
    if checked == 0:
        problems.append("no case was checked")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"checked {checked} cases, {total} accesses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
