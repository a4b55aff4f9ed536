#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""MR memory access through rrxe's in-kernel self-test (a module built with
`make module RRXE_SELFTEST=1`, see drivers/infiniband/sw/rrxe/mr_selftest.rs), TAP output.

Registering a user MR whose iova has 0x5e1f7e57 in its upper 32 bits makes the module write
a byte pattern through the MR (offsets va - iova, page by page), read it back, and run
atomics on it; this checks from userspace what the module wrote.
"""
import ctypes
import mmap
import os
import struct
import sys

DEV = os.environ.get("RRXE_DEV", "rrxe0")

MAGIC = 0x5E1F7E57 << 32
LW, RW, RR, RA = 1, 2, 4, 8
n = 0
failed = 0


def report(ok, desc, detail=""):
    global n, failed
    n += 1
    print(("ok" if ok else "not ok") + f" {n} - {desc}")
    if not ok:
        failed += 1
        print("#   " + detail)
    sys.stdout.flush()


class IbvMr(ctypes.Structure):
    _fields_ = [("context", ctypes.c_void_p), ("pd", ctypes.c_void_p),
                ("addr", ctypes.c_void_p), ("length", ctypes.c_size_t),
                ("handle", ctypes.c_uint32), ("lkey", ctypes.c_uint32),
                ("rkey", ctypes.c_uint32)]


lib = ctypes.CDLL("libibverbs.so.1", use_errno=True)
lib.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
lib.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
lib.ibv_get_device_name.restype = ctypes.c_char_p
lib.ibv_get_device_name.argtypes = [ctypes.c_void_p]
lib.ibv_open_device.restype = ctypes.c_void_p
lib.ibv_open_device.argtypes = [ctypes.c_void_p]
lib.ibv_alloc_pd.restype = ctypes.c_void_p
lib.ibv_alloc_pd.argtypes = [ctypes.c_void_p]
lib.ibv_reg_mr_iova2.restype = ctypes.POINTER(IbvMr)
lib.ibv_reg_mr_iova2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.c_uint64, ctypes.c_uint]
lib.ibv_dereg_mr.argtypes = [ctypes.POINTER(IbvMr)]
lib.ibv_dealloc_pd.argtypes = [ctypes.c_void_p]
lib.ibv_close_device.argtypes = [ctypes.c_void_p]

print("TAP version 13")
print(f"# MR self-test on {DEV}")
num = ctypes.c_int()
devs = lib.ibv_get_device_list(ctypes.byref(num))
dev = next(devs[i] for i in range(num.value) if lib.ibv_get_device_name(devs[i]).decode() == DEV)
rctx = lib.ibv_open_device(dev)
rpd = lib.ibv_alloc_pd(rctx)
assert rctx and rpd

# (offset of the buffer in its first page, length): within one page, across pages, large.
for start, length in ((0x14, 100), (0x14, 3 * 4096 + 100), (0, 8192), (0xff8, 64 << 10)):
    buf = mmap.mmap(-1, length + 2 * 4096)
    base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    addr = base + start
    iova = MAGIC | 0x7000 | start
    mr = lib.ibv_reg_mr_iova2(rpd, addr, length, iova, LW | RW | RR | RA)
    desc = f"self-test MR at page offset {start:#x}, {length} bytes"
    if not mr:
        report(False, desc, f"registration failed: {os.strerror(ctypes.get_errno())}")
        continue
    want = bytearray(((off * 13 + 5) & 0xFF) for off in range(length))
    at = (iova + 3 + 7) // 8 * 8 - iova
    want[at:at + 8] = struct.pack("=Q", 0x0123_4567_89AB_CDEF)
    got = buf[start:start + length]
    if got == bytes(want):
        report(True, desc + ": pattern and atomics visible to the application")
    else:
        bad = next(i for i in range(length) if got[i] != want[i])
        report(False, desc, f"first difference at offset {bad}: {got[bad]:#x} != {want[bad]:#x}")
    assert lib.ibv_dereg_mr(mr) == 0

# Read-only (remote read only): the module must refuse to write, and the memory stays zero.
buf = mmap.mmap(-1, 3 * 4096)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf)) + 0x20
mr = lib.ibv_reg_mr_iova2(rpd, addr, 4096, MAGIC | 0x20, RR)
desc = "self-test of a read-only MR: writes refused, memory untouched"
if not mr:
    report(False, desc, f"registration failed: {os.strerror(ctypes.get_errno())}")
else:
    report(buf[:] == bytes(3 * 4096), desc, "memory was written")
    assert lib.ibv_dereg_mr(mr) == 0

lib.ibv_dealloc_pd(rpd)
lib.ibv_close_device(rctx)
print(f"1..{n}")
print(f"# totals: {n - failed} passed, {failed} failed, 0 skipped")
sys.exit(1 if failed else 0)
