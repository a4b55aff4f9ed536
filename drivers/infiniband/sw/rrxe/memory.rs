// SPDX-License-Identifier: GPL-2.0

//! The transport engine's view of memory for one QP: SGE lists of its WQEs resolved through
//! L_Keys, and remote accesses through R_Keys, each checked against the MR's protection
//! domain, bounds and access rights (IBA 10.6.3, C10-4 .. C10-10) before any byte moves.

use crate::glue::rdma::object::PdId;
use crate::incarnation::QpIncarnation;
use crate::mr::{self, Access};
use crate::mw::{self, BindRequest};
use crate::shared::DeviceShared;
use crate::transport::qp::memory::{
    AtomicOp, LocalError, Memory, PdOf, RKey, RemoteAccess, RemoteError,
};
use crate::transport::qp::wqe::{LocalOp, RecvQueue, RecvWqe, SendQueue, Sge};
use core::cell::Cell;
use kernel::sync::Arc;

/// The MRs a QP's task last reached through a local key and through a remote one, kept from
/// one packet to the next within a run: a stream's packets gather from (or land in) the
/// same MR, and finding it again in the device's table took its lock (interrupts off) and a
/// reference every packet. Each use checks the MR as a lookup would, so an MR deregistered,
/// invalidated or re-registered since fails or is looked up again (IBA 10.6.3). Emptied at
/// the end of every use of the QP's memory (a task run, a Modify, a UD doorbell), in
/// process context, so that no idle QP keeps a deregistered MR's pages pinned.
#[derive(Default)]
pub(crate) struct MrCache {
    local: MrSlot,
    remote: MrSlot,
}

impl MrCache {
    /// Drops the MRs held. Process context (it may hold the last reference to a user MR).
    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }
}

#[derive(Default)]
struct MrSlot(Option<Arc<mr::MrState>>);

impl MrSlot {
    /// The MR `key` names, from the slot or the device's table (which then replaces the
    /// one held): what [`mr::MrTable::lookup`] would return.
    fn get(&mut self, dev: &DeviceShared, key: u32) -> Option<&mr::MrState> {
        let hit = matches!(&self.0, Some(mr) if mr.is_valid() && mr.key() == key);
        if !hit {
            self.0 = Some(dev.mrs.lookup(key)?);
        }
        self.0.as_deref()
    }
}

/// An MR reached through an R_Key: held in the cache, or a window's (found anew each time).
enum Reached<'a> {
    Cached(&'a mr::MrState),
    Window(Arc<mr::MrState>),
}

impl core::ops::Deref for Reached<'_> {
    type Target = mr::MrState;

    fn deref(&self) -> &mr::MrState {
        match self {
            Self::Cached(mr) => mr,
            Self::Window(mr) => mr,
        }
    }
}

/// Memory as one QP reaches it during a task run.
pub(crate) struct QpMemory<'a> {
    /// The network header of the datagram being delivered, for the GRH area of UD
    /// receives (borrowed: every engine call builds a `QpMemory`, most with none).
    pub(crate) grh: Option<&'a [u8; 40]>,
    dev: &'a DeviceShared,
    /// The PD local keys are checked in: the QP's, or for an XRC target the PD of the SRQ
    /// its current message takes from, which the SRQ lookup sets during the call.
    pd: &'a Cell<PdId>,
    /// The QP: type 2 windows answer only the QP they were bound through.
    qp: QpIncarnation,
    /// The MRs its L_Keys and R_Keys last reached, kept for the rest of the use.
    cache: &'a mut MrCache,
}

impl<'a> QpMemory<'a> {
    pub(crate) fn new(
        dev: &'a DeviceShared,
        pd: &'a Cell<PdId>,
        qp: QpIncarnation,
        cache: &'a mut MrCache,
    ) -> Self {
        Self {
            grh: None,
            dev,
            pd,
            qp,
            cache,
        }
    }

    /// Copies between `buf` and the SGE list `sge(i)`, starting `offset` bytes into the list.
    fn walk(
        &mut self,
        sge: impl Fn(u32) -> Option<Sge>,
        offset: u32,
        len: usize,
        access: Access,
        mut each: impl FnMut(&mr::MrState, u64, usize, usize) -> Result<(), LocalError>,
    ) -> Result<(), LocalError> {
        let mut skip = u64::from(offset);
        let mut done = 0usize;
        let mut i = 0;
        while done < len {
            // Running past the list: the message does not fit (IBA 9.7.5.1.6 / 10.8.3).
            let s = sge(i).ok_or(LocalError::Length)?;
            i += 1;
            let sge_len = u64::from(s.len);
            if skip >= sge_len {
                skip -= sge_len;
                continue;
            }
            let n = ((sge_len - skip) as usize).min(len - done);
            let va = s.addr.checked_add(skip).ok_or(LocalError::Protection)?;
            let pd = self.pd.get();
            let region = self
                .cache
                .local
                .get(self.dev, s.lkey)
                .ok_or(LocalError::Protection)?;
            region
                .check(pd, va, n, access)
                .map_err(|_| LocalError::Protection)?;
            each(region, va, done, n)?;
            done += n;
            skip = 0;
        }
        Ok(())
    }

    fn remote(
        &mut self,
        (rkey, pd): (u32, PdId),
        va: u64,
        len: usize,
        access: Access,
    ) -> Result<Reached<'_>, RemoteError> {
        if mw::is_mw_key(rkey) {
            return self
                .dev
                .mws
                .resolve(pd, self.qp, rkey, va, len, access)
                .map(Reached::Window)
                .ok_or(RemoteError::Access);
        }
        let region = self
            .cache
            .remote
            .get(self.dev, rkey)
            .ok_or(RemoteError::Access)?;
        region
            .check(pd, va, len, access)
            .map_err(|_| RemoteError::Access)?;
        Ok(Reached::Cached(region))
    }
}

impl QpMemory<'_> {
    /// Invalidates `key` for a Local Invalidate or a Send with Invalidate (IBA 10.6.6,
    /// 10.6.7.2.5). Only type 2 windows and fast-register MRs can be: MRs registered
    /// through the verbs (user and DMA MRs) are not invalidatable (o10-32: Send with
    /// Invalidate of such an R_Key is an invalid request).
    fn invalidate_key(&self, key: u32) -> Result<(), ()> {
        if mw::is_mw_key(key) {
            self.dev.mws.invalidate(self.pd.get(), key)
        } else {
            self.dev.mrs.invalidate(self.pd.get(), key)
        }
    }
}

impl QpMemory<'_> {
    /// An R_Key with the PD it must be valid in: the QP's, or the PD of the XRC SRQ an XRC
    /// target's request went to (Annex A14), found by the SRQ's number; an SRQ destroyed
    /// since makes the key invalid.
    #[inline]
    fn key_pd(&self, rkey: RKey) -> Result<(u32, PdId), RemoteError> {
        match rkey.pd {
            PdOf::Qp => Ok((rkey.key, self.pd.get())),
            PdOf::XrcSrq(srqn) => {
                let srq = self.dev.srqs.get(srqn).ok_or(RemoteError::Access)?;
                Ok((rkey.key, srq.pd()))
            }
        }
    }
}

impl Memory for QpMemory<'_> {
    fn gather(
        &mut self,
        sq: &dyn SendQueue,
        sq_index: u32,
        offset: u32,
        dst: &mut [u8],
    ) -> Result<(), LocalError> {
        if let Some(data) = sq.inline_data(sq_index) {
            let start = offset as usize;
            let src = data
                .get(start..start + dst.len())
                .ok_or(LocalError::Length)?;
            dst.copy_from_slice(src);
            return Ok(());
        }
        let len = dst.len();
        self.walk(
            |i| sq.sge(sq_index, i),
            offset,
            len,
            Access::LocalRead,
            |region, va, at, n| {
                region
                    .copy_out(va, &mut dst[at..at + n])
                    .map_err(|_| LocalError::Protection)
            },
        )
    }

    fn scatter_send(
        &mut self,
        sq: &dyn SendQueue,
        sq_index: u32,
        offset: u32,
        src: &[u8],
    ) -> Result<(), LocalError> {
        self.walk(
            |i| sq.sge(sq_index, i),
            offset,
            src.len(),
            Access::LocalWrite,
            |region, va, at, n| {
                region
                    .copy_in(va, &src[at..at + n])
                    .map_err(|_| LocalError::Protection)
            },
        )
    }

    fn write_grh(&mut self, rq: &dyn RecvQueue, wqe: &RecvWqe) -> Result<(), LocalError> {
        match self.grh {
            Some(grh) => self.scatter_recv(rq, wqe, 0, grh),
            None => Ok(()),
        }
    }

    fn scatter_recv(
        &mut self,
        rq: &dyn RecvQueue,
        wqe: &RecvWqe,
        offset: u32,
        src: &[u8],
    ) -> Result<(), LocalError> {
        self.walk(
            |i| rq.sge(wqe.id, i),
            offset,
            src.len(),
            Access::LocalWrite,
            |region, va, at, n| {
                region
                    .copy_in(va, &src[at..at + n])
                    .map_err(|_| LocalError::Protection)
            },
        )
    }

    fn check_remote(
        &mut self,
        rkey: RKey,
        va: u64,
        len: u32,
        access: RemoteAccess,
    ) -> Result<(), RemoteError> {
        let rkey = self.key_pd(rkey)?;
        let access = match access {
            RemoteAccess::Write => Access::RemoteWrite,
            RemoteAccess::Read => Access::RemoteRead,
            RemoteAccess::Atomic => Access::RemoteAtomic,
        };
        self.remote(rkey, va, len as usize, access).map(|_| ())
    }

    fn write_remote(&mut self, rkey: RKey, va: u64, src: &[u8]) -> Result<(), RemoteError> {
        let rkey = self.key_pd(rkey)?;
        let region = self.remote(rkey, va, src.len(), Access::RemoteWrite)?;
        region.copy_in(va, src).map_err(|_| RemoteError::Access)
    }

    fn read_remote(&mut self, rkey: RKey, va: u64, dst: &mut [u8]) -> Result<(), RemoteError> {
        let rkey = self.key_pd(rkey)?;
        let region = self.remote(rkey, va, dst.len(), Access::RemoteRead)?;
        region.copy_out(va, dst).map_err(|_| RemoteError::Access)
    }

    fn atomic(&mut self, rkey: RKey, va: u64, op: AtomicOp) -> Result<u64, RemoteError> {
        let rkey = self.key_pd(rkey)?;
        // IBA 9.4.5 (C9-28): the target must be 8-byte aligned.
        if va % 8 != 0 {
            return Err(RemoteError::InvalidRequest);
        }
        let access = match op {
            AtomicOp::Write { .. } => Access::RemoteWrite,
            _ => Access::RemoteAtomic,
        };
        let region = self.remote(rkey, va, 8, access)?;
        region.atomic(va, op).map_err(|_| RemoteError::Access)
    }

    fn invalidate(&mut self, rkey: RKey) -> Result<(), RemoteError> {
        let (rkey, _) = self.key_pd(rkey).map_err(|_| RemoteError::InvalidRequest)?;
        self.invalidate_key(rkey)
            .map_err(|()| RemoteError::InvalidRequest)?;
        self.dev.counters.remote_invalidates.inc();
        Ok(())
    }

    fn local_operation(&mut self, op: &LocalOp) -> Result<(), LocalError> {
        match *op {
            LocalOp::Invalidate { key } => {
                self.invalidate_key(key)
                    .map_err(|()| LocalError::Operation)?;
                self.dev.counters.local_invalidates.inc();
                Ok(())
            }
            LocalOp::FastRegister {
                key,
                access,
                iova,
                length,
            } => {
                self.dev
                    .mrs
                    .fast_register(self.pd.get(), key, access, iova, length)
                    .map_err(|()| LocalError::Operation)?;
                self.dev.counters.fast_reg_mrs.inc();
                Ok(())
            }
            LocalOp::BindMw {
                mw_rkey,
                rkey,
                mr_lkey,
                addr,
                length,
                access,
            } => {
                let req = BindRequest {
                    addr,
                    length,
                    mr_lkey,
                    mw_rkey,
                    rkey,
                    access,
                };
                self.dev
                    .mws
                    .bind(&self.dev.mrs, self.pd.get(), self.qp, &req)
                    .map_err(|()| LocalError::MwBind)
            }
        }
    }
}
