#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The XRC seed across two VMs (IBA Annex A14): a kernel-owned XRC target QP that outlives
the process that created it still receives, from an XRC initiator on the other VM, into
the XRC SRQ of another process. TAP output on side A.

  xrc_seed.py a                       side A (run by selftests/rrxe/xrc.sh): P2, the test itself
  xrc_seed.py creator PATH GID QPN    side A's P1, a child of P2 (see creator())
  xrc_seed.py peer DEV GID_INDEX PORT side B (selftests/rrxe/xrc-peer.sh): the XRC_INI, served
                                      over the control channel until side A says bye

Side A: P1, a process of its own, opens the XRC domain of a file (O_CREAT), creates a CQ,
PD, XRC SRQ and an XRC_TGT QP and brings the target to RTR towards side B's initiator. P2
(this process) opens the same domain through the file, creates its own PD, CQ, MR and
XRC SRQ (ring mapped, receive WQEs posted) and opens the target by its number (OPEN_QP).
P1 is SIGKILLed. Then side B's XRC_INI sends Sends (one of three packets) and an RDMA
Write naming P2's SRQ; P2 checks its completions and the data. Last, B sends one Send
naming P1's SRQ, destroyed with P1: Remote Access Error. P2 destroys its handle, the
target's last: the QP is gone; P2 closes everything; nothing is left.

Side A needs RRXE_PEER_IP4 and RRXE_XRC_PEER=1 (else RRXE_SRQ_PEER=1, which side-a.sh
exports for make check, whose side B runs side-b.sh and so xrc-peer.sh); else one skip.
The control channel is selftests/rrxe/lib/ctl_channel.py's JSON lines, TCP port 4800.

As selftests/rrxe/xrc.py and xrc_data.py do (the stock rxe provider has no XRC verbs), this
writes the raw uverbs commands to a pyverbs Context's command fd and maps the SRQ and SQ
rings, through selftests/rrxe/lib/uverbs_raw.py as they do. Device $RRXE_DEV (rrxe0), GID index $RRXE_GID.
"""
import errno
import json
import os
import socket
import sys
import tempfile
import time
import traceback

from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
import pyverbs.enums as e

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
import ctl_channel  # noqa: E402 - selftests/rrxe/lib, found through the line above
import tap  # noqa: E402
from tap import fails_with, row  # noqa: E402
from uverbs_raw import (  # noqa: E402
    ACCESS_REMOTE, MTU, MTU_1024, QP_ACCESS_FLAGS, QP_AV, QP_DEST_QPN, QP_MAX_DEST_RD_ATOMIC,
    QP_MAX_QP_RD_ATOMIC, QP_MIN_RNR_TIMER, QP_PATH_MTU, QP_PKEY_INDEX, QP_PORT, QP_RETRY_CNT,
    QP_RNR_RETRY, QP_RQ_PSN, QP_SQ_PSN, QP_STATE, QP_TIMEOUT, QPS_INIT, QPS_RTR, QPS_RTS,
    WC_RDMA_WRITE, WC_RECV, WC_REM_ACCESS_ERR, WC_SEND, WC_SUCCESS, WR_RDMA_WRITE, WR_SEND,
    Child, Raw, Ring, av, handle_of, listed_for_pid, no_completion, poll, poll_some, qp_listed,
    read_gid, restrack, srqs, state_name, wc_dict, wc_name, wc_str)

DEV = os.environ.get("RRXE_DEV", "rrxe0")
GID = int(os.environ.get("RRXE_GID") or "0")
PORT = 4800
POLL_TIMEOUT = 20.0     # seconds, every completion wait (two debug guests under TCG)
CREATOR_TIMEOUT = 60.0  # seconds for P1 to start Python and pyverbs and report
CTL_TIMEOUT = 120.0     # seconds for one control-channel answer
NO_COMPLETION_WAIT = 0.5  # seconds a CQ must stay empty where no completion is due

# The INI's sq_psn is the TGT's rq_psn; the INI's rq_psn is never used (the TGT sends no
# requests) but must be set.
INI_SQ_PSN = 0x2345
TGT_SQ_PSN = 0x6789
# The INI's Local ACK Timeout 17 (0.5 s): two debug guests under TCG stall beyond the 67 ms
# of 14 (a spurious retransmission each, harmless, but slower).
INI_TIMEOUT, INI_RETRY, INI_RNR_RETRY = 17, 7, 7

PAGE = 4096
FILL = 0xee
LW = e.IBV_ACCESS_LOCAL_WRITE

# What side B sends (the same table on both sides): (wr_id, bytes) of the Sends naming
# P2's SRQ, in order; P2's receive WQE k takes Send k. 3000 bytes are three packets at
# MTU 1024, 1024 exactly one.
SENDS = [(0x501, 64), (0x502, 1024), (0x503, 3000), (0x504, 200)]
WRITE = (0x511, 2500)    # the RDMA Write into P2's MR, three packets
REFUSED = (0x5f0, 100)   # the Send naming P1's SRQ
SPARE = 2                # P2's receive WQEs beyond the Sends: must stay untaken
RECV_WRID = 0x200        # P2's receive WQE k has wr_id RECV_WRID + k
WRITE_PAGE = len(SENDS) + SPARE  # P2's MR page the Write lands in (after the WQE buffers)


def pattern(i, n):
    """The n bytes of message i: both sides compute them; every message differs."""
    return bytes((i * 37 + k * 7 + (k >> 8)) & 0xff for k in range(n))


# --- side A's P1: the creator ---


def creator(path, peer_gid_hex, ini_qpn):
    """P1: its own process and Context. Opens the XRCD of `path`'s inode (O_CREAT),
    creates a CQ, PD, XRC SRQ and an XRC_TGT QP, brings the target to RTR towards side
    B's INI, prints one JSON line ({qpn, srqn, pid}) and waits on stdin; P2 kills it."""
    try:
        ctx = Context(name=DEV)
        raw = Raw(ctx)
        pd = PD(ctx)
        cq = CQ(ctx, 16)
        fd = os.open(path, os.O_RDWR)
        xrcd = raw.open_xrcd(fd, os.O_CREAT)
        srq = raw.create_xsrq(xrcd, handle_of(pd), handle_of(cq))
        qp, qpn = raw.create_tgt(xrcd)
        raw.modify_qp(qp, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS,
                      qp_state=QPS_INIT, pkey_index=0, port_num=1,
                      qp_access_flags=ACCESS_REMOTE)
        raw.modify_qp(qp, QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN
                      | QP_MAX_DEST_RD_ATOMIC | QP_MIN_RNR_TIMER,
                      dest=av(bytes.fromhex(peer_gid_hex), GID), qp_state=QPS_RTR,
                      path_mtu=MTU_1024, dest_qp_num=ini_qpn, rq_psn=INI_SQ_PSN,
                      max_dest_rd_atomic=4, min_rnr_timer=12)
        st = raw.qp_state(qp)
        assert st == QPS_RTR, f"TGT in {state_name(st)} after INIT->RTR"
        print(json.dumps({"qpn": qpn, "srqn": srq["srqn"], "pid": os.getpid()}), flush=True)
    except Exception:  # noqa: BLE001 - P2 reports it
        print(json.dumps({"error": traceback.format_exc()}), flush=True)
        os._exit(1)
    sys.stdin.readline()
    os._exit(0)


# --- side B: the initiator, served over the control channel ---


class Peer:
    """Side B's objects: PD, CQ, MR and one XRC_INI QP with its SQ ring mapped."""

    SLOTS = 8  # MR pages: one per WQE of one request

    def __init__(self, dev, gid_index):
        self.ctx = Context(name=dev)
        self.raw = Raw(self.ctx)
        self.gid_index = gid_index
        self.gidb = read_gid(dev, gid_index)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 32)
        self.mr = MR(self.pd, self.SLOTS * PAGE, LW)
        self.ini = None
        self.sq = None

    def hello(self):
        """Creates the INI and brings it to INIT; its QPN and our GID for side A."""
        ini = self.raw.create_ini(handle_of(self.pd), handle_of(self.cq))
        self.ini, self.qpn = ini["handle"], ini["qpn"]
        assert ini["max_send_wr"] >= 16 and ini["max_send_sge"] >= 1, f"INI caps {ini}"
        self.sq = Ring(self.raw.fd, ini["sq_offset"], ini["sq_size"], f"INI {self.qpn:#x} SQ")
        self.raw.modify_qp(self.ini, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS,
                           qp_state=QPS_INIT, pkey_index=0, port_num=1, qp_access_flags=0)
        return {"qpn": self.qpn, "gid": self.gidb.hex(), "psn": INI_SQ_PSN,
                "state": self.raw.qp_state(self.ini)}

    def connect(self, tgt_qpn, gid):
        """INIT->RTR (AV, PATH_MTU, DEST_QPN, RQ_PSN only: an initiator has no responder)
        ->RTS towards side A's TGT."""
        assert self.ini is not None, "connect before hello"
        self.raw.modify_qp(self.ini, QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN,
                           dest=av(bytes.fromhex(gid), self.gid_index), qp_state=QPS_RTR,
                           path_mtu=MTU_1024, dest_qp_num=tgt_qpn, rq_psn=TGT_SQ_PSN)
        self.raw.modify_qp(self.ini, QP_STATE | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY
                           | QP_SQ_PSN | QP_MAX_QP_RD_ATOMIC, qp_state=QPS_RTS,
                           timeout=INI_TIMEOUT, retry_cnt=INI_RETRY, rnr_retry=INI_RNR_RETRY,
                           sq_psn=INI_SQ_PSN, max_rd_atomic=1)
        return {"state": self.raw.qp_state(self.ini)}

    def post(self, wqes):
        """wqes: [{wr_id, op, srqn, idx, len[, raddr, rkey]}], the payload of each
        pattern(idx, len) in a page of the MR; one doorbell; then the completions that
        arrive within POLL_TIMEOUT (side A checks them) and the INI's state."""
        assert self.ini is not None, "post before hello"
        assert len(wqes) <= self.SLOTS, f"{len(wqes)} WQEs, {self.SLOTS} MR pages"
        for slot, w in enumerate(wqes):
            data = pattern(w["idx"], w["len"])
            self.mr.write(data, len(data), slot * PAGE)
            remote = (w["raddr"], w["rkey"]) if "raddr" in w else None
            self.sq.send(w["wr_id"], w["op"], w["srqn"],
                         (self.mr.buf + slot * PAGE, w["len"], self.mr.lkey), remote)
        self.sq.publish()
        bad = self.raw.post_send(self.ini)
        assert bad == 0, f"POST_SEND doorbell: bad_wr {bad}"
        wcs = [wc_dict(w) for w in poll_some(self.cq, len(wqes), POLL_TIMEOUT)]
        return {"wcs": wcs, "state": self.raw.qp_state(self.ini)}

    def bye(self):
        """Destroys the INI, unmaps its ring, closes the MR, CQ, PD and the Context."""
        errs = []
        if self.ini is not None:
            try:
                self.raw.destroy_qp(self.ini)
            except OSError as err:
                errs.append(f"destroy_qp INI: {err}")
            self.ini = None
        if self.sq is not None:
            self.sq.close()
        for name in ("mr", "cq", "pd", "ctx"):
            try:
                getattr(self, name).close()
            except Exception as err:  # noqa: BLE001 - reported to side A
                errs.append(f"close {name}: {err}")
        return {"errors": errs}


def serve(dev, gid_index, port):
    """Side B: answers side A's requests, one JSON line each, until `bye`. Exit status 0
    only if A said bye and every request and B's cleanup succeeded."""
    peer = Peer(dev, gid_index)
    srv = socket.create_server(("", port))
    print(f"# waiting for side A on TCP {port}", flush=True)
    conn, addr = srv.accept()  # xrc-peer.sh's timeout bounds the wait for side A
    srv.close()
    conn.settimeout(600)  # side A's steps take seconds: a silent A is a hung A
    print(f"# side A connected from {addr[0]}", flush=True)
    f = conn.makefile("rw")
    failed = False
    said_bye = False
    while not said_bye:
        line = f.readline()
        if not line:
            print("# side A closed the channel without bye", flush=True)
            failed = True
            break
        req = json.loads(line)
        op = req.pop("op", None)
        try:
            if op == "hello":
                reply = peer.hello()
            elif op == "connect":
                reply = peer.connect(req["tgt_qpn"], req["gid"])
            elif op == "post":
                reply = peer.post(req["wqes"])
            elif op == "bye":
                reply = peer.bye()
                said_bye = True
                failed |= bool(reply["errors"])
            else:
                raise ValueError(f"unknown request {op!r}")
        except Exception:  # noqa: BLE001 - the error goes to side A, which reports it
            failed = True
            reply = {"error": f"side B, {op}: {traceback.format_exc()}"}
        print(f"# {op}: {json.dumps(reply)}", flush=True)
        f.write(json.dumps(reply) + "\n")
        f.flush()
    conn.close()
    if not said_bye:
        peer.bye()
    return 1 if failed else 0


# --- side A: P2, the test ---


def connect_b(host, port, tries=600):
    """ctl_channel's Channel on a socket with a timeout (ctl_channel.connect sets none):
    B is up long before A gets here in make check; 10 minutes of retries otherwise."""
    for _ in range(tries):
        try:
            sock = socket.create_connection((host, port), timeout=10)
            sock.settimeout(CTL_TIMEOUT)
            return ctl_channel.Channel(sock, "op")
        except OSError:
            time.sleep(1)
    raise OSError(f"no control channel at {host}:{port} after {tries} tries")


class SideA:
    def __init__(self, host):
        self.host = host
        self.S = {}
        self.b = None
        self.ctx = Context(name=DEV)
        self.raw = Raw(self.ctx)
        self.gidb = read_gid(DEV, GID)
        self.verbs = []  # pyverbs objects of P2, closed in reverse at the end
        self.ring = None

    def need(self, *keys):
        missing = [k for k in keys if k not in self.S]
        assert not missing, f"an earlier step failed: no {missing}"

    def call(self, op, **kw):
        assert self.b is not None, "no control channel to side B"
        return self.b.call(op, **kw)

    # rows

    def hello(self):
        self.b = connect_b(self.host, PORT)
        r = self.call("hello")
        assert 0 < r["qpn"] < 1 << 24, f"B's INI QPN {r['qpn']}"
        assert r["state"] == QPS_INIT, f"B's INI in {state_name(r['state'])}, expected INIT"
        gid = bytes.fromhex(r["gid"])
        assert len(gid) == 16 and gid[:12] == bytes(10) + b"\xff\xff", \
            f"B's GID {r['gid']} is not IPv4-mapped"
        self.S["ini_qpn"], self.S["b_gid"] = r["qpn"], r["gid"]
        tap.diag(f"B: INI {r['qpn']:#x}, GID {r['gid']}; A: GID {self.gidb.hex()} (index {GID})")

    def p1_creates(self):
        self.need("ini_qpn")
        tmp = tempfile.mkdtemp(prefix="rrxe-xrc-seed-")
        path = self.S["path"] = os.path.join(tmp, "xrcd")
        with open(path, "w"):
            pass
        # P1 as a child process (its own uverbs file).
        self.S["p1"] = Child([sys.executable, os.path.realpath(__file__), "creator", path,
                              self.S["b_gid"], str(self.S["ini_qpn"])], CREATOR_TIMEOUT, "P1")
        info = self.S["p1"].info
        assert 0 < info["qpn"] < 1 << 24 and 0 < info["srqn"] < 1 << 24, f"P1 reported {info}"
        q = qp_listed(DEV, info["qpn"])
        assert q is not None, f"P1's TGT {info['qpn']:#x} not in rdma resource show qp"
        self.S["tgt_qpn"], self.S["p1_srqn"] = info["qpn"], info["srqn"]
        tap.diag(f"P1 pid {info['pid']}: TGT {info['qpn']:#x}, XRC SRQ {info['srqn']:#x}")

    def p2_opens(self):
        self.need("tgt_qpn")
        raw = self.raw
        self.S["fd"] = os.open(self.S["path"], os.O_RDONLY)
        # No O_CREAT: the domain must be found by the inode, i.e. be P1's.
        self.S["xrcd"] = raw.open_xrcd(self.S["fd"], 0)
        pd = PD(self.ctx)
        self.verbs.append(pd)
        cq = CQ(self.ctx, 32)
        self.verbs.append(cq)
        npages = WRITE_PAGE + 1
        mr = MR(pd, npages * PAGE, LW | e.IBV_ACCESS_REMOTE_WRITE)
        self.verbs.append(mr)
        mr.write(bytes([FILL]) * npages * PAGE, npages * PAGE, 0)
        self.pd, self.cq, self.mr = pd, cq, mr
        s = raw.create_xsrq(self.S["xrcd"], handle_of(pd), handle_of(cq), max_wr=8)
        self.S["srq"] = s["handle"]
        assert 0 < s["srqn"] < 1 << 24 and s["drv_srq_num"] == s["srqn"], \
            f"P2's SRQ: srqn {s['srqn']:#x}, the driver's srq_num {s['drv_srq_num']:#x}"
        assert s["srqn"] != self.S["p1_srqn"], f"P2's SRQN {s['srqn']:#x} is P1's"
        self.S["srqn"] = s["srqn"]
        self.ring = Ring(raw.fd, s["mi_offset"], s["mi_size"], "P2's SRQ")
        assert self.ring.prod == 0 and self.ring.consumer() == 0, \
            f"fresh SRQ ring: producer {self.ring.prod}, consumer {self.ring.consumer()}"
        for k in range(len(SENDS) + SPARE):
            self.ring.recv(RECV_WRID + k, mr.buf + k * PAGE, PAGE, mr.lkey)
        h, n = raw.open_qp(self.S["xrcd"], self.S["tgt_qpn"])
        assert n == self.S["tgt_qpn"], f"open_qp returned QPN {n:#x}, P1's is " \
                                       f"{self.S['tgt_qpn']:#x}"
        self.S["h"] = h
        self.expect_tgt_rtr()
        tap.diag(f"P2: XRC SRQ {s['srqn']:#x}, TGT handle {h}")

    def expect_tgt_rtr(self):
        a = self.raw.query_qp(self.S["h"])
        want = {"qp_state": QPS_RTR, "dest_qp_num": self.S["ini_qpn"], "rq_psn": INI_SQ_PSN,
                "path_mtu": MTU_1024}
        bad = {k: (a[k], v) for k, v in want.items() if a[k] != v}
        if a["dest"]["dgid"] != bytes.fromhex(self.S["b_gid"]):
            bad["dgid"] = (a["dest"]["dgid"].hex(), self.S["b_gid"])
        assert not bad, f"TGT through P2's handle, queried (got, expected): {bad}"

    def p1_exits(self):
        self.need("h")
        p1 = self.S["p1"]
        pid = p1.info["pid"]
        p1.kill()
        assert p1.p.returncode == -9, f"P1 exited with {p1.p.returncode}, not by SIGKILL"
        left = listed_for_pid(DEV, "pd", pid, 10)
        assert not left, f"P1's PDs still listed 10 s after its death: {left}"
        s = srqs(DEV)
        if s is None:
            tap.diag("this iproute2 lists no SRQs: P1's XRC SRQ not checked")
        else:
            gone = [x for x in s if int(x.get("srqn", -1)) == self.S["p1_srqn"]]
            assert not gone, f"P1's XRC SRQ {self.S['p1_srqn']:#x} still listed: {gone}"
        q = qp_listed(DEV, self.S["tgt_qpn"])
        assert q is not None, \
            f"TGT {self.S['tgt_qpn']:#x} gone with its creator, though P2 holds a handle"
        self.expect_tgt_rtr()
        self.S["p1_dead"] = True

    def b_connects(self):
        self.need("p1_dead")
        r = self.call("connect", tgt_qpn=self.S["tgt_qpn"], gid=self.gidb.hex())
        assert r["state"] == QPS_RTS, f"B's INI in {state_name(r['state'])}, expected RTS"
        self.S["connected"] = True

    def post(self, wqes):
        r = self.call("post", wqes=wqes)
        tap.diag("B's completions: " + "; ".join(wc_str(w) for w in r["wcs"]))
        return r

    def expect_b(self, r, want):
        """B's completions must be exactly want: [(wr_id, status, opcode or None)]."""
        wcs = r["wcs"]
        assert len(wcs) == len(want), \
            f"B: {len(wcs)} of {len(want)} completions within {POLL_TIMEOUT} s: " \
            f"{[wc_str(w) for w in wcs]}"
        for w, (wr_id, status, opcode) in zip(wcs, want):
            assert w["wr_id"] == wr_id and w["status"] == status, \
                f"B's completion {wc_str(w)}, expected wr_id {wr_id:#x} {wc_name(status)}"
            if opcode is not None:
                assert w["opcode"] == opcode, \
                    f"B's completion {wc_str(w)}: opcode, expected {opcode}"
            assert w["qp_num"] == self.S["ini_qpn"], \
                f"B's completion {wc_str(w)}: qp_num, expected the INI's {self.S['ini_qpn']:#x}"

    def sends(self):
        self.need("connected", "srqn")
        wqes = [{"wr_id": wr, "op": WR_SEND, "srqn": self.S["srqn"], "idx": i, "len": n}
                for i, (wr, n) in enumerate(SENDS)]
        r = self.post(wqes)
        self.expect_b(r, [(wr, WC_SUCCESS, WC_SEND) for wr, _ in SENDS])
        self.S["recvs"] = poll(self.cq, len(SENDS), POLL_TIMEOUT, what="P2's CQ")
        self.S["sent"] = True

    def recv_completions(self):
        self.need("recvs")
        tgt = self.S["tgt_qpn"]
        for k, (wc, (_, n)) in enumerate(zip(self.S["recvs"], SENDS)):
            want = RECV_WRID + k
            assert wc.wr_id == want, \
                f"receive {k}: {wc_str(wc)}, expected wr_id {want:#x} (WQEs taken in order)"
            assert wc.status == WC_SUCCESS, f"receive {k}: {wc_str(wc)}: not SUCCESS"
            assert wc.opcode == WC_RECV, f"receive {k}: {wc_str(wc)}: opcode, expected RECV"
            assert wc.byte_len == n, f"receive {k}: {wc_str(wc)}: byte_len, expected {n}"
            assert wc.qp_num == tgt, \
                f"receive {k}: {wc_str(wc)}: qp_num, expected the TGT's {tgt:#x}"
        no_completion(self.cq, "P2's CQ after the receives", wait=NO_COMPLETION_WAIT)

    def page(self, k):
        return self.mr.read(PAGE, k * PAGE)

    def untouched(self, k, what):
        got = self.page(k)
        assert got == bytes([FILL]) * PAGE, \
            f"{what} (page {k}) changed: first differing byte at " \
            f"{next(i for i in range(PAGE) if got[i] != FILL)}"

    def placement(self):
        self.need("recvs")
        for k, (_, n) in enumerate(SENDS):
            got = self.page(k)
            assert got[:n] == pattern(k, n), \
                f"receive buffer {k}: the {n}-byte message differs from Send {k}'s pattern " \
                f"at byte {next(i for i in range(n) if got[i] != pattern(k, n)[i])}"
            assert got[n:] == bytes([FILL]) * (PAGE - n), \
                f"receive buffer {k}: written past the {n}-byte message"
        for k in range(len(SENDS), len(SENDS) + SPARE):
            self.untouched(k, f"spare receive buffer {k}")
        self.untouched(WRITE_PAGE, "the RDMA Write target")
        c = self.ring.consumer()
        assert c == len(SENDS), f"P2's SRQ consumer index {c}, expected {len(SENDS)}"

    def rdma_write(self):
        self.need("sent")
        wr, n = WRITE
        idx = len(SENDS)
        r = self.post([{"wr_id": wr, "op": WR_RDMA_WRITE, "srqn": self.S["srqn"], "idx": idx,
                        "len": n, "raddr": self.mr.buf + WRITE_PAGE * PAGE,
                        "rkey": self.mr.rkey}])
        self.expect_b(r, [(wr, WC_SUCCESS, WC_RDMA_WRITE)])
        got = self.page(WRITE_PAGE)
        assert got[:n] == pattern(idx, n), "RDMA Write: the target data differs"
        assert got[n:] == bytes([FILL]) * (PAGE - n), "RDMA Write: written past the message"
        no_completion(self.cq, "P2's CQ after an RDMA Write", wait=NO_COMPLETION_WAIT)
        c = self.ring.consumer()
        assert c == len(SENDS), f"the RDMA Write took a receive WQE: consumer {c}"
        self.S["written"] = True

    def refused(self):
        self.need("sent", "p1_srqn", "h")
        wr, n = REFUSED
        r = self.post([{"wr_id": wr, "op": WR_SEND, "srqn": self.S["p1_srqn"],
                        "idx": len(SENDS) + 1, "len": n}])
        self.expect_b(r, [(wr, WC_REM_ACCESS_ERR, None)])
        no_completion(self.cq, "P2's CQ after a Send naming P1's SRQ", wait=NO_COMPLETION_WAIT)
        c = self.ring.consumer()
        assert c == len(SENDS), f"the refused Send took a receive WQE: consumer {c}"
        for k in range(len(SENDS), len(SENDS) + SPARE):
            self.untouched(k, f"spare receive buffer {k}")
        tap.diag(f"after the refused Send: B's INI {state_name(r['state'])}, the TGT "
                 f"{state_name(self.raw.qp_state(self.S['h']))}")

    def p2_destroys(self):
        self.need("h")
        self.raw.destroy_qp(self.S["h"])
        self.S["destroyed"] = self.S.pop("h")
        q = qp_listed(DEV, self.S["tgt_qpn"])
        assert q is None, f"TGT {self.S['tgt_qpn']:#x} still listed after its last handle: {q}"
        fails_with(lambda: self.raw.open_qp(self.S["xrcd"], self.S["tgt_qpn"]), errno.EINVAL)

    def p2_closes(self):
        self.need("xrcd", "srq")
        self.raw.destroy_srq(self.S.pop("srq"))
        if self.ring is not None:
            self.ring.close()
        self.raw.close_xrcd(self.S.pop("xrcd"))
        # The domain's last handle is gone: the inode has none (no O_CREAT -> EAGAIN).
        fails_with(lambda: self.raw.open_xrcd(self.S["fd"], 0), errno.EAGAIN)
        while self.verbs:
            self.verbs.pop().close()

    def nothing_left(self):
        qps = [q for q in restrack(DEV, "qp") if q.get("type") not in ("GSI", "SMI")]
        assert not qps, f"QPs left on {DEV}: {qps}"
        s = srqs(DEV)
        if s is None:
            tap.diag("this iproute2 lists no SRQs: leftover SRQs not checked")
        else:
            assert not s, f"SRQs left on {DEV}: {s}"

    def bye(self):
        b, self.b = self.b, None
        assert b is not None, "no control channel to side B"
        r = b.call("bye")
        assert not r["errors"], f"side B's cleanup: {r['errors']}"

    def cleanup(self):
        """Whatever failed: P1 dead, P2's objects gone, B told bye."""
        S = self.S
        if "p1" in S:
            S["p1"].kill()
        for k, f in (("h", self.raw.destroy_qp), ("srq", self.raw.destroy_srq),
                     ("xrcd", self.raw.close_xrcd)):
            if k in S:
                try:
                    f(S.pop(k))
                except OSError as err:
                    tap.diag(f"cleanup of {k}: {err}")
        if self.ring is not None:
            self.ring.close()
        try:
            while self.verbs:
                self.verbs.pop().close()
            self.ctx.close()
        except Exception as err:  # noqa: BLE001 - reported, the totals still printed
            tap.diag(f"closing the pyverbs objects: {err}")
        if "fd" in S:
            os.close(S.pop("fd"))
        if self.b is not None:
            try:
                self.b.call("bye")
            except Exception as err:  # noqa: BLE001
                tap.diag(f"bye to side B: {err}")


def side_a():
    peer = os.environ.get("RRXE_XRC_PEER") or os.environ.get("RRXE_SRQ_PEER", "")
    host = os.environ.get("RRXE_PEER_IP4", "")
    tap.begin(f"XRC seed across two VMs: a target QP outliving its creator receives from "
              f"the peer's initiator ({DEV}, GID {GID})")
    desc = "XRC target outliving its creator, fed by the peer VM's initiator"
    if peer != "1":
        tap.skip(desc, "no peer running xrc-peer.sh (RRXE_XRC_PEER, else RRXE_SRQ_PEER, "
                       "is not 1)")
        return tap.done()
    if not host:
        tap.skip(desc, "no peer VM (RRXE_PEER_IP4 unset)")
        return tap.done()
    try:
        a = SideA(host)
    except Exception:  # noqa: BLE001 - one failed row; B is still told bye
        tap.report(False, f"open {DEV} and read GID {GID}", traceback.format_exc())
        try:
            connect_b(host, PORT, tries=60).call("bye")
        except Exception as err:  # noqa: BLE001
            tap.diag(f"bye to side B: {err}")
        return tap.done()
    try:
        row(f"control channel to side B ({host}:{PORT}); B creates an XRC_INI (PD, CQ, SQ "
            "ring mapped) at INIT and reports its QPN and IPv4-mapped GID", a.hello)
        row("P1 (own process and Context) opens the XRCD of a file with O_CREAT, creates a CQ, "
            "PD, XRC SRQ and an XRC_TGT QP at RTR towards B's INI; the TGT is listed by rdma "
            "resource show qp", a.p1_creates)
        row(f"P2 opens the same XRCD through the file (no O_CREAT), creates its own PD, CQ, MR "
            f"and XRC SRQ (ring mapped, {len(SENDS) + SPARE} receive WQEs), open_qp of P1's "
            "TGT: RTR, dest_qpn B's INI, dgid B's GID", a.p2_opens)
        row("P1 SIGKILLed: its PDs and XRC SRQ are cleaned up, the TGT is still listed and "
            "in RTR through P2's handle", a.p1_exits)
        row("B's INI INIT->RTR (AV, PATH_MTU, DEST_QPN, RQ_PSN)->RTS towards the TGT",
            a.b_connects)
        sizes = "/".join(str(n) for _, n in SENDS)
        row(f"B posts {len(SENDS)} Sends naming P2's SRQN ({sizes} B; 3000 B is three packets "
            f"at MTU {MTU}), one doorbell: {len(SENDS)} SUCCESS send completions at B",
            a.sends)
        row(f"P2's CQ: {len(SENDS)} receive completions in order, wr_ids of P2's first "
            f"{len(SENDS)} WQEs, SUCCESS, RECV, byte_len {sizes}, qp_num the TGT's",
            a.recv_completions)
        row("each message in its WQE's buffer (the pattern of its index), nothing past it; "
            f"the spare buffers untouched; P2's SRQ consumer {len(SENDS)}", a.placement)
        row(f"B's RDMA Write ({WRITE[1]} B, three packets) naming P2's SRQ with P2's MR's "
            "R_Key: SUCCESS at B, the data placed, no receive completion, no WQE taken",
            a.rdma_write)
        row("B's Send naming P1's XRC SRQ (destroyed with P1): REM_ACCESS_ERR at B; nothing "
            "received by P2, no WQE taken", a.refused)
        row("P2 destroys its TGT handle, the last: the TGT is gone from rdma resource show "
            "qp; open_qp of its QPN -> EINVAL", a.p2_destroys)
        row("P2 destroys its XRC SRQ and closes the XRCD (the file's inode then has no domain: "
            "open_xrcd without O_CREAT -> EAGAIN), its MR, CQ and PD", a.p2_closes)
        row(f"no QP (but the GSI QP) and no SRQ left on {DEV} (rdma resource show)",
            a.nothing_left)
        row("side B destroys its INI and closes its MR, CQ and PD without error", a.bye)
    finally:
        a.cleanup()
    return tap.done()


def main(argv):
    if len(argv) == 5 and argv[1] == "creator":
        creator(argv[2], argv[3], int(argv[4]))
    elif len(argv) == 5 and argv[1] == "peer":
        return serve(argv[2], int(argv[3] or "0"), int(argv[4]))
    elif len(argv) == 2 and argv[1] == "a":
        return side_a()
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
