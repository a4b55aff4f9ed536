#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A third sender on the wire: sprays hand-made RoCEv2 packets at a peer's live RC QP and
at its UDP port 4791, for selftests/rrxe/spray-peer.sh. IPv4; root (raw sockets).

    roce_spray.py PHASE DEST SRC FOREIGN QPN RQ_PSN SQ_PSN N SEED

DEST is the victim's address, SRC this host's (the QP's path leads to it), FOREIGN an
address that is not the QP's path; QPN the victim QP, RQ_PSN and SQ_PSN the PSNs it expects
of requests and of responses (the first three classes take PSNs within 64 of them); N
packets per class; SEED makes the run repeatable. PHASE "qp" sends the classes aimed at the
live QP, "port" the ones that reach no QP. Prints one "CLASS COUNT" line per class sent.
The classes, and the counters of the victim they move (the drop counters by exactly COUNT;
the PSN rules' counters by at least COUNT, as the live connection's own retransmissions
count there too):

  qp:
    foreign   well-formed requests and responses of every RC kind from FOREIGN, with a
              right ICRC: rcvd_wrong_path (IBA 9.6.1.1: not over the QP's path)
    pkey      the same from SRC with a P_Key of another partition: rcvd_pkey_violations
              (10.9.3)
    fuzz      random opcode, flags, P_Key, length and bytes from FOREIGN with a right ICRC:
              one drop each, in whichever counter catches it first
    stale     well-formed packets over the QP's path (from SRC, default P_Key), requests
              and responses in turn, 2^20 to 2^22 PSNs behind the QP's: each request a
              duplicate (IBA 9.7.5.1.5: duplicate_requests; a Send or Write acknowledged
              again, a Read or atomic with no saved state to replay dropped), each
              response a ghost (9.7.6.1.2: rcvd_ignored_responses, or
              duplicate_responses for Read data and atomic ACKs); none executed
    ahead     the same 2^20 to 2^22 PSNs ahead: requests out of sequence
              (9.7.5.1.3: out_of_seq_requests, the first of a run answered with one
              sequence NAK), responses for PSNs never sent (ignored or duplicate
              responses as above)
  Their R_Keys, VAs and lengths are random too: a request at an implausible PSN is
  dropped before any key is looked at. (One at the exact ePSN with a bad key breaks
  the connection, as selftests/rrxe/qp.py shows; a live connection's ePSN moves too fast to
  aim at.)
  port:
    no-qp     well-formed Sends from SRC to QPNs nothing has: rcvd_no_qp
    bad-icrc  a well-formed Send from SRC whose ICRC is wrong: wire_icrc_errors
    runt      1 to 15 bytes (less than a BTH and an ICRC): wire_truncated
"""
import ipaddress
import os
import random
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from roce_send import PORT, SPORT, csum, icrc  # noqa: E402

# Well-formed RC packets (IBA 9.2-9.4), each whole in itself: one that is only part of a
# message (a First or Middle) would have to be a full PMTU long, and rrxe's parser drops
# a packet whose lengths disagree before it looks for a QP.


def reth(rng, length):
    return struct.pack("!QII", rng.randrange(1 << 64), rng.randrange(1 << 32), length)


def payload(rng):
    return rng.randbytes(4 * rng.randrange(1, 64))


def send_only(rng):
    return 0x04, payload(rng)


def send_only_imm(rng):
    return 0x05, rng.randbytes(4) + payload(rng)


def send_last(rng):
    return 0x02, payload(rng)


def send_only_inv(rng):
    return 0x17, rng.randbytes(4) + payload(rng)


def write_only(rng):
    data = payload(rng)
    return 0x0A, reth(rng, len(data)) + data


def write_only_imm(rng):
    data = payload(rng)
    return 0x0B, reth(rng, len(data)) + rng.randbytes(4) + data


def read_request(rng):
    return 0x0C, reth(rng, rng.randrange(1, 1 << 16))


def atomic(rng):
    eth = struct.pack("!QIQQ", rng.randrange(1 << 61) << 3, rng.randrange(1 << 32),
                      rng.randrange(1 << 64), rng.randrange(1 << 64))
    return rng.choice((0x13, 0x14)), eth


def aeth(rng, nak=False):
    """An ACK with a credit count; with nak, also an RNR NAK with a timer or a PSN sequence
    error NAK (Read responses and atomic ACKs carry ACKs only)."""
    syndromes = [rng.randrange(0x00, 0x20)]
    if nak:
        syndromes += [rng.randrange(0x20, 0x40), 0x60]
    return struct.pack("!I", rng.choice(syndromes) << 24 | rng.randrange(1 << 24))


def ack(rng):
    return 0x11, aeth(rng, nak=True)


def read_response_only(rng):
    return 0x10, aeth(rng) + payload(rng)


def atomic_ack(rng):
    return 0x12, aeth(rng) + rng.randbytes(8)


REQUESTS = (send_only, send_only_imm, send_last, send_only_inv, write_only, write_only_imm,
            read_request, atomic)
RESPONSES = (ack, read_response_only, atomic_ack)


class Sprayer:
    def __init__(self, dest, src, seed):
        self.dest = dest
        self.src = src
        self.rng = random.Random(seed)
        self.raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("0.0.0.0", SPORT))
        self.sent = 0
        self.ip_id = 0

    def pace(self):
        # A burst of a few packets, then a pause: the victim, a debug kernel under TCG,
        # must be able to take every one, or the exact counts below would not hold.
        self.sent += 1
        if self.sent % 8 == 0:
            time.sleep(0.004)

    def raw_packet(self, src, body, good_icrc=True):
        """IPv4 + UDP to port 4791 + body (BTH onwards) + ICRC, from any source address."""
        s = ipaddress.ip_address(src).packed
        d = ipaddress.ip_address(self.dest).packed
        udp_len = 8 + len(body) + 4
        self.ip_id = (self.ip_id + 1) & 0xFFFF
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, self.ip_id, 0x4000, 64, 17,
                         0, s, d)
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        udp = struct.pack("!HHHH", SPORT, PORT, udp_len, 0)
        crc = icrc(ip, udp, body)
        if not good_icrc:
            crc = bytes(b ^ 0xA5 for b in crc)
        self.raw.sendto(ip + udp + body + crc, (self.dest, 0))
        self.pace()

    def udp_datagram(self, data):
        self.udp.sendto(data, (self.dest, PORT))
        self.pace()

    def bth(self, opcode, pkey, qpn, psn, flags=0x40):
        """BTH (IBA 9.2): flags carry MigReq (0x40, the Migrated state's value) and no pad;
        AckReq is set on every PSN word."""
        return struct.pack("!BBHII", opcode, flags, pkey, qpn & 0xFFFFFF,
                           0x80000000 | (psn & 0xFFFFFF))

    def rc_packet(self, qpn, rq_psn, sq_psn, pkey, request=None, offsets=(-8, 64)):
        """One well-formed RC request (request True) or response (False; None: either,
        mostly requests) for the QP, its PSN the QP's plus an offset in range(*offsets)."""
        rng = self.rng
        if request is None:
            request = rng.random() < 0.7
        if request:
            opcode, rest = rng.choice(REQUESTS)(rng)
            psn = rq_psn + rng.randrange(*offsets)
        else:
            opcode, rest = rng.choice(RESPONSES)(rng)
            psn = sq_psn + rng.randrange(*offsets)
        return self.bth(opcode, pkey, qpn, psn) + rest

    def foreign(self, foreign, qpn, rq_psn, sq_psn, n):
        for _ in range(n):
            self.raw_packet(foreign, self.rc_packet(qpn, rq_psn, sq_psn, 0xFFFF))

    def pkey(self, qpn, rq_psn, sq_psn, n):
        for _ in range(n):
            # Another partition: the low 15 bits differ from the default's 0x7FFF (a
            # limited 0x7FFF would be a member of the full default partition).
            pkey = self.rng.choice((0x0000, 0x8000)) | self.rng.randrange(0x0001, 0x7FFF)
            self.raw_packet(self.src, self.rc_packet(qpn, rq_psn, sq_psn, pkey))

    def fuzz(self, foreign, qpn, rq_psn, sq_psn, n):
        rng = self.rng
        for _ in range(n):
            # Half of them with an opcode of a defined RC request and transport version 0,
            # so that more get past the parser to the QP's own checks.
            if rng.random() < 0.5:
                opcode, flags = rng.randrange(0x00, 0x18), rng.randrange(256) & 0xF0
            else:
                opcode, flags = rng.randrange(256), rng.randrange(256)
            body = struct.pack("!BBHII", opcode, flags, rng.randrange(0x10000),
                               qpn & 0xFFFFFF, rng.randrange(1 << 32))
            body += rng.randbytes(rng.randrange(0, 300))
            self.raw_packet(foreign, body)

    def own_path(self, qpn, rq_psn, sq_psn, n, offsets):
        """Requests and responses in turn over the QP's path at PSNs offset by
        range(*offsets) from the QP's."""
        for i in range(n):
            self.raw_packet(self.src, self.rc_packet(qpn, rq_psn, sq_psn, 0xFFFF,
                                                     request=i % 2 == 0, offsets=offsets))

    def no_qp(self, n):
        for i in range(n):
            # 0xF00000 up: far above the QPNs a test device hands out (and below the
            # multicast QPN 0xFFFFFF).
            body = self.bth(0x04, 0xFFFF, 0xF00000 + i, self.rng.randrange(1 << 24))
            self.raw_packet(self.src, body + self.rng.randbytes(16))

    def bad_icrc(self, n):
        for _ in range(n):
            body = self.bth(0x04, 0xFFFF, 0x11, self.rng.randrange(1 << 24))
            self.raw_packet(self.src, body + self.rng.randbytes(16), good_icrc=False)

    def runt(self, n):
        for _ in range(n):
            self.udp_datagram(self.rng.randbytes(self.rng.randrange(1, 16)))


def main():
    if len(sys.argv) != 10:
        sys.exit(__doc__)
    phase, dest, src, foreign = sys.argv[1:5]
    qpn, rq_psn, sq_psn, n, seed = (int(a, 0) for a in sys.argv[5:10])
    s = Sprayer(dest, src, seed)
    if phase == "qp":
        s.foreign(foreign, qpn, rq_psn, sq_psn, n)
        print("foreign", n)
        s.pkey(qpn, rq_psn, sq_psn, n)
        print("pkey", n)
        s.fuzz(foreign, qpn, rq_psn, sq_psn, n)
        print("fuzz", n)
        s.own_path(qpn, rq_psn, sq_psn, n, (-(1 << 22), -(1 << 20)))
        print("stale", n)
        s.own_path(qpn, rq_psn, sq_psn, n, (1 << 20, 1 << 22))
        print("ahead", n)
    elif phase == "port":
        s.no_qp(n)
        print("no-qp", n)
        s.bad_icrc(n)
        print("bad-icrc", n)
        s.runt(n)
        print("runt", n)
    else:
        sys.exit("unknown phase " + phase)


if __name__ == "__main__":
    main()
