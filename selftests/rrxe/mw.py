#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Memory windows, Local Invalidate and Send with Invalidate through the unmodified rdma-core
rxe provider (pyverbs), TAP output. RC QP pairs loop back on one device.

Run inside a VM with an rrxe device named by $RRXE_DEV (default rrxe0), with rdma-core's
test package (tests.base, tests.utils) importable.
"""
import errno
import os
import sys

from pyverbs.device import Context
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.pd import PD
from pyverbs.qp import QPAttr
from pyverbs.wr import SGE, SendWR
import pyverbs.enums as e

from tests.base import RCResources
import tests.utils as u

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
import tap  # noqa: E402 - selftests/rrxe/lib, found through the line above
from tap import fails_with, test  # noqa: E402

DEV = os.environ.get("RRXE_DEV", "rrxe0")
GID = int(os.environ.get("RRXE_GID", "0"))


class Res(RCResources):
    """An RC QP with an MR of `mr_access` rights."""

    mr_access = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND

    def __init__(self, mr_access=None):
        if mr_access is not None:
            self.mr_access = mr_access
        super().__init__(dev_name=DEV, ib_port=1, gid_index=GID)

    def create_mr(self):
        self.mr = MR(self.pd, self.msg_size, self.mr_access)

    def create_qp_attr(self):
        attr = QPAttr(port_num=self.ib_port)
        attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
        return attr


def pair(mr_access=None):
    a, b = Res(mr_access), Res(mr_access)
    a.pre_run(b.psns, b.qps_num)
    b.pre_run(a.psns, a.qps_num)
    return a, b


def one_wc(cq):
    return u._poll_cq(cq, 1)[0]


def bind2(res, mw, addr, length, access=e.IBV_ACCESS_REMOTE_WRITE):
    """Posts a type 2 bind; returns (completion, new rkey)."""
    wr = SendWR(opcode=e.IBV_WR_BIND_MW)
    wr.set_bind_wr(mw, MWBindInfo(res.mr, addr, length, access))
    res.qp.post_send(wr)
    return one_wc(res.cq), wr.rkey


def write(src, dst, rkey, addr, length=None):
    """RDMA Write from src's MR to (rkey, addr); returns the requester's completion."""
    length = src.msg_size if length is None else length
    wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                sg=[SGE(src.mr.buf, length, src.mr.lkey)])
    wr.set_wr_rdma(rkey, addr)
    src.qp.post_send(wr)
    return one_wc(src.cq)


tap.begin(f"memory windows on {DEV}")
ctx = Context(name=DEV)
attr = ctx.query_device()


@test("query_device reports type 1 and type 2B memory windows")
def _():
    assert attr.max_mw > 0, attr.max_mw
    caps = attr.device_cap_flags
    assert caps & e.IBV_DEVICE_MEM_WINDOW, hex(caps)
    assert caps & e.IBV_DEVICE_MEM_WINDOW_TYPE_2B, hex(caps)


@test("allocate and free type 1 and type 2 MWs; keys in the MW index range, distinct")
def _():
    with PD(ctx) as pd:
        mws = [MW(pd, t) for t in (e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2) * 50]
        keys = {mw.rkey for mw in mws}
        assert len(keys) == len(mws)
        assert all(k >> 8 >= 1 << 23 for k in keys), [hex(k) for k in keys][:4]
        for mw in mws:
            mw.close()


@test("an MW of type 3 is refused")
def _():
    with PD(ctx) as pd:
        fails_with(lambda: MW(pd, 3), errno.EINVAL, errno.EOPNOTSUPP)


@test("type 2 bind, RDMA Write through the window, lands in the MR")
def _():
    a, b = pair()
    mw = MW(b.pd, e.IBV_MW_TYPE_2)
    wc, rkey = bind2(b, mw, b.mr.buf, b.msg_size)
    assert wc.status == e.IBV_WC_SUCCESS and wc.opcode == e.IBV_WC_BIND_MW, (wc.status, wc.opcode)
    assert rkey >> 8 == mw.rkey >> 8, (hex(rkey), hex(mw.rkey))
    a.mr.write(b"x" * a.msg_size, a.msg_size)
    wc = write(a, b, rkey, b.mr.buf)
    assert wc.status == e.IBV_WC_SUCCESS, u.wc_status_to_str(wc.status)
    assert b.mr.read(a.msg_size, 0) == b"x" * a.msg_size
    # Outside the window: remote access error.
    wc = write(a, b, rkey, b.mr.buf + 1)
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, u.wc_status_to_str(wc.status)
    mw.close()


def fresh_qps(a, b):
    """Replaces the QPs of a connected pair with new ones on the same PDs and CQs."""
    for r in (a, b):
        for qp in r.qps:
            qp.close()
        r.qps, r.qps_num, r.psns = [], [], []
        r.create_qps()
    a.pre_run(b.psns, b.qps_num)
    b.pre_run(a.psns, a.qps_num)


@test("type 2 window answers only the QP it was bound through, never that QP's successor")
def _():
    a, b = pair()
    mw = MW(b.pd, e.IBV_MW_TYPE_2)
    wc, rkey = bind2(b, mw, b.mr.buf, b.msg_size)
    assert wc.status == e.IBV_WC_SUCCESS, u.wc_status_to_str(wc.status)
    # IBA 10.6.7.2.2: the window stays bound to b's first QP; after it is destroyed, a
    # new QP of the same PD (whatever its number) is refused with a remote access error.
    fresh_qps(a, b)
    a.mr.write(b"y" * a.msg_size, a.msg_size)
    wc = write(a, b, rkey, b.mr.buf)
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, u.wc_status_to_str(wc.status)
    assert b.mr.read(a.msg_size, 0) != b"y" * a.msg_size
    mw.close()


@test("type 2 bind to an MR without MW_BIND access fails with MW_BIND_ERR")
def _():
    a, b = pair(e.IBV_ACCESS_LOCAL_WRITE)
    mw = MW(b.pd, e.IBV_MW_TYPE_2)
    wc, _ = bind2(b, mw, b.mr.buf, b.msg_size)
    assert wc.status == e.IBV_WC_MW_BIND_ERR, u.wc_status_to_str(wc.status)
    mw.close()


@test("type 2 bind of a window beyond the MR fails with MW_BIND_ERR")
def _():
    a, b = pair()
    mw = MW(b.pd, e.IBV_MW_TYPE_2)
    wc, _ = bind2(b, mw, b.mr.buf + 1, b.msg_size)
    assert wc.status == e.IBV_WC_MW_BIND_ERR, u.wc_status_to_str(wc.status)
    mw.close()


@test("writable window on an MR without local write fails with MW_BIND_ERR")
def _():
    a, b = pair(e.IBV_ACCESS_MW_BIND)
    mw = MW(b.pd, e.IBV_MW_TYPE_2)
    wc, _ = bind2(b, mw, b.mr.buf, b.msg_size)
    assert wc.status == e.IBV_WC_MW_BIND_ERR, u.wc_status_to_str(wc.status)
    mw.close()


@test("type 2 window of another PD fails with MW_BIND_ERR")
def _():
    a, b = pair()
    with PD(b.ctx) as pd:
        mw = MW(pd, e.IBV_MW_TYPE_2)
        wc, _ = bind2(b, mw, b.mr.buf, b.msg_size)
        assert wc.status == e.IBV_WC_MW_BIND_ERR, u.wc_status_to_str(wc.status)
        mw.close()


@test("deregistering an MR with a bound window fails; after Local Invalidate it succeeds")
def _():
    a, b = pair()
    mw = MW(b.pd, e.IBV_MW_TYPE_2)
    wc, rkey = bind2(b, mw, b.mr.buf, b.msg_size)
    assert wc.status == e.IBV_WC_SUCCESS
    fails_with(b.mr.close, errno.EINVAL, errno.EBUSY)
    inv = SendWR(opcode=e.IBV_WR_LOCAL_INV)
    inv.imm_data = rkey
    b.qp.post_send(inv)
    wc = one_wc(b.cq)
    assert wc.status == e.IBV_WC_SUCCESS and wc.opcode == e.IBV_WC_LOCAL_INV, (wc.status, wc.opcode)
    wc = write(a, b, rkey, b.mr.buf)
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, u.wc_status_to_str(wc.status)
    b.mr.close()
    mw.close()


@test("Send with Invalidate: receive completion has WITH_INV and the R_Key; window dead")
def _():
    a, b = pair()
    mw = MW(b.pd, e.IBV_MW_TYPE_2)
    wc, rkey = bind2(b, mw, b.mr.buf, b.msg_size)
    assert wc.status == e.IBV_WC_SUCCESS
    b.qp.post_recv(u.get_recv_wr(b))
    inv = SendWR(opcode=e.IBV_WR_SEND_WITH_INV)
    inv.imm_data = rkey
    a.qp.post_send(inv)
    wc = one_wc(a.cq)
    assert wc.status == e.IBV_WC_SUCCESS, u.wc_status_to_str(wc.status)
    wc = one_wc(b.cq)
    assert wc.status == e.IBV_WC_SUCCESS, u.wc_status_to_str(wc.status)
    # The rxe ABI puts the kernel's IB_WC_WITH_INVALIDATE (4) in the user CQE, as rdma_rxe
    # does (rxe_resp.c: do_complete); the provider passes it through, so libibverbs reads
    # it as IBV_WC_IP_CSUM_OK. The key is in ex.invalidate_rkey, host order.
    assert wc.wc_flags & 4, hex(wc.wc_flags)
    assert wc.imm_data == rkey, (hex(wc.imm_data), hex(rkey))
    wc = write(a, b, rkey, b.mr.buf)
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, u.wc_status_to_str(wc.status)
    mw.close()


@test("Send with Invalidate of a plain MR's R_Key: remote invalid request")
def _():
    a, b = pair()
    b.qp.post_recv(u.get_recv_wr(b))
    inv = SendWR(opcode=e.IBV_WR_SEND_WITH_INV)
    inv.imm_data = b.mr.rkey
    a.qp.post_send(inv)
    wc = one_wc(a.cq)
    assert wc.status == e.IBV_WC_REM_INV_REQ_ERR, u.wc_status_to_str(wc.status)


@test("Local Invalidate of a type 1 window fails")
def _():
    a, b = pair()
    mw = MW(b.pd, e.IBV_MW_TYPE_1)
    inv = SendWR(opcode=e.IBV_WR_LOCAL_INV)
    inv.imm_data = mw.rkey
    b.qp.post_send(inv)
    wc = one_wc(b.cq)
    assert wc.status != e.IBV_WC_SUCCESS
    mw.close()


@test("type 1 bind (ibv_bind_mw), write through it, unbind by zero length")
def _():
    a, b = pair()
    mw = MW(b.pd, e.IBV_MW_TYPE_1)
    info = MWBindInfo(b.mr, b.mr.buf, b.msg_size, e.IBV_ACCESS_REMOTE_WRITE)
    b.qp.bind_mw(mw, MWBind(info, e.IBV_SEND_SIGNALED))
    wc = one_wc(b.cq)
    assert wc.status == e.IBV_WC_SUCCESS and wc.opcode == e.IBV_WC_BIND_MW, (wc.status, wc.opcode)
    wc = write(a, b, mw.rkey, b.mr.buf)
    assert wc.status == e.IBV_WC_SUCCESS, u.wc_status_to_str(wc.status)
    fails_with(b.mr.close, errno.EINVAL, errno.EBUSY)
    b.qp.bind_mw(mw, MWBind(MWBindInfo(b.mr, b.mr.buf, 0, 0), e.IBV_SEND_SIGNALED))
    wc = one_wc(b.cq)
    assert wc.status == e.IBV_WC_SUCCESS
    wc = write(a, b, mw.rkey, b.mr.buf)
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, u.wc_status_to_str(wc.status)
    mw.close()


@test("deallocating a bound window releases its MR")
def _():
    a, b = pair()
    mw = MW(b.pd, e.IBV_MW_TYPE_2)
    wc, rkey = bind2(b, mw, b.mr.buf, b.msg_size)
    assert wc.status == e.IBV_WC_SUCCESS
    mw.close()
    wc = write(a, b, rkey, b.mr.buf)
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, u.wc_status_to_str(wc.status)
    b.mr.close()


sys.exit(tap.done())
