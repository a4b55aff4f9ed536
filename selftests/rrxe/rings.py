#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Hostile ring contents: a process scribbles on the rings it maps from rrxe, TAP output.

rdma_rxe's ring ABI (Documentation/rrxe/uverbs-abi.rst, sections 2, 3, 5, 6, 4) lets the
provider write WQEs and the producer index of the SQ, RQ and SRQ without a system call, and
maps the CQ the kernel produces into; so every byte of those rings is hostile input. Each
row writes something no provider would (a producer index beyond the capacity, num_sge far
above max_sge, SGE lengths that overflow, unknown opcodes, the kernel-owned index, the
header's element size and mask) and checks the outcome the driver code promises: a
completion with an error status, a bounded number of WQEs taken, a lost completion counted
as a CQ overrun; then that the device still works (a fresh pyverbs RC pair passes a Send).
The harness fails on any oops, WARN, KASAN, lockdep or kmemleak report.

The objects whose rings are scribbled on are made with the raw uverbs write commands on a
pyverbs Context's command fd (selftests/rrxe/lib/uverbs_raw.py, as in xrc_data.py), so the test
knows their mmap offsets:
CREATE_CQ 18, CREATE_QP 24 (RC), MODIFY_QP 26, CREATE_SRQ 32 and their destroys
(include/uapi/rdma/ib_user_verbs.h, 6.12). Their peers are pyverbs RC QPs on the same
device, connected in loopback through its own GID.

Rows resting on the rules of Documentation/rrxe/uverbs-abi.rst (section 10, "never trust
the shared header") fail with a `# FINDING:` line naming the rule broken: the kernel's own
indices (RQ and SRQ consumer, CQ producer) are kept privately, and an SQ producer moved back
behind the WQEs already taken names nothing new (it used to run the index round 2^32 slots
under the QP's mutex).

Run inside a VM with the device named by $RRXE_DEV (default rrxe0), GID index $RRXE_GID.
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
from tap import row  # noqa: E402
from uverbs_raw import (  # noqa: E402
    ACCESS_REMOTE, MTU_1024, QP_ACCESS_FLAGS, QP_AV, QP_DEST_QPN, QP_MAX_DEST_RD_ATOMIC,
    QP_MAX_QP_RD_ATOMIC, QP_MIN_RNR_TIMER, QP_PATH_MTU, QP_PKEY_INDEX, QP_PORT, QP_RETRY_CNT,
    QP_RNR_RETRY, QP_RQ_PSN, QP_SQ_PSN, QP_STATE, QP_TIMEOUT, QPS_INIT, QPS_RTR, QPS_RTS,
    Q_INDEX_MASK, Q_LOG2_ELEM, WC_LOC_LEN_ERR, WC_LOC_PROT_ERR, WC_LOC_QP_OP_ERR,
    WC_REM_INV_REQ_ERR, WC_REM_OP_ERR, WC_RNR_RETRY_EXC_ERR, WC_SUCCESS, WC_WR_FLUSH_ERR,
    WR_REG_MR, Raw, Ring, av, handle_of, no_completion, poll, read_gid, restrack, wc_name,
    wc_str)

DEV = os.environ.get("RRXE_DEV", "rrxe0")
GID = int(os.environ.get("RRXE_GID", "0"))
POLL_TIMEOUT = 5.0  # seconds, every completion wait

PSN = 0x123


def drain(cq):
    while cq.poll(16)[0]:
        pass


def expect(cq, want, what):
    """cq gives exactly these (wr_id, status) completions, in order, then nothing."""
    wcs = poll(cq, len(want), POLL_TIMEOUT, what=what)
    got = [(wc.wr_id, wc.status) for wc in wcs]
    assert got == list(want), \
        f"{what}: {[wc_str(w) for w in wcs]}, expected " \
        f"{[(hex(w), wc_name(s)) for w, s in want]}"
    return wcs


# --- objects ---

ctx = Context(name=DEV)
pattr = ctx.query_port(1)
raw = Raw(ctx)
GIDB = read_gid(DEV, GID)
DGID = ctx.query_gid(1, GID)

tap.begin(f"hostile ring contents on {DEV} (GID {GID})")

PAGE = 4096
LW = e.IBV_ACCESS_LOCAL_WRITE
pd = PD(ctx)
pd2 = PD(ctx)  # another PD: its MR's L_Key is not valid on QPs of `pd`
cq_r = CQ(ctx, 256)  # the raw QPs' completions (unless a raw CQ is named)
cq_p = CQ(ctx, 256)  # the pyverbs peers' completions
NBUF = 16
mr = MR(pd, NBUF * PAGE, LW | e.IBV_ACCESS_REMOTE_WRITE)      # raw QPs' buffers
mr_p = MR(pd, NBUF * PAGE, LW | e.IBV_ACCESS_REMOTE_WRITE)    # peers' buffers
mr2 = MR(pd2, PAGE, LW | e.IBV_ACCESS_REMOTE_WRITE)
FILL = 0xee

owned = []  # raw objects alive, (kind, handle)
rings = []  # mapped rings


def own(kind, handle):
    owned.append((kind, handle))
    return handle


def destroy(kind, handle):
    raw.destroy(kind, handle)
    owned.remove((kind, handle))


def buf(i, length=64):
    """SGE (addr, length, lkey) of page i of `mr`."""
    return (mr.buf + i * PAGE, length, mr.lkey)


def payload(i, length=64):
    return bytes(((i * 31 + k) * 7 + 1) & 0xff for k in range(length))


def ah():
    return AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=DGID, sgid_index=GID),
                  dlid=pattr.lid)


def modify(qp, state, **attrs):
    a = QPAttr()
    a.qp_state = state
    mask = e.IBV_QP_STATE
    bits = {"pkey_index": e.IBV_QP_PKEY_INDEX, "port_num": e.IBV_QP_PORT,
            "qp_access_flags": e.IBV_QP_ACCESS_FLAGS, "ah_attr": e.IBV_QP_AV,
            "path_mtu": e.IBV_QP_PATH_MTU, "dest_qp_num": e.IBV_QP_DEST_QPN,
            "rq_psn": e.IBV_QP_RQ_PSN, "max_dest_rd_atomic": e.IBV_QP_MAX_DEST_RD_ATOMIC,
            "min_rnr_timer": e.IBV_QP_MIN_RNR_TIMER, "timeout": e.IBV_QP_TIMEOUT,
            "retry_cnt": e.IBV_QP_RETRY_CNT, "rnr_retry": e.IBV_QP_RNR_RETRY,
            "sq_psn": e.IBV_QP_SQ_PSN, "max_rd_atomic": e.IBV_QP_MAX_QP_RD_ATOMIC}
    for k, v in attrs.items():
        setattr(a, k, v)
        mask |= bits[k]
    qp.modify(a, mask)


def connect_pyverbs(qp, dest_qpn, rnr_retry=7, min_rnr_timer=1):
    modify(qp, e.IBV_QPS_INIT, pkey_index=0, port_num=1,
           qp_access_flags=e.IBV_ACCESS_REMOTE_WRITE)
    modify(qp, e.IBV_QPS_RTR, ah_attr=ah(), path_mtu=e.IBV_MTU_1024, dest_qp_num=dest_qpn,
           rq_psn=PSN, max_dest_rd_atomic=4, min_rnr_timer=min_rnr_timer)
    modify(qp, e.IBV_QPS_RTS, timeout=14, retry_cnt=7, rnr_retry=rnr_retry, sq_psn=PSN,
           max_rd_atomic=4)


class Peer:
    """A pyverbs RC QP (PD `pd`, CQ cq_p), the raw QP's other end."""

    def __init__(self):
        cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq_p, rcq=cq_p, cap=cap))
        self.qpn = self.qp.qp_num

    def recv(self, wr_id, i, length=PAGE):
        self.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1,
                                 sg=[SGE(mr_p.buf + i * PAGE, length, mr_p.lkey)]))

    def send(self, wr_id, i, length=64):
        mr_p.write(payload(i, length), length, i * PAGE)
        self.qp.post_send(SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1,
                                 sg=[SGE(mr_p.buf + i * PAGE, length, mr_p.lkey)],
                                 send_flags=e.IBV_SEND_SIGNALED))

    def close(self):
        self.qp.close()


class RawQp:
    """A raw RC QP (PD `pd`) with its rings mapped, connected to a pyverbs Peer."""

    def __init__(self, scq=None, srq=None, connect=True, peer_rnr_retry=7, max_inline=0,
                 rnr_retry=2, peer_min_rnr_timer=1):
        self.peer = Peer()
        r = raw.create_rc(handle_of(pd), scq if scq is not None else handle_of(cq_r),
                          handle_of(cq_r), srq=srq, max_inline=max_inline)
        self.handle, self.qpn, self.caps = own("qp", r["handle"]), r["qpn"], r
        self.sq = Ring(raw.fd, r["sq_offset"], r["sq_size"], f"QP {self.qpn:#x} SQ", rings)
        self.rq = None if srq is not None else Ring(raw.fd, r["rq_offset"], r["rq_size"],
                                                    f"QP {self.qpn:#x} RQ", rings)
        if connect:
            self.connect(peer_rnr_retry, rnr_retry, peer_min_rnr_timer)

    def connect(self, peer_rnr_retry=7, rnr_retry=2, peer_min_rnr_timer=1):
        raw.modify_qp(self.handle, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS,
                      qp_state=QPS_INIT, port_num=1, qp_access_flags=ACCESS_REMOTE)
        raw.modify_qp(self.handle, QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN
                      | QP_MAX_DEST_RD_ATOMIC | QP_MIN_RNR_TIMER,
                      dest=av(GIDB, GID), qp_state=QPS_RTR, path_mtu=MTU_1024,
                      dest_qp_num=self.peer.qpn, rq_psn=PSN, max_dest_rd_atomic=4,
                      min_rnr_timer=1)
        raw.modify_qp(self.handle, QP_STATE | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY
                      | QP_SQ_PSN | QP_MAX_QP_RD_ATOMIC, qp_state=QPS_RTS, timeout=14,
                      retry_cnt=7, rnr_retry=rnr_retry, sq_psn=PSN, max_rd_atomic=4)
        connect_pyverbs(self.peer.qp, self.qpn, rnr_retry=peer_rnr_retry,
                        min_rnr_timer=peer_min_rnr_timer)
        st = raw.qp_state(self.handle)
        assert st == QPS_RTS, f"raw QP in state {st} after connecting, expected RTS"

    def doorbell(self):
        bad = raw.post_send(self.handle)
        assert bad == 0, f"POST_SEND doorbell: bad_wr {bad}"

    def close(self):
        destroy("qp", self.handle)
        self.sq.close()
        if self.rq is not None:
            self.rq.close()
        self.peer.close()


def fresh():
    """Empty CQs and fresh buffers before a row."""
    drain(cq_r)
    drain(cq_p)
    mr.write(bytes([FILL]) * NBUF * PAGE, NBUF * PAGE, 0)
    mr_p.write(bytes([FILL]) * NBUF * PAGE, NBUF * PAGE, 0)


def control():
    """A fresh pyverbs RC pair (own PD, CQs, MR) passes a 256-byte Send: the device works."""
    cpd = PD(ctx)
    ccq = CQ(ctx, 8)
    cmr = MR(cpd, 2 * PAGE, LW)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    a = QP(cpd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=ccq, rcq=ccq, cap=cap))
    b = QP(cpd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=ccq, rcq=ccq, cap=cap))
    try:
        connect_pyverbs(a, b.qp_num)
        connect_pyverbs(b, a.qp_num)
        data = payload(99, 256)
        cmr.write(data, len(data), 0)
        cmr.write(bytes(256), 256, PAGE)
        b.post_recv(RecvWR(wr_id=0xc2, num_sge=1, sg=[SGE(cmr.buf + PAGE, 256, cmr.lkey)]))
        a.post_send(SendWR(wr_id=0xc1, opcode=e.IBV_WR_SEND, num_sge=1,
                           sg=[SGE(cmr.buf, 256, cmr.lkey)], send_flags=e.IBV_SEND_SIGNALED))
        wcs = poll(ccq, 2, POLL_TIMEOUT, what="control pair")
        got = sorted((wc.wr_id, wc.status) for wc in wcs)
        assert got == [(0xc1, WC_SUCCESS), (0xc2, WC_SUCCESS)], \
            f"control pair: {[wc_str(w) for w in wcs]}"
        assert cmr.read(256, PAGE) == data, "control pair: data differs"
    finally:
        for o in (a, b, cmr, ccq, cpd):
            o.close()


def finding(text):
    tap.diag("FINDING: " + text)
    raise AssertionError(text)


S = {}


# --- 1. SQ producer index beyond the capacity ---

def sq_producer_beyond():
    fresh()
    q = RawQp()
    sq = q.sq
    cap = sq.mask  # one slot always empty (section 2)
    assert q.caps["max_send_wr"] == cap, f"max_send_wr {q.caps['max_send_wr']}, mask {cap}"
    # Every slot, the always-empty one too, holds a valid signalled 64-byte Send.
    for i in range(cap + 1):
        mr.write(payload(i), 64, i * PAGE)
        sq.send_wqe(i, 0x100 + i, [buf(i)])
        q.peer.recv(0x180 + i, i)
    # consumer + capacity + 5, unmasked: glue/queue.rs producer() masks it, wq.rs
    # producer_index() counts (masked - head) & mask = 4 WQEs.
    first = (cap + 5) & sq.mask
    sq.set_producer(cap + 5)
    q.doorbell()
    expect(cq_r, [(0x100 + i, WC_SUCCESS) for i in range(first)], "raw SQ, first batch")
    expect(cq_p, [(0x180 + i, WC_SUCCESS) for i in range(first)], "peer receives")
    # 0xFFFFFFFF masks to `cap`: the WQEs up to the always-empty slot, never that one.
    sq.set_producer(0xFFFFFFFF)
    q.doorbell()
    expect(cq_r, [(0x100 + i, WC_SUCCESS) for i in range(first, cap)], "raw SQ, second batch")
    expect(cq_p, [(0x180 + i, WC_SUCCESS) for i in range(first, cap)], "peer receives")
    no_completion(cq_r, "raw SQ after the garbage producers")
    no_completion(cq_p, "peer after the garbage producers", wait=0)
    assert sq.consumer() == cap, f"SQ consumer {sq.consumer()}, expected {cap}"
    for i in range(cap):
        got = mr_p.read(64, i * PAGE)
        assert got == payload(i), f"peer buffer {i}: data differs"
    q.close()
    control()


row("SQ producer index consumer+capacity+5, then 0xFFFFFFFF: the kernel masks it and runs "
    "exactly 4, then capacity-4 more WQEs (never the always-empty slot), each once, in ring "
    "order; destroy works; a fresh pair passes a Send", sq_producer_beyond)


# --- 2-4. malformed send WQEs ---

def bad_send(wqe_kw, status, flush=True, max_inline=0):
    """One malformed WQE, then an honest one: the first completes with `status`, the second
    is flushed (the QP entered ERR); the peer receives nothing."""
    fresh()
    q = RawQp(max_inline=max_inline)
    q.peer.recv(0x280, 0)
    mr.write(payload(1), 64, PAGE)
    q.sq.post_send(0x201, **wqe_kw)
    if flush:
        q.sq.post_send(0x202, [buf(1)])
    q.doorbell()
    want = [(0x201, status)] + ([(0x202, WC_WR_FLUSH_ERR)] if flush else [])
    expect(cq_r, want, "raw SQ")
    no_completion(cq_p, "peer")
    assert mr_p.read(PAGE, 0) == bytes([FILL]) * PAGE, "peer buffer changed"
    q.close()
    control()


BIG = 0x80000000
SEND_ROWS = [
    ("num_sge 0xFFFF (max_sge 4) with one real SGE: LOC_QP_OP_ERR (wq.rs decode: "
     "n > max_sge -> SendOpcode::Unsupported; requester.rs: Unsupported -> LocQpOpErr)",
     {"sges": [buf(0)], "num_sge": 0xFFFF}, WC_LOC_QP_OP_ERR),
    ("num_sge 5 (max_sge 4): LOC_QP_OP_ERR",
     {"sges": [buf(0)] * 5}, WC_LOC_QP_OP_ERR),
    ("two SGEs of 2^31 bytes (sum overflows u32): LOC_QP_OP_ERR (decode: checked_add None)",
     {"sges": [buf(0, BIG), buf(1, BIG)]}, WC_LOC_QP_OP_ERR),
    ("two SGEs of 2^31-1 bytes (sum above 2^31): LOC_LEN_ERR (requester.rs MAX_MESSAGE)",
     {"sges": [buf(0, BIG - 1), buf(1, BIG - 1)]}, WC_LOC_LEN_ERR),
    ("an SGE whose L_Key names nothing: LOC_PROT_ERR (memory.rs walk: lookup None)",
     {"sges": [(mr.buf, 64, (mr.lkey ^ 0x00ffff00) | 0x7f000000)]}, WC_LOC_PROT_ERR),
    ("an SGE with the L_Key of another PD's MR: LOC_PROT_ERR",
     {"sges": [(mr2.buf, 64, mr2.lkey)]}, WC_LOC_PROT_ERR),
    ("an SGE whose addr+length wraps past 2^64: LOC_PROT_ERR (region check fails)",
     {"sges": [(0xFFFFFFFFFFFFFFC0, 0x100, mr.lkey)]}, WC_LOC_PROT_ERR),
    ("an SGE past the end of its MR: LOC_PROT_ERR",
     {"sges": [(mr.buf + NBUF * PAGE - 32, 64, mr.lkey)]}, WC_LOC_PROT_ERR),
    ("opcode 0xFF: LOC_QP_OP_ERR (decode: unknown opcode -> Unsupported)",
     {"sges": [buf(0)], "opcode": 0xFF}, WC_LOC_QP_OP_ERR),
    ("opcode 200: LOC_QP_OP_ERR",
     {"sges": [buf(0)], "opcode": 200}, WC_LOC_QP_OP_ERR),
    ("opcode 0xFFFFFFFF: LOC_QP_OP_ERR",
     {"sges": [buf(0)], "opcode": 0xFFFFFFFF}, WC_LOC_QP_OP_ERR),
    ("opcode 0x20 (kernel-only REG_MR) with key 0: LOC_QP_OP_ERR (mr.rs fast_register: "
     "no such MR -> LocalError::Operation)",
     {"sges": [], "opcode": WR_REG_MR}, WC_LOC_QP_OP_ERR),
    ("inline flag with dma.length 4096 (max_inline 64): LOC_QP_OP_ERR (decode: length > "
     "max_inline)", {"inline": payload(0, 32), "length": 4096}, WC_LOC_QP_OP_ERR),
]


for desc, kw, status in SEND_ROWS:
    inline_cap = 64 if "inline" in kw else 0
    row(f"send WQE with {desc}; the next WQE WR_FLUSH_ERR; peer untouched; fresh pair works",
        bad_send, kw, status, max_inline=inline_cap)


def reg_mr_user_key():
    """REG_MR with the key, access and range of the user MR `mr`: refused, and `mr` still
    works afterwards (its key and contents unchanged)."""
    fresh()
    q = RawQp()
    q.peer.recv(0x290, 0)
    sq = q.sq
    i = sq.prod
    sq.send_wqe(i, 0x291, [], opcode=WR_REG_MR)
    off = sq.at(i)
    struct.pack_into("=QII", sq.m, off + 24, 0x1000, mr.lkey, ACCESS_REMOTE | LW)
    struct.pack_into("=Q", sq.m, off + 40, PAGE)
    sq.prod = (i + 1) & sq.mask
    sq.set_producer(sq.prod)
    q.doorbell()
    expect(cq_r, [(0x291, WC_LOC_QP_OP_ERR)], "raw SQ")
    q.close()
    q = RawQp()
    q.peer.recv(0x292, 0)
    mr.write(payload(5), 64, 0)
    q.sq.post_send(0x293, [buf(0)])
    q.doorbell()
    expect(cq_r, [(0x293, WC_SUCCESS)], "raw SQ with the MR afterwards")
    expect(cq_p, [(0x292, WC_SUCCESS)], "peer")
    assert mr_p.read(64, 0) == payload(5), "data through the MR differs"
    q.close()
    control()


row("send WQE REG_MR (0x20) with a user MR's key, iova and length: LOC_QP_OP_ERR; the MR "
    "still gathers a Send on a new QP", reg_mr_user_key)


# --- 5. malformed receive WQEs ---

def bad_recv(sges, num_sge, recv_status, send_status, check_mr2=False):
    fresh()
    before2 = mr2.read(PAGE, 0)
    q = RawQp()
    q.rq.post_recv(0x301, sges, num_sge=num_sge)
    q.peer.send(0x381, 2, 64)
    expect(cq_p, [(0x381, send_status)], "peer (sender)")
    expect(cq_r, [(0x301, recv_status)], "raw RQ (receiver)")
    if check_mr2:
        assert mr2.read(PAGE, 0) == before2, "the other PD's MR was written"
    assert mr.read(PAGE, 0) == bytes([FILL]) * PAGE, "receive buffer written"
    q.close()
    control()


row("RQ WQE with num_sge 0xFFFF (max_sge 4): the receiver completes LOC_LEN_ERR, the "
    "sender REM_INV_REQ_ERR (wq.rs pop: length 0; responder.rs: message longer than the "
    "buffer -> InvalidRequest NAK); fresh pair works",
    bad_recv, [buf(0, PAGE)], 0xFFFF, WC_LOC_LEN_ERR, WC_REM_INV_REQ_ERR)
row("RQ WQE with two SGEs of 2^31 bytes (sum overflows): LOC_LEN_ERR / REM_INV_REQ_ERR "
    "(pop: checked_add fails -> length 0)",
    bad_recv, [buf(0, BIG), buf(1, BIG)], None, WC_LOC_LEN_ERR, WC_REM_INV_REQ_ERR)
row("RQ WQE whose SGE has the L_Key of another PD's MR: the receiver completes LOC_PROT_ERR, "
    "the sender REM_OP_ERR (responder.rs: scatter Protection -> RemoteOperationalError NAK); "
    "the other PD's memory unchanged",
    bad_recv, [(mr2.buf, 64, mr2.lkey)], None, WC_LOC_PROT_ERR, WC_REM_OP_ERR, True)
row("RQ WQE whose SGE wraps past 2^64: LOC_PROT_ERR / REM_OP_ERR",
    bad_recv, [(0xFFFFFFFFFFFFFFC0, 0x100, mr.lkey)], None, WC_LOC_PROT_ERR, WC_REM_OP_ERR)


# --- 6. RQ and SRQ producer (and kernel-owned consumer) garbage ---

def fill_recv(ring, base):
    for i in range(ring.mask + 1):
        ring.recv_wqe(i, base + i, [buf(i, PAGE)])


def deliver_all(q, ring, base, cap, what):
    """The peer sends cap messages: exactly cap receive completions, slots 0..cap-1 in order,
    each once, each message in its own buffer."""
    for i in range(cap):
        q.peer.send(0x480 + i, i, 64)
    expect(cq_p, [(0x480 + i, WC_SUCCESS) for i in range(cap)], f"peer sends into {what}")
    expect(cq_r, [(base + i, WC_SUCCESS) for i in range(cap)], f"{what} receives")
    for i in range(cap):
        assert mr.read(64, i * PAGE) == payload(i), f"{what} buffer {i}: data differs"
    assert mr.read(64, cap * PAGE) == bytes([FILL]) * 64, \
        f"{what}: the always-empty slot's buffer was written"


def rnr_fails(q, what):
    """The peer's next Send finds no receive WQE: with rnr_retry 0 it fails at once."""
    q.peer.send(0x4ff, 15, 64)
    expect(cq_p, [(0x4ff, WC_RNR_RETRY_EXC_ERR)], f"peer Send into an empty {what}")
    no_completion(cq_r, f"{what} after the RNR")


def rq_producer_garbage():
    fresh()
    q = RawQp(peer_rnr_retry=0)
    rq = q.rq
    cap = rq.mask
    fill_recv(rq, 0x400)
    rq.set_producer(0xFFFFFFFF)  # masks to `cap`: capacity WQEs, never the empty slot
    deliver_all(q, rq, 0x400, cap, "RQ")
    assert rq.consumer() == cap, f"RQ consumer {rq.consumer()}, expected {cap}"
    # consumer + slots (capacity + 1 beyond): masks to the consumer, an empty queue.
    rq.set_producer(cap + cap + 1)
    rnr_fails(q, "RQ")
    q.close()
    control()


row("RQ producer 0xFFFFFFFF over a full ring: exactly capacity receives, in slot order, each "
    "once; then producer consumer+capacity+1 reads as empty (RNR_RETRY_EXC_ERR at the "
    "sender, rnr_retry 0); destroy works", rq_producer_garbage)


def rq_consumer_rewind():
    fresh()
    q = RawQp(peer_rnr_retry=0)
    rq = q.rq
    rq.post_recv(0x411, [buf(0, PAGE)])
    q.peer.send(0x491, 0, 64)
    expect(cq_p, [(0x491, WC_SUCCESS)], "peer")
    expect(cq_r, [(0x411, WC_SUCCESS)], "RQ")
    assert rq.consumer() == 1, f"RQ consumer {rq.consumer()}"
    # The kernel owns the RQ consumer index; rewind it over the completed WQE.
    rq.set_consumer(0)
    q.peer.send(0x492, 1, 64)
    wc = poll(cq_p, 1, POLL_TIMEOUT, what="peer's second Send")[0]
    if wc.status == WC_SUCCESS:
        again = poll(cq_r, 1, POLL_TIMEOUT, what="RQ replay")[0]
        assert again.wr_id == 0x411, f"replayed receive {wc_str(again)}"
        finding("the RQ consumer index is read back from the shared ring (wq.rs RecvRing::"
                "take: ring.count()/ring.consumer()): rewinding it made the kernel take the "
                "completed receive WQE 0x411 again (delivered twice); rdma_rxe keeps it "
                "private (q->index)")
    else:
        assert wc.status == WC_RNR_RETRY_EXC_ERR, f"peer's second Send: {wc_str(wc)}"
        no_completion(cq_r, "RQ after a rewound consumer")
    q.close()
    control()


row("RQ consumer index (kernel-owned) rewound over a completed WQE: the kernel keeps its own "
    "(uverbs-abi.rst section 10); the next Send finds nothing (RNR_RETRY_EXC_ERR), no replay",
    rq_consumer_rewind)


def srq_garbage():
    fresh()
    s = raw.create_srq(handle_of(pd), 4, 1)
    own("srq", s["handle"])
    srq = Ring(raw.fd, s["mi_offset"], s["mi_size"], "SRQ", rings)
    assert s["max_wr"] == srq.mask, f"SRQ max_wr {s['max_wr']}, index_mask {srq.mask}"
    q = RawQp(srq=s["handle"], peer_rnr_retry=0)
    cap = srq.mask
    fill_recv(srq, 0x500)
    srq.set_producer(0xFFFFFFFF)
    deliver_all(q, srq, 0x500, cap, "SRQ")
    assert srq.consumer() == cap, f"SRQ consumer {srq.consumer()}, expected {cap}"
    # srq.rs keeps the consumer privately (SrqRing.consumer): rewinding the shared copy and
    # a producer of consumer+capacity+1 leave an empty queue.
    srq.set_consumer(0)
    srq.set_producer(cap + cap + 1)
    rnr_fails(q, "SRQ")
    q.close()
    destroy("srq", s["handle"])
    srq.close()
    control()


row("SRQ producer 0xFFFFFFFF over a full ring: exactly capacity receives in slot order, "
    "each once; consumer rewound to 0 and producer consumer+capacity+1: empty (srq.rs keeps "
    "its consumer privately), RNR_RETRY_EXC_ERR at the sender; QP and SRQ destroy work",
    srq_garbage)


# --- 7. CQ indices ---

def wait_for(pred, timeout=POLL_TIMEOUT):
    end = time.monotonic() + timeout
    while not pred() and time.monotonic() < end:
        time.sleep(0.005)
    return pred()


def cq_indices():
    fresh()
    c = raw.create_cq(4)
    own("cq", c["handle"])
    cq = Ring(raw.fd, c["mi_offset"], c["mi_size"], "CQ", rings)
    assert c["cqe"] == cq.mask, f"CQ cqe {c['cqe']}, index_mask {cq.mask}"
    tap.diag(f"user CQ: {cq.mask + 1} slots of {cq.slot} bytes (rdma_rxe: 128)")
    q = RawQp(scq=c["handle"])
    for i in range(8):
        q.peer.recv(0x680 + i, i)
    n = [0]

    def send(wr_id, settle=0.2):
        """A signalled Send, received by the peer; returns once the SQ consumer shows it
        retired (the CQE is posted right after, outside the QP's lock) and `settle` s."""
        i = n[0]
        n[0] += 1
        mr.write(payload(i), 64, i * PAGE)
        q.sq.post_send(wr_id, [buf(i)])
        q.doorbell()
        expect(cq_p, [(0x680 + i, WC_SUCCESS)], f"peer receive of {wr_id:#x}")
        assert wait_for(lambda: q.sq.consumer() == n[0]), \
            f"SQ consumer {q.sq.consumer()}, expected {n[0]} after {wr_id:#x}"
        time.sleep(settle)

    send(0x601)
    assert wait_for(lambda: cq.producer() == 1) and cq.cqe(0)[:2] == (0x601, WC_SUCCESS), \
        f"CQ producer {cq.producer()}, slot 0 {cq.cqe(0)}"
    # Consumer one past the producer: the CQ looks full (cq.rs post: next == consumer), the
    # completion is lost as an overrun (IBA 11.4.2.1, CQ error event), the QP goes on.
    cq.set_consumer(2)
    send(0x602, settle=0.5)
    assert cq.producer() == 1 and cq.cqe(1)[0] == 0, \
        f"full CQ written: producer {cq.producer()}, slot 1 {cq.cqe(1)}"
    cq.set_consumer(1)
    send(0x603)
    assert wait_for(lambda: cq.producer() == 2) and cq.cqe(1)[:2] == (0x603, WC_SUCCESS), \
        f"after the overrun: producer {cq.producer()}, slot 1 {cq.cqe(1)}"
    # Consumer garbage: masked (0xFFFFFFFF & mask = mask), not full: the CQE goes in.
    cq.set_consumer(0xFFFFFFFF)
    send(0x604)
    assert wait_for(lambda: cq.producer() == 3) and cq.cqe(2)[0] == 0x604, \
        f"consumer 0xFFFFFFFF: producer {cq.producer()}, slot 2 {cq.cqe(2)}"
    # The producer is the kernel's: scribble it and see where the next CQE lands.
    cq.set_consumer(3)
    cq.set_producer(6)
    send(0x605)
    assert wait_for(lambda: cq.producer() in (4, 7)), \
        f"CQ producer {cq.producer()} after a scribbled producer 6"
    if cq.producer() == 7 and cq.cqe(6)[0] == 0x605:
        finding("the CQ producer index is read back from the shared ring (cq.rs post(): "
                "ring.queue.producer(), glue/queue.rs producer() loads PRODUCER_INDEX): the "
                "process chose the slot the kernel wrote next; rdma_rxe keeps it private "
                "(uverbs-abi.rst 10, item 1)")
    else:
        assert cq.producer() == 4 and cq.cqe(3)[0] == 0x605, \
            f"CQ producer {cq.producer()}, slot 3 {cq.cqe(3)}, slot 6 {cq.cqe(6)}"
    cq.set_producer(0xFFFFFFFF)
    cq.set_consumer(0x12345678)
    send(0x606)
    st = raw.qp_state(q.handle)
    assert st == QPS_RTS, f"raw QP in state {st} after CQ scribbling, expected RTS"
    q.close()
    destroy("cq", c["handle"])
    cq.close()
    control()


row("CQ: consumer = producer+1 loses the next completion as an overrun and writes no slot; "
    "consumer 0xFFFFFFFF is masked; producer scribbled (kernel-owned): no crash, the QP stays "
    "in RTS, CQ destroy works; where the CQE lands is reported", cq_indices)


# --- 8. header fields ---

def header_scribble():
    fresh()
    c = raw.create_cq(4)
    own("cq", c["handle"])
    cq = Ring(raw.fd, c["mi_offset"], c["mi_size"], "CQ", rings)
    q = RawQp(scq=c["handle"])
    for r in (q.sq, q.rq, cq):
        r.put32(Q_LOG2_ELEM, 31)
        r.put32(Q_INDEX_MASK, 0xFFFFFFFF)
    # glue/queue.rs keeps log2_elem_size and index_mask in SharedQueue and never reads
    # them back: the rings work as before.
    q.rq.post_recv(0x701, [buf(1, PAGE)])
    q.peer.recv(0x781, 0)
    mr.write(payload(0), 64, 0)
    q.sq.post_send(0x702, [buf(0)])
    q.doorbell()
    expect(cq_p, [(0x781, WC_SUCCESS)], "peer receive")
    assert wait_for(lambda: cq.producer() == 1), f"CQ producer {cq.producer()}"
    assert mr_p.read(64, 0) == payload(0), "peer data differs"
    q.peer.send(0x782, 3, 100)
    expect(cq_p, [(0x782, WC_SUCCESS)], "peer send")
    expect(cq_r, [(0x701, WC_SUCCESS)], "raw RQ")
    assert mr.read(100, PAGE) == payload(3, 100), "raw receive data differs"
    assert cq.producer() == 1 and cq.cqe(0)[:2] == (0x702, WC_SUCCESS), \
        f"CQ producer {cq.producer()}, slot 0 {cq.cqe(0)}"
    assert (q.sq.u32(Q_LOG2_ELEM), cq.u32(Q_INDEX_MASK)) == (31, 0xFFFFFFFF), \
        "the kernel rewrote the header"
    q.close()
    destroy("cq", c["handle"])
    cq.close()
    control()


row("header log2_elem_size 31 and index_mask 0xFFFFFFFF written into the SQ, RQ and CQ: "
    "the kernel uses its own copies (a Send and a receive complete in the right slots)",
    header_scribble)


# --- 9. doorbell storms ---

def doorbell_storm():
    fresh()
    q = RawQp()
    q.peer.recv(0x881, 0)
    t0 = time.monotonic()
    for _ in range(1000):
        q.doorbell()
    dt = time.monotonic() - t0
    tap.diag(f"1000 empty doorbells in {dt:.2f} s")
    # A hang detector, not a timing check.
    assert dt < 60, f"1000 empty doorbells took {dt:.1f} s"
    no_completion(cq_r, "raw SQ after empty doorbells")
    no_completion(cq_p, "peer after empty doorbells", wait=0)
    mr.write(payload(0), 64, 0)
    q.sq.post_send(0x801, [buf(0)])
    q.doorbell()
    expect(cq_r, [(0x801, WC_SUCCESS)], "raw SQ")
    expect(cq_p, [(0x881, WC_SUCCESS)], "peer")
    q.close()
    # Below RTS the doorbell is refused (EINVAL) and takes nothing.
    q = RawQp(connect=False)
    q.sq.post_send(0x802, [buf(0)])
    for _ in range(100):
        try:
            raw.post_send(q.handle)
        except OSError as err:
            assert err.errno == 22, f"doorbell in RESET: {err}"
        else:
            raise AssertionError("doorbell in RESET succeeded")
    no_completion(cq_r, "raw SQ in RESET")
    q.close()
    control()


row("1000 POST_SEND doorbells with no new WQE return at once and send nothing; the next "
    "real WQE completes once; 100 doorbells in RESET fail EINVAL", doorbell_storm)


# --- the SQ producer moved back behind a WQE in flight ---

def sq_rewind_in_flight():
    fresh()
    # The peer posts no receive and answers RNR; the raw QP retries forever (rnr_retry 7),
    # so its Send stays copied and unretired (wq.rs: head 0, copied 1).
    q = RawQp(rnr_retry=7, peer_min_rnr_timer=31)
    q.sq.post_send(0x901, [buf(0)])
    q.doorbell()
    time.sleep(0.2)
    # Back to 0: producer_index() gives head + 0 = 0 < copied, and snapshot()'s
    # `while self.copied != producer` walks 2^32 - 1 slots under the QP mutex.
    q.sq.set_producer(0)
    t0 = time.monotonic()
    q.doorbell()
    dt = time.monotonic() - t0
    # A hang detector, not a timing check: the old loop ran for minutes.
    assert dt < 10, f"doorbell after the rewind took {dt:.1f} s"
    q.close()
    control()


row("SQ producer moved back behind a WQE in flight (RNR): the doorbell returns at once; "
    "destroy works", sq_rewind_in_flight)


# --- the end ---

def cleanup():
    errs = []
    for kind, h in reversed(list(owned)):
        try:
            destroy(kind, h)
        except OSError as err:
            errs.append(f"{kind} {h}: {err}")
            owned.remove((kind, h))
    for r in list(rings):
        r.close()
    for o in (mr2, mr_p, mr, cq_p, cq_r, pd2, pd):
        o.close()
    assert not errs, f"destroy failed: {errs}"


row("destroy whatever raw object an earlier failure left, close the pyverbs objects", cleanup)
row("final control: a fresh pyverbs RC pair passes a Send", control)


def nothing_left():
    for kind in ("qp", "cq", "srq", "mr", "pd"):
        try:
            left = restrack(DEV, kind, user_only=True)
        except AssertionError as err:
            tap.diag(f"rdma resource show {kind}: {err}")
            continue
        assert not left, f"{kind} left on {DEV}: {left}"


row(f"no QP (but GSI), CQ, SRQ, MR or PD of this process left on {DEV} "
    "(rdma resource show)", nothing_left)

ctx.close()
sys.exit(tap.done())
