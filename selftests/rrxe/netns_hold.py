#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Holds user contexts and live RC QPs on two rrxe devices while their namespace dies.

    netns_hold.py DEV_A GID_A DEV_B GID_B

Run from init_net: in the RDMA core's shared namespace mode every device is visible from
every namespace, so one process can open devices whose netdevs sit in two other
namespaces. It connects an RC QP on DEV_A to one on DEV_B (their GIDs at the given
indexes), checks ten Sends each way with their data, prints "ready" and then waits for
each context to be cut off (IBV_EVENT_DEVICE_FATAL) as the netdevs under them are
unregistered; then it closes what is left and prints what it saw. rrxe offers
disassociate_ucontext, so the core's unregistration of a device does not wait for the
user contexts: it destroys their objects and ends each context's event stream with
DEVICE_FATAL; the closes after that may fail with EIO.
"""

import os
import select
import sys
import time

from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SGE, SendWR
import pyverbs.enums as e

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
from uverbs_raw import async_event_fds  # noqa: E402 - selftests/rrxe/lib, found through the line above

PSN = 0x4e4e
MSG = 256
N = 10
WAIT = 120.0  # seconds for the events after "ready"


class Side:
    def __init__(self, name, gid):
        before = async_event_fds()
        self.ctx = Context(name=name)
        (self.event_fd,) = async_event_fds() - before
        self.gid_index = gid
        self.gid = self.ctx.query_gid(1, gid)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 64)
        self.mr = MR(self.pd, MSG * 2 * N,
                     e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
        cap = QPCap(max_send_wr=N, max_recv_wr=N, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq,
                                         cap=cap))

    def modify(self, state, mask, **attrs):
        a = QPAttr()
        a.qp_state = state
        for k, v in attrs.items():
            setattr(a, k, v)
        self.qp.modify(a, e.IBV_QP_STATE | mask)

    def connect(self, peer):
        self.modify(e.IBV_QPS_INIT, e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS,
                    pkey_index=0, port_num=1, qp_access_flags=e.IBV_ACCESS_REMOTE_WRITE)
        ah = AHAttr(port_num=1, is_global=1,
                    gr=GlobalRoute(dgid=peer.gid, sgid_index=self.gid_index, hop_limit=64))
        self.modify(e.IBV_QPS_RTR,
                    e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN |
                    e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER,
                    ah_attr=ah, path_mtu=e.IBV_MTU_1024, dest_qp_num=peer.qp.qp_num,
                    rq_psn=PSN, max_dest_rd_atomic=1, min_rnr_timer=1)
        self.modify(e.IBV_QPS_RTS,
                    e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
                    e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC,
                    timeout=14, retry_cnt=7, rnr_retry=7, sq_psn=PSN, max_rd_atomic=1)

    def post_recvs(self):
        for i in range(N):
            sge = SGE(self.mr.buf + (N + i) * MSG, MSG, self.mr.lkey)
            self.qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[sge]))

    def send(self, tag):
        for i in range(N):
            self.mr.write(bytes([tag, i]) * (MSG // 2), MSG, i * MSG)
            sge = SGE(self.mr.buf + i * MSG, MSG, self.mr.lkey)
            self.qp.post_send(SendWR(wr_id=i, num_sge=1, sg=[sge], opcode=e.IBV_WR_SEND,
                                     send_flags=e.IBV_SEND_SIGNALED))

    def poll(self, want):
        got = []
        end = time.monotonic() + 30
        while len(got) < want and time.monotonic() < end:
            n, wcs = self.cq.poll(want - len(got))
            for wc in wcs[:n]:
                if wc.status != e.IBV_WC_SUCCESS:
                    raise RuntimeError(f"completion status {wc.status}")
                got.append(wc)
            if n == 0:
                time.sleep(0.01)
        if len(got) < want:
            raise RuntimeError(f"{len(got)} of {want} completions")

    def received(self, tag):
        for i in range(N):
            if self.mr.read(MSG, (N + i) * MSG) != bytes([tag, i]) * (MSG // 2):
                raise RuntimeError(f"message {i} from the peer has the wrong data")

    def close(self):
        """Closes every object; returns how many closes the cut-off context refused."""
        refused = 0
        for o in (self.qp, self.mr, self.cq, self.pd, self.ctx):
            try:
                o.close()
            except Exception:  # noqa: BLE001 - EIO once the context is cut off
                refused += 1
        return refused


def events(sides):
    """The async events of each side until each saw DEVICE_FATAL, or WAIT seconds."""
    seen = {s: [] for s in sides}
    end = time.monotonic() + WAIT
    while time.monotonic() < end:
        waiting = [s for s in sides if e.IBV_EVENT_DEVICE_FATAL not in seen[s]]
        if not waiting:
            break
        fds = {s.event_fd: s for s in waiting}
        ready, _, _ = select.select(list(fds), [], [], max(0.0, end - time.monotonic()))
        for fd in ready:
            s = fds[fd]
            ev = s.ctx.get_async_event()
            seen[s].append(ev.event_type)
            ev.ack()
    return seen


def main():
    a = Side(sys.argv[1], int(sys.argv[2]))
    b = Side(sys.argv[3], int(sys.argv[4]))
    for x, y in ((a, b), (b, a)):
        x.connect(y)
    for x in (a, b):
        x.post_recvs()
    a.send(0xa)
    b.send(0xb)
    for x in (a, b):
        x.poll(2 * N)
    a.received(0xb)
    b.received(0xa)
    print(f"ready: {N} Sends each way between {sys.argv[1]} and {sys.argv[3]}", flush=True)
    seen = events([a, b])
    for s, name in ((a, sys.argv[1]), (b, sys.argv[3])):
        print(f"{name}: events {seen[s]}", flush=True)
    refused = sum(s.close() for s in (a, b))
    print(f"closed ({refused} closes refused after the cut)", flush=True)
    return 0 if all(e.IBV_EVENT_DEVICE_FATAL in seen[s] for s in (a, b)) else 1


sys.exit(main())
