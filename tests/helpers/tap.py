"""Reading what the guest programs print: kselftest TAP, key=value lines, and the edu stand-in's
byte pattern."""

import re
import struct
import subprocess

import pytest

from helpers.paths import BIN


def pattern(seed, length):
    """The edu module's pattern (selftests/kmod/gdrpeer_edu_hca.h): splitmix64 words, LE."""
    out = bytearray()
    m = (1 << 64) - 1
    for k in range((length + 7) // 8):
        z = (seed + (k + 1) * 0x9E3779B97F4A7C15) & m
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        z ^= z >> 31
        out += struct.pack("<Q", z)
    return bytes(out[:length])


def keyvals(text):
    """{key: int} of the `key=123` lines a guest command printed."""
    return {k: int(v) for k, v in re.findall(r"^(\w+)=(\d+)$", text, re.M)}


def tap(output):
    """(plan, ok, not_ok, skipped, totals dict) of one kselftest program's TAP output."""
    plan = re.search(r"^1\.\.(\d+)$", output, re.M)
    ok = re.findall(r"^ok \d+ ", output, re.M)
    not_ok = re.findall(r"^not ok \d+ .*$", output, re.M)
    skipped = re.findall(r"^ok \d+ .*# SKIP.*$", output, re.M)
    totals = re.search(r"^# Totals: pass:(\d+) fail:(\d+) xfail:\d+ xpass:\d+ skip:(\d+) "
                       r"error:(\d+)$", output, re.M)
    tot = dict(zip(("pass", "fail", "skip", "error"), map(int, totals.groups()))) if totals else {}
    return (int(plan.group(1)) if plan else None), len(ok), not_ok, skipped, tot


def listed_tests(program, fixture=None):
    """The tests of a kselftest program as its TAP lines name them ("fixture.test"), in order,
    from `PROGRAM -l` run on this host (GP_HARNESS_MAIN in selftests/user/gdrpeer_test.h: it
    lists and runs nothing), so no count is typed again here. fixture: only that fixture's
    tests (what `PROGRAM --only FIXTURE` runs)."""
    path = BIN / program
    if not path.exists():
        pytest.fail(f"{path} is missing (make selftests)")
    p = subprocess.run([str(path), "-l"], capture_output=True, text=True, timeout=60)
    names = p.stdout.split()
    assert p.returncode == 0 and names, f"{program} -l: rc={p.returncode}\n{p.stdout}{p.stderr}"
    # A program without GP_HARNESS_MAIN ignores -l and runs its tests: say so, not a count.
    assert all(re.fullmatch(r"\w+(\.\w+)+", n) for n in names), \
        f"{program} -l printed no test list (does it end with GP_HARNESS_MAIN?):\n{p.stdout[:2000]}"
    if fixture is not None:
        names = [n for n in names if n.split(".")[0] == fixture]
        assert names, f"{program} has no fixture {fixture}"
    return names


def passed_tests(output):
    """Names of the tests a TAP output says passed (not skipped), in order."""
    return re.findall(r"^ok \d+ (\S+)$", output, re.M)


def check_edu_dma(r, bar_path, offset, length, seed, transfers, fill=0):
    """gdrpeer_edu_dma's run r: every DMA done with no mismatch, and the host's BAR file holds the
    pattern at the export's bar_offset + offset (offset within the allocation), with only `fill`
    in the 8 bytes either side (before it only where the allocation has 8 bytes to show)."""
    assert r.status == 0, r.output
    kv = keyvals(r.output)
    assert kv["mismatches"] == 0 and kv["transfers"] == transfers
    at = kv["bar_offset"] + offset
    data = bar_path.read_bytes()
    assert data[at:at + length] == pattern(seed, length), f"pattern missing at BAR offset {at:#x}"
    assert data[at - 8:at] == bytes([fill]) * 8 or offset < 8
    assert data[at + length:at + length + 8] == bytes([fill]) * 8


def check_all_passed(output, count):
    """One kselftest program's TAP output: a plan of `count` tests, every one passed, none
    failed or skipped, and the totals line says the same."""
    plan, _, not_ok, skipped, tot = tap(output)
    assert plan == count, output[-3000:]
    assert not not_ok, "\n".join(not_ok) + "\n" + output[-4000:]
    assert not skipped, "\n".join(skipped)
    assert tot == {"pass": count, "fail": 0, "skip": 0, "error": 0}, output[-4000:]
