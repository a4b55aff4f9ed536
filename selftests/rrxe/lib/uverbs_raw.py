# SPDX-License-Identifier: GPL-2.0
"""The uverbs write commands and the rdma_rxe rings, driven directly: for what the stock
rxe provider cannot do through pyverbs, XRC (rdma-core's rxe provider, v44, has no XRC
verbs: ibv_open_xrcd, ibv_create_srq_ex and ibv_create_qp_ex with an XRCD fail in
userspace) and ring contents no provider would write (hostile producer and consumer
indices, header fields, malformed WQEs).

Raw writes IB_USER_VERBS_CMD_* to the command fd of a pyverbs Context in the layouts of
include/uapi/rdma/ib_user_verbs.h (6.12); Ring maps a struct rxe_queue_buf the driver
exports (its mminfo offset and size come back in the driver's part of the response) and
reads and writes it as Documentation/rrxe/uverbs-abi.rst describes (section 2, the
header; 5, send WQEs; 6, receive WQEs; 4, user CQ slots; 9, completion statuses). pyverbs
still gives the Context, PDs, MRs and CQs (handle_of() finds their uverbs handles) and
polls the CQs.

Used by selftests/rrxe/xrc.py, xrc_data.py, xrc_seed.py and rings.py, which import it as they
import tap.py (selftests/rrxe/lib on sys.path); qp.py and netns_hold.py take async_event_fds() from
it. Nothing here imports pyverbs.
"""
import ctypes
import json
import mmap
import os
import select
import struct
import subprocess
import time

# enum ib_uverbs_write_cmds (ib_user_verbs.h: implicit values counted from GET_CONTEXT = 0).
CMD_CREATE_CQ = 18
CMD_DESTROY_CQ = 20
CMD_CREATE_QP = 24
CMD_QUERY_QP = 25
CMD_MODIFY_QP = 26
CMD_DESTROY_QP = 27
CMD_POST_SEND = 28
CMD_CREATE_SRQ = 32
CMD_DESTROY_SRQ = 35
CMD_OPEN_XRCD = 37
CMD_CLOSE_XRCD = 38
CMD_CREATE_XSRQ = 39
CMD_OPEN_QP = 40

# enum ib_uverbs_qp_type / ib_uverbs_srq_type (ib_user_ioctl_verbs.h).
QPT_RC = 2
QPT_XRC_INI = 9
QPT_XRC_TGT = 10
SRQT_XRC = 1
# IB_UVERBS_DEVICE_XRC: the device capability flag that says XRC is supported.
DEVICE_XRC = 1 << 20

# enum ib_qp_attr_mask (include/rdma/ib_verbs.h; the uverbs ABI passes it through).
QP_STATE = 1 << 0
QP_ACCESS_FLAGS = 1 << 3
QP_PKEY_INDEX = 1 << 4
QP_PORT = 1 << 5
QP_AV = 1 << 7
QP_PATH_MTU = 1 << 8
QP_TIMEOUT = 1 << 9
QP_RETRY_CNT = 1 << 10
QP_RNR_RETRY = 1 << 11
QP_RQ_PSN = 1 << 12
QP_MAX_QP_RD_ATOMIC = 1 << 13
QP_MIN_RNR_TIMER = 1 << 15
QP_SQ_PSN = 1 << 16
QP_MAX_DEST_RD_ATOMIC = 1 << 17
QP_DEST_QPN = 1 << 20
QUERY_ALL = (1 << 21) - 1

QPS_RESET, QPS_INIT, QPS_RTR, QPS_RTS, QPS_SQD, QPS_SQE, QPS_ERR = range(7)
STATE_NAMES = ["RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"]
MTU = 1024
MTU_1024 = 3  # IB_MTU_1024
ACCESS_REMOTE = 2 | 4 | 8  # IB_ACCESS_REMOTE_WRITE | READ | ATOMIC

# Send opcodes (IB_UVERBS_WR_* = IBV_WR_* = IB_WR_*) and flags (rrxe abi.rs `wr`,
# `send_flag`).
WR_RDMA_WRITE = 0
WR_SEND = 2
WR_RDMA_READ = 4
WR_REG_MR = 0x20  # kernel only: never valid in a user ring
SEND_SIGNALED = 2
SEND_INLINE = 8

# Work completion statuses and opcodes (IBV_WC_* = IB_WC_*; uverbs-abi.rst section 9).
WC_SUCCESS = 0
WC_LOC_LEN_ERR = 1
WC_LOC_QP_OP_ERR = 2
WC_LOC_PROT_ERR = 4
WC_WR_FLUSH_ERR = 5
WC_REM_INV_REQ_ERR = 9
WC_REM_ACCESS_ERR = 10
WC_REM_OP_ERR = 11
WC_RETRY_EXC_ERR = 12
WC_RNR_RETRY_EXC_ERR = 13
WC_NAMES = {0: "SUCCESS", 1: "LOC_LEN_ERR", 2: "LOC_QP_OP_ERR", 4: "LOC_PROT_ERR",
            5: "WR_FLUSH_ERR", 9: "REM_INV_REQ_ERR", 10: "REM_ACCESS_ERR", 11: "REM_OP_ERR",
            12: "RETRY_EXC_ERR", 13: "RNR_RETRY_EXC_ERR"}
WC_SEND = 0
WC_RDMA_WRITE = 1
WC_RDMA_READ = 2
WC_RECV = 128

# struct rxe_queue_buf (uverbs-abi.rst section 2): header, then the slots.
Q_LOG2_ELEM = 0
Q_INDEX_MASK = 4
Q_PRODUCER = 128
Q_CONSUMER = 256
Q_DATA = 384
# struct rxe_send_wqe (section 5; rrxe abi.rs `send`): 208-byte header, then the SGEs or
# the inline data. An XRC_INI's WQE carries the remote XRC SRQ number in the `reserved`
# u32 at byte 8 (abi.rs send::XRC_SRQN).
SWQE_WR_ID = 0
SWQE_XRC_SRQN = 8
SWQE_OPCODE = 12
SWQE_FLAGS = 16
SWQE_REMOTE_ADDR = 24
SWQE_RKEY = 32
SWQE_IOVA = 152
SWQE_DMA = 184  # length, resid, cur_sge, num_sge, sge_offset (u32 each)
SWQE_HEADER = 208
# struct rxe_recv_wqe (section 6; abi.rs `recv`): 40-byte header, then the SGEs.
RWQE_WR_ID = 0
RWQE_DMA = 16  # length, resid, cur_sge, num_sge, sge_offset
RWQE_HEADER = 40
SGE_LEN = 16  # addr u64, length u32, lkey u32
# struct ib_uverbs_wc in a user CQ slot (section 4): wr_id@0, status@8, opcode@12,
# byte_len@20, qp_num@28.
CQE_STATUS = 8
CQE_QP = 28

# struct ib_uverbs_qp_dest: dgid, flow_label, dlid, reserved, sgid_index, hop_limit,
# traffic_class, sl, src_path_bits, static_rate, is_global, port_num.
DEST_FMT = "=16sIHHBBBBBBBB"
DEST_FIELDS = ("dgid", "flow_label", "dlid", "reserved", "sgid_index", "hop_limit",
               "traffic_class", "sl", "src_path_bits", "static_rate", "is_global", "port_num")
# struct ib_uverbs_modify_qp after its two qp_dest (64 bytes): 112 bytes in all.
MODIFY_TAIL_FMT = "=7IHH14B2x"
MODIFY_U8 = ("qp_state", "cur_qp_state", "path_mtu", "path_mig_state", "en_sqd_async_notify",
             "max_rd_atomic", "max_dest_rd_atomic", "min_rnr_timer", "port_num", "timeout",
             "retry_cnt", "rnr_retry", "alt_port_num", "alt_timeout")
# struct ib_uverbs_query_qp_resp after its two qp_dest: 128 bytes in all.
QUERY_TAIL_FMT = "=10IHH15B5x"
QUERY_TAIL = ("max_send_wr", "max_recv_wr", "max_send_sge", "max_recv_sge", "max_inline_data",
              "qkey", "rq_psn", "sq_psn", "dest_qp_num", "qp_access_flags", "pkey_index",
              "alt_pkey_index", "qp_state", "cur_qp_state", "path_mtu", "path_mig_state",
              "sq_draining", "max_rd_atomic", "max_dest_rd_atomic", "min_rnr_timer",
              "port_num", "timeout", "retry_cnt", "rnr_retry", "alt_port_num", "alt_timeout",
              "sq_sig_all")
assert struct.calcsize(DEST_FMT) == 32
assert 64 + struct.calcsize(MODIFY_TAIL_FMT) == 112
assert 64 + struct.calcsize(QUERY_TAIL_FMT) == 128

# Response sizes: the core's struct, then (for UDATA commands) the driver's, which the core
# places right after it in the same buffer (ib_uverbs_write: driver_udata.outbuf =
# response + resp_size).
CREATE_QP_RESP = 32   # struct ib_uverbs_create_qp_resp (also OPEN_QP's)
RXE_QP_RESP = 32      # struct rxe_create_qp_resp: rq_mi, sq_mi (struct mminfo, 16 bytes)
CREATE_CQ_RESP = 8    # struct ib_uverbs_create_cq_resp
RXE_CQ_RESP = 16      # struct rxe_create_cq_resp: mi
SRQ_RESP = 16         # struct ib_uverbs_create_srq_resp
RXE_SRQ_RESP = 24     # struct rxe_create_srq_resp: mi (16), srq_num, reserved
POST_SEND_WQE_SIZE = 128  # >= sizeof(struct ib_uverbs_send_wr) (56), as the core requires


def handle_of(obj):
    """The uverbs handle of a pyverbs PD or CQ. PD has a `handle` property; a CQ may not
    (rdma-core's pyverbs CQ prints its handle in str() but has no property for it in
    every release), so fall back to that line."""
    h = getattr(obj, "handle", None)
    if h is not None:
        return int(h)
    for line in str(obj).splitlines():
        if line.strip().lower().startswith("handle"):
            return int(line.split(":", 1)[1])
    raise AssertionError(f"no handle for {type(obj).__name__}")


def read_gid(dev, index):
    """The raw 16 bytes of GID `index` of port 1, from sysfs (no pyverbs GID formatting)."""
    with open(f"/sys/class/infiniband/{dev}/ports/1/gids/{index}") as f:
        return bytes.fromhex(f.read().strip().replace(":", ""))


def av(gid_bytes, sgid_index):
    """A RoCE AV for modify_qp's `dest`: a GRH (every RoCE path is global) to `gid_bytes`
    from our GID index `sgid_index`, port 1."""
    return {"dgid": gid_bytes, "sgid_index": sgid_index, "hop_limit": 64, "is_global": 1,
            "port_num": 1}


def state_name(s):
    return STATE_NAMES[s] if 0 <= s < len(STATE_NAMES) else str(s)


def wc_name(status):
    return WC_NAMES.get(status, str(status))


def wc_dict(wc):
    """A pyverbs WC as a dict (what crosses a control channel)."""
    return {"wr_id": wc.wr_id, "status": wc.status, "opcode": wc.opcode,
            "byte_len": wc.byte_len, "qp_num": wc.qp_num}


def wc_str(w):
    """A pyverbs WC, or a wc_dict(), for a message."""
    if not isinstance(w, dict):
        w = wc_dict(w)
    return (f"wr_id {w['wr_id']:#x} status {wc_name(w['status'])} opcode {w['opcode']} "
            f"byte_len {w['byte_len']} qp_num {w['qp_num']:#x}")


class Raw:
    """The raw uverbs write commands on one pyverbs Context's command fd. Each method
    raises OSError with the command's errno (os.write returns -1, errno set)."""

    def __init__(self, ctx):
        self.fd = ctx.cmd_fd

    def _write(self, cmd, body, out_len=0):
        # struct ib_uverbs_cmd_hdr: in_words counts the header and the body in 4-byte words,
        # out_words the response buffer (not extended commands: uverbs_main.c verify_hdr).
        assert len(body) % 4 == 0 and out_len % 4 == 0
        hdr = struct.pack("=IHH", cmd, (8 + len(body)) // 4, out_len // 4)
        n = os.write(self.fd, hdr + body)
        assert n == len(hdr) + len(body), f"write returned {n}"

    # --- XRC domains ---

    def open_xrcd(self, fd=-1, oflags=0):
        resp = ctypes.create_string_buffer(4)
        body = struct.pack("=QII", ctypes.addressof(resp), fd & 0xffffffff, oflags)
        self._write(CMD_OPEN_XRCD, body, len(resp))
        return struct.unpack("=I", resp.raw)[0]

    def close_xrcd(self, xrcd):
        self._write(CMD_CLOSE_XRCD, struct.pack("=I", xrcd))

    # --- CQs ---

    def create_cq(self, cqe):
        """Returns {handle, cqe, mi_offset, mi_size}: the core's response and the mminfo of
        the driver's struct rxe_create_cq_resp after it."""
        resp = ctypes.create_string_buffer(CREATE_CQ_RESP + RXE_CQ_RESP)
        body = struct.pack("=QQIIiI", ctypes.addressof(resp), 0xc0, cqe, 0, -1, 0)
        self._write(CMD_CREATE_CQ, body, len(resp))
        handle, got = struct.unpack_from("=II", resp.raw, 0)
        off, size = struct.unpack_from("=QI", resp.raw, CREATE_CQ_RESP)
        return {"handle": handle, "cqe": got, "mi_offset": off, "mi_size": size}

    def destroy_cq(self, cq):
        resp = ctypes.create_string_buffer(8)
        self._write(CMD_DESTROY_CQ, struct.pack("=QII", ctypes.addressof(resp), cq, 0),
                    len(resp))

    # --- SRQs ---

    def create_srq(self, pd, max_wr, max_sge):
        """A basic SRQ. Returns {handle, max_wr, max_sge, mi_offset, mi_size}."""
        resp = ctypes.create_string_buffer(SRQ_RESP + RXE_SRQ_RESP)
        body = struct.pack("=QQIIII", ctypes.addressof(resp), 0x5e, pd, max_wr, max_sge, 0)
        self._write(CMD_CREATE_SRQ, body, len(resp))
        handle, got_wr, got_sge = struct.unpack_from("=3I", resp.raw, 0)
        off, size = struct.unpack_from("=QI", resp.raw, SRQ_RESP)
        return {"handle": handle, "max_wr": got_wr, "max_sge": got_sge, "mi_offset": off,
                "mi_size": size}

    def create_xsrq(self, xrcd, pd, cq, max_wr=8, max_sge=1):
        """An XRC SRQ. Returns {handle, max_wr, max_sge, srqn, drv_srq_num, mi_offset,
        mi_size}: the core's response and the driver's struct rxe_create_srq_resp after
        it (its srq_num must equal the core's srqn)."""
        resp = ctypes.create_string_buffer(SRQ_RESP + RXE_SRQ_RESP)
        body = struct.pack("=QQ8I", ctypes.addressof(resp), 0x5e5e, SRQT_XRC, pd, max_wr,
                           max_sge, 0, 0, xrcd, cq)
        self._write(CMD_CREATE_XSRQ, body, len(resp))
        handle, got_wr, got_sge, srqn = struct.unpack_from("=4I", resp.raw, 0)
        off, size, _pad, drv_srqn, _rsvd = struct.unpack_from("=QIIII", resp.raw, SRQ_RESP)
        return {"handle": handle, "max_wr": got_wr, "max_sge": got_sge, "srqn": srqn,
                "drv_srq_num": drv_srqn, "mi_offset": off, "mi_size": size}

    def destroy_srq(self, srq):
        resp = ctypes.create_string_buffer(4)
        self._write(CMD_DESTROY_SRQ, struct.pack("=QII", ctypes.addressof(resp), srq, 0),
                    len(resp))

    # --- QPs ---

    def create_qp(self, qp_type, pd, scq=0, rcq=0, srq=None, max_send_wr=0, max_recv_wr=0,
                  max_send_sge=0, max_recv_sge=0, max_inline=0, drv_out=0):
        """CREATE_QP (struct ib_uverbs_create_qp) with `drv_out` bytes of driver response
        after the core's. Returns {handle, qpn, max_send_wr, max_recv_wr, max_send_sge,
        max_recv_sge, max_inline}, and with the rxe driver's response (drv_out
        RXE_QP_RESP) the mminfo of the rings: rq_offset, rq_size, sq_offset, sq_size."""
        resp = ctypes.create_string_buffer(CREATE_QP_RESP + drv_out)
        body = struct.pack("=QQ9IBBBB", ctypes.addressof(resp), 0x7e57, pd, scq, rcq,
                           srq or 0, max_send_wr, max_recv_wr, max_send_sge, max_recv_sge,
                           max_inline, 0, qp_type, 1 if srq is not None else 0, 0)
        self._write(CMD_CREATE_QP, body, len(resp))
        r = resp.raw
        handle, qpn, swr, rwr, ssge, rsge, inl = struct.unpack_from("=7I", r, 0)
        out = {"handle": handle, "qpn": qpn, "max_send_wr": swr, "max_recv_wr": rwr,
               "max_send_sge": ssge, "max_recv_sge": rsge, "max_inline": inl}
        if drv_out >= RXE_QP_RESP:
            out["rq_offset"], out["rq_size"] = struct.unpack_from("=QI", r, CREATE_QP_RESP)
            out["sq_offset"], out["sq_size"] = struct.unpack_from("=QI", r,
                                                                  CREATE_QP_RESP + 16)
        return out

    def create_rc(self, pd, scq, rcq, srq=None, max_send_wr=4, max_recv_wr=4, max_sge=4,
                  max_inline=0):
        """CREATE_QP of an RC QP with both rings (no RQ with an SRQ: its receive caps are
        zero), the rxe driver's response included (see create_qp)."""
        with_srq = srq is not None
        return self.create_qp(QPT_RC, pd, scq, rcq, srq=srq, max_send_wr=max_send_wr,
                              max_recv_wr=0 if with_srq else max_recv_wr,
                              max_send_sge=max_sge, max_recv_sge=0 if with_srq else max_sge,
                              max_inline=max_inline, drv_out=RXE_QP_RESP)

    def create_tgt(self, xrcd):
        """CREATE_QP of an XRC_TGT: pd_handle names the XRCD; no CQs, no SRQ, no queues
        (a target's receives go to the XRC SRQ each packet's XRCETH names). The core gives
        the driver no udata for it (ib_create_qp_user: the real QP is the kernel's).
        Returns (handle, qpn)."""
        r = self.create_qp(QPT_XRC_TGT, xrcd)
        return r["handle"], r["qpn"]

    def create_ini(self, pd, cq, max_send_wr=16, max_send_sge=1):
        """CREATE_QP of an XRC_INI: a send queue only (the core zeroes the receive caps),
        with the rxe provider's driver response after the core's. Returns create_qp's
        dict; rq_offset and rq_size are not written for an XRC QP and mean nothing."""
        return self.create_qp(QPT_XRC_INI, pd, cq, cq, max_send_wr=max_send_wr,
                              max_send_sge=max_send_sge, drv_out=RXE_QP_RESP)

    def open_qp(self, xrcd, qpn, qp_type=QPT_XRC_TGT):
        """OPEN_QP: a handle of our own to the XRC target `qpn` of domain `xrcd`.
        Returns (handle, qpn)."""
        resp = ctypes.create_string_buffer(CREATE_QP_RESP)
        body = struct.pack("=QQIIB7x", ctypes.addressof(resp), 0x09e4, xrcd, qpn, qp_type)
        self._write(CMD_OPEN_QP, body, len(resp))
        return struct.unpack_from("=II", resp.raw, 0)

    def modify_qp(self, qp, mask, dest=None, **kw):
        """MODIFY_QP: `dest` is the primary path's struct ib_uverbs_qp_dest fields (see
        av()), the keywords the other fields of struct ib_uverbs_modify_qp by name; what
        is not given is 0."""
        d = dict.fromkeys(DEST_FIELDS, 0)
        d["dgid"] = b"\0" * 16
        d.update(dest or {})
        dest_b = struct.pack(DEST_FMT, *(d[k] for k in DEST_FIELDS))
        alt_b = struct.pack(DEST_FMT, b"\0" * 16, *([0] * 11))
        tail = struct.pack(MODIFY_TAIL_FMT, qp, mask, kw.get("qkey", 0), kw.get("rq_psn", 0),
                           kw.get("sq_psn", 0), kw.get("dest_qp_num", 0),
                           kw.get("qp_access_flags", 0), kw.get("pkey_index", 0), 0,
                           *(kw.get(k, 0) for k in MODIFY_U8))
        self._write(CMD_MODIFY_QP, dest_b + alt_b + tail)

    def query_qp(self, qp, mask=QUERY_ALL):
        """QUERY_QP: struct ib_uverbs_query_qp_resp's fields by name, the primary path's
        under "dest"."""
        resp = ctypes.create_string_buffer(128)
        self._write(CMD_QUERY_QP, struct.pack("=QII", ctypes.addressof(resp), qp, mask),
                    len(resp))
        dest = dict(zip(DEST_FIELDS, struct.unpack_from(DEST_FMT, resp.raw, 0)))
        a = dict(zip(QUERY_TAIL, struct.unpack_from(QUERY_TAIL_FMT, resp.raw, 64)))
        a["dest"] = dest
        return a

    def qp_state(self, qp):
        """QUERY_QP with mask QP_STATE: the qp_state."""
        return self.query_qp(qp, QP_STATE)["qp_state"]

    def post_send(self, qp):
        """The send doorbell as the rxe provider rings it (post_send_db): POST_SEND with no
        WRs; the driver then takes what the SQ ring holds. Returns the core's bad_wr."""
        resp = ctypes.create_string_buffer(4)
        body = struct.pack("=QIIII", ctypes.addressof(resp), qp, 0, 0, POST_SEND_WQE_SIZE)
        self._write(CMD_POST_SEND, body, len(resp))
        return struct.unpack("=I", resp.raw)[0]

    def destroy_qp(self, qp):
        resp = ctypes.create_string_buffer(4)
        self._write(CMD_DESTROY_QP, struct.pack("=QII", ctypes.addressof(resp), qp, 0),
                    len(resp))

    def destroy(self, kind, handle):
        """Destroys (closes) object `handle` of `kind`: "qp", "srq", "cq" or "xrcd"."""
        {"qp": self.destroy_qp, "srq": self.destroy_srq, "cq": self.destroy_cq,
         "xrcd": self.close_xrcd}[kind](handle)


class Ring:
    """A mapped struct rxe_queue_buf (an SQ, RQ, SRQ or CQ) at the mminfo `offset`, `size`
    of command fd `fd`. The element size and index mask are read once, at mapping: what a
    test writes into the header afterwards never changes how the slots are addressed.
    `prod` is this process's producer index (masked). With `registry` (a list) the ring
    adds itself to it and close() takes it out.

    Two ways to produce: send() and recv() as a provider does (a WQE with one SGE in the
    next slot, refusing a full ring; recv() publishes at once, send() leaves that to
    publish(), before the doorbell), and send_wqe()/recv_wqe() into any slot, with
    post_send()/post_recv() writing at the producer and publishing, no checks: the WQE
    fields and the indices are for a test to make hostile."""

    def __init__(self, fd, offset, size, what, registry=None):
        assert size >= Q_DATA and offset % mmap.PAGESIZE == 0, \
            f"{what}: mminfo offset {offset:#x} size {size:#x} cannot be mapped"
        self.what = what
        self.m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE,
                           offset=offset)
        self.registry = registry
        if registry is not None:
            registry.append(self)
        self.log2 = self.u32(Q_LOG2_ELEM)
        self.mask = self.u32(Q_INDEX_MASK)
        self.slot = 1 << self.log2
        slots = self.mask + 1
        assert 6 <= self.log2 <= 16 and slots & (slots - 1) == 0, \
            f"{what}: header log2_elem_size {self.log2}, index_mask {self.mask:#x}"
        assert Q_DATA + slots * self.slot <= size, \
            f"{what}: {slots} slots of {self.slot} bytes do not fit the {size}-byte mapping"
        self.prod = self.producer() & self.mask

    # --- the header ---

    def u32(self, off):
        return struct.unpack_from("=I", self.m, off)[0]

    def put32(self, off, v):
        struct.pack_into("=I", self.m, off, v & 0xffffffff)

    def producer(self):
        return self.u32(Q_PRODUCER)

    def consumer(self):
        return self.u32(Q_CONSUMER)

    def set_producer(self, v):
        self.put32(Q_PRODUCER, v)

    def set_consumer(self, v):
        self.put32(Q_CONSUMER, v)

    def publish(self):
        # Python's pack_into is a plain store after the WQE's; x86 keeps stores in order.
        self.set_producer(self.prod)

    def at(self, i):
        """The byte offset of slot i (masked)."""
        return Q_DATA + ((i & self.mask) << self.log2)

    # --- WQEs into any slot ---

    def send_wqe(self, i, wr_id, sges=(), opcode=WR_SEND, flags=SEND_SIGNALED, num_sge=None,
                 length=None, inline=None, srqn=0, remote=None):
        """Slot i: a struct rxe_send_wqe; `num_sge`/`length` override the honest values;
        `srqn` is an XRC_INI's remote XRC SRQ number, `remote` (remote_addr, rkey) an RDMA
        operation's target."""
        off = self.at(i)
        self.m[off:off + self.slot] = bytes(self.slot)
        if inline is not None:
            flags |= SEND_INLINE
            n = len(inline) if length is None else length
            self.m[off + SWQE_HEADER:off + SWQE_HEADER + len(inline)] = inline
            dma = (n, n, 0, 0, 0)
        else:
            n = sum(s[1] for s in sges) & 0xffffffff if length is None else length
            dma = (n, n, 0, len(sges) if num_sge is None else num_sge, 0)
            for k, (addr, ln, lkey) in enumerate(sges):
                struct.pack_into("=QII", self.m, off + SWQE_HEADER + SGE_LEN * k, addr, ln,
                                 lkey)
        struct.pack_into("=QII", self.m, off + SWQE_WR_ID, wr_id, srqn, opcode)
        struct.pack_into("=I", self.m, off + SWQE_FLAGS, flags)
        if remote is not None:
            struct.pack_into("=QI", self.m, off + SWQE_REMOTE_ADDR, remote[0], remote[1])
            struct.pack_into("=Q", self.m, off + SWQE_IOVA, remote[0])
        struct.pack_into("=5I", self.m, off + SWQE_DMA, *dma)

    def recv_wqe(self, i, wr_id, sges, num_sge=None):
        """Slot i: a struct rxe_recv_wqe; `num_sge` overrides the honest value."""
        off = self.at(i)
        self.m[off:off + self.slot] = bytes(self.slot)
        n = sum(s[1] for s in sges) & 0xffffffff
        struct.pack_into("=Q", self.m, off + RWQE_WR_ID, wr_id)
        struct.pack_into("=5I", self.m, off + RWQE_DMA, n, n, 0,
                         len(sges) if num_sge is None else num_sge, 0)
        for k, (addr, ln, lkey) in enumerate(sges):
            struct.pack_into("=QII", self.m, off + RWQE_HEADER + SGE_LEN * k, addr, ln, lkey)

    def post_send(self, *args, **kw):
        """send_wqe() at the producer, then the producer advanced and published."""
        self.send_wqe(self.prod, *args, **kw)
        self.prod = (self.prod + 1) & self.mask
        self.set_producer(self.prod)

    def post_recv(self, *args, **kw):
        """recv_wqe() at the producer, then the producer advanced and published."""
        self.recv_wqe(self.prod, *args, **kw)
        self.prod = (self.prod + 1) & self.mask
        self.set_producer(self.prod)

    # --- as a provider produces ---

    def _next_slot(self):
        """The producer's slot, the producer advanced (not published); a full ring (one
        slot always empty, section 2) fails."""
        cons = self.consumer() & self.mask
        assert (self.prod + 1 - cons) & self.mask != 0, \
            f"{self.what}: ring full (producer {self.prod}, consumer {cons})"
        i = self.prod
        self.prod = (self.prod + 1) & self.mask
        return i

    def recv(self, wr_id, addr, length, lkey):
        """One struct rxe_recv_wqe with one SGE, published at once (no doorbell)."""
        assert RWQE_HEADER + SGE_LEN <= self.slot
        self.recv_wqe(self._next_slot(), wr_id, [(addr, length, lkey)])
        self.publish()

    def send(self, wr_id, opcode, srqn, sge, remote=None, flags=SEND_SIGNALED):
        """One struct rxe_send_wqe with one SGE (addr, length, lkey), naming XRC SRQ `srqn`;
        `remote` is (remote_addr, rkey) for RDMA. Published by publish()."""
        assert SWQE_HEADER + SGE_LEN <= self.slot
        self.send_wqe(self._next_slot(), wr_id, [sge], opcode=opcode, flags=flags, srqn=srqn,
                      remote=remote)

    # --- a CQ ---

    def cqe(self, i):
        """(wr_id, status, qp_num) of CQ slot i."""
        off = self.at(i)
        wr_id = struct.unpack_from("=Q", self.m, off)[0]
        return wr_id, self.u32(off + CQE_STATUS), self.u32(off + CQE_QP)

    def close(self):
        if not self.m.closed:
            self.m.close()
        if self.registry is not None and self in self.registry:
            self.registry.remove(self)


# --- completions (pyverbs CQs) ---


def poll_some(cq, count, timeout):
    """Up to `count` completions within `timeout` seconds: what arrived, not asserted."""
    wcs = []
    end = time.monotonic() + timeout
    while len(wcs) < count and time.monotonic() < end:
        nc, got = cq.poll(count - len(wcs))
        if nc:
            wcs += got
        else:
            time.sleep(0.002)
    return wcs


def poll(cq, count, timeout, what="CQ"):
    """Exactly `count` completions within `timeout` seconds."""
    wcs = poll_some(cq, count, timeout)
    assert len(wcs) == count, \
        f"{what}: {len(wcs)} of {count} completions within {timeout} s: " \
        f"{[wc_str(w) for w in wcs]}"
    return wcs


def no_completion(cq, what, wait=0.3):
    """No completion on `cq` after `wait` seconds."""
    time.sleep(wait)
    nc, wcs = cq.poll(1)
    assert nc == 0, f"{what}: unexpected completion {wc_str(wcs[0])}"


# --- restrack (rdma resource show) ---


def async_event_fds():
    """This process's uverbs async event fds (pyverbs does not expose a context's)."""
    fds = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "infinibandevent" in os.readlink(f"/proc/self/fd/{fd}"):
                fds.add(int(fd))
        except OSError:  # the fd listdir itself used
            pass
    return fds


def restrack(dev, kind, user_only=False):
    """The `rdma -j resource show KIND` entries of `dev` (dicts). Every exec costs ~1.5 s
    on the debug kernel under TCG: callers ask once per check. With `user_only`, only the
    objects of processes: kernel consumers' ones (the GSI QP, ib_core's CQ for MADs) are
    listed with no pid."""
    out = subprocess.run(["rdma", "-j", "resource", "show", kind], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, f"rdma resource show {kind}: {out.stderr.strip()}"
    found = []

    def walk(x):
        if isinstance(x, dict):
            if x.get("ifname") == dev:
                found.append(x)
            else:
                for v in x.values():
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(json.loads(out.stdout or "[]"))
    if user_only:
        return [x for x in found if "pid" in x]
    return found


def listed_for_pid(dev, kind, pid, timeout):
    """The `kind` entries of process `pid` on `dev` still listed after up to `timeout`
    seconds, polled every 0.5 s (a dead process's objects go when the kernel releases its
    uverbs file)."""
    end = time.monotonic() + timeout
    while True:
        left = [x for x in restrack(dev, kind) if int(x.get("pid", -1)) == pid]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.5)


def qp_listed(dev, qpn):
    """The restrack entry of QPN on `dev`, or None."""
    for q in restrack(dev, "qp"):
        if int(q.get("lqpn", -1)) == qpn:
            return q
    return None


def srqs(dev):
    """The SRQ entries of `dev`, or None when this iproute2 cannot list SRQs."""
    try:
        return restrack(dev, "srq")
    except AssertionError:
        return None


# --- a child process that reports one JSON line ---


class Child:
    """`argv` run as a child process (its own uverbs file once it opens a Context) that
    prints one JSON line, a dict (with "error" when it failed), and then waits on stdin:
    `info` is that dict. A child that fails, or says nothing within `timeout` seconds, is
    killed and raises AssertionError ("`name` failed: ...")."""

    def __init__(self, argv, timeout, name):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)
        self.info = None
        # Read the pipe's fd directly (no buffered readline): select() must see every byte.
        fd = self.p.stdout.fileno()
        end = time.monotonic() + timeout
        out = b""
        while self.info is None:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            out += chunk
            for line in out.decode(errors="replace").splitlines(keepends=True):
                if line.startswith("{") and line.endswith("\n"):
                    self.info = json.loads(line)
        if self.info is None or "error" in self.info:
            self.kill()
            raise AssertionError(f"{name} failed:\n" + (self.info or {}).get(
                "error", out.decode(errors="replace")
                or f"no output within {timeout:.0f} s"))

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=20)
        for f in (self.p.stdin, self.p.stdout):
            if f and not f.closed:
                f.close()
