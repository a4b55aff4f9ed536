// SPDX-License-Identifier: GPL-2.0

//! Limits and identities rrxe reports to the RDMA core and to userspace.
//!
//! Object counts are those the object model implements: a verb that does not exist yet
//! reports zero objects rather than a limit nobody enforces. How many objects of each kind a
//! device holds is its `quota`, bounded by the capacities here.

use crate::glue::module_param::Limit;

/// IBA 14.2.5.1 (NodeInfo): vendors without an IEEE OUI report 0xFFFFFF.
pub(crate) const VENDOR_ID: u32 = 0x00ff_ffff;

/// Node description in `/sys/class/infiniband/<dev>/node_desc`.
pub(crate) const NODE_DESC: &[u8] = b"rrxe";

/// rdma-core's rxe provider binds to devices reporting RDMA_DRIVER_RXE and ABI version 2.
pub(crate) const UVERBS_ABI_VERSION: u32 = 2;

/// Size of the GID table: one entry per IPv4/IPv6 address of the netdev (and of its VLAN
/// uppers), kept by the RDMA core's RoCE GID management.
pub(crate) const GID_TABLE_LEN: i32 = 1024;

/// RoCE has one partition: the default P_Key, full membership (IBA 10.9.1.1).
pub(crate) const PKEY_TABLE_LEN: u16 = 1;

/// Entries per CQ (as rdma_rxe: 2^15 - 1, a ring of 2^15 slots with one kept empty).
pub(crate) const MAX_CQE: u32 = (1 << 15) - 1;

/// Memory regions per device at most. MR and MW keys carry a 24-bit table index; MRs take
/// the lower half of the index space (index 0 is never handed out) and MWs the upper, so a
/// key names its kind (rdma_rxe splits its indices the same way, `rkey_is_mw()`).
pub(crate) const MAX_MR: u32 = Limit::Mr.capacity();

/// First table index of a memory window.
pub(crate) const MIN_MW_INDEX: u32 = 1 << 23;

/// Last table index of a memory window.
pub(crate) const MAX_MW_INDEX: u32 = (1 << 24) - 1;

const _: () = assert!(MAX_MR == MIN_MW_INDEX - 1);
const _: () = assert!(Limit::Mw.capacity() == MAX_MW_INDEX - MIN_MW_INDEX + 1);

/// Page sizes an MR may be built from: any 4 KiB multiple, as rdma_rxe reports.
pub(crate) const PAGE_SIZE_CAP: u64 = 0xffff_f000;

/// IBA 9.4 bounds a message at 2^31 bytes.
pub(crate) const MAX_MSG_SIZE: u32 = 1 << 31;

/// IBA 14.2.5.6: 4.096 us * 2^15 ~ 134 ms, the ack delay a software transport can promise
/// under load; the CM uses it in its timeout arithmetic.
pub(crate) const LOCAL_CA_ACK_DELAY: u8 = 15;

/// The default subnet prefix; RoCEv2 GIDs carry IP addresses, but the field is reported.
pub(crate) const SUBNET_PREFIX: u64 = 0xfe80_0000_0000_0000;

/// Bytes a RoCEv2 packet adds around its payload in the worst case, as the RDMA core's
/// `iboe_get_mtu` counts them: GRH-sized IP header (40), UDP (8), BTH (12), XRCETH (4),
/// AtomicETH (28) and ICRC (4).
pub(crate) const ROCE_OVERHEAD: u32 = 40 + 8 + 12 + 4 + 28 + 4;

/// QP numbers rrxe hands out: 0 and 1 are the SMI and GSI QPs (IBA 3.5.1), and rdma_rxe
/// starts its pool at 16; QPNs are 24 bits.
pub(crate) const MIN_QPN: u32 = 16;
/// Largest QP number: 0xFFFFFF is the multicast QP, the destination of every multicast
/// packet, never a QP of its own.
pub(crate) const MAX_QPN: u32 = (1 << 24) - 2;

/// Address handles per device at most: their numbers are 24 bits, 0 meaning none.
pub(crate) const MAX_AH: u32 = Limit::Ah.capacity();
/// SRQ numbers, as rdma_rxe's SRQ pool indices (the provider ignores them).
pub(crate) const MIN_SRQN: u32 = 0x0002_0001;
/// Largest SRQ number: one for each SRQ a device can hold.
pub(crate) const MAX_SRQN: u32 = MIN_SRQN + Limit::Srq.capacity() - 1;

/// Page size rrxe assumes when it has none from the consumer: 4 KiB, the smallest MR page
/// size it takes (`PAGE_SIZE_CAP`).
pub(crate) const PAGE_SHIFT: u32 = 12;

/// Most pages of a fast-register MR (`max_fast_reg_page_list_len`), as rdma_rxe reports:
/// ULPs size their registrations from it (nvme-rdma: its largest I/O).
pub(crate) const MAX_FAST_REG_PAGES: u32 = 512;
