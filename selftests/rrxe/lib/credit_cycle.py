#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Takes apart the slow-receiver runs of a `make bench` wire capture, message by message.

    credit_cycle.py PCAP [BENCH_OUTPUT]

PCAP is the wire of `BENCH_PCAP=FILE BENCH_TABLES=credits make bench`; BENCH_OUTPUT, side A's
output (a.out in the results directory), names the runs in the order they ran. A run is one
perftest connection: RC Send packets to one QP, with no pause of more than half a second.
For each message after the first, from the wire's own timestamps (the host's, as frames
pass between the two guests):

    gap     from the message's last packet to the next one's first (first transmissions only)
    ack     from its last packet to the responder's first ACK whose MSN counts it
    credit  from that ACK to the first ACK with credits (0 when the ACK itself carried them)
    next    from that credit ACK to the next message's first packet

each as median/p90/mean in ms, with the messages, the RNR NAKs and the run's span.
A credit-limited requester waits for ack, credit and next in turn; rdma_rxe's requester
sends on (gap near 0) and pays in RNR NAKs and their timer instead.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from roce_sniff import decode, pcap_packets  # noqa: E402

SEND_FIRST, SEND_LAST, SEND_LAST_IMM, SEND_ONLY, SEND_ONLY_IMM = 0x00, 0x02, 0x03, 0x04, 0x05
ACKNOWLEDGE = 0x11
NO_CREDIT_INFO = 0x1F


def runs(packets):
    """Splits the RC Send packets into runs: [dest QP, source address, first t, last t]."""
    out = []
    for t, p in packets:
        if p["opcode"] > SEND_ONLY_IMM:
            continue
        if not out or out[-1][0] != p["qp"] or t - out[-1][3] > 0.5:
            out.append([p["qp"], p["src"], t, t])
        out[-1][3] = t
    return out


def fmt(v):
    if not v:
        return "-"
    s = sorted(v)
    p90 = s[min(len(s) - 1, int(0.9 * len(s)))]
    return "%.2f/%.2f/%.2f" % (1e3 * statistics.median(s), 1e3 * p90, 1e3 * statistics.mean(s))


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    packets = [(t, p) for t, p in ((t, decode(f)) for t, f in pcap_packets(sys.argv[1])) if p]
    names = []
    if len(sys.argv) == 3:
        with open(sys.argv[2]) as f:
            names = [l.split()[1] for l in f if l.startswith("# ") and " ib_send_bw:" in l]
    print("%-26s %6s %5s %4s  %-17s %-17s %-17s %-17s" % (
        "run", "span s", "msgs", "RNR", "gap", "ack", "credit", "next"))
    for i, (qp, src, t0, t1) in enumerate(runs(packets)):
        data = [(t, p) for t, p in packets
                if p["opcode"] <= SEND_ONLY_IMM and p["qp"] == qp and t0 <= t <= t1]
        acks = [(t, p["aeth"]) for t, p in packets
                if p["opcode"] == ACKNOWLEDGE and p["dst"] == src and "aeth" in p
                and t0 - 0.01 <= t <= t1 + 0.01]
        firsts, lasts, high = [], [], -1
        for t, p in data:
            # Only a PSN's first transmission: retransmissions are not a message's start.
            if p["psn"] <= high:
                continue
            high = p["psn"]
            if p["opcode"] in (SEND_FIRST, SEND_ONLY, SEND_ONLY_IMM):
                firsts.append(t)
            if p["opcode"] in (SEND_LAST, SEND_LAST_IMM, SEND_ONLY, SEND_ONLY_IMM):
                lasts.append(t)
        gap, ack, credit, nxt = [], [], [], []
        for m in range(1, min(len(firsts), len(lasts))):
            last, first = lasts[m - 1], firsts[m]
            gap.append(first - last)
            # MSN m: m messages completed, the m-th being the one that just ended.
            a = next((t for t, e in acks
                      if t >= last and e["type"] == "ack" and e["msn"] >= m), None)
            c = next((t for t, e in acks
                      if last <= t <= first and e["type"] == "ack"
                      and 0 < e["value"] < NO_CREDIT_INFO), None)
            if a is not None and a <= first:
                ack.append(a - last)
            if a is not None and c is not None:
                credit.append(max(0.0, c - a))
                nxt.append(first - c)
        rnr = sum(1 for _, e in acks if e["type"] == "rnr")
        name = names[i] if i < len(names) else "run %d" % (i + 1)
        span = lasts[-1] - firsts[0] if firsts and lasts else 0.0
        print("%-26s %6.2f %5d %4d  %-17s %-17s %-17s %-17s" % (
            name.split(",")[0] + "," + name.split(",")[-1] if "," in name else name, span,
            len(lasts), rnr, fmt(gap), fmt(ack), fmt(credit), fmt(nxt)))
    print("(ms: median/p90/mean of the messages after each run's first)")


if __name__ == "__main__":
    main()
