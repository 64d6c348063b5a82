# Description: helper the Python test clients import (not a test): ok / fail / check lines in the suite's "ok: " / "FAIL: " format, and finish(), which exits 1 after any failure.
import sys

fails = 0


def ok(m):
    print("ok: " + m)


def fail(m):
    global fails
    print("FAIL: " + m)
    fails += 1


def check(c, m):
    (ok if c else fail)(m)


def finish():
    if fails:
        print("%d failures" % fails)
        sys.exit(1)
