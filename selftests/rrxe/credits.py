#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""End-to-end credits (IBA 9.7.7.2) between two VMs, through the unmodified rxe provider.

  credits.py server DEV GID_INDEX PORT                 side B: the slow receiver
  credits.py client DEV GID_INDEX HOST PORT [rxe|librrxe]   side A: the sender; TAP output

Side B keeps only DEPTH receives posted and reposts each one DELAY after its message
arrived; side A posts N Sends of SIZE bytes back to back on an RC QP. B checks every
message (order and bytes); A counts. Rounds: with credits, the same with B's credit
reporting off (the `credits` module parameter, read when B creates its QP: AETHs say "no
credit information" as rdma_rxe's do), and a QP on an SRQ. Each round prints both sides'
counters and the elapsed time; the wire checks decode the pcap of the VMs' wire
(/run/results/wire.pcap, from QEMU's filter-dump) with selftests/rrxe/lib/roce_sniff.py.

With `rxe`, side B runs rdma_rxe and only the slow-receiver round runs: a receiver that
reports no credits, against which the transfer still completes, through RNR NAKs; then
again with B reposting SLOW_DELAY late, longer than A's seven retries of RNR waits last.

With `librrxe`, side B's server runs through librrxe, the project's provider, and only the
credits-on round runs: B's reposts, which the stock provider makes in its ring unseen until
rrxe's next recheck of the queue, ring the receive doorbell rrxe asks for while A is held
(Documentation/rrxe/uverbs-abi.rst), and the round's time is printed beside the stock one.
B reposts its whole depth at once in that round, DELAY after the last of the messages
arrived: rrxe asks for the doorbell once the ring is back at the depth its consumer keeps,
which a receiver reposting one at a time, DELAY apart, reaches only when no recheck of the
queue came in between (on release guests 0 to 5 times in 300 messages).
"""
import json
import os
import random
import socket
import subprocess
import sys
import time
import traceback

from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import RecvWR, SGE, SendWR
import pyverbs.enums as e

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
import ctl_channel  # noqa: E402 - selftests/rrxe/lib, found through the line above
import roce_sniff  # noqa: E402
import tap  # noqa: E402
from tap import report  # noqa: E402

# make soak sends 1,000; make check 300, which show the same (each Send is a round trip
# with the slow receiver, so the count sets the time).
N = int(os.environ.get("CREDITS_N", "1000" if tap.SOAK else "300"))
# rdma_rxe's round only shows the transfer completing: fewer messages do.
N_RXE = int(os.environ.get("CREDITS_N_RXE", "300" if tap.SOAK else "100"))
# Then a receiver slower than A's retry_cnt RNR periods: rdma_rxe follows each RNR NAK with
# a PSN sequence error NAK of the same PSN, and before A stopped counting those against its
# retry counter, a receiver reposting 20 ms late failed it (RETRY_EXC_ERR at the 5th of 30
# Sends on release guests; 2 ms failed a CI run once, in a loaded host's stall). Release
# guests draw 4 to 8 RNR NAKs a Send at 50 ms; debug guests, whose RNR period (a window
# resent and dropped) lasts about the delay, about one, and so do not tell the two apart.
SLOW_N, SLOW_DELAY = 30, 0.05
SIZE = 4096
DEPTH = 2
DELAY = 0.002
SRQ_N = 32
MTU = e.IBV_MTU_1024
# perftest's RNR timer 12 (0.64 ms) and infinite RNR retry (the off round must survive its
# RNR NAK storm); Local ACK Timeout 15 (134 ms) rather than perftest's 14: two debug-kernel
# guests under TCG see stalls beyond 67 ms, each a spurious retransmission (and, with
# credits, the end of a hold: the requester holds a limited message for one timeout).
ACK_TIMEOUT, MIN_RNR_TIMER, RNR_RETRY = 15, 12, 7
PARAM = "/sys/module/rrxe/parameters/credits"
PCAP = "/run/results/wire.pcap"
# The stock provider's credits-on figures, for the librrxe round (a later process) to compare.
STOCK_FIGURES = "/tmp/credits-stock.json"
WC_SUCCESS = 0
# A block the messages are cut from: message i is its index and SIZE - 4 bytes of the
# block from offset i % 997, so every message differs and none is constant.
BLOCK = random.Random(4791).randbytes(SIZE + 1024)


def message(i):
    return i.to_bytes(4, "big") + BLOCK[i % 997:i % 997 + SIZE - 4]


def counters(dev):
    out = subprocess.run(["rdma", "-j", "statistic", "show", "link", f"{dev}/1"],
                         capture_output=True, text=True, check=True).stdout
    return {k: v for k, v in json.loads(out)[0].items() if isinstance(v, int)}


def delta(before, after, *names):
    return {n: after.get(n, 0) - before.get(n, 0) for n in names}


class Side:
    """A device's PD, CQ and buffers, and one RC QP at a time."""

    def __init__(self, dev, gid_index, nbufs):
        self.dev, self.gid_index = dev, gid_index
        self.ctx = Context(name=dev)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, max(2 * N, 2048))
        self.mr = MR(self.pd, nbufs * SIZE, e.IBV_ACCESS_LOCAL_WRITE)
        self.gid = str(self.ctx.query_gid(1, gid_index))
        self.qp = self.srq = None

    def open_qp(self, srq=False):
        for o in (self.qp, self.srq):
            if o is not None:
                o.close()
        self.qp = self.srq = None
        while self.cq.poll(64)[0] > 0:
            pass
        if srq:
            self.srq = SRQ(self.pd, SrqInitAttr(SrqAttr(max_wr=SRQ_N, max_sge=1)))
        cap = QPCap(max_send_wr=N, max_recv_wr=0 if srq else DEPTH, max_send_sge=1,
                    max_recv_sge=1)
        init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap)
        if srq:
            init.srq = self.srq
        self.qp = QP(self.pd, init)
        a = QPAttr(port_num=1)
        a.qp_state = e.IBV_QPS_INIT
        a.pkey_index = 0
        a.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
        self.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT
                       | e.IBV_QP_ACCESS_FLAGS)
        self.psn = (self.qp.qp_num * 7919) & 0xFFFFFF
        return {"qpn": self.qp.qp_num, "psn": self.psn, "gid": self.gid}

    def connect(self, peer):
        gr = GlobalRoute(dgid=GID(peer["gid"]), sgid_index=self.gid_index)
        a = QPAttr(port_num=1)
        a.qp_state = e.IBV_QPS_RTR
        a.path_mtu = MTU
        a.dest_qp_num = peer["qpn"]
        a.rq_psn = peer["psn"]
        a.max_dest_rd_atomic = 1
        a.min_rnr_timer = MIN_RNR_TIMER
        a.ah_attr = AHAttr(port_num=1, is_global=1, gr=gr, sl=0)
        self.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN
                       | e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
        a = QPAttr(port_num=1)
        a.qp_state = e.IBV_QPS_RTS
        a.sq_psn = self.psn
        a.timeout = ACK_TIMEOUT
        a.retry_cnt = 7
        a.rnr_retry = RNR_RETRY
        a.max_rd_atomic = 1
        self.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN | e.IBV_QP_TIMEOUT
                       | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY | e.IBV_QP_MAX_QP_RD_ATOMIC)

    def poll_one(self, deadline):
        # Sleeps between empty polls: a busy loop would take a vCPU from the kernel work
        # that moves the packets (two guests share two host cores).
        while True:
            got, wcs = self.cq.poll(1)
            if got:
                return wcs[0]
            if time.monotonic() > deadline:
                return None
            time.sleep(0.0005)

    def post_recv(self, slot):
        wr = RecvWR(wr_id=slot, num_sge=1, sg=[SGE(self.mr.buf + slot * SIZE, SIZE,
                                                   self.mr.lkey)])
        if self.srq is not None:
            self.srq.post_recv(wr)
        else:
            self.qp.post_recv(wr)


# ---------------------------------------------------------------------------------------
# Side B.


def receive(side, n, depth, delay, deadline, batch=False):
    """Takes n messages, each into slot i % depth, checked, then reposted after `delay`;
    with `batch`, the depth's slots together, `delay` after the last of them was taken."""
    errors = []
    for i in range(n):
        wc = side.poll_one(deadline)
        if wc is None:
            errors.append(f"message {i}: no completion")
            break
        slot = i % depth
        got = side.mr.read(SIZE, slot * SIZE) if wc.status == WC_SUCCESS else b""
        if wc.status != WC_SUCCESS or wc.wr_id != slot or wc.byte_len != SIZE \
                or got != message(i):
            seen = int.from_bytes(got[:4], "big") if got else None
            errors.append(f"message {i}: status {wc.status} slot {wc.wr_id} len "
                          f"{wc.byte_len} holds message {seen}")
            if len(errors) > 5:
                break
        if batch and slot != depth - 1 and i != n - 1:
            continue
        if delay:
            time.sleep(delay)
        for k in range(slot + 1) if batch else [slot]:
            side.post_recv(k)
    return errors


def serve(dev, gid_index, port):
    side = Side(dev, gid_index, max(DEPTH, SRQ_N))
    srv = socket.create_server(("", port))
    conn, _ = srv.accept()
    f = conn.makefile("rw")
    job = None

    def reply(obj):
        f.write(json.dumps(obj) + "\n")
        f.flush()

    for line in f:
        req = json.loads(line)
        cmd = req["cmd"]
        try:
            if cmd == "open":
                if req.get("credits") is not None and os.path.exists(PARAM):
                    with open(PARAM, "w") as p:
                        p.write("1" if req["credits"] else "0")
                info = side.open_qp(srq=req.get("srq", False))
                for slot in range(req["depth"]):
                    side.post_recv(slot)
                reply(info)
            elif cmd == "connect":
                side.connect(req["peer"])
                reply({"ok": True})
            elif cmd == "run":
                # Answers at once, then receives; "result" is read when they are in.
                before = counters(dev)
                reply({"ok": True})
                errors = receive(side, req["n"], req["depth"], req["delay"],
                                 time.monotonic() + req["wait"], req.get("batch", False))
                job = {"errors": errors,
                       "counters": delta(before, counters(dev), "rnr_naks_sent",
                                         "unsolicited_acks", "rcvd_pkts", "rcvd_queue_full",
                                         "duplicate_requests", "out_of_seq_requests",
                                         "seq_naks_sent", "recv_doorbells",
                                         "recv_doorbell_acks")}
            elif cmd == "result":
                reply(job)
            elif cmd == "bye":
                reply({"ok": True})
                break
            else:
                reply({"error": f"unknown command {cmd}"})
        except Exception:  # noqa: BLE001
            reply({"error": traceback.format_exc()})
    if os.path.exists(PARAM):
        with open(PARAM, "w") as p:
            p.write("1")


# ---------------------------------------------------------------------------------------
# Side A.


def wire_since(offset):
    """The decoded RoCE packets of the wire's pcap from byte `offset` on, each with its
    capture time ("t", seconds)."""
    pkts = []
    for t, fr in roce_sniff.pcap_packets(PCAP, offset):
        p = roce_sniff.decode(fr)
        if p:
            p["t"] = t
            pkts.append(p)
    return pkts


def rnr_waits(pkts, host, fig):
    """For each RNR NAK B sent A in a round, the time until A's retry of the refused PSN
    appeared on the wire, and the minimum RNR NAK timer the NAK named (IBA 9.7.5.2.8,
    table 45), both in seconds: [(wait, timer)]. A NAK answered by another NAK of the same
    PSN before any retry counts from the later one."""
    waiting, waits = {}, []
    for p in pkts:
        if p["src"] == host and p["qp"] == fig["qpn"] and p.get("aeth", {}).get("type") == "rnr":
            timer = roce_sniff.RNR_TIMER_10US[p["aeth"]["value"]] * 10e-6
            waiting[p["psn"]] = (p["t"], timer)
        elif p["dst"] == host and p["qp"] == fig["peer_qpn"] and p["psn"] in waiting:
            t, timer = waiting.pop(p["psn"])
            waits.append((p["t"] - t, timer))
    return waits


def acks_to(pkts, src, qpn):
    """The AETH-carrying packets from `src` to QP `qpn` (both VMs number their QPs alike:
    the address tells the directions apart)."""
    return [p for p in pkts if p["src"] == src and p["qp"] == qpn and "aeth" in p]


def refused_sends(pkts, host, fig):
    """B's RNR NAKs in a round, each as (SSN of the Send refused, the highest LSN that B's
    ACKs had announced before it). A's Sends are SIZE / 1024 packets each from the PSN A
    started at, so a NAK's PSN names its message; an ACK's MSN + credits (IBA 9.7.7.2,
    table 17-8) is the last SSN B has a receive for."""
    per_msg = SIZE // 1024
    lsn, refused = 0, []
    for p in pkts:
        if p["src"] != host or p["qp"] != fig["qpn"] or "aeth" not in p:
            continue
        a = p["aeth"]
        if a["type"] == "ack" and a["value"] != roce_sniff.NO_CREDIT_INFO:
            lsn = max(lsn, a["msn"] + roce_sniff.CREDITS[a["value"]])
        elif a["type"] == "rnr":
            refused.append((((p["psn"] - fig["psn"]) & 0xFFFFFF) // per_msg + 1, lsn))
    return refused


def slow_round(side, peer, name, credits, n, depth, srq=False, delay=DELAY, batch=False):
    """One slow-receiver round (with `batch`, B reposts its depth at once); returns
    (figures, pkts) or None if it could not run."""
    offset = os.path.getsize(PCAP) if os.path.exists(PCAP) else None
    info = peer("open", credits=credits, depth=depth, srq=srq)
    mine = side.open_qp()
    peer("connect", peer=mine)
    side.connect(info)
    side.mr.write(b"".join(message(i) for i in range(n)), n * SIZE, 0)
    a0 = counters(side.dev)
    # Both sides give up after this long: B waits for every message it was promised, so a
    # round A has lost would otherwise hold the boot for B's whole wait. The slowest round
    # measured, 1,000 Sends on debug guests with credits off, took 99 s.
    wait = 120 + n // 2
    peer("run", n=n, depth=depth, delay=delay, wait=wait, batch=batch)
    t0 = time.monotonic()
    for i in range(n):
        wr = SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(side.mr.buf + i * SIZE, SIZE, side.mr.lkey)])
        wr.send_flags = e.IBV_SEND_SIGNALED
        side.qp.post_send(wr)
    statuses = []
    deadline = time.monotonic() + wait
    while len(statuses) < n:
        wc = side.poll_one(deadline)
        if wc is None:
            break
        statuses.append(wc.status)
    elapsed = time.monotonic() - t0
    b = peer("result")
    a = delta(a0, counters(side.dev), "credit_holds", "limited_probes", "rnr_naks_rcvd",
              "retransmitted_pkts", "sent_pkts", "ack_timeouts", "seq_naks_rcvd",
              "duplicate_responses", "retry_exceeded", "rnr_retry_exceeded")
    ok = len(statuses) == n and all(s == WC_SUCCESS for s in statuses) and not b["errors"]
    first_bad = next((i for i, s in enumerate(statuses) if s != WC_SUCCESS), None)
    report(ok, f"{name}: {n} Sends of {SIZE} B into {depth} receive(s) reposted after "
               f"{delay * 1000:g} ms arrive in order, data verified",
           f"{len(statuses)} completed in {elapsed:.2f} s, statuses {sorted(set(statuses))} "
           f"(first not successful: {first_bad}), B: {b['errors']}\nA: {a}\n"
           f"B: {b['counters']}")
    fig = {"elapsed": elapsed, "a": a, "b": b["counters"], "qpn": mine["qpn"],
           "psn": mine["psn"], "peer_qpn": info["qpn"]}
    tap.diag(f"{name}: {elapsed:.2f} s; B sent {b['counters']['rnr_naks_sent']} RNR NAKs and "
             f"{b['counters']['unsolicited_acks']} unsolicited ACKs; A held {a['credit_holds']} "
             f"times, probed {a['limited_probes']}, sent {a['sent_pkts']} packets "
             f"({a['retransmitted_pkts']} again), got {a['rnr_naks_rcvd']} RNR NAKs")
    tap.diag(f"{name}: A {a}, B {b['counters']}")
    pkts = wire_since(offset) if offset is not None else None
    return fig, pkts


def credit_values(acks):
    return [p["aeth"]["value"] for p in acks if p["aeth"]["type"] == "ack"]


def librrxe_round(side, peer):
    """Credits on with B's server through librrxe: its receive doorbells."""
    fig, _ = slow_round(side, peer, "credits on, B through librrxe", True, N, DEPTH, batch=True)
    b = fig["b"]
    report(b["recv_doorbells"] > 0 and fig["a"]["credit_holds"] > 0
           and 0 < b["recv_doorbell_acks"] <= b["unsolicited_acks"],
           "credits on, B through librrxe: B's reposts rang receive doorbells, whose "
           "unsolicited ACKs, sent from the system calls, released A's holds",
           f"A {fig['a']}, B {b}")
    try:
        with open(STOCK_FIGURES) as f:
            stock = json.load(f)
        tap.diag(f"slow receiver, {N} x {SIZE} B, {DEPTH} receives, credits on: B through "
                 f"librrxe, reposting {DEPTH} at once, {fig['elapsed']:.2f} s, {b['recv_doorbells']} doorbells "
                 f"({b['recv_doorbell_acks']} sent the update), "
                 f"{b['rnr_naks_sent']} RNR NAKs, {b['unsolicited_acks']} unsolicited ACKs; "
                 f"through the stock provider, reposting one at a time, "
                 f"{stock['elapsed']:.2f} s, "
                 f"{stock['rnr_naks_sent']} RNR NAKs, {stock['unsolicited_acks']} unsolicited "
                 f"ACKs")
    except (OSError, ValueError, KeyError):
        pass


def client(dev, gid_index, host, port, peer_kind):
    rxe_peer = peer_kind == "rxe"
    tap.begin(f"end-to-end credits, {N_RXE if rxe_peer else N} Sends to a slow receiver"
              + {"rxe": " (rdma_rxe)", "librrxe": " (through librrxe)"}.get(peer_kind, ""))
    side = Side(dev, gid_index, N)
    peer = ctl_channel.connect(host, port, "cmd").call

    no_pcap = "no pcap of the wire (make check's boot writes " + PCAP + ")"
    try:
        if peer_kind == "librrxe":
            librrxe_round(side, peer)
        elif rxe_peer:
            fig, pkts = slow_round(side, peer, "rdma_rxe receiver", None, N_RXE, DEPTH)
            report(fig["a"]["rnr_naks_rcvd"] > 0 and fig["a"]["credit_holds"] == 0,
                   "... it reports no credits: A sends unlimited and recovers through RNR "
                   "NAKs", str(fig["a"]))
            if pkts is None:
                tap.skip("... on the wire: its ACKs say \"no credit information\"", no_pcap)
            else:
                vals = credit_values(acks_to(pkts, host, fig["qpn"]))
                report(vals and set(vals) == {roce_sniff.NO_CREDIT_INFO},
                       "... on the wire: its ACKs say \"no credit information\"",
                       f"credit codes {sorted(set(vals))}")
            slow, _ = slow_round(side, peer, "rdma_rxe receiver, slower", None, SLOW_N, DEPTH,
                                 delay=SLOW_DELAY)
            a = slow["a"]
            report(a["rnr_naks_rcvd"] > 0 and a["seq_naks_rcvd"] >= a["rnr_naks_rcvd"] // 2
                   and a["retry_exceeded"] == 0,
                   f"... {a['rnr_naks_rcvd']} RNR NAKs, {a['seq_naks_rcvd']} sequence error "
                   f"NAKs behind them, and A's retry counter never ran out", str(a))
        else:
            on, on_pkts = slow_round(side, peer, "credits on", True, N, DEPTH)
            with open(STOCK_FIGURES, "w") as f:
                json.dump({"elapsed": on["elapsed"], **on["b"]}, f)
            off, off_pkts = slow_round(side, peer, "credits off", False, N, DEPTH)
            # How many RNR NAKs credits leave depends on the hosts: A holds a Send that
            # is past its credits for at most 64 ms, then probes with it, and B refuses the
            # probe if its next receive is later than that (B's period per message in a
            # debug guest is close to it, and a loaded host stretches it). What never
            # depends on timing is checked on the wire below: B refuses no Send its credits
            # promised, A sends past them only as a probe.
            tap.diag(f"credits on: {on['b']['rnr_naks_sent']} RNR NAKs for {N} Sends, "
                     f"{on['a']['limited_probes']} probes after {on['a']['credit_holds']} "
                     f"holds")
            report(on["a"]["credit_holds"] > 0 and on["b"]["unsolicited_acks"] > 0,
                   "credits on: A held Sends back for credits and B's unsolicited ACKs "
                   "released them (counted in rdma statistic)", f"{on['a']} {on['b']}")
            report(off["b"]["rnr_naks_sent"] >= N // 10
                   and off["b"]["rnr_naks_sent"] > on["b"]["rnr_naks_sent"],
                   f"credits off: the RNR NAK storm credits prevent, at least {N // 10} "
                   f"({off['b']['rnr_naks_sent']} RNR NAKs against "
                   f"{on['b']['rnr_naks_sent']})", str(off))
            tap.diag(f"slow receiver, {N} x {SIZE} B, {DEPTH} receives: credits on "
                     f"{on['elapsed']:.2f} s / {on['b']['rnr_naks_sent']} RNR NAKs, credits off "
                     f"{off['elapsed']:.2f} s / {off['b']['rnr_naks_sent']} RNR NAKs")
            srq, srq_pkts = slow_round(side, peer, "QP on an SRQ", True, SRQ_N, SRQ_N,
                                       srq=True, delay=0)
            report(srq["b"]["unsolicited_acks"] == 0,
                   "QP on an SRQ: no unsolicited ACK", str(srq["b"]))
            if on_pkts is None:
                tap.skip("on the wire: credits tracked, 11111b when off and on an SRQ", no_pcap)
            else:
                acks = acks_to(on_pkts, host, on["qpn"])
                vals = credit_values(acks)
                report(vals and max(vals) <= DEPTH and 0 in vals and max(vals) > 0,
                       f"on the wire, credits on: every ACK carries a real credit code within "
                       f"0..{DEPTH}, the receive queue's depth, reaching both 0 and more",
                       f"{len(vals)} ACKs, codes {sorted(set(vals))}")
                refused = refused_sends(on_pkts, host, on)
                promised = [(ssn, lsn) for ssn, lsn in refused if ssn <= lsn]
                report(not promised and len({ssn for ssn, _ in refused})
                       <= on["a"]["limited_probes"],
                       f"... B refused no Send its credits had promised, and only Sends A "
                       f"sent past its credits as probes ({len(refused)} RNR NAKs, "
                       f"{on['a']['limited_probes']} probes)",
                       f"refused within credits (SSN, LSN): {promised[:10]}; refused SSNs "
                       f"{sorted({ssn for ssn, _ in refused})[:20]}")
                msns = [p["aeth"]["msn"] for p in acks if p["opcode"] == 0x11]
                report(msns and msns == sorted(msns) and msns[-1] == N & 0xFFFFFF,
                       f"... their MSNs climb to {N}, one per message", str(msns[-3:]))
                # An unsolicited ACK repeats the PSN of the ACK before it (IBA 9.7.7.2.4).
                # RNR NAKs (an Acknowledge too) carry the refused PSN, not the last ACKed.
                plain = [p for p in acks if p["opcode"] == 0x11 and p["aeth"]["type"] == "ack"]
                dup = sum(1 for a, b in zip(plain, plain[1:]) if b["psn"] == a["psn"])
                report(dup >= on["b"]["unsolicited_acks"] - 1 > 0,
                       "... B's unsolicited ACKs are on the wire (repeated PSN, new credits)",
                       f"{dup} seen, {on['b']['unsolicited_acks']} counted")
                vals = credit_values(acks_to(off_pkts, host, off["qpn"]))
                report(vals and set(vals) == {roce_sniff.NO_CREDIT_INFO},
                       "... credits off: every ACK says \"no credit information\" (11111b)",
                       f"codes {sorted(set(vals))}")
                # The RNR NAK timer is a minimum (IBA 9.7.5.2.8): A's timer starts when A
                # has the NAK, after the wire saw it, so no retry may show up sooner.
                waits = rnr_waits(off_pkts, host, off)
                early = sorted(w for w in waits if w[0] < w[1])
                report(len(waits) >= N // 10 and not early,
                       f"... credits off: A waited at least the RNR NAK timer before each "
                       f"retry ({len(waits)} retries, shortest wait "
                       f"{min(waits, default=(0, 0))[0] * 1e3:.2f} ms)",
                       f"{len(early)} early, (wait, timer) s: {early[:5]}")
                vals = credit_values(acks_to(srq_pkts, host, srq["qpn"]))
                report(vals and set(vals) == {roce_sniff.NO_CREDIT_INFO},
                       "... QP on an SRQ: every ACK says \"no credit information\"",
                       f"codes {sorted(set(vals))}")
    except Exception:  # noqa: BLE001
        report(False, "credits", traceback.format_exc())
    try:
        peer("bye")
    except Exception:  # noqa: BLE001
        pass
    return tap.done()


def main():
    mode = sys.argv[1]
    if mode == "server":
        serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return 0
    return client(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]),
                  sys.argv[6] if len(sys.argv) > 6 else None)


if __name__ == "__main__":
    sys.exit(main())
