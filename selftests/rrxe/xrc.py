#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""XRC objects through the raw uverbs write commands, TAP output: XRC domains (private and
shared through a file's inode), XRC SRQs, XRC target QPs that outlive the process that
created them, XRC initiator QPs, and the errnos of their misuse. One rrxe device in
loopback; no packets are sent.

The stock rdma-core rxe provider (v44, used by pyverbs) has no XRC verbs: ibv_open_xrcd,
ibv_create_srq_ex and ibv_create_qp_ex with an XRCD fail in userspace. So this test writes
IB_USER_VERBS_CMD_OPEN_XRCD, CREATE_XSRQ, CREATE_QP, OPEN_QP, MODIFY_QP, QUERY_QP,
DESTROY_QP, DESTROY_SRQ and CLOSE_XRCD itself to the command fd of a pyverbs Context, in
the layouts of include/uapi/rdma/ib_user_verbs.h (6.12), through selftests/rrxe/lib/uverbs_raw.py.
pyverbs gives only the Context, PDs and CQs (their handles).

The point (IBA Annex A14, XRC; in the kernel ib_create_qp_user ->
create_xrc_qp_user):
an XRC_TGT QP is created kernel-owned, not by the calling context; every CREATE_QP/OPEN_QP
handle is an ib_qp that shares it (qp->real_qp), and the real QP is destroyed only when the
last handle goes (__ib_destroy_shared_qp). So a target QP survives the process that created
it, as long as another process holds a handle opened through the same XRC domain.

Run inside a VM with the device named by $RRXE_DEV (default rrxe0), GID index $RRXE_GID.
`xrc.py creator PATH` is the child process of the cross-process rows (see creator()).
"""
import errno
import json
import os
import sys
import tempfile
import traceback

from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
import pyverbs.enums as e

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
import tap  # noqa: E402 - selftests/rrxe/lib, found through the line above
from tap import fails_with, row  # noqa: E402
from uverbs_raw import (  # noqa: E402
    ACCESS_REMOTE, DEVICE_XRC, MTU_1024, QP_ACCESS_FLAGS, QP_AV, QP_DEST_QPN,
    QP_MAX_DEST_RD_ATOMIC, QP_MIN_RNR_TIMER, QP_PATH_MTU, QP_PKEY_INDEX, QP_PORT, QP_RQ_PSN,
    QP_STATE, QPS_ERR, QPS_INIT, QPS_RESET, QPS_RTR, QPT_RC, QPT_XRC_TGT, STATE_NAMES, Child,
    Raw, av, handle_of, listed_for_pid, qp_listed, read_gid, restrack, srqs)

DEV = os.environ.get("RRXE_DEV", "rrxe0")
GID = int(os.environ.get("RRXE_GID", "0"))

# Attributes the TGT is brought to RTR with, checked again through QUERY_QP.
RQ_PSN = 0xabcdef
DEST_QPN = 0x00b0c1  # the INI QP it would pair with; nothing is sent, so any 24-bit QPN
MIN_RNR = 12
MAX_DEST_RD = 4
NO_QPN = 0xffffff  # never allocated: QPNs are handed out from low numbers up
NO_HANDLE = 0x7ffffff0  # never allocated: handles are small indices of the context's xarray


def tgt_to_rtr(raw, qp, gid_bytes):
    """RESET->INIT->RTR with the attributes ib_modify_qp_is_ok() requires of an XRC_TGT
    (IBA 11.2.4.2 as the kernel's table has them; the driver checks them, as rdma_rxe does
    through ib_modify_qp_is_ok: the core does not). The AV carries a GRH (RoCE: every path
    is global) to the device's own GID: loopback."""
    raw.modify_qp(qp, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS,
                  qp_state=QPS_INIT, pkey_index=0, port_num=1, qp_access_flags=ACCESS_REMOTE)
    raw.modify_qp(qp, QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN
                  | QP_MAX_DEST_RD_ATOMIC | QP_MIN_RNR_TIMER, dest=av(gid_bytes, GID),
                  qp_state=QPS_RTR, path_mtu=MTU_1024, dest_qp_num=DEST_QPN, rq_psn=RQ_PSN,
                  max_dest_rd_atomic=MAX_DEST_RD, min_rnr_timer=MIN_RNR)


def expect_state(raw, qp, want):
    got = raw.query_qp(qp, QP_STATE)["qp_state"]
    assert got == want, f"QP in {STATE_NAMES[got] if got < 7 else got}, " \
                        f"expected {STATE_NAMES[want]}"


def expect_rtr_attrs(raw, qp, gid_bytes):
    a = raw.query_qp(qp)
    want = {"qp_state": QPS_RTR, "path_mtu": MTU_1024, "rq_psn": RQ_PSN,
            "dest_qp_num": DEST_QPN, "min_rnr_timer": MIN_RNR,
            "max_dest_rd_atomic": MAX_DEST_RD, "port_num": 1, "pkey_index": 0,
            "qp_access_flags": ACCESS_REMOTE}
    bad = {k: (a[k], v) for k, v in want.items() if a[k] != v}
    d = a["dest"]
    if not (d["is_global"] and d["dgid"] == gid_bytes and d["sgid_index"] == GID
            and d["port_num"] == 1):
        bad["dest"] = d
    assert not bad, f"queried (got, set): {bad}"


# --- the creator process (P1) ---


def creator(path):
    """P1: a process of its own with its own Context. Opens the XRCD of `path`'s inode,
    creates a CQ, PD, XRC SRQ and an XRC_TGT QP, brings the QP to RTR, prints one JSON
    line ({qpn, srqn, pid}) and waits on stdin; the parent kills it (SIGKILL:
    nothing is destroyed by the process, everything by the kernel's cleanup of its
    uverbs file)."""
    try:
        ctx = Context(name=DEV)
        raw = Raw(ctx)
        pd = PD(ctx)
        cq = CQ(ctx, 16)
        fd = os.open(path, os.O_RDWR)
        xrcd = raw.open_xrcd(fd, os.O_CREAT)
        srq = raw.create_xsrq(xrcd, handle_of(pd), handle_of(cq), max_wr=16)
        qp, qpn = raw.create_tgt(xrcd)
        tgt_to_rtr(raw, qp, read_gid(DEV, GID))
        print(json.dumps({"qpn": qpn, "srqn": srq["srqn"], "pid": os.getpid()}), flush=True)
    except Exception:  # noqa: BLE001 - the parent reports it
        print(json.dumps({"error": traceback.format_exc()}), flush=True)
        os._exit(1)
    sys.stdin.readline()
    os._exit(0)


if len(sys.argv) > 2 and sys.argv[1] == "creator":
    creator(sys.argv[2])

# --- the checks ---

ctx = Context(name=DEV)
dattr = ctx.query_device()
raw = Raw(ctx)
GIDB = read_gid(DEV, GID)
tmpdir = tempfile.mkdtemp(prefix="rrxe-xrc-")
_nfile = 0


def new_file():
    """A fresh file (a fresh inode: no XRCD yet) for a shared XRC domain."""
    global _nfile
    _nfile += 1
    path = os.path.join(tmpdir, f"xrcd{_nfile}")
    with open(path, "w"):
        pass
    return path


class Objs:
    """Raw objects of one check, destroyed in reverse order when it ends (passed or not),
    so nothing outlives it to hold a pyverbs PD or CQ busy; a handle the check itself
    destroyed is dropped from the list with forget()."""

    def __init__(self):
        self.items = []
        self.fds = []
        self.verbs = []

    def add(self, kind, handle):
        self.items.append((kind, handle))
        return handle

    def forget(self, kind, handle):
        self.items.remove((kind, handle))

    def keep(self, obj):
        """A pyverbs object of the check, closed after the raw objects."""
        self.verbs.append(obj)
        return obj

    def fd(self, path, flags=os.O_RDONLY):
        f = os.open(path, flags)
        self.fds.append(f)
        return f

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for kind, h in reversed(self.items):
            try:
                raw.destroy(kind, h)
            except OSError as err:
                tap.diag(f"cleanup: destroying {kind} {h}: {err}")
        for v in reversed(self.verbs):
            v.close()
        for f in self.fds:
            os.close(f)
        return False


tap.begin(f"XRC through raw uverbs commands on {DEV} (GID {GID}); device_cap_flags "
          f"{dattr.device_cap_flags:#x}, max_srq {dattr.max_srq}, max_qp {dattr.max_qp}")
pd = PD(ctx)
cq = CQ(ctx, 16)

# --- control: the device claims XRC (a device capability flag in Query HCA), so
# the rows below cannot pass by every command failing the same way ---


def xrc_capable():
    assert dattr.device_cap_flags & DEVICE_XRC, \
        f"device_cap_flags {dattr.device_cap_flags:#x} without IB_DEVICE_XRC (1 << 20)"


row("control: query_device reports IB_DEVICE_XRC", xrc_capable)

# --- XRC domains (the verbs Open / Close XRC Domain) ---


def xrcd_private():
    # fd -1: a domain of this context only (ib_uverbs_open_xrcd, no inode).
    a = raw.open_xrcd()
    b = raw.open_xrcd()
    assert a != b, (a, b)
    raw.close_xrcd(a)
    raw.close_xrcd(b)
    # The handle is gone from the context's table: lookup_get_idr_uobject -> ENOENT.
    fails_with(lambda: raw.close_xrcd(a), errno.ENOENT)


row("open_xrcd fd -1 twice: two private domains; close_xrcd; closing again -> ENOENT",
    xrcd_private)


def xrcd_shared_flags():
    path = new_file()
    with Objs() as o:
        f = o.fd(path)
        # No domain on this inode yet and no O_CREAT: the core refuses (EAGAIN).
        fails_with(lambda: raw.open_xrcd(f, 0), errno.EAGAIN)
        o.add("xrcd", raw.open_xrcd(f, os.O_CREAT))
        # A domain exists now: O_EXCL refuses (EINVAL); without flags it is found.
        fails_with(lambda: raw.open_xrcd(f, os.O_CREAT | os.O_EXCL), errno.EINVAL)
        o.add("xrcd", raw.open_xrcd(f, 0))


row("open_xrcd on a file: no O_CREAT on a new inode -> EAGAIN; O_CREAT opens; O_EXCL on it "
    "-> EINVAL; then found without flags", xrcd_shared_flags)


def xrcd_bad_fd():
    f = os.open(new_file(), os.O_RDONLY)
    os.close(f)  # a number that names no open file now
    fails_with(lambda: raw.open_xrcd(f, os.O_CREAT), errno.EBADF)


row("open_xrcd with an fd that is not open -> EBADF", xrcd_bad_fd)

# --- XRC SRQs (Create SRQ with an XRC domain and a CQ of its own) ---


def xsrq_create():
    with Objs() as o:
        x = o.add("xrcd", raw.open_xrcd())
        s = raw.create_xsrq(x, handle_of(pd), handle_of(cq), max_wr=16, max_sge=1)
        o.add("srq", s["handle"])
        # The XRC SRQ number is what an XRCETH carries: 24 bits, and the core
        # (resp.srqn = srq->ext.xrc.srq_num) and the driver's own response must agree.
        assert 0 < s["srqn"] < 1 << 24, s
        assert s["drv_srq_num"] == s["srqn"], s
        assert s["max_wr"] >= 16 and s["max_sge"] >= 1, s
        # The CQ and the PD are in use: pyverbs' destroy would be refused (EBUSY), which
        # Objs avoids by destroying the SRQ first.
        raw.destroy_srq(s["handle"])
        o.forget("srq", s["handle"])
        fails_with(lambda: raw.destroy_srq(s["handle"]), errno.ENOENT)


row("create_xsrq: srqn nonzero and 24-bit, the driver's srq_num equals it, caps granted; "
    "destroy_srq; again -> ENOENT", xsrq_create)


def xsrq_bad(which, *errnos):
    with Objs() as o:
        x = o.add("xrcd", raw.open_xrcd())
        args = {"xrcd": x, "pd": handle_of(pd), "cq": handle_of(cq)}
        args[which] = NO_HANDLE

        def create():
            s = raw.create_xsrq(args["xrcd"], args["pd"], args["cq"], max_wr=16)
            o.add("srq", s["handle"])

        fails_with(create, *errnos)


# __uverbs_create_xsrq maps any XRCD lookup failure to EINVAL; the CQ and PD lookups return
# their own errno (uobj_get_obj_read: ENOENT for a handle that names nothing).
row("create_xsrq with a bad xrcd handle -> EINVAL", xsrq_bad, "xrcd", errno.EINVAL)
row("create_xsrq with a bad cq handle -> ENOENT", xsrq_bad, "cq", errno.ENOENT)
row("create_xsrq with a bad pd handle -> ENOENT", xsrq_bad, "pd", errno.ENOENT)


def close_xrcd_busy_srq():
    with Objs() as o:
        x = o.add("xrcd", raw.open_xrcd())
        s = raw.create_xsrq(x, handle_of(pd), handle_of(cq), max_wr=16)
        o.add("srq", s["handle"])
        # uverbs_free_xrcd: not while an SRQ or QP made through this handle uses it.
        fails_with(lambda: raw.close_xrcd(x), errno.EBUSY)
        raw.destroy_srq(s["handle"])
        o.forget("srq", s["handle"])
        raw.close_xrcd(x)
        o.forget("xrcd", x)


row("close_xrcd while an XRC SRQ uses it -> EBUSY; after destroy_srq it closes",
    close_xrcd_busy_srq)

# --- XRC target QPs in one process ---


def tgt_create_rtr():
    with Objs() as o:
        x = o.add("xrcd", raw.open_xrcd())
        qp, qpn = raw.create_tgt(x)
        o.add("qp", qp)
        assert 0 < qpn < 1 << 24, qpn
        expect_state(raw, qp, QPS_RESET)
        tgt_to_rtr(raw, qp, GIDB)
        expect_rtr_attrs(raw, qp, GIDB)
        # IBA 10.3.1: any state may go to Error by Modify QP.
        raw.modify_qp(qp, QP_STATE, qp_state=QPS_ERR)
        expect_state(raw, qp, QPS_ERR)


row("create_qp XRC_TGT (pd_handle = the XRCD): RESET; INIT, RTR with a GRH to the own GID; "
    "query_qp reports the attributes; RTR->ERR", tgt_create_rtr)


def tgt_bad_xrcd(pick):
    with Objs() as o:
        x = o.add("xrcd", raw.open_xrcd())

        def create():
            o.add("qp", raw.create_tgt(pick(x))[0])

        fails_with(create, errno.EINVAL)


# create_qp: for XRC_TGT any failure to look pd_handle up as an XRCD is EINVAL.
row("create_qp XRC_TGT with a handle that names nothing -> EINVAL", tgt_bad_xrcd,
    lambda x: NO_HANDLE)
row("create_qp XRC_TGT with a PD's handle for the XRCD -> EINVAL", tgt_bad_xrcd,
    lambda x: handle_of(pd))


def tgt_missing_init_attr():
    # ib_modify_qp_is_ok: RESET->INIT of an XRC_TGT requires PKEY_INDEX, PORT, ACCESS_FLAGS.
    # The core leaves that check to the driver (rdma_rxe: rxe_qp_chk_attr), so EINVAL is
    # rrxe's answer here.
    with Objs() as o:
        x = o.add("xrcd", raw.open_xrcd())
        qp, _ = raw.create_tgt(x)
        o.add("qp", qp)
        fails_with(lambda: raw.modify_qp(qp, QP_STATE | QP_PKEY_INDEX | QP_PORT,
                                         qp_state=QPS_INIT, port_num=1), errno.EINVAL)
        expect_state(raw, qp, QPS_RESET)


row("modify XRC_TGT RESET->INIT without ACCESS_FLAGS -> EINVAL, still RESET",
    tgt_missing_init_attr)


def close_xrcd_busy_tgt():
    with Objs() as o:
        x = o.add("xrcd", raw.open_xrcd())
        qp, _ = raw.create_tgt(x)
        o.add("qp", qp)
        fails_with(lambda: raw.close_xrcd(x), errno.EBUSY)
        raw.destroy_qp(qp)
        o.forget("qp", qp)
        raw.close_xrcd(x)
        o.forget("xrcd", x)


row("close_xrcd while an XRC_TGT QP uses it -> EBUSY; after destroy_qp it closes",
    close_xrcd_busy_tgt)


def open_qp_bad(make):
    """make(o, xrcd, tgt_qpn) -> (xrcd handle, qpn, qp_type) to OPEN_QP with."""
    with Objs() as o:
        x = o.add("xrcd", raw.open_xrcd())
        qp, qpn = raw.create_tgt(x)
        o.add("qp", qp)
        xh, n, t = make(o, x, qpn)

        def opened():
            o.add("qp", raw.open_qp(xh, n, t)[0])

        # ib_open_qp: EINVAL for a type other than XRC_TGT and for a QPN not in this
        # XRCD's tgt_qps; ib_uverbs_open_qp: EINVAL for any XRCD lookup failure.
        fails_with(opened, errno.EINVAL)


def rc_qpn(o, x, qpn):
    rc = o.keep(QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                  cap=QPCap(max_send_wr=1, max_recv_wr=1))))
    return x, rc.qp_num, QPT_XRC_TGT


row("open_qp of a QPN that no QP has -> EINVAL", open_qp_bad,
    lambda o, x, n: (x, NO_QPN, QPT_XRC_TGT))
row("open_qp of an RC QP's QPN -> EINVAL (not a target of the XRCD)", open_qp_bad, rc_qpn)
row("open_qp of a target of another XRCD -> EINVAL", open_qp_bad,
    lambda o, x, n: (o.add("xrcd", raw.open_xrcd()), n, QPT_XRC_TGT))
row("open_qp of a target with qp_type RC -> EINVAL (only XRC_TGT can be opened)",
    open_qp_bad, lambda o, x, n: (x, n, QPT_RC))
row("open_qp through a handle that names no XRCD -> EINVAL", open_qp_bad,
    lambda o, x, n: (NO_HANDLE, n, QPT_XRC_TGT))


def shared_refcount():
    # Two handles of one shared domain in one process (the same inode), a target created
    # through the first and opened through the second. The creator's handle goes first:
    # the QP stays (real_qp->usecnt), reachable through the other handle; the last handle
    # destroys it (__ib_destroy_shared_qp).
    path = new_file()
    with Objs() as o:
        f = o.fd(path)
        x1 = o.add("xrcd", raw.open_xrcd(f, os.O_CREAT))
        x2 = o.add("xrcd", raw.open_xrcd(f, 0))
        c, qpn = raw.create_tgt(x1)
        o.add("qp", c)
        h, n2 = raw.open_qp(x2, qpn)
        o.add("qp", h)
        assert n2 == qpn and h != c, (qpn, n2, c, h)
        tgt_to_rtr(raw, h, GIDB)
        # A modify through one handle is seen through the other: one QP.
        expect_rtr_attrs(raw, c, GIDB)
        # The opened handle pins x2 as the created one pins x1 (obj->uxrcd->refcnt).
        fails_with(lambda: raw.close_xrcd(x2), errno.EBUSY)
        raw.destroy_qp(c)
        o.forget("qp", c)
        assert qp_listed(DEV, qpn), f"QP {qpn:#x} gone with its creator's handle, one remains"
        expect_rtr_attrs(raw, h, GIDB)
        raw.close_xrcd(x1)  # its QP handle is gone: x1 is free, the domain lives on in x2
        o.forget("xrcd", x1)
        raw.destroy_qp(h)
        o.forget("qp", h)
        assert qp_listed(DEV, qpn) is None, f"QP {qpn:#x} still listed after its last handle"
        fails_with(lambda: raw.open_qp(x2, qpn), errno.EINVAL)


row("one shared XRCD through two handles: TGT created through one, opened through the other; "
    "destroying the creator's handle leaves the QP (listed, RTR); the last handle removes it",
    shared_refcount)

# --- the point: a target QP outlives the process that created it ---


S = {}  # what the cross-process rows hand on, step to step


def need(*keys):
    missing = [k for k in keys if k not in S]
    assert not missing, f"an earlier step failed: no {missing}"


@tap.test("P1 (its own process and Context) opens the XRCD of a file, creates a CQ, PD, "
          "XRC SRQ and an XRC_TGT QP in RTR; the QP is listed by rdma resource show")
def p1_creates():
    S["path"] = new_file()
    # P1, `xrc.py creator PATH` in a process of its own (its own uverbs file). Python and
    # pyverbs start slowly on the debug kernel under TCG: allow 40 s.
    S["p1"] = Child([sys.executable, os.path.realpath(__file__), "creator", S["path"]], 40,
                    "creator")
    info = S["p1"].info
    assert 0 < info["qpn"] < 1 << 24 and 0 < info["srqn"] < 1 << 24, info
    q = qp_listed(DEV, info["qpn"])
    assert q is not None, f"QP {info['qpn']:#x} not in rdma resource show qp"
    tap.diag(f"P1 pid {info['pid']}: QP {info['qpn']:#x} listed as {json.dumps(q)}")
    S["qpn"] = info["qpn"]


@tap.test("P2 opens the same XRCD through the same file and open_qp by P1's QPN: a handle "
          "of its own to the same QP, in RTR with P1's attributes")
def p2_opens():
    need("qpn")
    S["fd"] = os.open(S["path"], os.O_RDONLY)
    # No O_CREAT: the domain must be found by the inode, i.e. be P1's.
    S["x"] = raw.open_xrcd(S["fd"], 0)
    h, n = raw.open_qp(S["x"], S["qpn"])
    assert n == S["qpn"], (n, S["qpn"])
    S["h"] = h
    expect_rtr_attrs(raw, h, GIDB)


@tap.test("P1 killed (no destroy of its own): its PD, CQ and XRC SRQ are cleaned up, the "
          "target QP is still listed")
def p1_exits():
    need("h")
    pid, srqn = S["p1"].info["pid"], S["p1"].info["srqn"]
    S["p1"].kill()
    # The kernel destroys P1's objects when its uverbs file is released, during the exit
    # and before the parent's wait returns; poll briefly anyway.
    left = listed_for_pid(DEV, "pd", pid, 10)
    assert not left, f"P1's PDs still listed: {left}"
    s = srqs(DEV)
    if s is None:
        tap.diag("this iproute2 lists no SRQs: P1's XRC SRQ not checked")
    else:
        assert not [x for x in s if int(x.get("srqn", -1)) == srqn], \
            f"P1's XRC SRQ {srqn:#x} still listed"
    q = qp_listed(DEV, S["qpn"])
    assert q is not None, f"QP {S['qpn']:#x} gone with its creator; P2 holds a handle"
    tap.diag(f"after P1's exit: {json.dumps(q)}")


@tap.test("after P1's exit, query_qp through P2's handle: RTR, P1's attributes")
def p2_queries():
    need("h")
    expect_rtr_attrs(raw, S["h"], GIDB)


@tap.test("after P1's exit, modify_qp through P2's handle: RTR->ERR, query_qp says ERR")
def p2_modifies():
    need("h")
    raw.modify_qp(S["h"], QP_STATE, qp_state=QPS_ERR)
    expect_state(raw, S["h"], QPS_ERR)


@tap.test("close_xrcd of P2's domain handle while its opened QP handle uses it -> EBUSY")
def p2_close_busy():
    need("x", "h")
    fails_with(lambda: raw.close_xrcd(S["x"]), errno.EBUSY)


@tap.test("destroy_qp of P2's handle, the last: the QP is gone from rdma resource show")
def p2_destroys():
    need("h")
    raw.destroy_qp(S["h"])
    S["destroyed"] = S.pop("h")
    assert qp_listed(DEV, S["qpn"]) is None, f"QP {S['qpn']:#x} still listed after its last handle"


@tap.test("the destroyed handle: query_qp, modify_qp, destroy_qp -> ENOENT; open_qp of the "
          "QPN in the domain -> EINVAL")
def p2_after_destroy():
    need("destroyed", "x")
    h = S["destroyed"]
    # The handle is erased from the context's xarray: lookup_get_idr_uobject -> ENOENT.
    fails_with(lambda: raw.query_qp(h, QP_STATE), errno.ENOENT)
    fails_with(lambda: raw.modify_qp(h, QP_STATE, qp_state=QPS_RESET), errno.ENOENT)
    fails_with(lambda: raw.destroy_qp(h), errno.ENOENT)
    # The domain's table of targets no longer has it (ib_open_qp).
    fails_with(lambda: raw.open_qp(S["x"], S["qpn"]), errno.EINVAL)


@tap.test("close_xrcd of P2's handle, the domain's last: succeeds; the file's inode then has "
          "no domain (open_xrcd without O_CREAT -> EAGAIN)")
def p2_close():
    need("x")
    raw.close_xrcd(S.pop("x"))
    fails_with(lambda: raw.open_xrcd(S["fd"], 0), errno.EAGAIN)


# Whatever failed above, P1 does not outlive the test and P2 holds nothing.
if "p1" in S:
    S["p1"].kill()
for k, f in (("h", raw.destroy_qp), ("x", raw.close_xrcd)):
    if k in S:
        try:
            f(S.pop(k))
        except OSError as err:
            tap.diag(f"cleanup of {k}: {err}")
if "fd" in S:
    os.close(S.pop("fd"))

# --- XRC initiator QPs (the send side; optional for this test's point) ---


def ini_create():
    with Objs() as o:
        ini = raw.create_ini(handle_of(pd), handle_of(cq))
        qp, qpn = ini["handle"], ini["qpn"]
        o.add("qp", qp)
        assert 0 < qpn < 1 << 24, qpn
        expect_state(raw, qp, QPS_RESET)
        raw.destroy_qp(qp)
        o.forget("qp", qp)
        fails_with(lambda: raw.query_qp(qp, QP_STATE), errno.ENOENT)


row("create_qp XRC_INI (PD, send CQ, the rxe provider's driver response): created in RESET, "
    "destroyed", ini_create)

# --- nothing left behind ---


def nothing_left():
    # Every QP of this test is gone; what may remain is the device's own GSI QP (QP1).
    qps = [q for q in restrack(DEV, "qp") if q.get("type") not in ("GSI", "SMI")]
    assert not qps, f"QPs left on {DEV}: {qps}"
    s = srqs(DEV)
    if s is None:
        tap.diag("this iproute2 lists no SRQs: leftover SRQs not checked")
    else:
        assert not s, f"SRQs left on {DEV}: {s}"


row(f"no QP (but the GSI QP) and no SRQ left on {DEV} (rdma resource show)", nothing_left)

sys.exit(tap.done())
