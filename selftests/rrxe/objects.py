#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Verbs objects through the unmodified rdma-core rxe provider (pyverbs), TAP output.

Run inside a VM with an rrxe device named by $RRXE_DEV (default rrxe0).
"""
import ctypes
import errno
import mmap
import os
import sys

from pyverbs.cq import CQ, CQEX, CompChannel, CqInitAttrEx, PollCqAttr
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
import pyverbs.enums as e

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
import tap  # noqa: E402 - selftests/rrxe/lib, found through the line above
from tap import fails_with, test  # noqa: E402

DEV = os.environ.get("RRXE_DEV", "rrxe0")


tap.begin(f"verbs objects on {DEV}")
ctx = Context(name=DEV)
attr = ctx.query_device()


@test("query_device reports PD and CQ limits")
def _():
    assert attr.max_pd > 0 and attr.max_cq > 0, (attr.max_pd, attr.max_cq)
    assert attr.max_cqe == (1 << 15) - 1, attr.max_cqe


@test("allocate and free a PD")
def _():
    PD(ctx).close()


@test("1000 PDs allocated and freed")
def _():
    pds = [PD(ctx) for _ in range(1000)]
    for pd in pds:
        pd.close()


@test("create a CQ of 100 entries: ring mapped, capacity >= 100")
def _():
    cq = CQ(ctx, 100)
    assert cq.cqe >= 100, cq.cqe
    cq.close()


@test("poll an empty CQ returns nothing")
def _():
    cq = CQ(ctx, 16)
    npolled, wcs = cq.poll(num_entries=4)
    assert npolled == 0 and not wcs, (npolled, wcs)
    cq.close()


@test("CQ with a completion channel; request notification (next and solicited)")
def _():
    ch = CompChannel(ctx)
    cq = CQ(ctx, 16, None, ch, 0)
    cq.req_notify(solicited_only=False)
    cq.req_notify(solicited_only=True)
    cq.close()
    ch.close()


@test("resize a CQ up and down (ibv_resize_cq: new ring mapped)")
def _():
    cq = CQ(ctx, 16)
    cq.resize(1000)
    assert cq.cqe >= 1000, cq.cqe
    npolled, _ = cq.poll(num_entries=4)
    assert npolled == 0, npolled
    cq.resize(8)
    assert 8 <= cq.cqe < 1000, cq.cqe
    cq.close()


@test("resize a CQ beyond max_cqe is refused with EINVAL")
def _():
    cq = CQ(ctx, 16)
    fails_with(lambda: cq.resize(attr.max_cqe + 1), errno.EINVAL)
    npolled, _ = cq.poll(num_entries=1)
    assert npolled == 0, npolled
    cq.close()


@test("CQ of max_cqe entries")
def _():
    CQ(ctx, attr.max_cqe).close()


@test("CQ of max_cqe + 1 entries is refused with EINVAL")
def _():
    fails_with(lambda: CQ(ctx, attr.max_cqe + 1), errno.EINVAL)


@test("CQ of 0 entries is refused")
def _():
    fails_with(lambda: CQ(ctx, 0))


@test("extended CQ (ibv_create_cq_ex): start_poll on an empty CQ finds nothing")
def _():
    cq = CQEX(ctx, CqInitAttrEx(cqe=32))
    ret = cq.start_poll(PollCqAttr())
    assert ret == errno.ENOENT, ret
    cq.close()


@test("500 CQs created and destroyed (mmap/munmap of their rings)")
def _():
    for _ in range(500):
        CQ(ctx, 64).close()


@test("64 CQs alive at once")
def _():
    cqs = [CQ(ctx, 256) for _ in range(64)]
    for cq in cqs:
        cq.close()


LW = e.IBV_ACCESS_LOCAL_WRITE
RW = e.IBV_ACCESS_REMOTE_WRITE
RR = e.IBV_ACCESS_REMOTE_READ
RA = e.IBV_ACCESS_REMOTE_ATOMIC


@test("query_device reports MR limits")
def _():
    assert attr.max_mr > 0 and attr.max_mr_size > 0, (attr.max_mr, attr.max_mr_size)


@test("register a 4 KiB MR: L_Key == R_Key, non-zero")
def _():
    pd = PD(ctx)
    mr = MR(pd, 4096, LW)
    assert mr.lkey == mr.rkey and mr.lkey != 0, (hex(mr.lkey), hex(mr.rkey))
    mr.close()
    pd.close()


@test("register MRs with every remote access combination")
def _():
    pd = PD(ctx)
    for acc in (LW, LW | RW, RR, LW | RR | RW, LW | RW | RR | RA):
        MR(pd, 8192, acc).close()
    pd.close()


@test("remote write without local write is refused with EINVAL (IBA 10.6.3.1)")
def _():
    pd = PD(ctx)
    fails_with(lambda: MR(pd, 4096, RW), errno.EINVAL)
    pd.close()


@test("200 live MRs have distinct keys")
def _():
    pd = PD(ctx)
    mrs = [MR(pd, 4096, LW) for _ in range(200)]
    keys = {m.lkey for m in mrs}
    assert len(keys) == 200, len(keys)
    for m in mrs:
        m.close()
    pd.close()


@test("a re-registered MR gets a different key")
def _():
    pd = PD(ctx)
    first = MR(pd, 4096, LW)
    k = first.lkey
    first.close()
    second = MR(pd, 4096, LW)
    assert second.lkey != k, hex(k)
    second.close()
    pd.close()


@test("4 MiB MR")
def _():
    pd = PD(ctx)
    MR(pd, 4 << 20, LW | RW | RR).close()
    pd.close()


@test("MR over unmapped memory is refused (EFAULT)")
def _():
    pd = PD(ctx)
    fails_with(lambda: MR(pd, 4096, LW, address=0x1000), errno.EFAULT)
    pd.close()


@test("MR over a buffer that does not start on a page boundary (3 pages)")
def _():
    pd = PD(ctx)
    buf = mmap.mmap(-1, 4 * 4096)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    mr = MR(pd, 8192, LW, address=addr + 100)
    assert mr.lkey != 0
    mr.close()
    pd.close()


class IbvMr(ctypes.Structure):
    _fields_ = [("context", ctypes.c_void_p), ("pd", ctypes.c_void_p),
                ("addr", ctypes.c_void_p), ("length", ctypes.c_size_t),
                ("handle", ctypes.c_uint32), ("lkey", ctypes.c_uint32),
                ("rkey", ctypes.c_uint32)]


def raw_verbs():
    """libibverbs through ctypes, for what pyverbs 44 lacks (ibv_reg_mr_iova2)."""
    lib = ctypes.CDLL("libibverbs.so.1", use_errno=True)
    lib.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
    lib.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.ibv_get_device_name.restype = ctypes.c_char_p
    lib.ibv_get_device_name.argtypes = [ctypes.c_void_p]
    lib.ibv_open_device.restype = ctypes.c_void_p
    lib.ibv_open_device.argtypes = [ctypes.c_void_p]
    lib.ibv_alloc_pd.restype = ctypes.c_void_p
    lib.ibv_alloc_pd.argtypes = [ctypes.c_void_p]
    lib.ibv_reg_mr_iova2.restype = ctypes.POINTER(IbvMr)
    lib.ibv_reg_mr_iova2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                     ctypes.c_uint64, ctypes.c_uint]
    lib.ibv_dereg_mr.argtypes = [ctypes.POINTER(IbvMr)]
    lib.ibv_dealloc_pd.argtypes = [ctypes.c_void_p]
    lib.ibv_close_device.argtypes = [ctypes.c_void_p]
    lib.ibv_free_device_list.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    num = ctypes.c_int()
    devs = lib.ibv_get_device_list(ctypes.byref(num))
    dev = next(devs[i] for i in range(num.value)
               if lib.ibv_get_device_name(devs[i]).decode() == DEV)
    rctx = lib.ibv_open_device(dev)
    lib.ibv_free_device_list(devs)
    assert rctx, "ibv_open_device"
    rpd = lib.ibv_alloc_pd(rctx)
    assert rpd, "ibv_alloc_pd"
    return lib, rctx, rpd


def reg_mr_iova(lib, rpd, addr, length, iova, access):
    """Registers with ibv_reg_mr_iova2; returns the MR pointer or raises OSError."""
    mr = lib.ibv_reg_mr_iova2(rpd, addr, length, iova, access)
    if not mr:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return mr


@test("MR with an iova other than its address (ibv_reg_mr_iova2), and bad iovas refused")
def _():
    lib, rctx, rpd = raw_verbs()
    buf = mmap.mmap(-1, 3 * 4096)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf)) + 0x10
    try:
        mr = reg_mr_iova(lib, rpd, addr, 8192, 0x7700_0000_0000_0010, LW | RW | RR)
        assert mr.contents.lkey != 0 and mr.contents.lkey == mr.contents.rkey
        assert lib.ibv_dereg_mr(mr) == 0
        # The iova's offset in its page must be the address's (the RDMA core's rule).
        fails_with(lambda: reg_mr_iova(lib, rpd, addr, 4096, 0x7700_0000_0000_0020, LW),
                   errno.EINVAL)
        # An MR's address range cannot wrap around the 64-bit space.
        fails_with(lambda: reg_mr_iova(lib, rpd, addr, 8192, 0xffff_ffff_ffff_f010, LW),
                   errno.EINVAL)
    finally:
        assert lib.ibv_dealloc_pd(rpd) == 0
        assert lib.ibv_close_device(rctx) == 0


@test("mmap of the uverbs fd at an offset nothing exported is refused (EINVAL)")
def _():
    fails_with(lambda: mmap.mmap(ctx.cmd_fd, 4096, offset=1 << 30), errno.EINVAL)


@test("mmap of the uverbs fd at offset 0 is refused (EINVAL)")
def _():
    fails_with(lambda: mmap.mmap(ctx.cmd_fd, 4096, offset=0), errno.EINVAL)


ctx.close()
sys.exit(tap.done())
