#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""UD multicast (IBA 10.5) between two VMs, through unmodified tools and plain verbs.

  mcast.py peer PORT                      side B: runs what side A asks, until A says bye
  mcast.py client DEV HOST PORT [rxe]     side A: the checks; TAP output

mckey (librdmacm) joins through rdma_cm, which attaches its QPs and has the kernel send
IGMP; it is judged by what its receivers print ("data transfers complete" only once every
QP got every message; its exit status says nothing). IPv6 groups, Q_Keys, payloads and the
sender's GID in every GRH go through selftests/rrxe/mcast_verbs.c (ibv_attach_mcast), built into
MCAST_VERBS by mcast.sh. IPv6 mckey needs the project's kernel (kernel-patches/0001: the
6.12 rdma_cm refuses IPv6 joins on RoCEv2). With `rxe`, side B runs rdma_rxe and only the
mckey rounds run: rdma_rxe joins no IP group of its own, so plain verbs attach reaches it
only through rdma_cm's joins.

Side B's requests (JSON lines): start a command and wait for a line of its output, finish a
started command, run one to completion, read the device's counters.
"""
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
import ctl_channel  # noqa: E402 - selftests/rrxe/lib, found through the line above
import tap  # noqa: E402
from tap import report  # noqa: E402

TOOL = os.environ.get("MCAST_VERBS", "/tmp/mcast_verbs")
# Both VMs see this checkout (or the kselftest install) at the same path, so side B sources
# the same file whatever its working directory.
GID_SH = os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib", "gid.sh")
GROUP4 = "239.1.2.3"       # mckey's IPv4 group
GROUP6 = "ff0e::db8:1"     # mckey's IPv6 group (needs kernel-patches/0001)
VERBS4 = "239.4.7.91"      # mcast_verbs' IPv4 group
EMPTY4 = "239.4.7.92"      # joined by a UDP socket only: no QP attached
INFLIGHT4 = "239.4.7.93"   # detached while packets arrive
LEFT4 = "239.4.7.94"       # a process exits attached
GONE4 = "239.4.7.95"       # the device goes away attached
VERBS6 = "ff0e::db8:4791"  # mcast_verbs' IPv6 group
QKEY = "0x1234"
COUNT = 100


class Proc:
    """A command whose output lines are collected as they come."""

    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
        self.lines = []
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))
            self.q.put(line)
        self.q.put(None)

    def until(self, pattern, timeout):
        """Whether a line containing `pattern` came within `timeout` seconds."""
        end = time.monotonic() + timeout
        if any(pattern in line for line in self.lines):
            return True
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return False
            try:
                line = self.q.get(timeout=left)
            except queue.Empty:
                return False
            if line is None:
                return False
            if pattern in line:
                return True

    def finish(self, timeout):
        """Waits for the command (killing it after `timeout`); its status and output."""
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = f"killed after {timeout} s"
            self.p.wait()
        time.sleep(0.2)
        return {"rc": rc, "out": "\n".join(self.lines)}


def run(argv, timeout=120):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return {"rc": p.returncode, "out": p.stdout + p.stderr}
    except subprocess.TimeoutExpired as exc:
        return {"rc": f"killed after {timeout} s", "out": str(exc.stdout or "")}


def counters(dev):
    out = subprocess.run(["rdma", "-j", "statistic", "show", "link", f"{dev}/1"],
                         capture_output=True, text=True, check=True).stdout
    return {k: v for k, v in json.loads(out)[0].items() if isinstance(v, int)}


def delta(before, after):
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def maddrs():
    """The netdev's multicast memberships (`ip maddr`: link, inet and inet6 lines)."""
    return run(["ip", "maddr", "show", "dev", "eth0"])["out"]


# ---------------------------------------------------------------------------------------
# Side B.


def peer(port):
    srv = socket.create_server(("", port))
    conn, _ = srv.accept()
    f = conn.makefile("rw")
    procs = {}

    def reply(obj):
        f.write(json.dumps(obj) + "\n")
        f.flush()

    for line in f:
        req = json.loads(line)
        op = req["op"]
        try:
            if op == "start":
                p = Proc(req["argv"])
                procs[req["name"]] = p
                reply({"seen": p.until(req["until"], req["timeout"]),
                       "out": "\n".join(p.lines)})
            elif op == "finish":
                reply(procs.pop(req["name"]).finish(req["timeout"]))
            elif op == "run":
                reply(run(req["argv"], req.get("timeout", 120)))
            elif op == "counters":
                reply(counters(req["dev"]))
            elif op == "maddrs":
                reply({"out": maddrs()})
            elif op == "bye":
                reply({"ok": True})
                break
            else:
                reply({"error": f"unknown op {op}"})
        except Exception:  # noqa: BLE001
            reply({"error": traceback.format_exc()})
    for p in procs.values():
        p.finish(1)


# ---------------------------------------------------------------------------------------
# Side A.


def mckey_complete(res, connections):
    """mckey's receiver printed the end of its transfers and no CM error."""
    out = res["out"]
    return ("data transfers complete" in out and "ERROR" not in out
            and out.count("mckey: joined dgid") == connections)


def client(dev, host, port, rxe_peer):
    local4, peer4 = os.environ["RRXE_LOCAL_IP4"], os.environ["RRXE_PEER_IP4"]
    bdev = "rxe0" if rxe_peer else dev
    tap.begin("UD multicast between two VMs" + (", B on rdma_rxe" if rxe_peer else ""))
    b = ctl_channel.connect(host, port, "op").call

    def gid_index(addr):
        out = run(["bash", "-c", f". {GID_SH}; gid_index {dev} {addr}"])["out"].strip()
        return out

    local6, peer6 = os.environ["RRXE_LOCAL_IP6"], os.environ["RRXE_PEER_IP6"]

    def mckey_round(desc, receiver_is_a, connections, v6=False, count=50, verbs_sender=False,
                    soak=False):
        """One mckey transfer; the receiver has `connections` QPs in the group. With
        `verbs_sender`, B sends with mcast_verbs instead of mckey. A `soak` round runs in
        make soak only: make check keeps one direction per address family."""
        if soak and not tap.SOAK:
            tap.skip(desc, tap.SOAK_ONLY)
            return {}, {}
        group, here, there = (GROUP6, local6, peer6) if v6 else (GROUP4, local4, peer4)
        # mckey's stdout is a pipe here: line-buffer it, or "receiving data transfers"
        # shows only when it exits.
        recv = ["stdbuf", "-oL", "mckey", "-m", group, "-c", str(connections), "-C", str(count)]
        send = ["stdbuf", "-oL", "mckey", "-m", group, "-s", "-C", str(count)]
        a0, b0 = counters(dev), b("counters", dev=bdev)
        if receiver_is_a:
            p = Proc(recv + ["-b", here])
            ready = p.until("receiving data transfers", 60)
            if verbs_sender:
                # mckey's own Q_Key (rdma_cm's RDMA_UDP_QKEY) and message size.
                bgid = b("run", argv=["bash", "-c", f". {GID_SH}; gid_index {bdev} "
                                      + there])["out"].strip()
                mgid = group if v6 else "::ffff:" + group
                sent = b("run", argv=[TOOL, "send", bdev, bgid, mgid, str(count),
                                      "0x01234567", "100"], timeout=60)
            else:
                sent = b("run", argv=send + ["-b", there], timeout=60)
            res = p.finish(60)
        else:
            r = b("start", name="mckey", argv=recv + ["-b", there],
                  until="receiving data transfers", timeout=60)
            ready = r["seen"]
            sent = run(send + ["-b", here], 60)
            res = b("finish", name="mckey", timeout=60)
        a1, b1 = counters(dev), b("counters", dev=bdev)
        report(ready and mckey_complete(res, connections), desc,
               f"receiver ready: {ready}\nreceiver (rc {res['rc']}):\n{res['out']}\n"
               f"sender (rc {sent['rc']}):\n{sent['out']}")
        return delta(a0, a1), delta(b0, b1)

    try:
        if rxe_peer:
            # rdma_rxe sends through mcast_verbs, which waits for its Sends to complete:
            # mckey destroys its AH right after posting, and rdma_rxe (6.12) resolves a UD
            # WQE's AH only when its send task gets to it, so some or all of mckey's
            # datagrams never leave.
            mckey_round("mckey 239.1.2.3: rrxe sends (mckey), 2 QPs on rdma_rxe each get "
                        "all 50", False, 2)
            mckey_round("mckey 239.1.2.3: rdma_rxe sends (verbs), 2 QPs on rrxe each get "
                        "all 50", True, 2, verbs_sender=True, soak=True)
            mckey_round("mckey ff0e::db8:1: rrxe sends (mckey), 2 QPs on rdma_rxe each get "
                        "all 50", False, 2, v6=True, soak=True)
            mckey_round("mckey ff0e::db8:1: rdma_rxe sends (verbs), 2 QPs on rrxe each get "
                        "all 50", True, 2, v6=True, verbs_sender=True)
        else:
            info = run(["ibv_devinfo", "-v", "-d", dev])["out"]
            limits = dict(re.findall(r"(max_\w*mcast\w*):\s+(\d+)", info))
            report(limits == {"max_mcast_grp": "256", "max_mcast_qp_attach": "16",
                              "max_total_mcast_qp_attach": "4096"},
                   "query_device: 256 groups, 16 QPs per group, 4096 attachments", limits)
            a, bd = mckey_round("mckey 239.1.2.3 (IPv4): B sends 50, 3 QPs on A each get all 50",
                                True, 3)
            report(a.get("mcast_pkts_rcvd", 0) >= 50 and bd.get("mcast_pkts_sent", 0) >= 50,
                   "... counted: mcast_pkts_sent at B, mcast_pkts_rcvd at A", f"A {a}\nB {bd}")
            mckey_round("mckey 239.1.2.3 (IPv4): A sends 50, 2 QPs on B each get all 50",
                        False, 2, soak=True)
            mckey_round("mckey ff0e::db8:1 (IPv6): B sends 50, 2 QPs on A each get all 50",
                        True, 2, v6=True, soak=True)
            mckey_round("mckey ff0e::db8:1 (IPv6): A sends 50, 3 QPs on B each get all 50",
                        False, 3, v6=True)

            g4, g6 = gid_index(local4), gid_index(local6)
            bg4 = b("run", argv=["bash", "-c", f". {GID_SH}; gid_index rrxe0 "
                                 + peer4])["out"].strip()
            bg6 = b("run", argv=["bash", "-c", f". {GID_SH}; gid_index rrxe0 "
                                 + peer6])["out"].strip()

            def verbs_round(fam, group, mac, from_gid, bgid, agid):
                r = b("start", name="recv", until="ready", timeout=60,
                      argv=[TOOL, "recv", "rrxe0", bgid, group, "3", str(COUNT), QKEY, "60",
                            "--wrong-qkey", "--from", from_gid])
                joined = b("maddrs")["out"]
                sent = run([TOOL, "send", dev, agid, group, str(COUNT), QKEY, "512"], 60)
                res = b("finish", name="recv", timeout=90)
                left = b("maddrs")["out"]
                short = group.removeprefix("::ffff:")
                report(r["seen"] and res["rc"] == 0 and sent["rc"] == 0,
                       f"verbs, {fam} group {short}: {COUNT} Sends to QPN 0xFFFFFF reach "
                       f"each of 3 attached QPs intact, with A's GID in the GRH; a 4th QP "
                       f"attached with another Q_Key gets none",
                       f"receiver (rc {res['rc']}):\n{res['out']}\nsender: {sent}")
                report(short in joined and mac in joined and short not in left
                       and mac not in left,
                       f"... B's eth0 joined {short} (the kernel's "
                       f"{'IGMP' if fam == 'IPv4' else 'MLD'}) and listened to {mac} while "
                       f"QPs were attached, and left both when the last detached",
                       f"joined:\n{joined}\nafter:\n{left}")

            # The group MACs: 33:33 and the low 32 bits (RFC 2464), 01:00:5e and the low 23
            # (RFC 1112).
            verbs_round("IPv6", VERBS6, "33:33:0d:b8:47:91", local6, bg6, g6)
            verbs_round("IPv4", "::ffff:" + VERBS4, "01:00:5e:04:07:5b", "::ffff:" + local4,
                        bg4, g4)

            # A group the netdev joined (a UDP socket) but no QP is attached to: counted drops.
            join = ("import socket,struct,time; s=socket.socket(socket.AF_INET,"
                    "socket.SOCK_DGRAM); s.setsockopt(socket.IPPROTO_IP,"
                    "socket.IP_ADD_MEMBERSHIP,struct.pack('4s4s',socket.inet_aton('"
                    + EMPTY4 + "'),socket.inet_aton('" + peer4 + "'))); print('ready',"
                    "flush=True); time.sleep(30)")
            b0 = b("counters", dev="rrxe0")
            r = b("start", name="sock", argv=["python3", "-c", join], until="ready", timeout=30)
            sent = run([TOOL, "send", dev, g4, "::ffff:" + EMPTY4, "20", QKEY, "64"], 60)
            time.sleep(1)
            b1 = b("counters", dev="rrxe0")
            b("finish", name="sock", timeout=1)
            d = delta(b0, b1)
            report(r["seen"] and sent["rc"] == 0 and d.get("rcvd_mcast_no_group") == 20
                   and d.get("rcvd_pkts", 0) == 0,
                   "20 Sends to a group B's netdev joined but no QP did: 20 counted in "
                   "rcvd_mcast_no_group, none delivered", f"B {d}\nsender {sent}")

            # Detached while packets keep coming: no splat, nothing after the detach.
            r = b("start", name="recv", until="ready", timeout=60,
                  argv=[TOOL, "recv", "rrxe0", bg4, "::ffff:" + INFLIGHT4, "1", "2000", QKEY,
                        "15", "--detach-after", "100"])
            sent = run([TOOL, "send", dev, g4, "::ffff:" + INFLIGHT4, "2000", QKEY, "256"], 120)
            res = b("finish", name="recv", timeout=60)
            left = b("maddrs")["out"]
            report(r["seen"] and res["rc"] == 0 and "detached after" in res["out"]
                   and INFLIGHT4 not in left,
                   "a QP detached while 2000 Sends arrive: clean, the group left",
                   f"{res['out']}\nsender {sent}\n{left}")

            # A process exits with its QP attached: uverbs detaches it, the group is left.
            r = b("start", name="recv", until="ready", timeout=60,
                  argv=[TOOL, "recv", "rrxe0", bg4, "::ffff:" + LEFT4, "1", "10", QKEY, "30",
                        "--no-detach"])
            sent = run([TOOL, "send", dev, g4, "::ffff:" + LEFT4, "10", QKEY, "64"], 60)
            res = b("finish", name="recv", timeout=60)
            left = b("maddrs")["out"]
            report(r["seen"] and res["rc"] == 0 and LEFT4 not in left,
                   "a process exits with its QP attached: its 10 messages arrived, the QP "
                   "is detached and destroyed, the group left", f"{res['out']}\n{left}")

            # The device goes away with a QP attached. rrxe offers disassociate_ucontext:
            # the deletion does not wait for the process; the core cuts its context off,
            # detaching and destroying its QP on the way, and the device goes.
            p = Proc([TOOL, "recv", dev, g4, "::ffff:" + GONE4, "1", "10", QKEY, "5",
                      "--no-detach"])
            ready = p.until("ready", 60)
            joined = maddrs()
            gone = run(["rdma", "link", "delete", dev], 60)
            res = p.finish(60)
            left = maddrs()
            report(ready and GONE4 in joined and gone["rc"] == 0 and GONE4 not in left,
                   "rdma link delete while a process has a QP attached: the device goes, the "
                   "process's context cut off, the group is left",
                   f"delete: {gone}\nreceiver: {res}\njoined:\n{joined}\nafter:\n{left}")
    except Exception:  # noqa: BLE001
        report(False, "multicast", traceback.format_exc())
    try:
        b("bye")
    except Exception:  # noqa: BLE001
        pass
    return tap.done()


def main():
    if sys.argv[1] == "peer":
        peer(int(sys.argv[2]))
        return 0
    return client(sys.argv[2], sys.argv[3], int(sys.argv[4]),
                  len(sys.argv) > 5 and sys.argv[5] == "rxe")


if __name__ == "__main__":
    sys.exit(main())
