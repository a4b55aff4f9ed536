#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The QP context as the engine keeps it, through the unmodified rxe provider (pyverbs),
TAP output: Query QP reports the PSNs in use; a responder without resources
(max_dest_rd_atomic 0) refuses RDMA Reads and atomics with an Invalid Request NAK; a
requester with an initiator depth of 0 issues none; a packet for a connected QP that does
not come over its path, or carries another P_Key, is dropped and counted.

Runs on side A with an rrxe device $RRXE_DEV over eth0 whose IPv4 GID index is $RRXE_GID.
The first checks use two QPs of the device in loopback; the last one needs the peer VM
running selftests/rrxe/qp-peer.sh, which sends hand-made packets to a QP here (selftests/rrxe/lib/
roce_send.py) once it learns the QP's number and expected PSN over TCP port 4796.
"""
import os
import select
import socket
import subprocess
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
import tap  # noqa: E402 - selftests/rrxe/lib, found through the line above
from tap import report, test  # noqa: E402
from uverbs_raw import async_event_fds  # noqa: E402

DEV = os.environ.get("RRXE_DEV", "rrxe0")
GID = int(os.environ.get("RRXE_GID", "1"))
PEER = os.environ.get("RRXE_PEER_IP4")
CTL_PORT = 4796
PSN = 0x123
ALL = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
       | e.IBV_ACCESS_REMOTE_ATOMIC)

ctx = Context(name=DEV)
OWN_GID = ctx.query_gid(1, GID)


def counters():
    out = subprocess.run(["rdma", "statistic", "show", "link", f"{DEV}/1"],
                         capture_output=True, text=True, check=True).stdout.split()
    return {out[i]: int(out[i + 1]) for i in range(2, len(out) - 1, 2)
            if out[i + 1].isdigit()}


def gid_of_ip4(ip):
    from pyverbs.addr import GID as Gid
    g = Gid()
    g.gid = "0000:0000:0000:0000:0000:ffff:" + "".join(
        f"{int(a):02x}" + ("" if i % 2 == 0 else ":") for i, a in enumerate(ip.split("."))
    ).rstrip(":")
    return g


def modify(qp, state, **attrs):
    a = QPAttr()
    a.qp_state = state
    mask = e.IBV_QP_STATE
    bits = {"pkey_index": e.IBV_QP_PKEY_INDEX, "port_num": e.IBV_QP_PORT,
            "qp_access_flags": e.IBV_QP_ACCESS_FLAGS, "ah_attr": e.IBV_QP_AV,
            "path_mtu": e.IBV_QP_PATH_MTU, "dest_qp_num": e.IBV_QP_DEST_QPN,
            "rq_psn": e.IBV_QP_RQ_PSN, "max_dest_rd_atomic": e.IBV_QP_MAX_DEST_RD_ATOMIC,
            "min_rnr_timer": e.IBV_QP_MIN_RNR_TIMER, "sq_psn": e.IBV_QP_SQ_PSN,
            "timeout": e.IBV_QP_TIMEOUT, "retry_cnt": e.IBV_QP_RETRY_CNT,
            "rnr_retry": e.IBV_QP_RNR_RETRY, "max_rd_atomic": e.IBV_QP_MAX_QP_RD_ATOMIC}
    for name, val in attrs.items():
        setattr(a, name, val)
        mask |= bits[name]
    qp.modify(a, mask)


def connect(qp, dest_qpn, dgid, rd_atomic=4, dest_rd_atomic=4, rtr_only=False):
    """Brings `qp` to RTS (or RTR) towards QP `dest_qpn` at `dgid`."""
    modify(qp, e.IBV_QPS_INIT, pkey_index=0, port_num=1, qp_access_flags=ALL)
    ah = AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=dgid, sgid_index=GID))
    modify(qp, e.IBV_QPS_RTR, ah_attr=ah, path_mtu=e.IBV_MTU_1024, dest_qp_num=dest_qpn,
           rq_psn=PSN, max_dest_rd_atomic=dest_rd_atomic, min_rnr_timer=12)
    if not rtr_only:
        modify(qp, e.IBV_QPS_RTS, sq_psn=PSN, timeout=14, retry_cnt=7, rnr_retry=7,
               max_rd_atomic=rd_atomic)


class Pair:
    """Two RC QPs of the device connected to each other (loopback): `a` requests, `b`
    responds, with the depths given."""

    def __init__(self, rd_atomic=4, dest_rd_atomic=4):
        self.pd = PD(ctx)
        self.cq_a = CQ(ctx, 64)
        self.cq_b = CQ(ctx, 64)
        cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
        self.a = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq_a, rcq=self.cq_a,
                                        cap=cap))
        self.b = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq_b, rcq=self.cq_b,
                                        cap=cap))
        connect(self.a, self.b.qp_num, OWN_GID, rd_atomic=rd_atomic)
        connect(self.b, self.a.qp_num, OWN_GID, dest_rd_atomic=dest_rd_atomic)
        self.buf = MR(self.pd, 64 * 1024, ALL)

    def close(self):
        for o in (self.a, self.b, self.buf, self.cq_a, self.cq_b, self.pd):
            o.close()


def poll(cq, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        n, wcs = cq.poll(1)
        if n:
            return wcs[0]
        time.sleep(0.001)
    raise AssertionError(f"no completion within {timeout} s")


def state(qp):
    return qp.query(e.IBV_QP_STATE)[0].qp_state


def rdma(p, opcode, offset=0, length=64):
    wr = SendWR(wr_id=opcode, opcode=opcode, num_sge=1,
                sg=[SGE(p.buf.buf + offset, length, p.buf.lkey)])
    if opcode in (e.IBV_WR_ATOMIC_FETCH_AND_ADD, e.IBV_WR_ATOMIC_CMP_AND_SWP):
        wr.set_wr_atomic(p.buf.rkey, p.buf.buf + 4096, 1, 0)
    else:
        wr.set_wr_rdma(p.buf.rkey, p.buf.buf + 8192)
    p.a.post_send(wr)
    return poll(p.cq_a)


def async_event(want, timeout=5.0):
    """Waits for an async event of type `want` on the context; returns the types seen."""
    fds = list(async_event_fds())
    seen = []
    end = time.monotonic() + timeout
    while want not in seen and time.monotonic() < end:
        ready, _, _ = select.select(fds, [], [], max(0, end - time.monotonic()))
        if not ready:
            break
        ev = ctx.get_async_event()
        seen.append(ev.event_type)
        ev.ack()
    return seen


tap.begin(f"QP context on {DEV} (GID {GID})")


@test("Query QP: the next send PSN and the expected receive PSN, not the ones set")
def _():
    p = Pair()
    try:
        for i in range(5):
            p.b.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(p.buf.buf, 4096, p.buf.lkey)]))
        for i in range(5):
            # 3000 bytes at MTU 1024: three packets, three PSNs each.
            p.a.post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1,
                                 sg=[SGE(p.buf.buf + 8192, 3000, p.buf.lkey)]))
        for _ in range(5):
            assert poll(p.cq_a).status == e.IBV_WC_SUCCESS
            assert poll(p.cq_b).status == e.IBV_WC_SUCCESS
        qa = p.a.query(e.IBV_QP_SQ_PSN | e.IBV_QP_RQ_PSN)[0]
        qb = p.b.query(e.IBV_QP_SQ_PSN | e.IBV_QP_RQ_PSN)[0]
        assert qa.sq_psn == PSN + 15, f"A's sq_psn {qa.sq_psn:#x}, want {PSN + 15:#x}"
        assert qb.rq_psn == PSN + 15, f"B's rq_psn {qb.rq_psn:#x}, want {PSN + 15:#x}"
        # Nothing went the other way: B sent only ACKs, which take no PSN of its own.
        assert qa.rq_psn == PSN and qb.sq_psn == PSN, (qa.rq_psn, qb.sq_psn)
    finally:
        p.close()


@test("max_dest_rd_atomic 0: RDMA Read and fetch-and-add get Invalid Request NAKs, "
      "Writes still go, the responder reports QP_REQ_ERR")
def _():
    for opcode in (e.IBV_WR_RDMA_READ, e.IBV_WR_ATOMIC_FETCH_AND_ADD):
        p = Pair(dest_rd_atomic=0)
        try:
            assert p.b.query(e.IBV_QP_MAX_DEST_RD_ATOMIC)[0].max_dest_rd_atomic == 0
            wc = rdma(p, e.IBV_WR_RDMA_WRITE)
            assert wc.status == e.IBV_WC_SUCCESS, f"write: status {wc.status}"
            wc = rdma(p, opcode, length=8)
            assert wc.status == e.IBV_WC_REM_INV_REQ_ERR, f"opcode {opcode}: status {wc.status}"
            seen = async_event(e.IBV_EVENT_QP_REQ_ERR)
            assert e.IBV_EVENT_QP_REQ_ERR in seen, f"events {seen}"
            assert state(p.b) == e.IBV_QPS_ERR, f"B in state {state(p.b)}"
        finally:
            p.close()


@test("max_rd_atomic 0: a Read and an atomic complete with a local QP operation error, "
      "nothing is sent for them, Sends and Writes go")
def _():
    p = Pair(rd_atomic=0)
    try:
        assert p.a.query(e.IBV_QP_MAX_QP_RD_ATOMIC)[0].max_rd_atomic == 0
        wc = rdma(p, e.IBV_WR_RDMA_WRITE)
        assert wc.status == e.IBV_WC_SUCCESS, f"write: status {wc.status}"
        before = counters()
        wc = rdma(p, e.IBV_WR_RDMA_READ)
        assert wc.status == e.IBV_WC_LOC_QP_OP_ERR, f"read: status {wc.status}"
        time.sleep(0.2)
        after = counters()
        assert after["sent_pkts"] == before["sent_pkts"], (before["sent_pkts"], after["sent_pkts"])
        assert state(p.a) == e.IBV_QPS_ERR and state(p.b) == e.IBV_QPS_RTS
    finally:
        p.close()
    p = Pair(rd_atomic=0)
    try:
        wc = rdma(p, e.IBV_WR_ATOMIC_FETCH_AND_ADD, length=8)
        assert wc.status == e.IBV_WC_LOC_QP_OP_ERR, f"atomic: status {wc.status}"
    finally:
        p.close()


def wire():
    """A QP in RTR whose path leads to the peer; the peer sends it a Send with a foreign
    P_Key, one from an address that is not the path's, and a good one; then, over the
    path, requests with plausible PSNs and an R_Key the QP never gave out. An RDMA Write
    ahead of the ePSN is dropped as out of sequence (IBA 9.7.5.1.3) before its key is
    looked at, with one sequence NAK; the good Send again is a duplicate (9.7.5.1.5),
    acknowledged and not delivered twice; an RDMA Write at the ePSN is indistinguishable
    from the peer's own and fails its R_Key check: NAK Remote Access Error, and the QP
    goes to ERR with a QP access error event (9.7.5.2.5, 11.6.3) - the connection a forged
    packet legitimately breaks, its other receives flushed and no memory written."""
    pd = PD(ctx)
    cq = CQ(ctx, 16)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=4, max_recv_wr=4)))
    buf = MR(pd, 4096, ALL)
    try:
        connect(qp, 0x12, gid_of_ip4(PEER), rtr_only=True)
        for i in range(3):
            qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(buf.buf + i * 64, 64, buf.lkey)]))
        before = counters()
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("0.0.0.0", CTL_PORT))
        srv.listen(1)
        srv.settimeout(1800)
        conn, _ = srv.accept()
        conn.settimeout(120)
        conn.sendall(f"{qp.qp_num} {PSN}\n".encode())
        reply = conn.makefile().readline().strip()
        conn.close()
        srv.close()
        assert reply == "done", f"peer said {reply!r}"
        events = async_event(e.IBV_EVENT_QP_ACCESS_ERR)
        wcs = [poll(cq, timeout=10) for _ in range(3)]
        time.sleep(0.5)
        n, more = cq.poll(1)
        after = counters()
        names = ("rcvd_wrong_path", "rcvd_pkey_violations", "out_of_seq_requests",
                 "seq_naks_sent", "duplicate_requests", "error_naks_sent")
        delta = {k: after[k] - before[k] for k in names}
        got = bytes(buf.read(4096, 0))
        got_wcs = [(wc.wr_id, wc.status) for wc in wcs]
        assert got_wcs == [(0, e.IBV_WC_SUCCESS), (1, e.IBV_WC_WR_FLUSH_ERR),
                           (2, e.IBV_WC_WR_FLUSH_ERR)], got_wcs
        assert got[:8] == b"rrxe-qp!", f"received {got[:8]!r}"
        assert got[8:] == bytes(4088), "memory written beyond the one receive"
        assert n == 0, "a fourth completion"
        assert delta == dict.fromkeys(names, 1), delta
        assert e.IBV_EVENT_QP_ACCESS_ERR in events, f"async events {events}"
        assert state(qp) == e.IBV_QPS_ERR, state(qp)
    finally:
        for o in (qp, buf, cq, pd):
            o.close()


if PEER:
    tap.row("wire: a Send from another address and one with another P_Key are dropped and "
            "counted; the one over the QP's path is received; forged requests over the path: "
            "one ahead of the ePSN dropped unchecked, a duplicate acknowledged once, a bad "
            "R_Key at the ePSN breaks the connection (NAK, ERR, access error event)", wire)
else:
    tap.skip("wire: path and P_Key checks", "no peer VM (RRXE_PEER_IP4 unset)")

sys.exit(tap.done())
