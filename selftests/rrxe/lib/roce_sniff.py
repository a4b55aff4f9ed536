#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Captures RoCEv2 packets on an interface and checks them, or decodes a wire's pcap.

    roce_sniff.py IFACE SPORT COUNT TIMEOUT OUTFILE
        Waits for COUNT IPv4/IPv6 UDP packets to port 4791 from UDP source port SPORT (or
        TIMEOUT seconds) and writes one line per packet to OUTFILE:
        v4|v6 SRC DST icrc=ok|bad payload=ok|bad ttl=N df=0|1 ipcsum=ok|bad|- len=N
    roce_sniff.py pcap FILE [OFFSET]
        Decodes the RoCEv2 packets of a pcap (QEMU's filter-dump of the VMs' wire, which
        `make check` writes to results/foundation/wire.pcap and the guests see as
        /run/results/wire.pcap), from byte OFFSET (a record boundary), one line each:
        SRC DST op=0x11 qp=0x000012 psn=0x0000ff ackreq=0|1 migreq=0|1 [aeth=ack/N msn=M]

As a library, pcap_packets() and decode() give the same fields to a test.
"""
import socket
import struct
import sys
import time

sys.path.insert(0, __import__("os").path.dirname(__file__))
from roce_send import BTH, PAYLOAD, icrc, csum  # noqa: E402

ETH_P_ALL = 3

# Opcodes whose header stack carries an AETH (IBA 9.3.5 / table 38): RC and XRC Read
# responses First, Last and Only, Acknowledge and Atomic Acknowledge.
AETH_OPCODES = {0x0D, 0x0F, 0x10, 0x11, 0x12, 0xAD, 0xAF, 0xB0, 0xB1, 0xB2}
# AETH syndrome types (IBA 9.7.5.2.1 / table 44): bits 6:5 of the syndrome.
AETH_TYPES = {0: "ack", 1: "rnr", 2: "reserved", 3: "nak"}
# Table 17-8 (IBA 9.7.7.2): the credits a 5-bit credit code stands for; 31 is "none".
CREDITS = [0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768,
           1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768]
NO_CREDIT_INFO = 0x1F
# Table 45 (IBA 9.7.5.2.8): the minimum RNR NAK timer a 5-bit RNR NAK value stands for, in
# units of 10 us; code 0 is the longest, 655.36 ms.
RNR_TIMER_10US = [65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384,
                  512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576,
                  32768, 49152]


def pcap_packets(path, offset=0):
    """Yields (seconds, frame) for each record of a classic little- or big-endian pcap,
    starting at byte `offset` (0, or a record boundary such as the file's size earlier)."""
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            return
        magic = struct.unpack("<I", head[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            end = "<"
        elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
            end = ">"
        else:
            raise ValueError(f"{path}: not a pcap file")
        nano = magic in (0xA1B23C4D, 0x4D3CB2A1)
        snaplen = struct.unpack(end + "I", head[16:20])[0]
        f.seek(max(offset, 24))
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            sec, frac, incl, orig = struct.unpack(end + "IIII", rec)
            if incl > max(snaplen, 65535) or incl > orig:
                raise ValueError(f"{path}: no pcap record at byte {f.tell() - 16}")
            frame = f.read(incl)
            if len(frame) < incl:
                return
            yield sec + frac / (1e9 if nano else 1e6), frame


def decode(frame):
    """The BTH (and AETH) of a RoCEv2 frame as a dict, or None for any other frame."""
    if len(frame) < 14:
        return None
    etype = struct.unpack("!H", frame[12:14])[0]
    p = frame[14:]
    if etype == 0x0800 and len(p) >= 20 and p[9] == 17:
        ihl = (p[0] & 0xF) * 4
        src = socket.inet_ntop(socket.AF_INET, p[12:16])
        dst = socket.inet_ntop(socket.AF_INET, p[16:20])
        udp = p[ihl:]
    elif etype == 0x86DD and len(p) >= 40 and p[6] == 17:
        src = socket.inet_ntop(socket.AF_INET6, p[8:24])
        dst = socket.inet_ntop(socket.AF_INET6, p[24:40])
        udp = p[40:]
    else:
        return None
    if len(udp) < 8 + 12 or struct.unpack("!H", udp[2:4])[0] != 4791:
        return None
    bth = udp[8:20]
    op = bth[0]
    pkt = {
        "src": src,
        "dst": dst,
        "opcode": op,
        "migreq": (bth[1] >> 6) & 1,
        "qp": struct.unpack("!I", bth[4:8])[0] & 0xFFFFFF,
        "ackreq": bth[8] >> 7,
        "psn": struct.unpack("!I", bth[8:12])[0] & 0xFFFFFF,
    }
    # XRC responses carry no XRCETH; RD (0x40-0x5F) is not spoken here.
    if op in AETH_OPCODES and len(udp) >= 8 + 12 + 4:
        syndrome, msn = udp[20], struct.unpack("!I", udp[20:24])[0] & 0xFFFFFF
        kind = AETH_TYPES[(syndrome >> 5) & 3]
        pkt["aeth"] = {"type": kind, "value": syndrome & 0x1F, "msn": msn}
    return pkt


def describe(pkt):
    line = "%s %s op=0x%02x qp=0x%06x psn=0x%06x ackreq=%d migreq=%d" % (
        pkt["src"], pkt["dst"], pkt["opcode"], pkt["qp"], pkt["psn"], pkt["ackreq"],
        pkt["migreq"])
    if "aeth" in pkt:
        a = pkt["aeth"]
        line += " aeth=%s/%d msn=%d" % (a["type"], a["value"], a["msn"])
    return line


def check(frame, sport):
    etype = struct.unpack("!H", frame[12:14])[0]
    p = frame[14:]
    if etype == 0x0800:
        ihl = (p[0] & 0xF) * 4
        if p[9] != 17:
            return None
        ip, rest = p[:ihl], p[ihl:struct.unpack("!H", p[2:4])[0]]
        fam, src, dst = "v4", socket.inet_ntop(socket.AF_INET, ip[12:16]), socket.inet_ntop(
            socket.AF_INET, ip[16:20])
        ttl, df = ip[8], (ip[6] >> 6) & 1
        ipcsum = "ok" if csum(ip) == 0 else "bad"
    elif etype == 0x86DD:
        if p[6] != 17:
            return None
        ip, rest = p[:40], p[40:40 + struct.unpack("!H", p[4:6])[0]]
        fam, src, dst = "v6", socket.inet_ntop(socket.AF_INET6, ip[8:24]), socket.inet_ntop(
            socket.AF_INET6, ip[24:40])
        ttl, df, ipcsum = ip[7], 0, "-"
    else:
        return None
    sp, dp, ulen, _ = struct.unpack("!HHHH", rest[:8])
    if sp != sport or dp != 4791:
        return None
    udp, body = rest[:8], rest[8:ulen]
    good = icrc(ip, udp, body[:-4]) == body[-4:]
    payload_ok = body[:-4] == BTH + PAYLOAD
    return "%s %s %s icrc=%s payload=%s ttl=%d df=%d ipcsum=%s len=%d" % (
        fam, src, dst, "ok" if good else "bad", "ok" if payload_ok else "bad", ttl, df, ipcsum,
        ulen)


def main():
    if sys.argv[1] == "pcap":
        offset = int(sys.argv[3], 0) if len(sys.argv) > 3 else 0
        for _, frame in pcap_packets(sys.argv[2], offset):
            pkt = decode(frame)
            if pkt:
                print(describe(pkt))
        return
    iface, sport, count, timeout, out = sys.argv[1], int(sys.argv[2], 0), int(sys.argv[3]), \
        float(sys.argv[4]), sys.argv[5]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    open(out + ".ready", "w").close()
    lines = []
    end = time.time() + timeout
    while len(lines) < count and time.time() < end:
        s.settimeout(max(0.1, end - time.time()))
        try:
            frame, addr = s.recvfrom(65535)
        except socket.timeout:
            break
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        r = check(frame, sport)
        if r:
            lines.append(r)
    with open(out, "w") as f:
        f.write("".join(line + "\n" for line in lines))


if __name__ == "__main__":
    main()
