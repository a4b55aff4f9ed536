#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Negative tests through the unmodified rdma-core rxe provider (pyverbs), TAP output: invalid
QP attributes per transition, posting in the wrong state, bad R_Keys, out-of-bounds and
unauthorised remote accesses, local protection and length errors, oversized SGE lists. Each
row names the errno or completion status it expects. RC QP pairs loop back on one device.

Run inside a VM with an RDMA device named by $RRXE_DEV (default rrxe0; rdma_rxe's rxe0 works
too, for comparison), GID index $RRXE_GID.

Where the rxe provider decides (it validates send WRs and writes both rings in userspace,
then rings the send doorbell, a POST_SEND command with no WRs; receives have no system call
at all), the row says so: those errnos are the provider's, not the kernel's.
"""
import ctypes
import errno
import mmap
import os
import struct
import sys
import time

from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR, MW, MWBindInfo
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SGE, SendWR
import pyverbs.enums as e

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
import tap  # noqa: E402 - selftests/rrxe/lib, found through the line above
from tap import fails_with, row  # noqa: E402

DEV = os.environ.get("RRXE_DEV", "rrxe0")
GID = int(os.environ.get("RRXE_GID", "0"))


ctx = Context(name=DEV)
dattr = ctx.query_device()
pattr = ctx.query_port(1)
DGID = ctx.query_gid(1, GID)
MSG = 4096

ALL_REMOTE = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
              | e.IBV_ACCESS_REMOTE_ATOMIC)
STATE_NAMES = {e.IBV_QPS_RESET: "RESET", e.IBV_QPS_INIT: "INIT", e.IBV_QPS_RTR: "RTR",
               e.IBV_QPS_RTS: "RTS", e.IBV_QPS_SQD: "SQD", e.IBV_QPS_SQE: "SQE",
               e.IBV_QPS_ERR: "ERR"}
WC_NAMES = {getattr(e, k): k[len("IBV_WC_"):] for k in dir(e)
            if k.startswith("IBV_WC_") and k.endswith("_ERR") or k in ("IBV_WC_SUCCESS",)}


def wc_name(status):
    return WC_NAMES.get(status, str(status))


# Attributes of each transition IBA 11.2.4.2 requires of an RC QP (bit: (QPAttr field, value)),
# as the kernel's ib_modify_qp_is_ok() table has them.
def to_init_attrs():
    return {e.IBV_QP_PKEY_INDEX: ("pkey_index", 0), e.IBV_QP_PORT: ("port_num", 1),
            e.IBV_QP_ACCESS_FLAGS: ("qp_access_flags", ALL_REMOTE & ~e.IBV_ACCESS_LOCAL_WRITE)}


def ah(sgid_index=GID):
    gr = GlobalRoute(dgid=DGID, sgid_index=sgid_index)
    return AHAttr(port_num=1, is_global=1, gr=gr, dlid=pattr.lid)


def to_rtr_attrs(dest_qpn, rq_psn=0x123):
    return {e.IBV_QP_AV: ("ah_attr", ah()), e.IBV_QP_PATH_MTU: ("path_mtu", e.IBV_MTU_1024),
            e.IBV_QP_DEST_QPN: ("dest_qp_num", dest_qpn), e.IBV_QP_RQ_PSN: ("rq_psn", rq_psn),
            e.IBV_QP_MAX_DEST_RD_ATOMIC: ("max_dest_rd_atomic", 4),
            e.IBV_QP_MIN_RNR_TIMER: ("min_rnr_timer", 12)}


def to_rts_attrs(sq_psn=0x123):
    return {e.IBV_QP_TIMEOUT: ("timeout", 14), e.IBV_QP_RETRY_CNT: ("retry_cnt", 7),
            e.IBV_QP_RNR_RETRY: ("rnr_retry", 7), e.IBV_QP_SQ_PSN: ("sq_psn", sq_psn),
            e.IBV_QP_MAX_QP_RD_ATOMIC: ("max_rd_atomic", 4)}


def modify(qp, state, attrs=None, drop=0, extra=None):
    """Modify QP to `state` with `attrs` less the mask bits in `drop`, plus `extra`."""
    a = QPAttr()
    mask = 0
    if state is not None:
        a.qp_state = state
        mask |= e.IBV_QP_STATE
    for bit, (name, val) in {**(attrs or {}), **(extra or {})}.items():
        if bit & drop:
            continue
        setattr(a, name, val)
        mask |= bit
    qp.modify(a, mask)


def qp_state(qp):
    return qp.query(e.IBV_QP_STATE)[0].qp_state


def expect_state(qp, want):
    got = qp_state(qp)
    assert got == want, f"QP in {STATE_NAMES.get(got, got)}, expected {STATE_NAMES[want]}"


class Pair:
    """Two RC QPs of one PD connected to each other on one device, each with its own CQ;
    `a` requests, `b` responds. `state` is how far both are brought up."""

    def __init__(self, state=e.IBV_QPS_RTS, cap=None, qp_type=e.IBV_QPT_RC):
        self.pd = PD(ctx)
        self.cq_a = CQ(ctx, 64)
        self.cq_b = CQ(ctx, 64)
        cap = cap or QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=4, max_recv_sge=4,
                           max_inline_data=64)
        self.a = QP(self.pd, QPInitAttr(qp_type=qp_type, scq=self.cq_a, rcq=self.cq_a, cap=cap))
        self.b = QP(self.pd, QPInitAttr(qp_type=qp_type, scq=self.cq_b, rcq=self.cq_b, cap=cap))
        self.cap = cap
        for qp, peer in ((self.a, self.b), (self.b, self.a)):
            if state >= e.IBV_QPS_INIT:
                modify(qp, e.IBV_QPS_INIT, to_init_attrs())
            if state >= e.IBV_QPS_RTR:
                modify(qp, e.IBV_QPS_RTR, to_rtr_attrs(peer.qp_num))
            if state >= e.IBV_QPS_RTS:
                modify(qp, e.IBV_QPS_RTS, to_rts_attrs())

    def mr(self, access=ALL_REMOTE, pd=None, size=MSG):
        return MR(pd or self.pd, size, access)


def poll(cq, count=1, timeout=3.0):
    wcs = []
    end = time.monotonic() + timeout
    while len(wcs) < count and time.monotonic() < end:
        nc, got = cq.poll(count - len(wcs))
        wcs += got
        if not nc:
            time.sleep(0.001)
    assert len(wcs) == count, f"{len(wcs)} of {count} completions within {timeout} s"
    return wcs


def no_completion(cq, wait=0.3):
    time.sleep(wait)
    nc, wcs = cq.poll(1)
    assert nc == 0, f"unexpected completion: {wc_name(wcs[0].status)}"


def expect_wc(cq, status, opcode=None):
    wc = poll(cq)[0]
    assert wc.status == status, f"status {wc_name(wc.status)}, expected {wc_name(status)}"
    if opcode is not None:
        assert wc.opcode == opcode, f"opcode {wc.opcode}, expected {opcode}"
    return wc


def rdma_wr(opcode, sge, rkey, addr, wr_id=1):
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1 if sge else 0,
                sg=[sge] if sge else None)
    wr.set_wr_rdma(rkey, addr)
    return wr


def atomic_wr(sge, rkey, addr):
    wr = SendWR(wr_id=1, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1, sg=[sge])
    wr.set_wr_atomic(rkey, addr, 1, 0)
    return wr


def send_wr(sges, flags=e.IBV_SEND_SIGNALED, wr_id=1):
    return SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=len(sges), sg=sges or None,
                  send_flags=flags)


def recv_wr(sges, wr_id=2):
    return RecvWR(wr_id=wr_id, num_sge=len(sges), sg=sges or None)


tap.begin(f"negative tests on {DEV} (GID {GID}); max_qp_wr {dattr.max_qp_wr}, max_sge "
          f"{dattr.max_sge}, max_qp_rd_atom {dattr.max_qp_rd_atom}, "
          f"max_qp_init_rd_atom {dattr.max_qp_init_rd_atom}, pkeys {pattr.pkey_tbl_len}, "
          f"gids {pattr.gid_tbl_len}")

# --- create_qp with caps above the device limits (IBA 11.2.4.1: the CI refuses) ---

CAP_ROWS = [
    ("max_send_wr", dattr.max_qp_wr + 1),
    ("max_recv_wr", dattr.max_qp_wr + 1),
    ("max_send_sge", dattr.max_sge + 1),
    ("max_recv_sge", dattr.max_sge + 1),
    # rdma_rxe's limit (RXE_MAX_INLINE_DATA); query_device does not report one.
    ("max_inline_data", 1 << 20),
]


def create_with_cap(field, value):
    pd = PD(ctx)
    cq = CQ(ctx, 8)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    setattr(cap, field, value)
    fails_with(lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap)),
               errno.EINVAL)


for field, value in CAP_ROWS:
    row(f"create_qp: {field} {value} above the device limit -> EINVAL", create_with_cap,
        field, value)

# --- modify_qp per transition ---
#
# Missing required and disallowed attributes are what ib_modify_qp_is_ok() (IBA 10.3.1 and
# 11.2.4.2 as a table) rejects; uverbs itself checks only the port and the state values.
# Values out of range are the driver's to reject (IBA 11.2.4.2 gives every field's range).

RESET_INIT = [
    ("missing PKEY_INDEX", e.IBV_QP_PKEY_INDEX, None),
    ("missing PORT", e.IBV_QP_PORT, None),
    ("missing ACCESS_FLAGS", e.IBV_QP_ACCESS_FLAGS, None),
    ("SQ_PSN not allowed", 0, {e.IBV_QP_SQ_PSN: ("sq_psn", 1)}),
    ("DEST_QPN not allowed", 0, {e.IBV_QP_DEST_QPN: ("dest_qp_num", 1)}),
    ("port 0", 0, {e.IBV_QP_PORT: ("port_num", 0)}),
    ("port 2", 0, {e.IBV_QP_PORT: ("port_num", 2)}),
    ("pkey_index past the P_Key table", 0,
     {e.IBV_QP_PKEY_INDEX: ("pkey_index", pattr.pkey_tbl_len)}),
    ("access flag MW_BIND (not a QP right)", 0,
     {e.IBV_QP_ACCESS_FLAGS: ("qp_access_flags", e.IBV_ACCESS_MW_BIND)}),
    ("access flag bit 20 (undefined)", 0,
     {e.IBV_QP_ACCESS_FLAGS: ("qp_access_flags", 1 << 20)}),
]


def modify_fails(state_from, state_to, attrs, drop, extra, *errnos):
    p = Pair(state_from)
    fails_with(lambda: modify(p.a, state_to, attrs(p), drop, extra), *(errnos or (errno.EINVAL,)))
    expect_state(p.a, state_from)


for what, drop, extra in RESET_INIT:
    row(f"modify RESET->INIT: {what} -> EINVAL", modify_fails, e.IBV_QPS_RESET,
        e.IBV_QPS_INIT, lambda p: to_init_attrs(), drop, extra)


def ud_init_without_qkey():
    p = Pair(e.IBV_QPS_RESET, qp_type=e.IBV_QPT_UD,
             cap=QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1))
    attrs = {e.IBV_QP_PKEY_INDEX: ("pkey_index", 0), e.IBV_QP_PORT: ("port_num", 1)}
    fails_with(lambda: modify(p.a, e.IBV_QPS_INIT, attrs), errno.EINVAL)
    modify(p.a, e.IBV_QPS_INIT, attrs, extra={e.IBV_QP_QKEY: ("qkey", 0x11111111)})
    a = p.a.query(e.IBV_QP_QKEY | e.IBV_QP_STATE)[0]
    assert a.qp_state == e.IBV_QPS_INIT and a.qkey == 0x11111111, (a.qp_state, hex(a.qkey))


row("modify RESET->INIT (UD): missing QKEY -> EINVAL; with it INIT and the Q_Key queried",
    ud_init_without_qkey)

BIG_RD = max(dattr.max_qp_rd_atom, dattr.max_qp_init_rd_atom) + 1
INIT_RTR = [
    ("missing AV", e.IBV_QP_AV, None),
    ("missing PATH_MTU", e.IBV_QP_PATH_MTU, None),
    ("missing DEST_QPN", e.IBV_QP_DEST_QPN, None),
    ("missing RQ_PSN", e.IBV_QP_RQ_PSN, None),
    ("missing MAX_DEST_RD_ATOMIC", e.IBV_QP_MAX_DEST_RD_ATOMIC, None),
    ("missing MIN_RNR_TIMER", e.IBV_QP_MIN_RNR_TIMER, None),
    ("SQ_PSN not allowed", 0, {e.IBV_QP_SQ_PSN: ("sq_psn", 1)}),
    ("TIMEOUT not allowed", 0, {e.IBV_QP_TIMEOUT: ("timeout", 14)}),
    ("path MTU 0 (no enum ib_mtu)", 0, {e.IBV_QP_PATH_MTU: ("path_mtu", 0)}),
    ("path MTU 6 (no enum ib_mtu)", 0, {e.IBV_QP_PATH_MTU: ("path_mtu", 6)}),
    ("dest QPN 2^24 (QPNs are 24 bits)", 0, {e.IBV_QP_DEST_QPN: ("dest_qp_num", 1 << 24)}),
    (f"max_dest_rd_atomic {BIG_RD} above the device's", 0,
     {e.IBV_QP_MAX_DEST_RD_ATOMIC: ("max_dest_rd_atomic", BIG_RD)}),
    ("min_rnr_timer 32 (codes are 5 bits)", 0,
     {e.IBV_QP_MIN_RNR_TIMER: ("min_rnr_timer", 32)}),
    # sgid_index is 8 bits in the ABI: 255 names an empty entry (rrxe's and rdma_rxe's
    # tables have 1024) or one past a smaller table. The core resolves it before the
    # driver (rdma_get_gid_attr): ENODATA for an empty entry, EINVAL past the table.
    ("sgid_index 255 (no GID there)", 0, {e.IBV_QP_AV: ("ah_attr", ah(255))}),
]

for what, drop, extra in INIT_RTR:
    errs = (errno.EINVAL, errno.ENODATA) if "sgid" in what else (errno.EINVAL,)
    row(f"modify INIT->RTR: {what} -> {'/'.join(errno.errorcode[x] for x in errs)}",
        modify_fails, e.IBV_QPS_INIT, e.IBV_QPS_RTR, lambda p: to_rtr_attrs(p.b.qp_num), drop,
        extra, *errs)

RTR_RTS = [
    ("missing SQ_PSN", e.IBV_QP_SQ_PSN, None),
    ("missing TIMEOUT", e.IBV_QP_TIMEOUT, None),
    ("missing RETRY_CNT", e.IBV_QP_RETRY_CNT, None),
    ("missing RNR_RETRY", e.IBV_QP_RNR_RETRY, None),
    ("missing MAX_QP_RD_ATOMIC", e.IBV_QP_MAX_QP_RD_ATOMIC, None),
    ("DEST_QPN not allowed", 0, {e.IBV_QP_DEST_QPN: ("dest_qp_num", 1)}),
    ("PATH_MTU not allowed", 0, {e.IBV_QP_PATH_MTU: ("path_mtu", e.IBV_MTU_1024)}),
    ("PORT not allowed", 0, {e.IBV_QP_PORT: ("port_num", 1)}),
    ("timeout 32 (codes are 5 bits)", 0, {e.IBV_QP_TIMEOUT: ("timeout", 32)}),
    ("retry_cnt 8 (3 bits)", 0, {e.IBV_QP_RETRY_CNT: ("retry_cnt", 8)}),
    ("rnr_retry 8 (3 bits)", 0, {e.IBV_QP_RNR_RETRY: ("rnr_retry", 8)}),
    (f"max_rd_atomic {BIG_RD} above the device's", 0,
     {e.IBV_QP_MAX_QP_RD_ATOMIC: ("max_rd_atomic", BIG_RD)}),
]

for what, drop, extra in RTR_RTS:
    row(f"modify RTR->RTS: {what} -> EINVAL", modify_fails, e.IBV_QPS_RTR, e.IBV_QPS_RTS,
        lambda p: to_rts_attrs(), drop, extra)

ILLEGAL = [
    (e.IBV_QPS_RESET, e.IBV_QPS_RTR, lambda p: to_rtr_attrs(p.b.qp_num)),
    (e.IBV_QPS_RESET, e.IBV_QPS_RTS, lambda p: to_rts_attrs()),
    (e.IBV_QPS_RESET, e.IBV_QPS_SQD, lambda p: {}),
    (e.IBV_QPS_INIT, e.IBV_QPS_RTS, lambda p: to_rts_attrs()),
    (e.IBV_QPS_INIT, e.IBV_QPS_SQD, lambda p: {}),
    (e.IBV_QPS_RTR, e.IBV_QPS_INIT, lambda p: {}),
    (e.IBV_QPS_RTR, e.IBV_QPS_SQD, lambda p: {}),
    (e.IBV_QPS_RTS, e.IBV_QPS_INIT, lambda p: {}),
    (e.IBV_QPS_RTS, e.IBV_QPS_RTR, lambda p: {}),
    # SQE is entered only by the CI on a send error of a UC/UD QP, never by Modify QP.
    (e.IBV_QPS_RTS, e.IBV_QPS_SQE, lambda p: {}),
]

for frm, to, attrs in ILLEGAL:
    row(f"modify {STATE_NAMES[frm]}->{STATE_NAMES[to]}: not a transition (IBA 10.3.1) -> EINVAL",
        modify_fails, frm, to, attrs, 0, None)


def bad_state_value():
    p = Pair(e.IBV_QPS_RESET)
    fails_with(lambda: modify(p.a, 7, {}), errno.EINVAL)


row("modify to state 7 (no such state) -> EINVAL", bad_state_value)


def wrong_cur_state():
    # IBA 11.2.4.2: the current state given must be the QP's; rrxe checks it against its
    # own. ib_modify_qp_is_ok() allows IB_QP_CUR_STATE only from RTR, RTS, SQD, SQE.
    p = Pair(e.IBV_QPS_RTS)
    a = QPAttr()
    a.qp_state = e.IBV_QPS_RTS
    a.cur_qp_state = e.IBV_QPS_SQD
    fails_with(lambda: p.a.modify(a, e.IBV_QP_STATE | e.IBV_QP_CUR_STATE), errno.EINVAL)
    a.cur_qp_state = e.IBV_QPS_RTS
    p.a.modify(a, e.IBV_QP_STATE | e.IBV_QP_CUR_STATE)
    expect_state(p.a, e.IBV_QPS_RTS)


row("modify RTS->RTS with cur_qp_state SQD (not the QP's) -> EINVAL; with RTS it succeeds",
    wrong_cur_state)

# Legal transitions: query_qp returns what was set.

QUERY_ALL = 0x1fffff & ~(e.IBV_QP_ALT_PATH | e.IBV_QP_PATH_MIG_STATE)


def check_query(qp, want):
    a, _ = qp.query(QUERY_ALL)
    for name, val in want.items():
        got = getattr(a, name)
        assert got == val, f"{name}: queried {got}, set {val}"


def legal_path():
    p = Pair(e.IBV_QPS_RESET)
    check_query(p.a, {"qp_state": e.IBV_QPS_RESET})
    modify(p.a, e.IBV_QPS_INIT, to_init_attrs())
    check_query(p.a, {"qp_state": e.IBV_QPS_INIT, "pkey_index": 0, "port_num": 1,
                      "qp_access_flags": ALL_REMOTE & ~e.IBV_ACCESS_LOCAL_WRITE})
    modify(p.a, e.IBV_QPS_RTR, to_rtr_attrs(p.b.qp_num, rq_psn=0xabcdef))
    check_query(p.a, {"qp_state": e.IBV_QPS_RTR, "path_mtu": e.IBV_MTU_1024,
                      "dest_qp_num": p.b.qp_num, "rq_psn": 0xabcdef,
                      "max_dest_rd_atomic": 4, "min_rnr_timer": 12})
    a, _ = p.a.query(e.IBV_QP_AV)
    assert a.ah_attr.dgid == DGID.gid and a.ah_attr.sgid_index == GID, \
        (a.ah_attr.dgid, a.ah_attr.sgid_index)
    rts = to_rts_attrs(sq_psn=0xfedcba)
    rts[e.IBV_QP_TIMEOUT] = ("timeout", 31)
    rts[e.IBV_QP_RETRY_CNT] = ("retry_cnt", 3)
    rts[e.IBV_QP_RNR_RETRY] = ("rnr_retry", 6)
    modify(p.a, e.IBV_QPS_RTS, rts)
    check_query(p.a, {"qp_state": e.IBV_QPS_RTS, "sq_psn": 0xfedcba, "timeout": 31,
                      "retry_cnt": 3, "rnr_retry": 6, "max_rd_atomic": 4})
    modify(p.a, e.IBV_QPS_SQD)
    check_query(p.a, {"qp_state": e.IBV_QPS_SQD})
    modify(p.a, e.IBV_QPS_RTS, extra={e.IBV_QP_MIN_RNR_TIMER: ("min_rnr_timer", 20)})
    check_query(p.a, {"qp_state": e.IBV_QPS_RTS, "min_rnr_timer": 20})
    modify(p.a, e.IBV_QPS_ERR)
    check_query(p.a, {"qp_state": e.IBV_QPS_ERR})
    fails_with(lambda: modify(p.a, e.IBV_QPS_RTS), errno.EINVAL)
    modify(p.a, e.IBV_QPS_RESET)
    check_query(p.a, {"qp_state": e.IBV_QPS_RESET})
    modify(p.a, e.IBV_QPS_INIT, to_init_attrs())
    check_query(p.a, {"qp_state": e.IBV_QPS_INIT})


row("RESET->INIT->RTR->RTS->SQD->RTS->ERR->RESET->INIT: query_qp returns what was set; "
    "ERR->RTS -> EINVAL", legal_path)


def sqd_disallowed():
    p = Pair(e.IBV_QPS_RTS)
    fails_with(lambda: modify(p.a, e.IBV_QPS_SQD, extra={e.IBV_QP_SQ_PSN: ("sq_psn", 1)}),
               errno.EINVAL)
    modify(p.a, e.IBV_QPS_SQD)
    fails_with(lambda: modify(p.a, e.IBV_QPS_RTS,
                              extra={e.IBV_QP_DEST_QPN: ("dest_qp_num", p.b.qp_num)}),
               errno.EINVAL)
    expect_state(p.a, e.IBV_QPS_SQD)


def psn_masked(frm, to, attrs, bit, name):
    # The core masks PSNs to 24 bits (with a dev_warn) before the driver sees them
    # (_ib_modify_qp); the driver cannot refuse what it never gets.
    p = Pair(frm)
    modify(p.a, to, attrs(p), extra={bit: (name, (1 << 24) + 5)})
    got = getattr(p.a.query(bit)[0], name)
    assert got == 5, f"{name} queried as {got:#x}"


row("modify INIT->RTR with rq_psn 2^24 + 5: masked to 24 bits by the core, queried as 5",
    psn_masked, e.IBV_QPS_INIT, e.IBV_QPS_RTR, lambda p: to_rtr_attrs(p.b.qp_num),
    e.IBV_QP_RQ_PSN, "rq_psn")
row("modify RTR->RTS with sq_psn 2^24 + 5: masked to 24 bits by the core, queried as 5",
    psn_masked, e.IBV_QPS_RTR, e.IBV_QPS_RTS, lambda p: to_rts_attrs(), e.IBV_QP_SQ_PSN,
    "sq_psn")
row("modify RTS->SQD with SQ_PSN, SQD->RTS with DEST_QPN: not allowed -> EINVAL",
    sqd_disallowed)


def any_to_err(state):
    p = Pair(state)
    if state == e.IBV_QPS_SQD:
        modify(p.a, e.IBV_QPS_SQD)
    modify(p.a, e.IBV_QPS_ERR)
    expect_state(p.a, e.IBV_QPS_ERR)
    modify(p.a, e.IBV_QPS_RESET)
    expect_state(p.a, e.IBV_QPS_RESET)


for st in (e.IBV_QPS_INIT, e.IBV_QPS_RTR, e.IBV_QPS_RTS, e.IBV_QPS_SQD):
    row(f"modify {STATE_NAMES[st]}->ERR->RESET succeeds", any_to_err, st)


def reset_to_err():
    # IBA 10.3.1 draws "any state to Error", but the kernel's table (ib_modify_qp_is_ok)
    # has no RESET to ERR, and rdma_rxe refuses it too: a QP in RESET has nothing to flush.
    p = Pair(e.IBV_QPS_RESET)
    fails_with(lambda: modify(p.a, e.IBV_QPS_ERR), errno.EINVAL)
    expect_state(p.a, e.IBV_QPS_RESET)


row("modify RESET->ERR: not in the kernel's table -> EINVAL", reset_to_err)

# --- posting in the wrong state ---


def post_send_early(state):
    # The provider writes the ring, then its doorbell (POST_SEND with no WRs) is refused
    # before RTS (IBA 10.3.1: Send WRs are not accepted before RTS): ibv_post_send returns
    # EINVAL, and nothing completes. The WQE stays in the ring; this QP is destroyed.
    p = Pair(state)
    mr = p.mr()
    fails_with(lambda: p.a.post_send(send_wr([SGE(mr.buf, 8, mr.lkey)])), errno.EINVAL)
    no_completion(p.cq_a)


for st in (e.IBV_QPS_RESET, e.IBV_QPS_INIT, e.IBV_QPS_RTR):
    row(f"post_send in {STATE_NAMES[st]} -> EINVAL (the provider's doorbell), no completion",
        post_send_early, st)


def post_recv_reset():
    # IBA 10.3.1 refuses receive WRs in RESET. The rxe provider writes receives to the ring
    # without a system call, so the check is its own (it tracks the state ibv_modify_qp set).
    p = Pair(e.IBV_QPS_RESET)
    mr = p.mr()
    fails_with(lambda: p.a.post_recv(recv_wr([SGE(mr.buf, 8, mr.lkey)])), errno.EINVAL)
    no_completion(p.cq_a)


row("post_recv in RESET -> EINVAL (the provider's check), no completion", post_recv_reset)


def post_in_err():
    p = Pair(e.IBV_QPS_RTS)
    mr = p.mr()
    modify(p.a, e.IBV_QPS_ERR)
    p.a.post_recv(recv_wr([SGE(mr.buf, 8, mr.lkey)], wr_id=7))
    p.a.post_send(send_wr([SGE(mr.buf, 8, mr.lkey)], wr_id=8))
    wcs = poll(p.cq_a, 2)
    got = sorted((wc.wr_id, wc.status) for wc in wcs)
    assert got == [(7, e.IBV_WC_WR_FLUSH_ERR), (8, e.IBV_WC_WR_FLUSH_ERR)], got


row("post_recv then post_send in ERR: both flushed with WR_FLUSH_ERR", post_in_err)

# --- remote access errors: an R_Key, bounds or rights violation is answered with a Remote
# Access Error NAK (IBA 9.7.5.2) and completes with REM_ACCESS_ERR; the requester's QP goes
# to ERR and later WRs flush ---


def remote_error(build, status=e.IBV_WC_REM_ACCESS_ERR, mr_access=ALL_REMOTE, other_pd=False):
    p = Pair()
    src = p.mr()
    dst = p.mr(mr_access, pd=PD(ctx) if other_pd else None)
    wr = build(src, dst)
    p.a.post_send(wr)
    wc = expect_wc(p.cq_a, status)
    assert wc.wr_id == 1, wc.wr_id
    expect_state(p.a, e.IBV_QPS_ERR)
    p.a.post_send(send_wr([SGE(src.buf, 8, src.lkey)], wr_id=9))
    wc = expect_wc(p.cq_a, e.IBV_WC_WR_FLUSH_ERR)
    assert wc.wr_id == 9, wc.wr_id


def w(src, length=8):
    return SGE(src.buf, length, src.lkey)


REMOTE = [
    ("RDMA Write, R_Key of no MR (index + 1)",
     lambda s, d: rdma_wr(e.IBV_WR_RDMA_WRITE, w(s), d.rkey + 0x100, d.buf), {}),
    ("RDMA Write, R_Key with the wrong key byte",
     lambda s, d: rdma_wr(e.IBV_WR_RDMA_WRITE, w(s), d.rkey ^ 0x01, d.buf), {}),
    ("RDMA Read, R_Key with the wrong key byte",
     lambda s, d: rdma_wr(e.IBV_WR_RDMA_READ, w(s), d.rkey ^ 0x80, d.buf), {}),
    ("RDMA Write, R_Key of an MR in another PD",
     lambda s, d: rdma_wr(e.IBV_WR_RDMA_WRITE, w(s), d.rkey, d.buf), {"other_pd": True}),
    ("RDMA Write 1 byte before the MR",
     lambda s, d: rdma_wr(e.IBV_WR_RDMA_WRITE, w(s), d.rkey, d.buf - 1), {}),
    ("RDMA Write past the MR's end",
     lambda s, d: rdma_wr(e.IBV_WR_RDMA_WRITE, w(s), d.rkey, d.buf + MSG), {}),
    ("RDMA Write straddling the MR's end",
     lambda s, d: rdma_wr(e.IBV_WR_RDMA_WRITE, w(s), d.rkey, d.buf + MSG - 4), {}),
    ("RDMA Read straddling the MR's end",
     lambda s, d: rdma_wr(e.IBV_WR_RDMA_READ, w(s), d.rkey, d.buf + MSG - 4), {}),
    ("RDMA Read at address 2^64 - 4 (wraps)",
     lambda s, d: rdma_wr(e.IBV_WR_RDMA_READ, w(s), d.rkey, (1 << 64) - 4), {}),
    ("Atomic past the MR's end",
     lambda s, d: atomic_wr(w(s), d.rkey, d.buf + MSG), {}),
    ("RDMA Write to an MR without REMOTE_WRITE",
     lambda s, d: rdma_wr(e.IBV_WR_RDMA_WRITE, w(s), d.rkey, d.buf),
     {"mr_access": ALL_REMOTE & ~e.IBV_ACCESS_REMOTE_WRITE}),
    ("RDMA Read of an MR without REMOTE_READ",
     lambda s, d: rdma_wr(e.IBV_WR_RDMA_READ, w(s), d.rkey, d.buf),
     {"mr_access": ALL_REMOTE & ~e.IBV_ACCESS_REMOTE_READ}),
    ("Atomic on an MR without REMOTE_ATOMIC",
     lambda s, d: atomic_wr(w(s), d.rkey, d.buf),
     {"mr_access": ALL_REMOTE & ~e.IBV_ACCESS_REMOTE_ATOMIC}),
]

for what, build, kw in REMOTE:
    row(f"{what} -> REM_ACCESS_ERR, QP in ERR, next WR flushed", remote_error, build,
        e.IBV_WC_REM_ACCESS_ERR, kw.get("mr_access", ALL_REMOTE), kw.get("other_pd", False))


def atomic_misaligned():
    # The rxe provider refuses an atomic WR whose remote address is not 8-byte aligned
    # (IBA 9.4.5 requires natural alignment) before it reaches the ring.
    p = Pair()
    src, dst = p.mr(), p.mr()
    fails_with(lambda: p.a.post_send(atomic_wr(w(src), dst.rkey, dst.buf + 4)), errno.EINVAL)
    expect_state(p.a, e.IBV_QPS_RTS)


row("Atomic at a misaligned remote address -> EINVAL (the provider's check)", atomic_misaligned)


def remote_qp_access():
    # The responder QP's own access flags gate remote operations too; an operation the QP is
    # not enabled for is an Invalid Request (IBA 9.7.5.2.2, NAK code 1), not an R_Key
    # violation. rdma_rxe answers the same.
    p = Pair(e.IBV_QPS_RESET)
    for qp, peer in ((p.a, p.b), (p.b, p.a)):
        init = to_init_attrs()
        init[e.IBV_QP_ACCESS_FLAGS] = ("qp_access_flags", e.IBV_ACCESS_REMOTE_READ)
        modify(qp, e.IBV_QPS_INIT, init)
        modify(qp, e.IBV_QPS_RTR, to_rtr_attrs(peer.qp_num))
        modify(qp, e.IBV_QPS_RTS, to_rts_attrs())
    src, dst = p.mr(), p.mr()
    p.a.post_send(rdma_wr(e.IBV_WR_RDMA_WRITE, w(src), dst.rkey, dst.buf))
    expect_wc(p.cq_a, e.IBV_WC_REM_INV_REQ_ERR)


row("RDMA Write to a QP without REMOTE_WRITE in its access flags -> REM_INV_REQ_ERR",
    remote_qp_access)

# --- local errors on the requester (IBA 10.8.3: Local Protection / Local Length Error) ---


def local_error(sges, status, opcode=e.IBV_WR_SEND, recv=True, access=ALL_REMOTE):
    p = Pair()
    src = p.mr(access)
    dst = p.mr()
    if recv:
        p.b.post_recv(recv_wr([SGE(dst.buf, MSG, dst.lkey)]))
    if opcode == e.IBV_WR_SEND:
        wr = send_wr(sges(src))
    else:
        wr = rdma_wr(opcode, sges(src)[0], dst.rkey, dst.buf)
    p.a.post_send(wr)
    expect_wc(p.cq_a, status)
    expect_state(p.a, e.IBV_QPS_ERR)
    no_completion(p.cq_b, 0.1)


LOCAL = [
    ("Send, SGE with an L_Key of no MR", lambda s: [SGE(s.buf, 8, s.lkey + 0x100)],
     e.IBV_WC_LOC_PROT_ERR, {}),
    ("Send, SGE with the wrong L_Key byte", lambda s: [SGE(s.buf, 8, s.lkey ^ 1)],
     e.IBV_WC_LOC_PROT_ERR, {}),
    ("Send, SGE past the local MR's end", lambda s: [SGE(s.buf + MSG - 4, 8, s.lkey)],
     e.IBV_WC_LOC_PROT_ERR, {}),
    ("Send, SGE before the local MR", lambda s: [SGE(s.buf - 8, 8, s.lkey)],
     e.IBV_WC_LOC_PROT_ERR, {}),
    ("RDMA Read into a local MR without LOCAL_WRITE", lambda s: [SGE(s.buf, 8, s.lkey)],
     e.IBV_WC_LOC_PROT_ERR,
     {"opcode": e.IBV_WR_RDMA_READ, "recv": False, "access": 0}),
]

for what, sges, status, kw in LOCAL:
    row(f"{what} -> {wc_name(status)}, QP in ERR", local_error, sges, status, **kw)


def too_long():
    # IBA 9.4: a message is at most 2^31 bytes (max_msg_sz). The SGE lies beyond the MR
    # too; the length is checked first, before any byte is read.
    p = Pair()
    src = p.mr()
    dst = p.mr()
    p.b.post_recv(recv_wr([SGE(dst.buf, MSG, dst.lkey)]))
    p.a.post_send(send_wr([SGE(src.buf, 1 << 31, src.lkey), SGE(src.buf, 8, src.lkey)]))
    expect_wc(p.cq_a, e.IBV_WC_LOC_LEN_ERR)
    expect_state(p.a, e.IBV_QPS_ERR)


row("Send of 2^31 + 8 bytes (above max_msg_sz) -> LOC_LEN_ERR", too_long)

# --- errors on the responder's receive WQE (IBA 9.7.5.2: Invalid Request NAK for a
# message longer than the receive buffer; Remote Operational Error for a receive WQE the
# responder cannot use) ---


def recv_error(recv_sges, req_status, resp_status, length=MSG):
    p = Pair()
    src = p.mr()
    dst = p.mr(e.IBV_ACCESS_LOCAL_WRITE)
    ro = p.mr(0)
    p.b.post_recv(recv_wr(recv_sges(dst, ro)))
    p.a.post_send(send_wr([SGE(src.buf, length, src.lkey)]))
    expect_wc(p.cq_a, req_status)
    expect_wc(p.cq_b, resp_status)
    expect_state(p.a, e.IBV_QPS_ERR)
    expect_state(p.b, e.IBV_QPS_ERR)


row("Send of 4096 into a 100-byte receive buffer -> responder LOC_LEN_ERR, requester "
    "REM_INV_REQ_ERR", recv_error, lambda d, r: [SGE(d.buf, 100, d.lkey)],
    e.IBV_WC_REM_INV_REQ_ERR, e.IBV_WC_LOC_LEN_ERR)
row("Send into a receive SGE with a bad L_Key -> responder LOC_PROT_ERR, requester "
    "REM_OP_ERR", recv_error, lambda d, r: [SGE(d.buf, MSG, d.lkey + 0x100)],
    e.IBV_WC_REM_OP_ERR, e.IBV_WC_LOC_PROT_ERR)
row("Send into a receive MR without LOCAL_WRITE -> responder LOC_PROT_ERR, requester "
    "REM_OP_ERR", recv_error, lambda d, r: [SGE(r.buf, MSG, r.lkey)],
    e.IBV_WC_REM_OP_ERR, e.IBV_WC_LOC_PROT_ERR)

# --- oversized SGE lists and inline data: the rxe provider checks them against the QP's
# caps before writing the ring (EINVAL), as IBA 11.4.1.1 requires of post ---


def too_many_send_sges():
    p = Pair()
    mr = p.mr()
    sges = [SGE(mr.buf, 8, mr.lkey)] * (p.cap.max_send_sge + 1)
    fails_with(lambda: p.a.post_send(send_wr(sges)), errno.EINVAL, errno.ENOMEM)
    no_completion(p.cq_a, 0.1)


def too_many_recv_sges():
    p = Pair()
    mr = p.mr()
    sges = [SGE(mr.buf, 8, mr.lkey)] * (p.cap.max_recv_sge + 1)
    fails_with(lambda: p.a.post_recv(recv_wr(sges)), errno.EINVAL, errno.ENOMEM)


def too_much_inline():
    p = Pair()
    mr = p.mr()
    _, init = p.a.query(e.IBV_QP_CAP)
    granted = init.cap.max_inline_data
    sge = SGE(mr.buf, granted + 1, mr.lkey)
    fails_with(lambda: p.a.post_send(send_wr([sge], e.IBV_SEND_SIGNALED | e.IBV_SEND_INLINE)),
               errno.EINVAL, errno.ENOMEM)


def max_sges_work():
    p = Pair()
    src = p.mr()
    dst = p.mr()
    k = p.cap.max_send_sge
    p.b.post_recv(recv_wr([SGE(dst.buf + 16 * i, 16, dst.lkey) for i in range(k)]))
    src.write(bytes(range(16 * k)), 16 * k)
    p.a.post_send(send_wr([SGE(src.buf + 16 * i, 16, src.lkey) for i in range(k)]))
    expect_wc(p.cq_a, e.IBV_WC_SUCCESS)
    wc = expect_wc(p.cq_b, e.IBV_WC_SUCCESS)
    assert wc.byte_len == 16 * k, wc.byte_len
    assert dst.read(16 * k, 0) == bytes(range(16 * k))


row("post_send with max_send_sge + 1 SGEs -> EINVAL (provider), nothing completes",
    too_many_send_sges)
row("post_recv with max_recv_sge + 1 SGEs -> EINVAL (provider)", too_many_recv_sges)
row("post_send with inline data of max_inline_data + 1 bytes -> EINVAL (provider)",
    too_much_inline)
row("control: exactly max_send_sge and max_recv_sge SGEs carry the message", max_sges_work)

# --- Reregister Memory Region (IBA 11.2.8.2) through the raw uverbs command: the rxe
# provider has no ibv_rereg_mr (EOPNOTSUPP in userspace), so the test writes
# IB_USER_VERBS_CMD_REREG_MR (struct ib_uverbs_rereg_mr) to the context's command fd. The
# MR keeps its handle; its keys come back in the response. ---

CMD_REREG_MR = 11
REREG_TRANS, REREG_PD, REREG_ACCESS = 1, 2, 4


def rereg(mr, flags, pd=None, start=0, length=0, hca_va=0, access=0):
    """Returns the new (lkey, rkey); raises OSError with the command's errno."""
    resp = ctypes.create_string_buffer(8)
    body = struct.pack("=QIIQQQII", ctypes.addressof(resp), mr.handle, flags, start, length,
                       hca_va, pd.handle if pd else 0, access)
    hdr = struct.pack("=IHH", CMD_REREG_MR, (8 + len(body)) // 4, len(resp) // 4)
    os.write(ctx.cmd_fd, hdr + body)
    return struct.unpack("=II", resp.raw)


def write_ok(p, rkey, addr, data):
    src = p.mr()
    src.write(data, len(data))
    p.a.post_send(rdma_wr(e.IBV_WR_RDMA_WRITE, SGE(src.buf, len(data), src.lkey), rkey, addr))
    return poll(p.cq_a)[0].status


def rereg_access_add():
    p = Pair()
    dst = p.mr(e.IBV_ACCESS_LOCAL_WRITE)
    old = dst.rkey
    lkey, rkey = rereg(dst, REREG_ACCESS, access=e.IBV_ACCESS_LOCAL_WRITE
                       | e.IBV_ACCESS_REMOTE_WRITE)
    # The new registration has new keys (IBA 11.2.8.2 returns them); the old ones are dead.
    assert rkey != old and lkey == rkey, (hex(old), hex(lkey), hex(rkey))
    st = write_ok(p, rkey, dst.buf, b"rereg-access")
    assert st == e.IBV_WC_SUCCESS, wc_name(st)
    assert dst.read(12, 0) == b"rereg-access"
    p = Pair()
    st = write_ok(p, old, dst.buf, b"x")
    assert st == e.IBV_WC_REM_ACCESS_ERR, wc_name(st)


def rereg_access_drop():
    p = Pair()
    dst = p.mr()
    _, rkey = rereg(dst, REREG_ACCESS, access=e.IBV_ACCESS_LOCAL_WRITE
                    | e.IBV_ACCESS_REMOTE_READ)
    st = write_ok(p, rkey, dst.buf, b"x")
    assert st == e.IBV_WC_REM_ACCESS_ERR, wc_name(st)


def rereg_pd():
    p = Pair()
    pd2 = PD(ctx)
    dst = p.mr(pd=pd2)
    st = write_ok(p, dst.rkey, dst.buf, b"x")
    assert st == e.IBV_WC_REM_ACCESS_ERR, wc_name(st)
    p = Pair()
    _, rkey = rereg(dst, REREG_PD, pd=p.pd)
    st = write_ok(p, rkey, dst.buf, b"rereg-pd")
    assert st == e.IBV_WC_SUCCESS, wc_name(st)
    assert dst.read(8, 0) == b"rereg-pd"
    dst.close()
    pd2.close()


def rereg_trans():
    p = Pair()
    dst = p.mr()
    dst.write(b"\0" * 16, 16)
    buf = mmap.mmap(-1, 2 * MSG)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    # A new range with an iova of our choosing (same page offset, as the core requires).
    iova = 0x7e57000000 + 0x100
    _, rkey = rereg(dst, REREG_TRANS, start=addr + 0x100, length=MSG, hca_va=iova)
    st = write_ok(p, rkey, iova + MSG - 11, b"rereg-trans")
    assert st == e.IBV_WC_SUCCESS, wc_name(st)
    assert buf[0x100 + MSG - 11:0x100 + MSG] == b"rereg-trans"
    assert dst.read(16, 0) == b"\0" * 16
    # The new range is the MR: one byte past it is out of bounds.
    p = Pair()
    st = write_ok(p, rkey, iova + MSG - 10, b"rereg-trans")
    assert st == e.IBV_WC_REM_ACCESS_ERR, wc_name(st)
    dst.close()


def rereg_bad(flags, errno_, **kw):
    p = Pair()
    dst = p.mr()
    fails_with(lambda: rereg(dst, flags, **kw), errno_)
    # A refused reregistration leaves the MR as it was.
    st = write_ok(p, dst.rkey, dst.buf, b"still")
    assert st == e.IBV_WC_SUCCESS, wc_name(st)


def rereg_with_window():
    p = Pair()
    dst = p.mr(ALL_REMOTE | e.IBV_ACCESS_MW_BIND)
    mw = MW(p.pd, e.IBV_MW_TYPE_2)
    wr = SendWR(opcode=e.IBV_WR_BIND_MW)
    wr.set_bind_wr(mw, MWBindInfo(dst, dst.buf, MSG, e.IBV_ACCESS_REMOTE_WRITE))
    p.b.post_send(wr)
    expect_wc(p.cq_b, e.IBV_WC_SUCCESS)
    # IBA 11.2.8.2 / rdma_rxe's num_mw: not while a window is bound to it.
    fails_with(lambda: rereg(dst, REREG_ACCESS, access=ALL_REMOTE), errno.EINVAL)
    st = write_ok(p, dst.rkey, dst.buf, b"still")
    assert st == e.IBV_WC_SUCCESS, wc_name(st)
    mw.close()
    _, rkey = rereg(dst, REREG_ACCESS, access=ALL_REMOTE)
    st = write_ok(p, rkey, dst.buf, b"after")
    assert st == e.IBV_WC_SUCCESS, wc_name(st)


row("rereg_mr ACCESS adds REMOTE_WRITE: new keys, a Write with them lands, the old R_Key "
    "gets REM_ACCESS_ERR", rereg_access_add)
row("rereg_mr ACCESS drops REMOTE_WRITE: a Write with the new R_Key gets REM_ACCESS_ERR",
    rereg_access_drop)
row("rereg_mr PD: an MR of another PD moved to the QP's PD takes a Write", rereg_pd)
row("rereg_mr TRANS: a new buffer and iova; a Write lands there, not in the old buffer; "
    "bounds are the new length", rereg_trans)
row("rereg_mr with no flags -> EINVAL (core); the MR unchanged", rereg_bad, 0, errno.EINVAL)
row("rereg_mr with unknown flag 8 -> EOPNOTSUPP (core)", rereg_bad, 8, errno.EOPNOTSUPP)
row("rereg_mr TRANS with iova and address at different page offsets -> EINVAL (core)",
    rereg_bad, REREG_TRANS, errno.EINVAL, start=0x10000, length=MSG, hca_va=0x10008)
row("rereg_mr while a type 2 window is bound -> EINVAL; after dealloc_mw it succeeds",
    rereg_with_window)


# --- objects destroyed while the peer's packets for them are in flight: every WR of the
# burst completes, in order (delivered; then at most one error, the NAK or the retry
# exhaustion the destruction causes; then flushes), nothing hangs, nothing leaks (the debug
# kernel's KASAN and kmemleak watch the in-flight references), and the device carries
# traffic afterwards ---

BURST = 16  # Pair's send queue
BIG = 64 * 1024
# Completions taken before the object goes: `make check` destroys it at once (it went after
# 0 or 1 of the 16 WRs in debug VMs); `make soak` also lets a quarter, half and most of the
# burst through first, so the destruction lands at other points of the stream.
AFTER = (0, 4, 8, 12) if tap.SOAK else (0,)


def burst_outcome(cq, after, allowed, timeout):
    """Waits for the BURST - `after` completions left; returns how many succeeded before the
    first error, which must be one of `allowed` and be followed by flushes only."""
    st = [wc.status for wc in poll(cq, BURST - after, timeout)]
    ok = next((i for i, s in enumerate(st) if s != e.IBV_WC_SUCCESS), len(st))
    if ok < len(st):
        assert st[ok] in allowed, f"WR {after + ok}: {wc_name(st[ok])}"
        later = {wc_name(s) for s in st[ok + 1:]}
        assert later <= {"WR_FLUSH_ERR"}, f"after {wc_name(st[ok])}: {sorted(later)}"
    tap.diag(f"{after + ok} of {BURST} WRs completed before the object went"
             + (f", then {wc_name(st[ok])}" if ok < len(st) else ""))
    return ok


def let_through(cq, after):
    """The first `after` WRs of the burst complete before the object goes."""
    for wc in poll(cq, after, 30):
        assert wc.status == e.IBV_WC_SUCCESS, wc_name(wc.status)


def still_carries_traffic():
    q = Pair()
    dst = q.mr()
    st = write_ok(q, dst.rkey, dst.buf, b"after")
    assert st == e.IBV_WC_SUCCESS, wc_name(st)


def write_burst(p, src, rkey, addr):
    for i in range(BURST):
        p.a.post_send(rdma_wr(e.IBV_WR_RDMA_WRITE, SGE(src.buf, BIG, src.lkey), rkey, addr,
                              wr_id=i))


def mr_gone_mid_write(after):
    p = Pair()
    src, dst = p.mr(size=BIG), p.mr(size=BIG)
    write_burst(p, src, dst.rkey, dst.buf)
    let_through(p.cq_a, after)
    dst.close()
    burst_outcome(p.cq_a, after, {e.IBV_WC_REM_ACCESS_ERR}, 30)
    still_carries_traffic()


def mw_gone_mid_write(after):
    p = Pair()
    src, dst = p.mr(size=BIG), p.mr(ALL_REMOTE | e.IBV_ACCESS_MW_BIND, size=BIG)
    mw = MW(p.pd, e.IBV_MW_TYPE_2)
    wr = SendWR(opcode=e.IBV_WR_BIND_MW)
    wr.set_bind_wr(mw, MWBindInfo(dst, dst.buf, BIG, e.IBV_ACCESS_REMOTE_WRITE))
    p.b.post_send(wr)
    expect_wc(p.cq_b, e.IBV_WC_SUCCESS)
    write_burst(p, src, wr.rkey, dst.buf)
    let_through(p.cq_a, after)
    mw.close()
    burst_outcome(p.cq_a, after, {e.IBV_WC_REM_ACCESS_ERR}, 30)
    # Deallocating the window unbound it (IBA 10.6.7.4), so its MR can go.
    dst.close()
    still_carries_traffic()


def qp_gone_mid_send(after):
    p = Pair()
    src, dst = p.mr(size=BIG), p.mr(size=BIG)
    for i in range(BURST):
        p.b.post_recv(recv_wr([SGE(dst.buf, BIG, dst.lkey)], wr_id=i))
    for i in range(BURST):
        p.a.post_send(send_wr([SGE(src.buf, BIG, src.lkey)], wr_id=i))
    let_through(p.cq_a, after)
    p.b.close()
    # The rest go to a QP number nobody has: timeout 14 (67 ms), 7 retries.
    burst_outcome(p.cq_a, after, {e.IBV_WC_RETRY_EXC_ERR}, 60)
    still_carries_traffic()


for n in AFTER:
    first = f"after {n} of them completed" if n else "at once"
    row(f"MR deregistered during {BURST} 64 KiB RDMA Writes to it ({first}): all complete, "
        "in order (REM_ACCESS_ERR, then flushes, once it is gone)", mr_gone_mid_write, n)
    row(f"type 2 MW deallocated during {BURST} 64 KiB RDMA Writes through it ({first}): all "
        "complete, in order (REM_ACCESS_ERR, then flushes); its MR deregisters",
        mw_gone_mid_write, n)
    row(f"responder QP destroyed during {BURST} 64 KiB Sends to it ({first}): all complete, "
        "in order (RETRY_EXC_ERR, then flushes, once it is gone)", qp_gone_mid_send, n)

sys.exit(tap.done())
