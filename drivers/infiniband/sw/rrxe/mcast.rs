// SPDX-License-Identifier: GPL-2.0

//! UD multicast: the device's multicast groups and the UD QPs attached to each.
//!
//! A RoCEv2 multicast GID is an IP multicast address (Annex A17: IPv4-mapped for IPv4), so a
//! group is an IP multicast group of the netdev. The first QP attached makes the netdev join
//! it: the kernel's IGMP or MLD announces the membership and programs the netdev's MAC
//! filter, and only a joined group's packets get past the IP layer to the RoCEv2 socket.
//! The last QP detached leaves it. A packet to the multicast QP (0xFFFFFF) goes to every QP
//! attached to its destination GID, each its own copy, which the QP checks against its own
//! P_Key and Q_Key like any datagram: IBA leaves no QP a datagram it does not admit.
//!
//! Locking: attach and detach (process context, they may sleep to join or leave) serialise
//! on a mutex; the groups themselves are under an interrupt-safe spinlock, which the
//! receive path takes (softirq, or the caller of a loopback send) only long enough to copy
//! a group's QP numbers out.

use crate::counters::Counters;
use crate::glue::net::{IpAddr, RxPacket};
use crate::glue::netdev::NetDevice;
use crate::glue::rcu::RcuSection;
use crate::glue::sync::{IrqSpinLock, LockClass};
use crate::qp::object::QpTable;
use crate::shared::DeviceShared;
use kernel::c_str;
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::Mutex;
use kernel::types::ARef;

static GROUPS_LOCK: LockClass = LockClass::new();

/// Groups a device can have joined at once.
pub(crate) const MAX_GROUPS: u32 = 256;
/// QPs attached to one group.
pub(crate) const MAX_QPS_PER_GROUP: usize = 16;
/// Attachments over all groups: every group may be full.
pub(crate) const MAX_ATTACHMENTS: u32 = MAX_GROUPS * MAX_QPS_PER_GROUP as u32;

/// The destination QP of every multicast packet (IBA: the multicast QPN, all ones).
pub(crate) const MULTICAST_QPN: u32 = 0xFF_FFFF;

/// One joined group.
struct Group {
    gid: [u8; 16],
    qpns: [u32; MAX_QPS_PER_GROUP],
    len: usize,
}

impl Group {
    fn qpns(&self) -> &[u32] {
        &self.qpns[..self.len]
    }

    fn position(&self, qpn: u32) -> Option<usize> {
        self.qpns().iter().position(|&q| q == qpn)
    }

    /// Removes `qpn`; whether it was attached.
    fn remove(&mut self, qpn: u32) -> bool {
        let Some(i) = self.position(qpn) else {
            return false;
        };
        self.len -= 1;
        self.qpns[i] = self.qpns[self.len];
        true
    }
}

/// The groups, in slots that are reused once empty (a slot with no QP is free), and how
/// many of each there are.
struct Groups {
    slots: KVec<Group>,
    joined: u32,
    attachments: u32,
}

impl Groups {
    fn find(&self, gid: &[u8; 16]) -> Option<usize> {
        self.slots.iter().position(|g| g.len != 0 && g.gid == *gid)
    }

    fn free_slot(&self) -> Option<usize> {
        self.slots.iter().position(|g| g.len == 0)
    }
}

/// A device's multicast groups.
#[pin_data]
pub(crate) struct McastTable {
    /// Serialises attach and detach, which join and leave outside the spinlock.
    #[pin]
    config: Mutex<()>,
    #[pin]
    groups: IrqSpinLock<Groups>,
    netdev: ARef<NetDevice>,
}

impl McastTable {
    /// No groups, on `netdev`.
    pub(crate) fn new(netdev: &NetDevice) -> impl PinInit<Self> + '_ {
        pin_init!(Self {
            config <- new_mutex!((), "rrxe_mcast"),
            groups <- IrqSpinLock::new(
                Groups {
                    slots: KVec::new(),
                    joined: 0,
                    attachments: 0,
                },
                c_str!("rrxe_mcast_groups"),
                &GROUPS_LOCK
            ),
            netdev: netdev.into(),
        })
    }

    /// Attaches UD QP `qpn` to group `gid` (the IBA verb Attach QP to Multicast Group),
    /// joining the group on the netdev if it is the group's first QP. Attaching a QP twice
    /// is not an error. Process context.
    pub(crate) fn attach(&self, gid: &[u8; 16], qpn: u32) -> Result {
        // The core checks the same (ib_attach_mcast); kernel callers may not go through it.
        if !IpAddr::from_octets(*gid).is_multicast() {
            return Err(EINVAL);
        }
        let _config = self.config.lock();
        {
            let mut g = self.groups.lock();
            if g.attachments >= MAX_ATTACHMENTS {
                return Err(ENOMEM);
            }
            if let Some(i) = g.find(gid) {
                let group = &mut g.slots[i];
                if group.position(qpn).is_some() {
                    return Ok(());
                }
                if group.len == MAX_QPS_PER_GROUP {
                    return Err(ENOMEM);
                }
                group.qpns[group.len] = qpn;
                group.len += 1;
                g.attachments += 1;
                return Ok(());
            }
            if g.joined >= MAX_GROUPS {
                return Err(ENOMEM);
            }
        }
        // A new group: join it first (this may sleep), then publish it, so that no packet
        // is delivered for a group the netdev failed to join.
        self.netdev.join_ip_multicast(gid)?;
        let mut group = Group {
            gid: *gid,
            qpns: [0; MAX_QPS_PER_GROUP],
            len: 1,
        };
        group.qpns[0] = qpn;
        let published = {
            let mut g = self.groups.lock();
            let published = match g.free_slot() {
                Some(i) => {
                    g.slots[i] = group;
                    Ok(())
                }
                None => g.slots.push(group, GFP_ATOMIC),
            };
            if published.is_ok() {
                g.joined += 1;
                g.attachments += 1;
            }
            published
        };
        if published.is_err() {
            self.netdev.leave_ip_multicast(gid);
            return Err(ENOMEM);
        }
        Ok(())
    }

    /// Detaches `qpn` from group `gid` (Detach QP from Multicast Group), leaving the group
    /// on the netdev when it was its last QP. Packets already queued to the QP still
    /// complete. Process context.
    pub(crate) fn detach(&self, gid: &[u8; 16], qpn: u32) -> Result {
        let _config = self.config.lock();
        let emptied = {
            let mut g = self.groups.lock();
            let i = g.find(gid).ok_or(EINVAL)?;
            if !g.slots[i].remove(qpn) {
                return Err(EINVAL);
            }
            g.attachments -= 1;
            let emptied = g.slots[i].len == 0;
            if emptied {
                g.joined -= 1;
            }
            emptied
        };
        if emptied {
            self.netdev.leave_ip_multicast(gid);
        }
        Ok(())
    }

    /// Detaches QP `qpn` from every group, for a QP being destroyed. The core refuses to
    /// destroy an attached QP and uverbs detaches before destroying, so this finds nothing
    /// unless a consumer broke that rule; then it keeps the groups consistent anyway.
    pub(crate) fn forget_qp(&self, qpn: u32) {
        let _config = self.config.lock();
        let mut emptied = [[0u8; 16]; 4];
        loop {
            // Leaving sleeps, so it happens outside the spinlock, a few groups at a time.
            let n = {
                let mut g = self.groups.lock();
                let mut n = 0;
                let mut removed = 0;
                for group in g.slots.iter_mut() {
                    if n == emptied.len() {
                        break;
                    }
                    if group.len != 0 && group.remove(qpn) {
                        removed += 1;
                        if group.len == 0 {
                            emptied[n] = group.gid;
                            n += 1;
                        }
                    }
                }
                g.attachments -= removed;
                g.joined -= n as u32;
                n
            };
            for gid in &emptied[..n] {
                self.netdev.leave_ip_multicast(gid);
            }
            if n < emptied.len() {
                return;
            }
        }
    }

    /// Leaves every group still joined; for a device going away.
    pub(crate) fn leave_all(&self) {
        let _config = self.config.lock();
        loop {
            let gid = {
                let mut g = self.groups.lock();
                let Some(i) = g.slots.iter().position(|s| s.len != 0) else {
                    return;
                };
                let removed = g.slots[i].len as u32;
                g.slots[i].len = 0;
                g.attachments -= removed;
                g.joined -= 1;
                g.slots[i].gid
            };
            self.netdev.leave_ip_multicast(&gid);
        }
    }

    /// Delivers a packet addressed to the multicast QP: a copy to every QP attached to its
    /// destination GID, none (counted) if no QP is. Any context, inside the RCU read-side
    /// section `rcu` (the receive path's); does not sleep.
    pub(crate) fn deliver(
        &self,
        qps: &QpTable,
        dev: &DeviceShared,
        pkt: RxPacket,
        rcu: &RcuSection,
    ) {
        let counters: &Counters = &dev.counters;
        let gid = pkt.dst_ip().octets();
        let (qpns, len) = {
            let g = self.groups.lock();
            match g.find(&gid) {
                Some(i) => (g.slots[i].qpns, g.slots[i].len),
                None => ([0; MAX_QPS_PER_GROUP], 0),
            }
        };
        let members = qpns.get(..len).unwrap_or(&[]);
        let Some((&last, others)) = members.split_last() else {
            counters.mcast_no_group.inc();
            pkt.discard();
            return;
        };
        counters.mcast_rcvd_pkts.inc();
        // Each member's task is kicked at once: dropping its kick fires it.
        for &qpn in others {
            match pkt.try_clone() {
                Ok(copy) => drop(qps.deliver(dev, qpn, copy, rcu)),
                Err(_) => counters.mcast_copy_failures.inc(),
            }
        }
        drop(qps.deliver(dev, last, pkt, rcu));
    }
}
