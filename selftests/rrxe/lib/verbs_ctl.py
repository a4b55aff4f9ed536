#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Server side of the verbs tests' control channel (selftests/rrxe/verbs-peer.sh).

Side A drives: it asks side B over TCP to start one verbs server at a time, is told when that
server listens on its port (so the client connects exactly once, to a server that is there),
and later asks for the server's exit status. Side B prints every server's output and status.

Usage: verbs_ctl.py PORT IDLE_SECONDS RESULTS_FILE GID=INDEX...

Protocol (one line per request and per reply):
  start NAME PORT TIMEOUT ARGV...  -> "ready" once PORT is listening, or "fail REASON"
  wait NAME                        -> "rc N" once the server has exited
  set credits 0|1                  -> "ok" once rrxe's `credits` module parameter is set
                                      (read when a QP is created: make bench's credit rows)
  set answer_waits 0|1|2           -> "ok" once rrxe's `answer_waits` parameter is set
                                      (read at each answer's doorbell)
  set provider librrxe|stock       -> "ok": servers started from now on load librrxe, the
                                      project's provider (RDMAV_DRIVERS), or the stock one
  done                             -> "bye"; the control server exits
ARGV words @NAME@ are replaced by the GID=INDEX substitutions given on the command line
(side B's own GID indices). Only the verbs test programs may be started.
"""
import os
import socket
import subprocess
import sys
import time

ALLOWED = {
    "ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_ud_pingpong",
    "ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_atomic_bw",
    "ib_send_lat", "ib_write_lat", "ib_read_lat", "ib_atomic_lat",
    "rping",
    "rstream", "riostream",
}
# The servers that listen through rdma_cm rather than on a TCP port.
CM_SERVERS = {"rping", "rstream", "riostream"}
LOGDIR = "/tmp/verbs-srv"
PARAM_DIR = "/sys/module/rrxe/parameters/"
# The module parameters side A may set, and their values.
PARAMS = {"credits": ("0", "1"), "answer_waits": ("0", "1", "2")}
# librrxe as the kselftest install has it (load_driver() appends -rdmav34.so).
LIBRRXE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "provider", "librrxe")


def listening(port):
    want = ":%04X" % port
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(f) as fh:
                next(fh)
                for line in fh:
                    cols = line.split()
                    if cols[1].endswith(want) and cols[3] == "0A":
                        return True
        except OSError:
            pass
    return False


def cm_listening(port):
    """Whether an rdma_cm ID listens on PORT (rping and rsockets have no TCP socket)."""
    try:
        res = subprocess.run(["rdma", "resource", "show", "cm_id"], capture_output=True,
                             text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return any("LISTEN" in l and (":%d " % port) in l + " " for l in res.splitlines())


def main():
    port, idle, results = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    subst = {}
    for kv in sys.argv[4:]:
        k, v = kv.split("=", 1)
        subst["@%s@" % k] = v
    os.makedirs(LOGDIR, exist_ok=True)
    procs = {}
    env = dict(os.environ)
    out = open(results, "w")

    def report(name):
        p, t0 = procs[name]
        rc = p.wait()
        out.write("%s %d %.1f\n" % (name, rc, time.monotonic() - t0))
        out.flush()
        print("# --- server %s: exit %d" % (name, rc), flush=True)
        with open(os.path.join(LOGDIR, name + ".log"), errors="replace") as fh:
            for line in fh:
                print("#   " + line.rstrip(), flush=True)
        return rc

    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(1)
    ls.settimeout(idle)
    print("# control channel listening on TCP %d" % port, flush=True)
    finished = False
    while not finished:
        try:
            conn, _ = ls.accept()
        except socket.timeout:
            print("# control channel: side A never came (or went idle)", flush=True)
            break
        conn.settimeout(idle)
        rf = conn.makefile("r")
        wf = conn.makefile("w")
        try:
            for line in rf:
                words = line.split()
                if not words:
                    continue
                if words[0] == "start" and len(words) >= 5:
                    name, sport, tmo = words[1], int(words[2]), words[3]
                    argv = [subst.get(w, w) for w in words[4:]]
                    if argv[0] not in ALLOWED or name in procs:
                        wf.write("fail refused\n")
                        wf.flush()
                        continue
                    log = open(os.path.join(LOGDIR, name + ".log"), "w")
                    print("# server %s: %s" % (name, " ".join(argv)), flush=True)
                    p = subprocess.Popen(["timeout", tmo] + argv, stdout=log, env=env,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                    procs[name] = (p, time.monotonic())
                    ready = cm_listening if argv[0] in CM_SERVERS else listening
                    end = time.monotonic() + 120
                    while not ready(sport) and p.poll() is None and time.monotonic() < end:
                        time.sleep(0.05)
                    if ready(sport):
                        wf.write("ready\n")
                    else:
                        wf.write("fail not listening (exit %s)\n" % p.poll())
                elif words[0] == "wait" and len(words) == 2 and words[1] in procs:
                    wf.write("rc %d\n" % report(words[1]))
                elif (len(words) == 3 and words[0] == "set"
                      and words[2] in PARAMS.get(words[1], ())):
                    try:
                        with open(PARAM_DIR + words[1], "w") as fh:
                            fh.write(words[2])
                        wf.write("ok\n")
                    except OSError as e:
                        wf.write("fail %s\n" % e)
                elif words[0:2] == ["set", "provider"] and words[2:] in (["librrxe"], ["stock"]):
                    if words[2] == "stock":
                        env.pop("RDMAV_DRIVERS", None)
                        wf.write("ok\n")
                    elif os.path.exists(LIBRRXE + "-rdmav34.so"):
                        env["RDMAV_DRIVERS"] = LIBRRXE
                        wf.write("ok\n")
                    else:
                        wf.write("fail no %s-rdmav34.so\n" % LIBRRXE)
                elif words[0] == "done":
                    wf.write("bye\n")
                    finished = True
                else:
                    wf.write("fail bad request\n")
                wf.flush()
                if finished:
                    break
        except (socket.timeout, OSError) as e:
            print("# control channel: %s" % e, flush=True)
        conn.close()
    for name, (p, _) in procs.items():
        if p.returncode is None:
            if p.poll() is None:
                p.kill()
            report(name)
    out.close()


if __name__ == "__main__":
    main()
