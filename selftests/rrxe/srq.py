#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Shared receive queues through the unmodified rdma-core rxe provider (pyverbs), TAP output.

Run inside a VM with an rrxe device named by $RRXE_DEV (default rrxe0), whose RoCEv2 GID
index is $RRXE_GID. Receives are consumed by UD datagrams a second QP of the same device
sends to the QP on the SRQ (the loopback path).
"""
import os
import select
import sys
import time

from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE
import pyverbs.enums as e

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
import tap  # noqa: E402 - selftests/rrxe/lib, found through the line above
from tap import fails_with, test  # noqa: E402

DEV = os.environ.get("RRXE_DEV", "rrxe0")
GID_INDEX = int(os.environ.get("RRXE_GID", "1"))
QKEY = 0x11111111
GRH = 40
MSG = 64


def event_fds():
    """The context's async event fd (uverbs' anon inode; this script opens no channels)."""
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "infinibandevent" in os.readlink(f"/proc/self/fd/{fd}"):
                fds.append(int(fd))
        except OSError:
            pass
    return fds


def next_event(timeout=5.0):
    """The next async event type, or None if none comes within `timeout` seconds."""
    fds = event_fds()
    if not fds:
        raise AssertionError("no async event fd found")
    ready, _, _ = select.select(fds, [], [], timeout)
    if not ready:
        return None
    ev = ctx.get_async_event()
    kind = ev.event_type
    ev.ack()
    return kind


def drain_events():
    while next_event(0.2) is not None:
        pass


tap.begin(f"shared receive queues on {DEV}, GID index {GID_INDEX}")
ctx = Context(name=DEV)
attr = ctx.query_device()
pd = PD(ctx)
gid = ctx.query_gid(1, GID_INDEX)
buf = MR(pd, 1 << 16, e.IBV_ACCESS_LOCAL_WRITE)


def srq_of(max_wr, max_sge=1, limit=0):
    return SRQ(pd, SrqInitAttr(SrqAttr(max_wr=max_wr, max_sge=max_sge, srq_limit=limit)))


def post(srq, first, count):
    for i in range(first, first + count):
        sge = SGE(buf.buf + (i % 64) * 256, GRH + MSG, buf.lkey)
        srq.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[sge]))


class Pair:
    """A UD QP on `srq` and a UD sender addressing it through a loopback AH."""

    def __init__(self, srq):
        self.cq = CQ(ctx, 256)
        cap = QPCap(max_send_wr=64, max_recv_wr=0, max_send_sge=1, max_recv_sge=0)
        qa = QPAttr()
        qa.qkey = QKEY
        self.rx = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=self.cq, rcq=self.cq, srq=srq,
                                    cap=cap), qa)
        cap = QPCap(max_send_wr=64, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
        self.tx = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=self.cq, rcq=self.cq, cap=cap,
                                    sq_sig_all=1), qa)
        gr = GlobalRoute(dgid=gid, sgid_index=GID_INDEX)
        self.ah = AH(pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))

    def send(self, count):
        for _ in range(count):
            wr = SendWR(opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(buf.buf + 0xf000, MSG, buf.lkey)])
            wr.set_wr_ud(self.ah, self.rx.qp_num, QKEY)
            self.tx.post_send(wr)

    def receives(self, count, timeout=5.0):
        """wr_ids of `count` successful receives, in completion order."""
        got = []
        end = time.time() + timeout
        while len(got) < count and time.time() < end:
            npolled, wcs = self.cq.poll(16)
            for wc in wcs[:npolled]:
                if wc.opcode & e.IBV_WC_RECV:
                    assert wc.status == e.IBV_WC_SUCCESS, f"receive status {wc.status}"
                    assert wc.byte_len == GRH + MSG, f"byte_len {wc.byte_len}"
                    assert wc.qp_num == self.rx.qp_num
                    got.append(wc.wr_id)
                else:
                    assert wc.status == e.IBV_WC_SUCCESS, f"send status {wc.status}"
            if not npolled:
                time.sleep(0.01)
        return got

    def close(self):
        self.rx.close()
        self.tx.close()
        self.ah.close()
        self.cq.close()


@test("query_device reports SRQ limits and SRQ resize")
def _():
    assert attr.max_srq > 0, attr.max_srq
    assert attr.max_srq_wr == 1 << 20, attr.max_srq_wr
    assert attr.max_srq_sge == 27, attr.max_srq_sge
    assert attr.device_cap_flags & e.IBV_DEVICE_SRQ_RESIZE


@test("create, query and destroy an SRQ; sizes are granted as rdma_rxe grants them")
def _():
    srq = srq_of(100, max_sge=3)
    a = srq.query()
    assert a.max_wr == 127 and a.max_sge == 3 and a.srq_limit == 0, \
        (a.max_wr, a.max_sge, a.srq_limit)
    srq.close()
    srq = srq_of(1, max_sge=0)
    a = srq.query()
    assert a.max_wr == 1 and a.max_sge == 1, (a.max_wr, a.max_sge)
    srq.close()


@test("bad create attributes are refused: max_wr 0, 2^20 + 1, 28 SGEs")
def _():
    fails_with(lambda: srq_of(0), 22)
    fails_with(lambda: srq_of((1 << 20) + 1), 22)
    fails_with(lambda: srq_of(16, max_sge=28), 22)
    srq_of(16, max_sge=27).close()


@test("modify: the limit arms and is reported; bad limits and sizes are refused")
def _():
    srq = srq_of(15)
    srq.modify(SrqAttr(srq_limit=5), e.IBV_SRQ_LIMIT)
    assert srq.query().srq_limit == 5
    fails_with(lambda: srq.modify(SrqAttr(srq_limit=16), e.IBV_SRQ_LIMIT), 22)
    # IBA 11.2.3.3: a size below the armed limit is refused.
    fails_with(lambda: srq.modify(SrqAttr(max_wr=4), e.IBV_SRQ_MAX_WR), 22)
    fails_with(lambda: srq.modify(SrqAttr(max_wr=0), e.IBV_SRQ_MAX_WR), 22)
    fails_with(lambda: srq.modify(SrqAttr(max_wr=(1 << 20) + 1), e.IBV_SRQ_MAX_WR), 22)
    srq.modify(SrqAttr(srq_limit=0), e.IBV_SRQ_LIMIT)
    assert srq.query().srq_limit == 0
    srq.close()


@test("WQEs posted to an SRQ are consumed by a UD QP on it, in order")
def _():
    srq = srq_of(31)
    p = Pair(srq)
    post(srq, 0, 20)
    p.send(20)
    got = p.receives(20)
    assert got == list(range(20)), got
    p.close()
    srq.close()


@test("limit event: one-shot, when fewer than the limit remain; the limit then reads 0")
def _():
    drain_events()
    srq = srq_of(31)
    p = Pair(srq)
    post(srq, 0, 10)
    srq.modify(SrqAttr(srq_limit=5), e.IBV_SRQ_LIMIT)
    p.send(5)
    assert p.receives(5) == list(range(5))
    # 5 left: not below the limit yet.
    assert next_event(0.5) is None, "limit event with 5 WQEs left, limit 5"
    p.send(1)
    assert p.receives(1) == [5]
    kind = next_event()
    assert kind == e.IBV_EVENT_SRQ_LIMIT_REACHED, kind
    assert srq.query().srq_limit == 0
    p.send(2)
    assert p.receives(2) == [6, 7]
    assert next_event(0.5) is None, "the limit event fired twice"
    # Re-armed, it fires again.
    srq.modify(SrqAttr(srq_limit=2), e.IBV_SRQ_LIMIT)
    p.send(1)
    assert p.receives(1) == [8]
    kind = next_event()
    assert kind == e.IBV_EVENT_SRQ_LIMIT_REACHED, kind
    p.close()
    srq.close()
    drain_events()


@test("resize with WQEs waiting: they move to the new ring, in order, and posting goes on")
def _():
    srq = srq_of(15)
    p = Pair(srq)
    post(srq, 0, 12)
    p.send(2)
    assert p.receives(2) == [0, 1]
    srq.modify(SrqAttr(max_wr=100), e.IBV_SRQ_MAX_WR)
    assert srq.query().max_wr == 127, srq.query().max_wr
    # Beyond the old capacity: the provider posts into the new ring it mapped.
    post(srq, 12, 50)
    p.send(60)
    got = p.receives(60)
    assert got == list(range(2, 62)), got
    p.close()
    srq.close()


@test("resize below the WQEs waiting is refused and loses none")
def _():
    srq = srq_of(31)
    p = Pair(srq)
    post(srq, 0, 10)
    fails_with(lambda: srq.modify(SrqAttr(max_wr=4), e.IBV_SRQ_MAX_WR), 22)
    assert srq.query().max_wr == 31
    post(srq, 10, 5)
    p.send(15)
    assert p.receives(15) == list(range(15))
    # Shrinking to what is waiting works.
    post(srq, 15, 3)
    srq.modify(SrqAttr(max_wr=3), e.IBV_SRQ_MAX_WR)
    assert srq.query().max_wr == 3, srq.query().max_wr
    p.send(3)
    assert p.receives(3) == [15, 16, 17]
    p.close()
    srq.close()


@test("two QPs share one SRQ")
def _():
    srq = srq_of(63)
    p1, p2 = Pair(srq), Pair(srq)
    post(srq, 0, 40)
    p1.send(20)
    p2.send(20)
    got = p1.receives(20) + p2.receives(20)
    assert sorted(got) == list(range(40)), got
    p1.close()
    p2.close()
    srq.close()


@test("a QP on an SRQ entering ERR reports LAST_WQE_REACHED; the SRQ keeps its WQEs")
def _():
    drain_events()
    srq = srq_of(31)
    p = Pair(srq)
    post(srq, 0, 4)
    p.rx.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    kind = next_event()
    assert kind == e.IBV_EVENT_QP_LAST_WQE_REACHED, kind
    p2 = Pair(srq)
    p2.send(4)
    got = p2.receives(4)
    assert got == [0, 1, 2, 3], (got, srq.query().max_wr)
    p.close()
    p2.close()
    srq.close()


@test("100 SRQs created and destroyed")
def _():
    srqs = [srq_of(64, max_sge=4) for _ in range(100)]
    for s in srqs:
        s.close()


sys.exit(tap.done())
