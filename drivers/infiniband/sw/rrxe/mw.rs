// SPDX-License-Identifier: GPL-2.0

//! Memory windows (IBA 10.6.7): R_Keys a consumer binds to a range of a registered MR, with
//! remote rights of their own, and rebinds or invalidates through its send queue.
//!
//! Keys follow MRs' layout (`index << 8 | variant`) on table indices above every MR's
//! (`params::MIN_MW_INDEX`), so a key tells which table names it. The low byte of a bound
//! window's R_Key is the consumer's (IBA 10.6.7.2.1: the Bind supplies the key portion;
//! rdma-core's rxe provider computes it as the old byte plus one).

use crate::glue::bindings as b;
use crate::glue::rdma::object::PdId;
use crate::glue::sync::{IrqSpinLock, LockClass};
use crate::glue::table::IndexTable;
use crate::incarnation::QpIncarnation;
use crate::mr::{Access, MrState, MrTable};
use crate::params;
use crate::quota::Charge;
use crate::transport::region;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

static MW_LOCK: LockClass = LockClass::new();

/// Access bits a bind may carry: the remote rights a window grants, and the local bits
/// consumers pass along with them (rdma-core's tests bind with Local Write), which mean
/// nothing for a window (IBA 10.6.7.2.1: a window only grants remote access) and are
/// ignored, as rdma_rxe does.
const SUPPORTED_ACCESS: u32 = b::ib_access_flags_IB_ACCESS_REMOTE_READ
    | b::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
    | b::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | b::ib_access_flags_IB_ACCESS_MW_BIND;

/// Handle of one rrxe MW, owned by the RDMA core's `struct ib_mw`.
pub(crate) struct RrxeMw {
    state: Arc<MwState>,
    /// The window's place in the device's count.
    _charge: Charge,
}

/// What a window is bound to.
struct Binding {
    /// Its current R_Key.
    key: u32,
    /// Bound and usable (IBA 10.6.7.1: a type 1 window is valid from allocation, unbound; a
    /// type 2 window is free until bound, and free again once invalidated).
    valid: bool,
    /// The MR it is bound to, with the range and rights it grants.
    mr: Option<Arc<MrState>>,
    addr: u64,
    length: u64,
    access: u32,
    /// The QP a type 2 window was bound through: only that QP may use it (IBA 10.6.7.2.2),
    /// not a later QP that reuses its number.
    qp: QpIncarnation,
    /// Set at deallocation: a bind racing with it must not attach an MR to a window nobody
    /// can unbind any more.
    dead: bool,
}

/// A memory window as the data path sees it.
#[pin_data]
pub(crate) struct MwState {
    pd: PdId,
    type2: bool,
    #[pin]
    binding: IrqSpinLock<Binding>,
}

/// A Bind Memory Window work request.
pub(crate) struct BindRequest {
    /// First byte of the window, in the MR's address space.
    pub(crate) addr: u64,
    /// Length of the window; zero unbinds a type 1 window.
    pub(crate) length: u64,
    pub(crate) mr_lkey: u32,
    pub(crate) mw_rkey: u32,
    /// The new R_Key; only its low byte counts.
    pub(crate) rkey: u32,
    pub(crate) access: u32,
}

/// Whether `key` names a memory window rather than an MR.
pub(crate) fn is_mw_key(key: u32) -> bool {
    region::key_index(key) >= params::MIN_MW_INDEX
}

/// A device's memory windows, by key index, and the key portions it hands out.
#[pin_data]
pub(crate) struct MwTable {
    #[pin]
    mws: IndexTable<MwState>,
    /// Low byte of the next key.
    key_variant: AtomicU32,
}

impl MwTable {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            mws <- IndexTable::new(),
            key_variant: AtomicU32::new(0),
        })
    }

    /// The window `key` names (its index; the caller compares the whole key under the
    /// window's lock, since binding changes it).
    fn get(&self, key: u32) -> Option<Arc<MwState>> {
        self.mws.get(region::key_index(key))
    }

    /// Creates a window in `pd`; returns it with its R_Key.
    pub(crate) fn alloc(&self, charge: Charge, pd: PdId, type2: bool) -> Result<(RrxeMw, u32)> {
        let reservation = self
            .mws
            .reserve(params::MIN_MW_INDEX, params::MAX_MW_INDEX)?;
        let variant = self.key_variant.fetch_add(1, Ordering::Relaxed);
        let key = region::key(reservation.index(), variant);
        // A type 1 window is valid from allocation; a type 2 one starts free (IBA 10.6.7.1).
        let valid = !type2;
        let state = Arc::pin_init(
            pin_init!(MwState {
                pd,
                type2,
                binding <- IrqSpinLock::new(
                    Binding {
                        key,
                        valid,
                        mr: None,
                        addr: 0,
                        length: 0,
                        access: 0,
                        qp: QpIncarnation::NONE,
                        dead: false,
                    },
                    kernel::c_str!("rrxe_mw"),
                    &MW_LOCK,
                ),
            }),
            GFP_KERNEL,
        )?;
        reservation.store(state.clone())?;
        Ok((
            RrxeMw {
                state,
                _charge: charge,
            },
            key,
        ))
    }

    /// Destroys a window: its key stops working at once, and a bound MR is released (IBA
    /// 10.6.7.4: deallocating a bound window unbinds it). Process context.
    pub(crate) fn dealloc(&self, mw: &RrxeMw) {
        let (old, key) = {
            let mut g = mw.state.binding.lock();
            g.valid = false;
            g.dead = true;
            (g.mr.take(), g.key)
        };
        if let Some(mr) = old {
            mr.detach_window();
        }
        drop(self.mws.remove(region::key_index(key)));
    }

    /// Executes a Bind Memory Window WQE of QP `qp` in `pd` (IBA 10.6.7.2.4). Any failure is
    /// a bind error for the WQE. Process context (the QP's work item).
    pub(crate) fn bind(
        &self,
        mrs: &MrTable,
        pd: PdId,
        qp: QpIncarnation,
        req: &BindRequest,
    ) -> Result<(), ()> {
        let mw = self.get(req.mw_rkey).ok_or(())?;
        let mr = if req.length != 0 {
            Some(mrs.lookup(req.mr_lkey).ok_or(())?)
        } else {
            None
        };
        // Zero-based windows are not offered (o10-36.2.2 forbids them for type 1).
        if req.access & !SUPPORTED_ACCESS != 0 {
            return Err(());
        }
        // C10-72: the window and the QP are in one PD.
        if mw.pd != pd {
            return Err(());
        }
        if mw.type2 && mr.is_none() {
            // o10-37.2.40: a type 2 window cannot be bound to nothing (invalidation unbinds it).
            return Err(());
        }
        if let Some(mr) = &mr {
            // The MR is in the QP's PD, allows binding (C10-73), allows local writes if the
            // window allows remote writes or atomics (C10-74), and holds the window (C10-75).
            let writes = b::ib_access_flags_IB_ACCESS_REMOTE_WRITE
                | b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
            if mr.pd() != pd
                || mr.access() & b::ib_access_flags_IB_ACCESS_MW_BIND == 0
                || mr.access() & b::ib_access_flags_IB_ZERO_BASED != 0
                || (req.access & writes != 0
                    && mr.access() & b::ib_access_flags_IB_ACCESS_LOCAL_WRITE == 0)
                || !mr.contains(req.addr, req.length)
            {
                return Err(());
            }
            if !mr.attach_window() {
                return Err(());
            }
        }
        let old = {
            let mut g = mw.binding.lock();
            // The whole R_Key must match; a type 1 window must be valid (bound or not) and a
            // type 2 one free (o10-37.2.30).
            let usable = if mw.type2 { !g.valid } else { g.valid };
            if g.dead || g.key != req.mw_rkey || !usable {
                drop(g);
                if let Some(mr) = &mr {
                    mr.detach_window();
                }
                return Err(());
            }
            g.key = region::key(region::key_index(g.key), req.rkey);
            g.valid = true;
            g.addr = req.addr;
            g.length = req.length;
            g.access = req.access;
            g.qp = qp;
            core::mem::replace(&mut g.mr, mr)
        };
        if let Some(old) = old {
            old.detach_window();
        }
        Ok(())
    }

    /// Invalidates the type 2 window `key` names, for a Local Invalidate or a Send with
    /// Invalidate on a QP of `pd` (IBA 10.6.7.2.5: type 1 windows cannot be invalidated,
    /// o10-37.2.26; the window must be in the QP's PD). It becomes free. Process context.
    pub(crate) fn invalidate(&self, pd: PdId, key: u32) -> Result<(), ()> {
        let mw = self.get(key).ok_or(())?;
        if !mw.type2 || mw.pd != pd {
            return Err(());
        }
        let old = {
            let mut g = mw.binding.lock();
            if g.key != key || !g.valid {
                return Err(());
            }
            g.valid = false;
            g.length = 0;
            g.access = 0;
            g.mr.take()
        };
        if let Some(mr) = old {
            mr.detach_window();
        }
        Ok(())
    }

    /// The MR behind window `key` for `access` to `len` bytes at `va` by QP `qp` of `pd`: the
    /// key must match a valid window of the QP's PD (and, for type 2, bound through this QP),
    /// granting the right, with the range inside the window and its MR (IBA 10.6.7.1,
    /// C10-10 .. C10-13). The caller moves bytes through the returned MR at `va`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn resolve(
        &self,
        pd: PdId,
        qp: QpIncarnation,
        key: u32,
        va: u64,
        len: usize,
        access: Access,
    ) -> Option<Arc<MrState>> {
        let mw = self.get(key)?;
        if mw.pd != pd {
            return None;
        }
        let mr = {
            let g = mw.binding.lock();
            let need = access.required();
            if g.key != key
                || !g.valid
                || (mw.type2 && g.qp != qp)
                || g.access & need != need
                || region::offset_in(g.addr, g.length, va, u64::try_from(len).ok()?).is_none()
            {
                return None;
            }
            g.mr.clone()?
        };
        mr.check_window(va, len).ok()?;
        Some(mr)
    }
}
