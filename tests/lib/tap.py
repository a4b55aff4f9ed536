# SPDX-License-Identifier: GPL-2.0
"""TAP output for the in-VM Python tests, in the format of tests/lib/tap.sh (which
scripts/check.sh counts: `ok ` passes, `not ok ` fails, `ok ... # SKIP` is neither).

    import tap
    from tap import fails_with, report, row, skip, test

    tap.begin(TITLE)              "TAP version 13", then "# TITLE"
    report(ok, desc, detail="")   "ok N - desc" or "not ok N - desc" followed by detail
                                  (any object, str() of it), one "#   " line per line
    @test(desc)                   runs the function at once as one check: passes if it
                                  returns, fails with the traceback if it raises
    row(desc, fn, *args, **kw)    the same for fn(*args, **kw)
    fails_with(fn, *errnos)       fn() must raise a pyverbs error or OSError, with one of
                                  errnos if any are given; else AssertionError
    skip(desc, reason)            "ok N - desc # SKIP reason"
    diag(text)                    "# text", one line per line: figures, not checks
    SOAK                          whether this is `make soak` (RRXE_SOAK=1): the long
                                  variants of a test; `make check` runs the short ones
    sys.exit(tap.done())          "1..N", then "# totals: P passed, F failed, S skipped";
                                  returns the exit status, 1 if anything failed

A row that takes 20 s or more is followed by "# took N s" (tap.sh does the same).
Every line is flushed as it is printed. The counters live here, one stream per process.
"""
import os
import sys
import time
import traceback

try:
    from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
    _VERBS_ERRORS = (PyverbsRDMAError, PyverbsError, OSError)
except ImportError:  # a host without pyverbs: only OS errors
    _VERBS_ERRORS = (OSError,)

SOAK = os.environ.get("RRXE_SOAK") == "1"
# Why `make check` skips a soak-only check (tap.sh has the same).
SOAK_ONLY = "soak only (make soak: RRXE_SOAK=1); make check runs the other rounds"

_n = 0
_failed = 0
_skipped = 0


def _say(*lines):
    for line in lines:
        print(line)
    sys.stdout.flush()


def begin(title):
    """The stream's header: the TAP version and a comment line naming what runs."""
    _say("TAP version 13", *("# " + line for line in str(title).splitlines()))


def report(ok, desc, detail=""):
    """One check: `ok N - desc`, or `not ok N - desc` and the detail as `#   ` lines."""
    global _n, _failed
    _n += 1
    lines = [("ok" if ok else "not ok") + f" {_n} - {desc}"]
    if not ok:
        _failed += 1
        lines += ["#   " + line for line in str(detail).splitlines()]
    _say(*lines)


def skip(desc, reason):
    """A check that did not run: counted as neither a pass nor a failure."""
    global _n, _skipped
    _n += 1
    _skipped += 1
    _say(f"ok {_n} - {desc} # SKIP {reason}")


def diag(text):
    """Information for the reader (figures, counters), one `# ` line per line."""
    _say(*("# " + line for line in str(text).splitlines()))


def row(desc, fn, *args, **kwargs):
    """Runs fn(*args, **kwargs) as one check; an exception fails it with its traceback."""
    start = time.monotonic()
    try:
        fn(*args, **kwargs)
        report(True, desc)
    except Exception:  # noqa: BLE001 - every failure is reported, none is fatal
        report(False, desc, traceback.format_exc())
    took = time.monotonic() - start
    if took >= 20:
        _say(f"# took {took:.0f} s")


def test(desc):
    """Decorator: runs the function at once as one check (see row) and returns it."""
    def wrap(fn):
        row(desc, fn)
        return fn
    return wrap


def fails_with(fn, *errnos):
    """fn() must fail with a verbs or OS error, with one of `errnos` if any are given."""
    try:
        fn()
    except _VERBS_ERRORS as exc:
        err = getattr(exc, "error_code", None) or getattr(exc, "errno", None)
        if errnos and err not in errnos:
            raise AssertionError(f"failed with errno {err}, expected one of {errnos}: {exc}")
        return
    raise AssertionError("unexpectedly succeeded")


def done():
    """Prints the plan and the totals; returns the exit status (1 if anything failed)."""
    _say(f"1..{_n}", f"# totals: {_n - _failed - _skipped} passed, {_failed} failed, "
         f"{_skipped} skipped")
    return 1 if _failed else 0
