#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Object limits, TAP output: a device holds at most the PDs, CQs, QPs, SRQs, MRs, MWs and
AHs it reports (ibv_query_device), kernel-owned ones counted; one more fails with ENOMEM,
and destroying one makes room for one. A process without CAP_IPC_LOCK pins MRs up to its
RLIMIT_MEMLOCK.

Run inside a VM on an rrxe device ($RRXE_DEV, default rrxe0) created after rrxe was loaded
with the limits $RRXE_LIMITS names ("pd=6 cq=6 ..."), every other object of the device
being the kernel's.
"""
import contextlib
import ctypes
import errno
import glob
import json
import os
import resource
import subprocess
import sys

from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR, MW
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
import pyverbs.enums as e

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
import tap  # noqa: E402 - selftests/rrxe/lib, found through the line above
from tap import fails_with, test  # noqa: E402

DEV = os.environ.get("RRXE_DEV", "rrxe0")
LIMITS = dict((k, int(v)) for k, v in (w.split("=") for w in os.environ["RRXE_LIMITS"].split()))

tap.begin(f"object limits on {DEV}: {os.environ['RRXE_LIMITS']}")
ctx = Context(name=DEV)
attr = ctx.query_device()


def in_use(kind):
    """Objects of `kind` the device holds now, by the core's resource tracking (`rdma
    resource`); it tracks no MWs or AHs, of which the kernel holds none here."""
    if kind in ("mw", "ah"):
        return 0
    out = subprocess.run(["rdma", "-j", "resource", "show", DEV], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)[0][kind]


def roce_v2_gid():
    """The index and value of a RoCEv2 GID of port 1."""
    base = f"/sys/class/infiniband/{DEV}/ports/1"
    for path in sorted(glob.glob(f"{base}/gid_attrs/types/*")):
        index = int(os.path.basename(path))
        try:
            with open(path) as f:
                if f.read().strip() != "RoCE v2":
                    continue
        except OSError:  # an empty entry has no type
            continue
        return index, ctx.query_gid(1, index)
    raise AssertionError("no RoCEv2 GID on port 1")


@test("query_device reports the limits the module parameters set")
def _():
    got = {"pd": attr.max_pd, "cq": attr.max_cq, "qp": attr.max_qp, "srq": attr.max_srq,
           "mr": attr.max_mr, "mw": attr.max_mw, "ah": attr.max_ah}
    assert got == LIMITS, (got, LIMITS)


pd = PD(ctx)
cq = CQ(ctx, 4)
gid_index, gid = roce_v2_gid()


def new_qp():
    return QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                             cap=QPCap(max_send_wr=1, max_recv_wr=1)))


def new_ah():
    gr = GlobalRoute(dgid=gid, sgid_index=gid_index)
    return AH(pd, attr=AHAttr(port_num=1, is_global=1, gr=gr))


MAKERS = {
    "pd": lambda: PD(ctx),
    "cq": lambda: CQ(ctx, 1),
    "qp": new_qp,
    "srq": lambda: SRQ(pd, SrqInitAttr(SrqAttr(max_wr=1))),
    "mr": lambda: MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE),
    "mw": lambda: MW(pd, e.IBV_MW_TYPE_1),
    "ah": new_ah,
}


def fill(kind):
    """Creates objects of `kind` up to the device's limit, counting those in use already;
    then one more must fail with ENOMEM, and after destroying one, one more must fit."""
    room = LIMITS[kind] - in_use(kind)
    assert room > 0, f"the kernel holds all {LIMITS[kind]} {kind}s"
    objs = []
    try:
        for _ in range(room):
            objs.append(MAKERS[kind]())
        fails_with(MAKERS[kind], errno.ENOMEM)
        objs.pop().close()
        objs.append(MAKERS[kind]())
        fails_with(MAKERS[kind], errno.ENOMEM)
    finally:
        for obj in objs:
            obj.close()
    # Every destroyed object gave its place back: the whole room fits again.
    objs = [MAKERS[kind]() for _ in range(room)]
    for obj in objs:
        obj.close()


for kind in MAKERS:
    tap.row(f"{kind}: {LIMITS[kind]} at most, the next gets ENOMEM, a freed place is reused",
            fill, kind)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


CAP_IPC_LOCK = 14
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


@contextlib.contextmanager
def without_ipc_lock(limit):
    """This process without CAP_IPC_LOCK in its effective set and with RLIMIT_MEMLOCK at
    `limit` bytes, both given back afterwards (the capability stays permitted)."""
    libc = ctypes.CDLL(None, use_errno=True)
    hdr = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    caps = (_CapData * 2)()
    if libc.capget(ctypes.byref(hdr), caps) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    saved = caps[0].effective
    old_limit = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    caps[0].effective = saved & ~(1 << CAP_IPC_LOCK)
    if libc.capset(ctypes.byref(hdr), caps) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    try:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (limit, old_limit[1]))
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, old_limit)
        caps[0].effective = saved
        if libc.capset(ctypes.byref(hdr), caps) != 0:
            raise OSError(ctypes.get_errno(), "capset (restoring CAP_IPC_LOCK)")


def pinned_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmPin:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmPin in /proc/self/status")


@test("without CAP_IPC_LOCK, MRs pin up to RLIMIT_MEMLOCK (1 MiB) and no further: ENOMEM, "
      "nothing left pinned by a refusal, all unpinned by deregistration")
def _():
    # ib_umem_get counts an MR's pages in the process's pinned_vm (VmPin) and, for a
    # process without CAP_IPC_LOCK, refuses those past RLIMIT_MEMLOCK with ENOMEM. pyverbs
    # allocates MR buffers page-aligned, so halves of the limit pin exactly half each.
    mib = 1 << 20
    access = e.IBV_ACCESS_LOCAL_WRITE
    assert pinned_bytes() == 0, pinned_bytes()
    with without_ipc_lock(mib):
        half = MR(pd, mib // 2, access)
        assert pinned_bytes() == mib // 2, pinned_bytes()
        fails_with(lambda: MR(pd, mib, access), errno.ENOMEM)
        # The refusal pinned nothing: the other half fits, and then not a page more.
        other = MR(pd, mib // 2, access)
        fails_with(lambda: MR(pd, 4096, access), errno.ENOMEM)
        assert pinned_bytes() == mib, pinned_bytes()
        for mr in (half, other):
            mr.close()
        assert pinned_bytes() == 0, pinned_bytes()
        MR(pd, mib, access).close()


for obj in (cq, pd):
    obj.close()
ctx.close()


@test("a limit above rrxe's capacity is clamped: max_qp=4294967295 reports 65536")
def _():
    # The device goes and comes back with the parameter raised: limits are read when a
    # device is created. No context may stay open (rrxe cannot disassociate one).
    netdev = os.environ["RRXE_NETDEV"]
    with open("/sys/module/rrxe/parameters/max_qp", "w") as f:
        f.write("4294967295")
    subprocess.run(["rdma", "link", "delete", DEV], check=True)
    subprocess.run(["rdma", "link", "add", DEV, "type", "rrxe", "netdev", netdev], check=True)
    with Context(name=DEV) as again:
        got = again.query_device()
    assert got.max_qp == 65536 and got.max_pd == LIMITS["pd"], (got.max_qp, got.max_pd)


sys.exit(tap.done())
