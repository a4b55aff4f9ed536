# SPDX-License-Identifier: GPL-2.0
"""The JSON-lines control channel between the two VMs' halves of a Python test: side A
sends one request per line, side B answers each with one line.

    ch = ctl_channel.connect(host, port, key)   retries for 10 minutes while B is not
                                                listening (make check: B's earlier tests)
    reply = ch.call(request, **fields)          the request {key: request, **fields}; a reply
                                                with an "error" field raises RuntimeError
"""
import json
import socket
import time


class Channel:
    def __init__(self, conn, key):
        self.f = conn.makefile("rw")
        self.key = key

    def call(self, request, /, **fields):
        fields[self.key] = request
        self.f.write(json.dumps(fields) + "\n")
        self.f.flush()
        reply = json.loads(self.f.readline())
        if isinstance(reply, dict) and "error" in reply:
            raise RuntimeError(reply["error"])
        return reply


def connect(host, port, key, tries=600):
    for _ in range(tries):
        try:
            return Channel(socket.create_connection((host, port)), key)
        except OSError:
            time.sleep(1)
    raise OSError(f"no control channel at {host}:{port}")
