#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Captures RoCEv2 packets on an interface and checks them, for the wire tests.

    roce_sniff.py IFACE SPORT COUNT TIMEOUT OUTFILE

Waits for COUNT IPv4/IPv6 UDP packets to port 4791 from UDP source port SPORT (or TIMEOUT
seconds) and writes one line per packet to OUTFILE:
    v4|v6 SRC DST icrc=ok|bad payload=ok|bad ttl=N df=0|1 ipcsum=ok|bad|- len=N
"""
import socket
import struct
import sys
import time

sys.path.insert(0, __import__("os").path.dirname(__file__))
from roce_send import BTH, PAYLOAD, icrc, csum  # noqa: E402

ETH_P_ALL = 3


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
