#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A QP's datagrams follow the routing table as it changes under the QP.

    netns_route.py NS DEV_A GID_A DEV_B GID_B DST [NETDEV]

Run from init_net: in the RDMA core's shared namespace mode every device is visible from
every namespace. A UD QP on DEV_A, whose netdev (NETDEV, needed for IPv4) is in
namespace NS, sends through one AH to a UD QP on DEV_B at DST (DEV_B's GID at GID_B).
rrxe keeps a QP's route between its packets (glue/net.rs, RouteCache) and must drop it
when the FIB changes, as the kernel's sockets do: a datagram arrives; with a route for
DST added in NS the next takes that route and does not arrive; with the route deleted
the next arrives again. One line a step; exit 1 at the first failure.

The route added differs by family because rrxe's lookups name the netdev (the port's) as
the output interface: for IPv6 an unreachable route, which the IP layer refuses the
datagram by (counted in DEV_A's send_errors); for IPv4, where a lookup bound to an
interface that finds no usable route assumes the destination on link
(ip_route_output_key_hash_rcu) and so ignores an unreachable route, a route through a
gateway that never answers its neighbour's solicitation, where the datagram waits and
is dropped.
"""

import subprocess
import sys
import time

from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE
import pyverbs.enums as e

QKEY = 0x1ee7
GRH = 40
MSG = 64
# How long a datagram that is not to arrive is waited for: under TCG one crosses the veth
# in well under a millisecond.
QUIET = 3.0


class Side:
    def __init__(self, name, gid_index):
        self.name = name
        self.ctx = Context(name=name)
        self.gid_index = gid_index
        self.gid = self.ctx.query_gid(1, gid_index)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 16)
        self.mr = MR(self.pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
        qa = QPAttr()
        qa.qkey = QKEY
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=self.cq, rcq=self.cq,
                                         cap=cap, sq_sig_all=1), qa)

    def completions(self, timeout):
        """The completions that come within `timeout` seconds, until the first, as
        (status, byte_len)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            n, wcs = self.cq.poll(8)
            if n:
                return [(wc.status, wc.byte_len) for wc in wcs[:n]]
            time.sleep(0.01)
        return []

    def send_errors(self):
        out = subprocess.run(["rdma", "statistic", "show", "link", f"{self.name}/1"],
                             check=True, capture_output=True, text=True).stdout.split()
        return int(out[out.index("send_errors") + 1])


def main():
    ns, dst = sys.argv[1], sys.argv[6]
    a = Side(sys.argv[2], int(sys.argv[3]))
    b = Side(sys.argv[4], int(sys.argv[5]))
    ah = AH(a.pd, attr=AHAttr(port_num=1, is_global=1,
                               gr=GlobalRoute(dgid=b.gid, sgid_index=a.gid_index, hop_limit=64)))
    v6 = ":" in dst
    if v6:
        family, route = "-6", ["unreachable", f"{dst}/128"]
    else:
        gateway = dst.rsplit(".", 1)[0] + ".254"
        family, route = "-4", [f"{dst}/32", "via", gateway, "dev", sys.argv[7]]

    def attempt(what, arrives):
        sge = SGE(b.mr.buf, GRH + MSG, b.mr.lkey)
        b.qp.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[sge]))
        errors = a.send_errors()
        wr = SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(a.mr.buf, MSG, a.mr.lkey)])
        wr.set_wr_ud(ah, b.qp.qp_num, QKEY)
        a.qp.post_send(wr)
        # A UD send completes once handed to the IP layer, whatever it then does.
        sent = a.completions(30)
        got = b.completions(30 if arrives else QUIET)
        more = a.send_errors() - errors
        print(f"# {what}: sender {sent}, receiver {got}, send_errors +{more}")
        ok_send = len(sent) == 1 and sent[0][0] == e.IBV_WC_SUCCESS
        if arrives:
            ok = ok_send and got == [(e.IBV_WC_SUCCESS, GRH + MSG)] and more == 0
        else:
            ok = ok_send and not got and more == (1 if v6 else 0)
        if not ok:
            print(f"not ok: {what}")
            sys.exit(1)
        print(f"ok: {what}")

    def ip_route(verb):
        subprocess.run(["ip", "-n", ns, family, "route", verb, *route], check=True)

    attempt("a datagram arrives", True)
    attempt("a second one by the same route arrives", True)
    ip_route("add")
    try:
        # The receive posted for the lost datagram stays posted for the next.
        attempt(f"with {' '.join(route)} in {ns} the next does not arrive", False)
    finally:
        ip_route("del")
    attempt("with the route deleted again the next arrives", True)


if __name__ == "__main__":
    main()
