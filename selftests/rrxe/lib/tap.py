# SPDX-License-Identifier: GPL-2.0
"""KTAP output for the in-VM Python tests, written through the kernel's kselftest helpers
(kselftest/ksft.py of the install scripts/kselftest.sh made), as selftests/rrxe/lib/tap.sh
does for the shell tests (scripts/check.sh counts: `ok ` passes, `not ok ` fails,
`ok ... # SKIP` is neither).

    import tap
    from tap import fails_with, report, row, skip, test

    tap.begin(TITLE)              "TAP version 13", then "# TITLE"
    report(ok, desc, detail="")   "ok N desc" or "not ok N desc" followed by detail
                                  (any object, str() of it), one "#   " line per line
    @test(desc)                   runs the function at once as one check: passes if it
                                  returns, fails with the traceback if it raises
    row(desc, fn, *args, **kw)    the same for fn(*args, **kw)
    fails_with(fn, *errnos)       fn() must raise a pyverbs error or OSError, with one of
                                  errnos if any are given; else AssertionError
    skip(desc, reason)            "ok N desc (skipped: reason) # SKIP"
    diag(text)                    "# text", one line per line: figures, not checks
    SOAK                          whether this is `make soak` (RRXE_SOAK=1): the long
                                  variants of a test; `make check` runs the short ones
    sys.exit(tap.done())          "1..N", then "# Totals: pass:P fail:F ... skip:S ...";
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



def _import_ksft():
    """ksft.py sits at kselftest/ beside the collections of an install (this file being
    rrxe/lib/tap.py there); a test run from the checkout uses the checkout's install."""
    lib = os.path.dirname(os.path.realpath(__file__))
    for where in (os.path.join(lib, "..", "..", "kselftest"),
                  os.path.join(lib, "..", "..", "..", "build", "kselftest", "kselftest")):
        if os.path.exists(os.path.join(where, "ksft.py")):
            sys.path.insert(0, where)
            import ksft  # noqa: PLC0415 - found only now
            return ksft
    print("Bail out! no kselftest/ksft.py: install the target first (scripts/kselftest.sh)")
    sys.exit(1)


ksft = _import_ksft()

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
    """The stream's header: the KTAP version and a comment line naming what runs. One stream
    a process; a shell program that runs several nests them (tap.sh's subtest)."""
    global _n, _failed, _skipped
    _n = _failed = _skipped = 0
    ksft.ksft_cnt = {"pass": 0, "fail": 0, "skip": 0}
    ksft.ksft_test_number = 1
    ksft.print_header()
    for line in str(title).splitlines():
        ksft.print_msg(line)
    sys.stdout.flush()


def report(ok, desc, detail=""):
    """One check: `ok N desc`, or `not ok N desc` and the detail as `#   ` lines."""
    global _n, _failed
    _n += 1
    if ok:
        ksft.test_result_pass(desc)
    else:
        _failed += 1
        ksft.test_result_fail(desc)
        _say(*("#   " + line for line in str(detail).splitlines()))
    sys.stdout.flush()


def skip(desc, reason):
    """A check that did not run: counted as neither a pass nor a failure. ksft.py's skip
    takes no reason; the description carries it."""
    global _n, _skipped
    _n += 1
    _skipped += 1
    ksft.test_result_skip(f"{desc} (skipped: {reason})")
    sys.stdout.flush()


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
    """Prints the plan (last, as TAP allows) and the totals; returns the exit status (1 if
    anything failed). ksft.finished() would exit; callers still clean up after this."""
    ksft.set_plan(_n)
    ksft.print_cnts()
    sys.stdout.flush()
    return 1 if _failed else 0
