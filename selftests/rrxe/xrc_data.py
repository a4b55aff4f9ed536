#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The XRC data path (IBA Annex A14) through the raw uverbs write commands and the rdma_rxe
rings, TAP output. One rrxe device in loopback through its own GID, one process.

An XRC initiator QP (XRC_INI) sends; an XRC target QP (XRC_TGT, in an XRC domain) receives
each message into the XRC SRQ that the message's XRCETH names, checks R_Keys against that
SRQ's PD, and completes receives to that SRQ's CQ, reporting the target QP's number. The
rows check, over the wire: Sends to two SRQs of one domain (one of them a 3-packet
message), RDMA Write and Read (which carry an XRCETH too), an R_Key of another PD than the
named SRQ's (Remote Access Error), a Send naming an SRQ of another XRC domain and one
naming an SRQ number nobody has (Remote Access Error, counted in rcvd_xrc_srq_refused).

The stock rdma-core rxe provider (v44, used by pyverbs) has no XRC verbs, so, as
selftests/rrxe/xrc.py does, this test writes OPEN_XRCD, CREATE_XSRQ, CREATE_QP, MODIFY_QP,
QUERY_QP, POST_SEND (the send doorbell, no WRs), DESTROY_QP, DESTROY_SRQ and CLOSE_XRCD
itself to the command fd of a pyverbs Context, in the layouts of
include/uapi/rdma/ib_user_verbs.h (6.12), through selftests/rrxe/lib/uverbs_raw.py. It maps the
SRQ and SQ rings the driver exports (struct rxe_queue_buf, Documentation/rrxe/uverbs-abi.rst
section 2) and writes receive and send WQEs into them as the rxe provider would (sections
5 and 6); an XRC_INI send WQE carries the remote XRC SRQ number in the `reserved` u32 at
byte 8 (rrxe's abi.rs, send::XRC_SRQN). pyverbs gives the Context, PDs, MRs and CQs, and
polls the CQs.

Run inside a VM with the device named by $RRXE_DEV (default rrxe0), GID index $RRXE_GID.
"""
import json
import os
import subprocess
import sys
import time

from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
import pyverbs.enums as e

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
import tap  # noqa: E402 - selftests/rrxe/lib, found through the line above
from tap import row  # noqa: E402
from uverbs_raw import (  # noqa: E402
    ACCESS_REMOTE, DEVICE_XRC, MTU_1024, QP_ACCESS_FLAGS, QP_AV, QP_DEST_QPN,
    QP_MAX_DEST_RD_ATOMIC, QP_MAX_QP_RD_ATOMIC, QP_MIN_RNR_TIMER, QP_PATH_MTU, QP_PKEY_INDEX,
    QP_PORT, QP_RETRY_CNT, QP_RNR_RETRY, QP_RQ_PSN, QP_SQ_PSN, QP_STATE, QP_TIMEOUT, QPS_ERR,
    QPS_INIT, QPS_RTR, QPS_RTS, STATE_NAMES, WC_RDMA_READ, WC_RDMA_WRITE, WC_RECV,
    WC_REM_ACCESS_ERR, WC_SEND, WC_SUCCESS, WR_RDMA_READ, WR_RDMA_WRITE, WR_SEND, Raw, Ring,
    av, handle_of, no_completion, poll, read_gid, restrack, wc_name, wc_str)

DEV = os.environ.get("RRXE_DEV", "rrxe0")
GID = int(os.environ.get("RRXE_GID", "0"))
POLL_TIMEOUT = 10.0  # seconds, every completion wait

# Both ends' PSNs (the INI's sq_psn is the TGT's rq_psn and the other way round).
INI_SQ_PSN = 0x1234
TGT_SQ_PSN = 0x5678

NO_SRQN = 0xfffffe  # a 24-bit SRQ number no SRQ has (numbers are handed out low first)


def counter(name):
    """Counter `name` of DEV port 1 from `rdma statistic show link` (JSON, else text)."""
    args = ["rdma", "-j", "statistic", "show", "link", f"{DEV}/1"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if out.returncode == 0:
        try:
            for d in json.loads(out.stdout):
                if isinstance(d.get(name), int):
                    return d[name]
        except (ValueError, AttributeError):
            pass
    out = subprocess.run([a for a in args if a != "-j"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, f"rdma statistic show link: {out.stderr.strip()}"
    words = out.stdout.split()
    assert name in words, f"no counter {name} in: {out.stdout.strip()}"
    return int(words[words.index(name) + 1])


# --- objects ---

ctx = Context(name=DEV)
dattr = ctx.query_device()
raw = Raw(ctx)
GIDB = read_gid(DEV, GID)

tap.begin(f"XRC data path through raw uverbs commands and the rxe rings on {DEV} (GID {GID}); "
          f"device_cap_flags {dattr.device_cap_flags:#x}")

PAGE = 4096
LW = e.IBV_ACCESS_LOCAL_WRITE
pd = PD(ctx)
pd2 = PD(ctx)  # another PD: its MRs' R_Keys are not valid at SRQs of `pd`
cq_srq = CQ(ctx, 64)  # the receive completions of every XRC SRQ
cq_ini = CQ(ctx, 64)  # the initiator's send completions

# Receive side, in `pd`: SRQ buffers and RDMA targets, one page each.
RX = {"A0": 0, "A1": 1, "A2": 2, "B0": 3, "B1": 4, "C0": 5, "W": 6, "R": 7}
mr_rx = MR(pd, len(RX) * PAGE, LW | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ)
# Send side, in `pd` (the INI's PD): payloads and the Read sink.
TX = {"A": 0, "B": 1, "BIG": 2, "W": 3, "R": 4, "N": 5}
mr_tx = MR(pd, len(TX) * PAGE, LW)
# In `pd2`: the RDMA Write target of an SRQ of pd2, and the key of the wrong-PD row.
mr2 = MR(pd2, PAGE, LW | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ)

FILL = 0xee
PAY_A = b"to A" * 16                                     # 64 bytes, one packet
PAY_B = b"to B" * 24                                     # 96 bytes, one packet
PAY_BIG = bytes((i * 7 + 3) & 0xff for i in range(3000))  # three packets at MTU 1024
PAY_W = bytes((i * 13 + 1) & 0xff for i in range(1500))   # RDMA Write, two packets
PAY_R = bytes((i * 11 + 5) & 0xff for i in range(2500))   # RDMA Read, three responses
PAY_W2 = b"into pd2 " * 20


def rx_addr(k):
    return mr_rx.buf + RX[k] * PAGE


def tx_sge(k, length):
    return (mr_tx.buf + TX[k] * PAGE, length, mr_tx.lkey)


def rx_page(k):
    return mr_rx.read(PAGE, RX[k] * PAGE)


def untouched(k):
    got = rx_page(k)
    assert got == bytes([FILL]) * PAGE, \
        f"buffer {k} changed: first differing byte at " \
        f"{next(i for i in range(PAGE) if got[i] != FILL)}"


S = {}           # what the rows hand on, step to step
owned = []       # raw objects alive, (kind, handle), destroyed in reverse at the end
rings = []       # mapped rings, unmapped at the end


def need(*keys):
    missing = [k for k in keys if k not in S]
    assert not missing, f"an earlier step failed: no {missing}"


def own(kind, handle):
    owned.append((kind, handle))
    return handle


def destroy(kind, handle):
    raw.destroy(kind, handle)
    owned.remove((kind, handle))


class Pair:
    """An XRC_TGT in XRC domain `xrcd` at RTR and an XRC_INI (PD `pd`, CQ cq_ini) at RTS,
    connected to each other through the device's own GID; the INI's SQ ring mapped."""

    def __init__(self, xrcd):
        self.tgt, self.tgt_qpn = raw.create_tgt(xrcd)
        own("qp", self.tgt)
        ini = raw.create_ini(handle_of(pd), handle_of(cq_ini))
        self.ini, self.ini_qpn = own("qp", ini["handle"]), ini["qpn"]
        assert ini["max_send_wr"] >= 16 and ini["max_send_sge"] >= 1, ini
        self.sq = Ring(raw.fd, ini["sq_offset"], ini["sq_size"], f"INI {self.ini_qpn:#x} SQ")
        rings.append(self.sq)
        dest = av(GIDB, GID)
        # TGT: RESET->INIT->RTR (verbs.c qp_state_table, XRC_TGT column); it answers from
        # RTR (a receive-only target needs no send queue state).
        raw.modify_qp(self.tgt, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS,
                      qp_state=QPS_INIT, pkey_index=0, port_num=1,
                      qp_access_flags=ACCESS_REMOTE)
        raw.modify_qp(self.tgt, QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN
                      | QP_MAX_DEST_RD_ATOMIC | QP_MIN_RNR_TIMER, dest=dest,
                      qp_state=QPS_RTR, path_mtu=MTU_1024, dest_qp_num=self.ini_qpn,
                      rq_psn=INI_SQ_PSN, max_dest_rd_atomic=4, min_rnr_timer=12)
        # INI: RESET->INIT->RTR->RTS. Its INIT->RTR takes AV, PATH_MTU, DEST_QPN and RQ_PSN
        # only (MAX_DEST_RD_ATOMIC and MIN_RNR_TIMER are not in the XRC_INI column: no
        # responder); RTR->RTS is RC's.
        raw.modify_qp(self.ini, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS,
                      qp_state=QPS_INIT, pkey_index=0, port_num=1, qp_access_flags=0)
        raw.modify_qp(self.ini, QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN,
                      dest=dest, qp_state=QPS_RTR, path_mtu=MTU_1024,
                      dest_qp_num=self.tgt_qpn, rq_psn=TGT_SQ_PSN)
        raw.modify_qp(self.ini, QP_STATE | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY
                      | QP_SQ_PSN | QP_MAX_QP_RD_ATOMIC, qp_state=QPS_RTS, timeout=14,
                      retry_cnt=7, rnr_retry=7, sq_psn=INI_SQ_PSN, max_rd_atomic=1)
        for qp, want, name in ((self.tgt, QPS_RTR, "TGT"), (self.ini, QPS_RTS, "INI")):
            got = raw.qp_state(qp)
            assert got == want, f"{name} in {STATE_NAMES[got] if got < 7 else got}, " \
                                f"expected {STATE_NAMES[want]}"

    def post(self, *wqes):
        """Each wqe: (wr_id, opcode, srqn, sge[, remote]); then the doorbell."""
        for w in wqes:
            self.sq.send(*w)
        self.sq.publish()
        bad = raw.post_send(self.ini)
        assert bad == 0, f"POST_SEND doorbell: bad_wr {bad}"

    def close(self):
        for qp in (self.ini, self.tgt):
            if ("qp", qp) in owned:
                destroy("qp", qp)
        self.sq.close()
        rings.remove(self.sq)


def expect_ini(wcs_want, pair):
    """cq_ini must give exactly these (wr_id, status, opcode or None) completions."""
    wcs = poll(cq_ini, len(wcs_want), POLL_TIMEOUT, what="cq_ini")
    for wc, (wr_id, status, opcode) in zip(wcs, wcs_want):
        assert wc.wr_id == wr_id and wc.status == status, \
            f"INI completion {wc_str(wc)}, expected wr_id {wr_id:#x} {wc_name(status)}"
        if status == WC_SUCCESS and opcode is not None:
            assert wc.opcode == opcode, f"INI completion {wc_str(wc)}: opcode, expected {opcode}"
        assert wc.qp_num == pair.ini_qpn, \
            f"INI completion {wc_str(wc)}: qp_num, expected the INI's {pair.ini_qpn:#x}"
    return wcs


# --- rows ---


def xrc_capable():
    assert dattr.device_cap_flags & DEVICE_XRC, \
        f"device_cap_flags {dattr.device_cap_flags:#x} without IB_DEVICE_XRC (1 << 20)"


row("control: query_device reports IB_DEVICE_XRC", xrc_capable)


def setup_srqs():
    mr_rx.write(bytes([FILL]) * len(RX) * PAGE, len(RX) * PAGE, 0)
    mr2.write(bytes([FILL]) * PAGE, PAGE, 0)
    S["x1"] = own("xrcd", raw.open_xrcd())
    S["x2"] = own("xrcd", raw.open_xrcd())
    for name, x, p in (("A", "x1", pd), ("B", "x1", pd), ("D", "x1", pd2), ("C", "x2", pd)):
        s = raw.create_xsrq(S[x], handle_of(p), handle_of(cq_srq))
        own("srq", s["handle"])
        assert 0 < s["srqn"] < 1 << 24 and s["drv_srq_num"] == s["srqn"], \
            f"SRQ {name}: srqn {s['srqn']:#x}, driver's srq_num {s['drv_srq_num']:#x}"
        s["ring"] = Ring(raw.fd, s["mi_offset"], s["mi_size"], f"SRQ {name}")
        rings.append(s["ring"])
        assert s["ring"].prod == 0 and s["ring"].consumer() == 0, \
            f"SRQ {name}: fresh ring with producer {s['ring'].prod}, " \
            f"consumer {s['ring'].consumer()}"
        S[name] = s
    nums = [S[n]["srqn"] for n in "ABCD"]
    assert len(set(nums)) == 4 and NO_SRQN not in nums, f"SRQ numbers {nums}"
    tap.diag("SRQNs: " + ", ".join(f"{n} {S[n]['srqn']:#x}" for n in "ABCD"))
    # Receive WQEs: three in A, two in B, one in C; one page each, distinct wr_ids.
    for k in ("A0", "A1", "A2", "B0", "B1", "C0"):
        S[k[0]]["ring"].recv(0x100 + RX[k], rx_addr(k), PAGE, mr_rx.lkey)


row("open two XRC domains; XRC SRQs A, B (domain 1, PD 1), D (domain 1, PD 2) and C "
    "(domain 2) with one CQ; each SRQ's ring mapped at its mminfo; receive WQEs in A, B and C",
    setup_srqs)


def connect():
    need("x1")
    S["pair"] = Pair(S["x1"])
    tap.diag(f"INI {S['pair'].ini_qpn:#x} -> TGT {S['pair'].tgt_qpn:#x}")


row("XRC_TGT in domain 1 to RTR and XRC_INI (PD 1, cq_ini) to RTS, connected to each other "
    "through the device's own GID; query_qp confirms the states", connect)


def wrid(k):
    return 0x100 + RX[k]


def sends():
    need("pair", "A", "B")
    p = S["pair"]
    mr_tx.write(PAY_A, len(PAY_A), TX["A"] * PAGE)
    mr_tx.write(PAY_B, len(PAY_B), TX["B"] * PAGE)
    mr_tx.write(PAY_BIG, len(PAY_BIG), TX["BIG"] * PAGE)
    p.post((0x51, WR_SEND, S["A"]["srqn"], tx_sge("A", len(PAY_A))),
           (0x52, WR_SEND, S["B"]["srqn"], tx_sge("B", len(PAY_B))),
           (0x53, WR_SEND, S["A"]["srqn"], tx_sge("BIG", len(PAY_BIG))))
    expect_ini([(0x51, WC_SUCCESS, WC_SEND), (0x52, WC_SUCCESS, WC_SEND),
                (0x53, WC_SUCCESS, WC_SEND)], p)
    S["recvs"] = poll(cq_srq, 3, POLL_TIMEOUT, what="cq_srq")


row("three Sends from the INI, naming SRQ A (64 B), SRQ B (96 B) and SRQ A (3000 B, three "
    "packets at MTU 1024), one doorbell: three successful send completions on cq_ini", sends)


def recv_completions():
    need("recvs", "pair")
    tgt = S["pair"].tgt_qpn
    got = {wc.wr_id: wc for wc in S["recvs"]}
    want = {wrid("A0"): len(PAY_A), wrid("B0"): len(PAY_B), wrid("A1"): len(PAY_BIG)}
    assert set(got) == set(want), \
        f"receive wr_ids {[hex(w) for w in got]}, expected {[hex(w) for w in want]}"
    for w, length in want.items():
        wc = got[w]
        assert wc.status == WC_SUCCESS, f"receive {wc_str(wc)}: not SUCCESS"
        assert wc.opcode == WC_RECV, f"receive {wc_str(wc)}: opcode, expected RECV (128)"
        assert wc.byte_len == length, f"receive {wc_str(wc)}: byte_len, expected {length}"
        # IBA Annex A14: the receive completion names the XRC target QP.
        assert wc.qp_num == tgt, f"receive {wc_str(wc)}: qp_num, expected the TGT's {tgt:#x}"
    no_completion(cq_srq, "cq_srq after the three receives")


row("cq_srq: three receive completions, wr_ids of A's first, B's first and A's second WQE, "
    "SUCCESS, opcode RECV, byte_len 64/96/3000, qp_num the XRC target's", recv_completions)


def placement():
    need("recvs")
    for k, pay in (("A0", PAY_A), ("B0", PAY_B), ("A1", PAY_BIG)):
        page = rx_page(k)
        assert page[:len(pay)] == pay, f"buffer {k}: payload differs"
        assert page[len(pay):] == bytes([FILL]) * (PAGE - len(pay)), \
            f"buffer {k}: written past the {len(pay)}-byte message"
    for k in ("A2", "B1", "C0", "W", "R"):
        untouched(k)
    for n, taken in (("A", 2), ("B", 1), ("C", 0), ("D", 0)):
        c = S[n]["ring"].consumer()
        assert c == taken, f"SRQ {n}: consumer index {c}, expected {taken} WQEs taken"


row("each message landed in a buffer of the SRQ it named (A: 64 B and 3000 B, B: 96 B), "
    "nothing past it; the other buffers untouched; SRQ consumers A 2, B 1, C 0, D 0",
    placement)


def rdma_write():
    need("pair", "A")
    p = S["pair"]
    mr_tx.write(PAY_W, len(PAY_W), TX["W"] * PAGE)
    p.post((0x61, WR_RDMA_WRITE, S["A"]["srqn"], tx_sge("W", len(PAY_W)),
            (rx_addr("W"), mr_rx.rkey)))
    expect_ini([(0x61, WC_SUCCESS, WC_RDMA_WRITE)], p)
    page = rx_page("W")
    assert page[:len(PAY_W)] == PAY_W, "RDMA Write: target data differs"
    assert page[len(PAY_W):] == bytes([FILL]) * (PAGE - len(PAY_W)), \
        "RDMA Write: written past the message"
    no_completion(cq_srq, "cq_srq after an RDMA Write")
    assert S["A"]["ring"].consumer() == 2, "RDMA Write consumed a receive WQE of SRQ A"


row("RDMA Write (1500 B, two packets) naming SRQ A with an R_Key of SRQ A's PD: success, "
    "data placed, no receive WQE taken and no receive completion", rdma_write)


def rdma_read():
    need("pair", "A")
    p = S["pair"]
    mr_rx.write(PAY_R, len(PAY_R), RX["R"] * PAGE)
    mr_tx.write(bytes(PAGE), PAGE, TX["R"] * PAGE)
    p.post((0x62, WR_RDMA_READ, S["A"]["srqn"], tx_sge("R", len(PAY_R)),
            (rx_addr("R"), mr_rx.rkey)))
    wc = expect_ini([(0x62, WC_SUCCESS, WC_RDMA_READ)], p)[0]
    assert wc.byte_len == len(PAY_R), f"RDMA Read completion {wc_str(wc)}: byte_len"
    got = mr_tx.read(PAGE, TX["R"] * PAGE)
    assert got[:len(PAY_R)] == PAY_R, "RDMA Read: data read back differs"
    assert got[len(PAY_R):] == bytes(PAGE - len(PAY_R)), "RDMA Read: written past the message"
    no_completion(cq_srq, "cq_srq after an RDMA Read")


row("RDMA Read (2500 B, three response packets) naming SRQ A: success, the data read back",
    rdma_read)


def write_pd2_ok():
    need("pair", "D")
    p = S["pair"]
    mr_tx.write(PAY_W2, len(PAY_W2), TX["N"] * PAGE)
    p.post((0x63, WR_RDMA_WRITE, S["D"]["srqn"], tx_sge("N", len(PAY_W2)),
            (mr2.buf, mr2.rkey)))
    expect_ini([(0x63, WC_SUCCESS, WC_RDMA_WRITE)], p)
    got = mr2.read(PAGE, 0)
    assert got[:len(PAY_W2)] == PAY_W2, "RDMA Write into PD 2: data differs"


row("RDMA Write with an R_Key of PD 2 naming SRQ D (domain 1, PD 2): success (the key is "
    "checked in the PD of the SRQ named)", write_pd2_ok)


def write_wrong_pd():
    need("pair", "A")
    p = S["pair"]
    before = mr2.read(PAGE, 0)
    p.post((0x64, WR_RDMA_WRITE, S["A"]["srqn"], tx_sge("W", len(PAY_W)),
            (mr2.buf, mr2.rkey)))
    expect_ini([(0x64, WC_REM_ACCESS_ERR, None)], p)
    assert mr2.read(PAGE, 0) == before, "RDMA Write with a refused R_Key changed the target"
    # The QP enters ERR with its error completion; allow the state a moment to show.
    end = time.monotonic() + 2
    while (st := raw.qp_state(p.ini)) != QPS_ERR and time.monotonic() < end:
        time.sleep(0.01)
    assert st == QPS_ERR, f"INI in {STATE_NAMES[st] if st < 7 else st} after the error, " \
                          f"expected ERR"
    no_completion(cq_srq, "cq_srq after a refused RDMA Write")


row("RDMA Write with an R_Key of PD 2 naming SRQ A (PD 1): the INI completes "
    "REM_ACCESS_ERR, the target memory unchanged, the INI in ERR", write_wrong_pd)


def refused_send(srqn, label):
    """A fresh pair, one Send naming `srqn`: REM_ACCESS_ERR at the INI, nothing received."""
    need("x1")
    if "pair" in S:
        S.pop("pair").close()
    p = S["pair"] = Pair(S["x1"])
    mr_tx.write(PAY_A, len(PAY_A), TX["A"] * PAGE)
    p.post((0x70, WR_SEND, srqn, tx_sge("A", len(PAY_A))))
    expect_ini([(0x70, WC_REM_ACCESS_ERR, None)], p)
    no_completion(cq_srq, f"cq_srq after a Send naming {label}")
    for n, taken in (("A", 2), ("B", 1), ("C", 0), ("D", 0)):
        c = S[n]["ring"].consumer()
        assert c == taken, f"SRQ {n}: consumer index {c} after the refused Send, " \
                           f"expected {taken}"
    untouched("C0")
    untouched("A2")


def refused_other_domain():
    need("C")
    S["refused0"] = counter("rcvd_xrc_srq_refused")
    refused_send(S["C"]["srqn"], "SRQ C")


row("fresh INI/TGT pair; a Send naming SRQ C (another XRC domain): the INI completes "
    "REM_ACCESS_ERR; no receive completion, C's WQE not taken, its buffer untouched",
    refused_other_domain)


def refused_no_srq():
    refused_send(NO_SRQN, f"SRQN {NO_SRQN:#x}")


row(f"fresh INI/TGT pair; a Send naming SRQN {NO_SRQN:#x} (no such SRQ): the INI completes "
    "REM_ACCESS_ERR; no receive completion", refused_no_srq)


def refused_counted():
    need("refused0")
    after = counter("rcvd_xrc_srq_refused")
    tap.diag(f"rcvd_xrc_srq_refused {S['refused0']} -> {after}")
    assert after - S["refused0"] >= 2, \
        f"rcvd_xrc_srq_refused rose by {after - S['refused0']} over two refused Sends"


row("rdma statistic: rcvd_xrc_srq_refused rose by at least 2 over the two refused Sends",
    refused_counted)


def cleanup():
    errs = []
    if "pair" in S:
        try:
            S.pop("pair").close()
        except OSError as err:
            errs.append(f"pair: {err}")
    for kind, h in reversed(list(owned)):
        try:
            destroy(kind, h)
        except OSError as err:
            errs.append(f"{kind} {h}: {err}")
            owned.remove((kind, h))
    for r in list(rings):
        r.close()
        rings.remove(r)
    assert not errs, f"destroy failed: {errs}"


row("destroy the QPs and the XRC SRQs, close both XRC domains: all succeed", cleanup)


def nothing_left():
    qps = [q for q in restrack(DEV, "qp") if q.get("type") not in ("GSI", "SMI")]
    assert not qps, f"QPs left on {DEV}: {qps}"
    try:
        srqs = restrack(DEV, "srq")
    except AssertionError as err:
        tap.diag(f"this iproute2 lists no SRQs ({err}): leftover SRQs not checked")
        return
    assert not srqs, f"SRQs left on {DEV}: {srqs}"


row(f"no QP (but the GSI QP) and no SRQ left on {DEV} (rdma resource show)", nothing_left)

# Whatever failed above: no raw object may hold a PD or CQ busy when pyverbs closes them.
for kind, h in reversed(list(owned)):
    try:
        destroy(kind, h)
    except OSError as err:
        tap.diag(f"cleanup of {kind} {h}: {err}")
for r in rings:
    r.close()
try:
    for v in (mr2, mr_tx, mr_rx, cq_ini, cq_srq, pd2, pd):
        v.close()
    ctx.close()
except Exception as err:  # noqa: BLE001 - reported, the TAP totals still printed
    tap.diag(f"closing the pyverbs objects: {err}")
sys.exit(tap.done())
