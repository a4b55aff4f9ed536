#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Which provider drives a device, seen through a verb only librrxe supplies.

    provider.py DEV

Prints `provider: rrxe` when ibv_get_srq_num() answers on a basic SRQ of DEV
(librrxe reports the number rrxe assigned) and `provider: rxe` when it fails
with EOPNOTSUPP (rdma-core's rxe provider has no get_srq_num, so libibverbs
answers for it). Any other outcome is an error (exit 1). It then checks what
any provider must do on the same context: a PD, a CQ and the SRQ, which is
how the number comes to exist.
"""
import errno
import sys

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.srq import SRQ, SrqInitAttr, SrqAttr


def main():
    dev = sys.argv[1]
    with d.Context(name=dev) as ctx:
        pd = PD(ctx)
        CQ(ctx, 8)
        srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=8, max_sge=1)))
        try:
            num = srq.get_srq_num()
        except PyverbsRDMAError as err:
            if err.error_code != errno.EOPNOTSUPP:
                raise
            print("provider: rxe")
            return 0
        # rrxe numbers SRQs from 1 (the core's srq_num; 0 names none).
        if num == 0:
            print(f"get_srq_num gave 0 on {dev}")
            return 1
        print(f"provider: rrxe (srq_num {num:#x})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
