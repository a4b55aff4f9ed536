#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Holds a user context and a PD on a device until the core cuts the context off.

    fatal_hold.py DEV READY RESULT [WAIT]

Opens DEV (a context and a PD), creates the file READY, then waits up to WAIT seconds
(default 600) for the context's first asynchronous event. rrxe offers
disassociate_ucontext, so an rmmod, a device's unregistration or its move to another
namespace does not wait for the context: the core destroys its objects and ends its event
stream with IBV_EVENT_DEVICE_FATAL, after which a verb fails with EIO. RESULT gets one line,
`event=E errno=N`: E is DEVICE_FATAL, another event's number or None (nothing came), N the
errno of a query_device after the event (0 if it worked). Then the objects are closed,
whatever that returns.
"""

import os
import select
import sys

from pyverbs.device import Context
from pyverbs.pd import PD
import pyverbs.enums as e

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from uverbs_raw import async_event_fds  # noqa: E402 - this directory, found through the line above


def main(dev, ready, result, wait=600.0):
    before = async_event_fds()
    ctx = Context(name=dev)
    (fd,) = async_event_fds() - before
    pd = PD(ctx)
    open(ready, "w").close()
    kind = None
    if select.select([fd], [], [], wait)[0]:
        ev = ctx.get_async_event()
        kind = "DEVICE_FATAL" if ev.event_type == e.IBV_EVENT_DEVICE_FATAL else ev.event_type
        ev.ack()
    try:
        ctx.query_device()
        err = 0
    except Exception as exc:  # noqa: BLE001 - pyverbs raises several kinds; the errno counts
        err = getattr(exc, "error_code", None) or getattr(exc, "errno", None)
    with open(result, "w") as f:
        f.write(f"event={kind} errno={err}\n")
    for o in (pd, ctx):
        try:
            o.close()
        except Exception:  # noqa: BLE001 - a cut-off context may refuse its closes (EIO)
            pass


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 600.0)
