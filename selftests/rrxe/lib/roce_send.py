#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Sends hand-made RoCEv2 packets to a peer's UDP port 4791, for the wire tests.

    roce_send.py KIND DEST [SRC]
    roce_send.py send DEST SRC QPN PSN PKEY PAYLOAD

KIND is one of
  garbage    a 7-byte UDP datagram (shorter than a BTH and an ICRC)
  short      a BTH and a 3-byte "ICRC" (one byte short)
  bad-icrc   a BTH, 8 payload bytes and a wrong ICRC
  good       a BTH, 8 payload bytes and the right ICRC (raw socket: the ICRC covers the IP
             header, whose ID and length must therefore be chosen here)
  send       an RC SEND Only with AckReq to QP QPN at PSN PSN with P_Key PKEY (numbers in
             any base Python reads, 0x.. for hex) carrying PAYLOAD (ASCII, padded with
             NULs to a multiple of 4 bytes), with the right ICRC
  write      the same as an RDMA WRITE Only to R_Key RKEY at virtual address 0x1000:
             roce_send.py write DEST SRC QPN PSN PKEY RKEY PAYLOAD
DEST and SRC are IPv4 or IPv6 addresses; SRC (which need not be one of this host's) is
needed for "good", "send" and "write".
"""
import ipaddress
import os
import socket
import struct
import sys
import zlib

PORT = 4791
SPORT = 0xC121
# RC SEND Only, P_Key 0xFFFF, dest QP 0x11, AckReq, PSN 0x21e9e0 (as rdma_rxe sends it).
BTH = bytes.fromhex("0400ffff000000118021e9e0")
PAYLOAD = b"rrxe-net"


def icrc(ip, udp, bth_to_pad):
    """IBA A17.4: CRC-32 over a masked LRH (8 x 0xFF), IP and UDP headers, BTH..pad."""
    ip = bytearray(ip)
    if ip[0] >> 4 == 4:
        ip[1] = 0xFF  # TOS
        ip[8] = 0xFF  # TTL
        ip[10:12] = b"\xff\xff"  # checksum
    else:
        ip[0] |= 0x0F  # traffic class, flow label
        ip[1:4] = b"\xff\xff\xff"
        ip[7] = 0xFF  # hop limit
    udp = bytearray(udp)
    udp[6:8] = b"\xff\xff"
    bth = bytearray(bth_to_pad)
    bth[4] = 0xFF
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth)))


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def rc_bth(opcode, qpn, psn, pkey):
    """An RC BTH with AckReq (IBA 9.2)."""
    return struct.pack("!BBHII", opcode, 0x00, pkey, qpn & 0xFFFFFF,
                       0x80000000 | (psn & 0xFFFFFF))


def rc_write_only(qpn, psn, pkey, rkey, length):
    """The BTH and RETH (IBA 9.3.3) of an RC RDMA WRITE Only (opcode 0x0A) with AckReq."""
    return rc_bth(0x0A, qpn, psn, pkey) + struct.pack("!QII", 0x1000, rkey, length)


def padded(text):
    """ASCII text as a payload, padded with NULs to a multiple of 4 bytes (no PadCnt)."""
    data = text.encode()
    return data + b"\0" * (-len(data) % 4)


def good(dest, src, bth=BTH, payload=PAYLOAD):
    d = ipaddress.ip_address(dest)
    s = ipaddress.ip_address(src)
    body = bth + payload
    udp_len = 8 + len(body) + 4
    if d.version == 4:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0x1234, 0x4000, 64, 17, 0,
                         s.packed, d.packed)
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        udp = struct.pack("!HHHH", SPORT, PORT, udp_len, 0)
        pkt = ip + udp + body + icrc(ip, udp, body)
        sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        sock.sendto(pkt, (dest, 0))
    else:
        ip = struct.pack("!IHBB16s16s", 6 << 28, udp_len, 17, 64, s.packed, d.packed)
        udp = struct.pack("!HHHH", SPORT, PORT, udp_len, 0)
        data = body + icrc(ip, udp, body)
        pseudo = s.packed + d.packed + struct.pack("!IxxxB", udp_len, 17)
        ck = csum(pseudo + udp + data) or 0xFFFF
        udp = struct.pack("!HHHH", SPORT, PORT, udp_len, ck)
        # The checksum is masked in the ICRC, so the ICRC computed above still holds.
        sock = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
        sock.sendto(ip + udp + data, (dest, 0))


def udp(dest, data):
    fam = socket.AF_INET6 if ":" in dest else socket.AF_INET
    sock = socket.socket(fam, socket.SOCK_DGRAM)
    sock.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", SPORT))
    sock.sendto(data, (dest, PORT))


def main():
    kind, dest = sys.argv[1], sys.argv[2]
    if kind == "garbage":
        udp(dest, b"garbage")
    elif kind == "short":
        udp(dest, BTH + b"\0\0\0")
    elif kind == "bad-icrc":
        udp(dest, BTH + PAYLOAD + b"\xde\xad\xbe\xef")
    elif kind == "good":
        good(dest, sys.argv[3])
    elif kind == "send":
        qpn, psn, pkey = (int(a, 0) for a in sys.argv[4:7])
        payload = padded(sys.argv[7])
        good(dest, sys.argv[3], rc_bth(0x04, qpn, psn, pkey), payload)  # SEND Only
    elif kind == "write":
        qpn, psn, pkey, rkey = (int(a, 0) for a in sys.argv[4:8])
        payload = padded(sys.argv[8])
        good(dest, sys.argv[3], rc_write_only(qpn, psn, pkey, rkey, len(payload)), payload)
    else:
        sys.exit("unknown kind " + kind)


if __name__ == "__main__":
    main()
