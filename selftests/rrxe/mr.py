#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""User MR memory access through real verbs (pyverbs, the unmodified rxe provider), TAP
output: an MR that starts and ends inside pages is written and read by RDMA in pieces of
varied sizes that cross page boundaries, its bytes checked through the registering
process's own mapping; atomics hit aligned targets in it; accesses just outside it are
refused; local SGEs at odd offsets gather and scatter through it.

Runs on an rrxe device $RRXE_DEV whose RoCEv2 GID index is $RRXE_GID, with two QPs of the
device in loopback.
"""
import os
import struct
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
from tap import test  # noqa: E402

DEV = os.environ.get("RRXE_DEV", "rrxe0")
GID = int(os.environ.get("RRXE_GID", "1"))
PAGE = 4096
ALL = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
       | e.IBV_ACCESS_REMOTE_ATOMIC)
# The target MR: 4 pages and a bit, starting 3 bytes into a page.
HEAD = 3
LEN = 4 * PAGE + 10

ctx = Context(name=DEV)
pd = PD(ctx)
cq = CQ(ctx, 64)
cap = QPCap(max_send_wr=32, max_recv_wr=32, max_send_sge=4, max_recv_sge=4)
a = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
b = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
gid = ctx.query_gid(1, GID)
for qp, peer in ((a, b), (b, a)):
    attr = QPAttr(qp_state=e.IBV_QPS_INIT)
    attr.pkey_index, attr.port_num, attr.qp_access_flags = 0, 1, ALL
    qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
    attr = QPAttr(qp_state=e.IBV_QPS_RTR)
    attr.ah_attr = AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=GID))
    attr.path_mtu, attr.dest_qp_num, attr.rq_psn = e.IBV_MTU_1024, peer.qp_num, 0
    attr.max_dest_rd_atomic, attr.min_rnr_timer = 4, 12
    qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN
              | e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
    attr = QPAttr(qp_state=e.IBV_QPS_RTS)
    attr.sq_psn, attr.timeout, attr.retry_cnt, attr.rnr_retry, attr.max_rd_atomic = 0, 14, 7, 7, 4
    qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT
              | e.IBV_QP_RNR_RETRY | e.IBV_QP_MAX_QP_RD_ATOMIC)

# `backing` holds the pages; `target` is registered over part of them, unaligned.
backing = MR(pd, 6 * PAGE, e.IBV_ACCESS_LOCAL_WRITE)
target = MR(pd, LEN, ALL, address=backing.buf + HEAD)
local = MR(pd, 8 * PAGE, ALL)


def pattern(off, n, seed):
    return bytes((i * 13 + seed * 7 + 5) & 0xFF for i in range(off, off + n))


def wait(wr_id, status=e.IBV_WC_SUCCESS, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        n, wcs = cq.poll(1)
        if n:
            wc = wcs[0]
            assert wc.wr_id == wr_id, f"completion of wr {wc.wr_id}, want {wr_id}"
            assert wc.status == status, f"wr {wr_id}: status {wc.status}, want {status}"
            return wc
        time.sleep(0.001)
    raise AssertionError(f"no completion of wr {wr_id}")


def wait_all(wr_ids, timeout=10.0):
    """The completions of WRs WR_IDS, in any order (send and receive queues share CQ)."""
    got = {}
    end = time.monotonic() + timeout
    while len(got) < len(wr_ids) and time.monotonic() < end:
        n, wcs = cq.poll(len(wr_ids))
        for wc in wcs[:n]:
            got[wc.wr_id] = wc
    assert set(got) == set(wr_ids), f"completions {sorted(got)}"
    return got


def rdma(opcode, loff, n, roff, rkey=None, status=e.IBV_WC_SUCCESS, wr_id=1):
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[SGE(local.buf + loff, n, local.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(target.rkey if rkey is None else rkey, target.buf + roff)
    a.post_send(wr)
    return wait(wr_id, status)


# Pieces crossing page boundaries of the target (its page 0 starts HEAD bytes early).
PIECES = [(0, 1), (1, 7), (PAGE - HEAD - 5, 11), (PAGE - HEAD, PAGE), (2 * PAGE - 100, PAGE + 300),
          (3 * PAGE + 17, PAGE - 7), (0, LEN)]

tap.begin(f"user MR memory access on {DEV}: an MR at page offset {HEAD}, {LEN} bytes")


@test("RDMA Writes of 1 byte to the whole MR land at the right bytes across pages")
def _():
    for seed, (off, n) in enumerate(PIECES):
        local.write(pattern(off, n, seed), n, 0)
        rdma(e.IBV_WR_RDMA_WRITE, 0, n, off)
        got = backing.read(n, HEAD + off)
        assert got == pattern(off, n, seed), f"piece {off}+{n}: bytes differ"


@test("RDMA Reads of the same pieces return what the pages hold")
def _():
    whole = pattern(0, LEN, 99)
    backing.write(whole, LEN, HEAD)
    for off, n in PIECES:
        local.write(b"\0" * n, n, PAGE)
        rdma(e.IBV_WR_RDMA_READ, PAGE, n, off)
        got = local.read(n, PAGE)
        assert got == whole[off:off + n], f"piece {off}+{n}: bytes differ"


@test("fetch-and-add and compare-and-swap on aligned targets in every page of the MR")
def _():
    for page in range(4):
        # The first 8-byte aligned address at least 3 bytes into this page of the MR.
        addr = target.buf + page * PAGE + 3
        addr += -addr % 8
        off = addr - target.buf
        backing.write(struct.pack("<Q", 1000 + page), 8, HEAD + off)
        wr = SendWR(wr_id=2, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1,
                    sg=[SGE(local.buf, 8, local.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_atomic(target.rkey, addr, 5, 0)
        a.post_send(wr)
        wait(2)
        assert struct.unpack("<Q", local.read(8, 0))[0] == 1000 + page
        wr = SendWR(wr_id=3, opcode=e.IBV_WR_ATOMIC_CMP_AND_SWP, num_sge=1,
                    sg=[SGE(local.buf, 8, local.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_atomic(target.rkey, addr, 1005 + page, 7)
        a.post_send(wr)
        wait(3)
        assert struct.unpack("<Q", local.read(8, 0))[0] == 1005 + page
        assert struct.unpack("<Q", backing.read(8, HEAD + off))[0] == 7


@test("zero-length Write with Immediate, Write and Read with a key naming nothing succeed "
      "(C9-88); the first consumes a receive with its immediate")
def _():
    # rsockets sends its control messages this way, with whatever R_Key and VA were on its
    # stack: a responder must not check them (the DMA length is zero) nor NAK them.
    bogus_va, bogus_rkey = 0x7FFC_0000_0C60, 0xD1E1EC20
    # pyverbs wants an SGE in every WR: one of length 0 makes the same zero DMA length.
    wrs = []
    for wr_id, opcode in ((11, e.IBV_WR_RDMA_WRITE_WITH_IMM), (12, e.IBV_WR_RDMA_WRITE),
                          (13, e.IBV_WR_RDMA_READ)):
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[SGE(local.buf, 0, local.lkey)],
                    imm_data=0x0E000000, send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(bogus_rkey, bogus_va)
        wrs.append(wr)
    b.post_recv(RecvWR(wr_id=10, num_sge=1, sg=[SGE(local.buf + PAGE, 16, local.lkey)]))
    for wr in wrs:
        a.post_send(wr)
    got = wait_all({10, 11, 12, 13})
    bad = {i: wc.status for i, wc in got.items() if wc.status != e.IBV_WC_SUCCESS}
    assert not bad, f"statuses {bad}"
    assert got[10].opcode == e.IBV_WC_RECV_RDMA_WITH_IMM and got[10].byte_len == 0
    assert got[10].imm_data == 0x0E000000, hex(got[10].imm_data)


@test("a Write straddling the end of the MR is refused with a remote access error")
def _():
    # Each error moves the requester to ERR: one fresh pair of states per check is too
    # costly here, so the checks run last in this order and each ends the QPs' use.
    rdma(e.IBV_WR_RDMA_WRITE, 0, 2, LEN - 1, status=e.IBV_WC_REM_ACCESS_ERR, wr_id=4)


@test("local SGEs at odd offsets: a Send gathers 3 pieces, the receive scatters into 3")
def _():
    # The pair is in ERR now; a second pair on the same MRs.
    c = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    d = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    for qp, peer in ((c, d), (d, c)):
        attr = QPAttr(qp_state=e.IBV_QPS_INIT)
        attr.pkey_index, attr.port_num, attr.qp_access_flags = 0, 1, ALL
        qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT
                  | e.IBV_QP_ACCESS_FLAGS)
        attr = QPAttr(qp_state=e.IBV_QPS_RTR)
        attr.ah_attr = AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=GID))
        attr.path_mtu, attr.dest_qp_num, attr.rq_psn = e.IBV_MTU_1024, peer.qp_num, 0
        attr.max_dest_rd_atomic, attr.min_rnr_timer = 4, 12
        qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN
                  | e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
        attr = QPAttr(qp_state=e.IBV_QPS_RTS)
        attr.sq_psn, attr.timeout, attr.retry_cnt = 0, 14, 7
        attr.rnr_retry, attr.max_rd_atomic = 7, 4
        qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN | e.IBV_QP_TIMEOUT
                  | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY | e.IBV_QP_MAX_QP_RD_ATOMIC)
    src = [(1, 1), (PAGE - 1 - HEAD, 4093), (2 * PAGE + 5, 5000)]
    dst = [(7, 4000), (PAGE + 1, 1), (3 * PAGE - 1, 5093)]
    msg = pattern(0, sum(n for _, n in src), 42)
    at = 0
    for off, n in src:
        backing.write(msg[at:at + n], n, HEAD + off)
        at += n
    d.post_recv(RecvWR(wr_id=6, num_sge=3, sg=[SGE(local.buf + o, n, local.lkey) for o, n in dst]))
    c.post_send(SendWR(wr_id=5, opcode=e.IBV_WR_SEND, num_sge=3,
                       sg=[SGE(target.buf + o, n, target.lkey) for o, n in src],
                       send_flags=e.IBV_SEND_SIGNALED))
    got = wait_all({5, 6})
    assert got[5].status == e.IBV_WC_SUCCESS and got[6].status == e.IBV_WC_SUCCESS
    assert got[6].byte_len == len(msg), got[6].byte_len
    at = 0
    for off, n in dst:
        assert local.read(n, off) == msg[at:at + n], f"scatter piece at {off} differs"
        at += n
    c.close()
    d.close()


sys.exit(tap.done())
