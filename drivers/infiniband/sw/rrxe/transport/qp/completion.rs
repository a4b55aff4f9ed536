// SPDX-License-Identifier: GPL-2.0

//! What the engine reports: completions (IBA 11.4.2.1 "Poll for
//! Completion") and asynchronous events (IBA 11.6.3), which it holds in
//! fixed-capacity rings (`ring.rs`) until the glue polls.

/// Completion status, numbered as the kernel's `enum ib_wc_status` so the
/// glue can pass it through unchanged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum WcStatus {
    /// Success.
    #[default]
    Success = 0,
    /// Local length error.
    LocLenErr = 1,
    /// Local QP operation error.
    LocQpOpErr = 2,
    /// Local EE context operation error.
    LocEecOpErr = 3,
    /// Local protection error.
    LocProtErr = 4,
    /// Work request flushed (the QP is in the error state).
    WrFlushErr = 5,
    /// Memory window bind error.
    MwBindErr = 6,
    /// Bad response.
    BadRespErr = 7,
    /// Local access error.
    LocAccessErr = 8,
    /// Remote invalid request (NAK Invalid Request).
    RemInvReqErr = 9,
    /// Remote access error (NAK Remote Access Error).
    RemAccessErr = 10,
    /// Remote operational error (NAK Remote Operational Error).
    RemOpErr = 11,
    /// Transport retry counter exceeded.
    RetryExcErr = 12,
    /// RNR retry counter exceeded.
    RnrRetryExcErr = 13,
    /// Local RDD violation.
    LocRddViolErr = 14,
    /// Remote invalid RD request.
    RemInvRdReqErr = 15,
    /// Remote aborted.
    RemAbortErr = 16,
    /// Invalid EE context number.
    InvEecnErr = 17,
    /// Invalid EE context state.
    InvEecStateErr = 18,
    /// Fatal error.
    FatalErr = 19,
    /// Response timeout.
    RespTimeoutErr = 20,
    /// General error.
    GeneralErr = 21,
}

/// Completion opcode, as `enum ib_wc_opcode` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcOpcode {
    /// Send (any variant).
    Send,
    /// RDMA Write (with or without immediate).
    RdmaWrite,
    /// RDMA Read.
    RdmaRead,
    /// Atomic Compare & Swap.
    CompSwap,
    /// Atomic Fetch & Add.
    FetchAdd,
    /// Atomic Write.
    AtomicWrite,
    /// Local Invalidate.
    LocalInvalidate,
    /// Fast Register.
    FastRegister,
    /// Bind Memory Window.
    BindMw,
    /// A received Send.
    Recv,
    /// A received RDMA Write with immediate.
    RecvRdmaWithImm,
}

/// Which work queue a completion belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkQueue {
    /// The send queue.
    Send,
    /// The receive queue (or SRQ).
    Recv,
}

/// A work completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The WR id given when posting.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// Opcode.
    pub opcode: WcOpcode,
    /// Bytes transferred: message length; for UD receives it includes the
    /// 40-byte GRH area (IBA 11.4.1.2).
    pub byte_len: u32,
    /// Immediate data, for sends and writes with immediate.
    pub imm_data: Option<u32>,
    /// R_Key invalidated by a received Send with Invalidate.
    pub invalidated_rkey: Option<u32>,
    /// Source QP of a UD receive (from the DETH); 0 otherwise.
    pub src_qp: u32,
    /// Whether the received message had the solicited-event bit set.
    pub solicited: bool,
    /// Send or receive queue.
    pub queue: WorkQueue,
    /// The XRC SRQ whose receive WQE completed, at an XRC target: the
    /// completion belongs to that SRQ's CQ (IBA Annex A14).
    pub xrc_srqn: Option<u32>,
}

/// Asynchronous events (IBA 11.6.3), polled with `Qp::poll_event`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncEvent {
    /// First packet received in RTR (IBA 11.6.3.1, communication
    /// established); the glue may move the QP to RTS.
    CommEstablished,
    /// The send queue drained in the SQD state.
    SqDrained,
    /// A QP on an SRQ entered the error state: no further WQE of the SRQ
    /// will be consumed by it.
    LastWqeReached,
    /// The responder detected an invalid request and moved the QP to the
    /// error state (IBA 11.6.3.1, invalid request local work queue error).
    QpRequestError,
    /// The responder detected an access violation and moved the QP to the
    /// error state (IBA 11.6.3.1, local access violation work queue error).
    QpAccessError,
    /// An error the transport cannot report through a completion.
    QpFatal,
    /// The transport (`rnr == false`) or RNR retry counter ran out with no
    /// armed alternate path to migrate to: the WQE completed in error and
    /// the QP entered ERR.
    RetryExhausted {
        /// Whether it was the RNR retry counter.
        rnr: bool,
    },
    /// The QP migrated to its alternate path (IBA 17.2.8, 11.6.3.1: Path
    /// Migrated), for any cause: its retries ran out, software commanded
    /// it, or the peer's migration request arrived.
    PathMigrated,
    /// A migration request (MigReq = 1) reached the ARMED QP over a path
    /// that is not its alternate path: dropped, the state kept (IBA 17.2.8,
    /// 11.6.3.1: Path Migration Request Failed).
    PathMigrationFailed,
}
