/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Everything bindgen generates Rust bindings for (drivers/infiniband/sw/rrxe/glue/bindings.rs).
 * Only the kernel-glue layer uses them.
 */
#include <linux/crc32.h>
#include <linux/device.h>
#include <linux/etherdevice.h>
#include <linux/hrtimer.h>
#include <linux/if_arp.h>
#include <linux/mm.h>
#include <linux/netdevice.h>
#include <linux/notifier.h>
#include <linux/printk.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_netlink.h>
#include <rdma/uverbs_ioctl.h>
#include <uapi/rdma/ib_user_ioctl_verbs.h>
#include <uapi/rdma/rdma_user_rxe.h>

#include "rrxe_shim.h"

/* Constants bindgen cannot see through macros. */
/*
 * The uverbs ABI version of rdma_rxe (drivers/infiniband/sw/rxe/rxe.h, not a uapi header):
 * rdma-core's rxe provider binds to devices that report it.
 */
const u32 RRXE_RXE_UVERBS_ABI_VERSION = 2;
const u16 RRXE_IB_DEFAULT_PKEY_FULL = IB_DEFAULT_PKEY_FULL;
const int RRXE_IB_MGMT_MAD_SIZE = IB_MGMT_MAD_SIZE;
const unsigned int RRXE_ARPHRD_ETHER = ARPHRD_ETHER;
const unsigned int RRXE_ARPHRD_NONE = ARPHRD_NONE;
const unsigned int RRXE_IFF_UP = IFF_UP;
const int RRXE_EOPNOTSUPP = EOPNOTSUPP;
const unsigned int RRXE_PAGE_SHIFT = PAGE_SHIFT;
const unsigned long RRXE_PAGE_SIZE = PAGE_SIZE;
const unsigned long RRXE_RDMA_HW_STATS_DEFAULT_LIFESPAN = RDMA_HW_STATS_DEFAULT_LIFESPAN;

/* ---- memory / tables ---- */
#include <linux/highmem.h>
#include <linux/scatterlist.h>
#include <linux/xarray.h>
const xa_mark_t RRXE_XA_PRESENT = XA_PRESENT;
/* ---- end of memory / tables ---- */

/* --- UDP tunnel / skb (glue/net.rs) --------------------------------------------------- */
#include <linux/skbuff.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/route.h>
#include <net/udp_tunnel.h>

const u16 RRXE_ROCE_V2_UDP_DPORT = ROCE_V2_UDP_DPORT;
const u16 RRXE_ETH_P_IP = ETH_P_IP;
const u16 RRXE_ETH_P_IPV6 = ETH_P_IPV6;
const int RRXE_NET_XMIT_DROP = NET_XMIT_DROP;
const int RRXE_NET_XMIT_CN = NET_XMIT_CN;
const int RRXE_EAFNOSUPPORT = EAFNOSUPPORT;
const int RRXE_EADDRINUSE = EADDRINUSE;
const int RRXE_IFNAMSIZ = IFNAMSIZ;
const int RRXE_EMSGSIZE = EMSGSIZE;
const int RRXE_ENOBUFS = ENOBUFS;
