// SPDX-License-Identifier: GPL-2.0
/*
 * Forwards for static inline kernel functions the Rust glue calls (see include/rrxe_shim.h).
 */
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/if_vlan.h>
#include <linux/moduleparam.h>
#include <linux/netdevice.h>
#include <linux/percpu.h>
#include <linux/spinlock.h>
#include <linux/timekeeping.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "rrxe_shim.h"

/*
 * Module parameters: the 6.12 Rust module! macro declares none, so they live here and the
 * glue reads them (glue/module_param.rs).
 */
static bool credits = true;
module_param(credits, bool, 0644);
MODULE_PARM_DESC(credits,
		 "RC receive queues report end-to-end credits (IBA 9.7.7.2); 0: every AETH says \"no credit information\" and no unsolicited ACK goes, as with rdma_rxe. Read when a QP is created (default: 1)");

bool rrxe_param_credits(void)
{
	return READ_ONCE(credits);
}

/*
 * Timing a QP task run and its parts costs clock readings on the data path (under TCG 34 ns
 * each, eight a looped-back 2-byte Read): like the scheduler's schedstats, off unless asked.
 */
bool rrxe_run_times;
module_param_named(run_times, rrxe_run_times, bool, 0644);
MODULE_PARM_DESC(run_times,
		 "Time every QP task run and its parts in the qp_*_ns counters of rdma statistic, at a few clock readings a run; read at each run (default: 0)");

/*
 * Whether an answer's doorbell and the QP's run spin for each other (qp/object.rs): the
 * measured default weighs the device's spins against its worker wake-ups; 0 and 1 exist to
 * measure either way in one boot (make bench-local's A/B runs).
 */
int rrxe_answer_waits = 2;
module_param_named(answer_waits, rrxe_answer_waits, int, 0644);
MODULE_PARM_DESC(answer_waits,
		 "An answer's doorbell and its QP's run spin for each other: 0 never, 1 always, 2 while the device measures its spins cheaper than its worker wake-ups (qp_wait_ns and qp_wakeup_ns of rdma statistic); read at each answer (default: 2)");

/*
 * Two-port devices: "NETDEV:NETDEV2[,NETDEV:NETDEV2...]". A device added over NETDEV gets a
 * second port over NETDEV2, so that a QP's alternate path can leave over another wire (IBA
 * 17.2.8). Netdev names cannot contain ':' or ',' (dev_valid_name), so the pairs parse
 * unambiguously.
 */
static char port2[256];
module_param_string(port2, port2, sizeof(port2), 0644);
MODULE_PARM_DESC(port2,
		 "Two-port devices, NETDEV:NETDEV2[,...]: a device added over NETDEV gets port 2 over NETDEV2 (in NETDEV's namespace). Read when a device is added (default: none)");

int rrxe_param_port2(const struct net_device *first, char *name, struct net_device **second)
{
	char buf[sizeof(port2)], *rest, *pair;

	kernel_param_lock(THIS_MODULE);
	strscpy(buf, port2, sizeof(buf));
	kernel_param_unlock(THIS_MODULE);
	rest = buf;
	while ((pair = strsep(&rest, ","))) {
		char *colon = strchr(pair, ':');

		if (!colon)
			continue;
		*colon = '\0';
		if (strcmp(strim(pair), first->name))
			continue;
		strscpy(name, strim(colon + 1), IFNAMSIZ);
		*second = dev_get_by_name(dev_net(first), name);
		return *second ? 1 : -ENODEV;
	}
	return 0;
}

#define RRXE_LIMIT_PARAM(name, NAME, what)						\
	static unsigned int name = RRXE_##NAME;						\
	module_param(name, uint, 0644);							\
	MODULE_PARM_DESC(name, "Most " what " a device may hold (default and largest: "	\
			 __stringify(RRXE_##NAME) "). Read when a device is created")

RRXE_LIMIT_PARAM(max_pd, MAX_PD, "protection domains");
RRXE_LIMIT_PARAM(max_cq, MAX_CQ, "completion queues");
RRXE_LIMIT_PARAM(max_qp, MAX_QP, "queue pairs, kernel-owned ones (GSI, XRC targets) included");
RRXE_LIMIT_PARAM(max_srq, MAX_SRQ, "shared receive queues, XRC SRQs included");
RRXE_LIMIT_PARAM(max_mr, MAX_MR, "memory regions");
RRXE_LIMIT_PARAM(max_mw, MAX_MW, "memory windows");
RRXE_LIMIT_PARAM(max_ah, MAX_AH, "address handles");

unsigned int rrxe_param_limit(enum rrxe_limit limit)
{
	switch (limit) {
	case RRXE_LIMIT_PD:
		return READ_ONCE(max_pd);
	case RRXE_LIMIT_CQ:
		return READ_ONCE(max_cq);
	case RRXE_LIMIT_QP:
		return READ_ONCE(max_qp);
	case RRXE_LIMIT_SRQ:
		return READ_ONCE(max_srq);
	case RRXE_LIMIT_MR:
		return READ_ONCE(max_mr);
	case RRXE_LIMIT_MW:
		return READ_ONCE(max_mw);
	case RRXE_LIMIT_AH:
		return READ_ONCE(max_ah);
	}
	return 0;
}

void rrxe_dev_hold(struct net_device *ndev)
{
	dev_hold(ndev);
}

void rrxe_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

bool rrxe_netif_running(const struct net_device *ndev)
{
	return netif_running(ndev);
}

bool rrxe_netif_carrier_ok(const struct net_device *ndev)
{
	return netif_carrier_ok(ndev);
}

/*
 * reg_state leaves NETREG_REGISTERED before NETDEV_UNREGISTER is notified, so a device
 * registered while its netdev was going away can tell it missed the event.
 */
bool rrxe_netdev_is_registered(const struct net_device *ndev)
{
	return READ_ONCE(ndev->reg_state) == NETREG_REGISTERED;
}

bool rrxe_netdev_is_vlan(const struct net_device *ndev)
{
	return is_vlan_dev(ndev);
}

unsigned int rrxe_netdev_mtu(const struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

struct net_device *rrxe_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

bool rrxe_ib_device_try_get(struct ib_device *ibdev)
{
	return ib_device_try_get(ibdev);
}

unsigned int rrxe_num_possible_cpus(void)
{
	return num_possible_cpus();
}

/* vmalloc_user() is a macro (allocation profiling hooks). */
void *rrxe_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

void rrxe_xa_init_alloc(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC);
}

/*
 * Reserves the next free index in [min, max] after *next (a NULL entry is stored as a
 * reservation, which xa_load() reports as empty). Returns 0 or 1 (wrapped) on success.
 */
int rrxe_xa_reserve_cyclic(struct xarray *xa, u32 *id, u32 min, u32 max, u32 *next)
{
	return xa_alloc_cyclic(xa, id, NULL, XA_LIMIT(min, max), next, GFP_KERNEL);
}

/* The user context of a uverbs call's driver udata (rdma_udata_to_drv_context()). */
struct ib_ucontext *rrxe_udata_to_ucontext(struct ib_udata *udata)
{
	return container_of(udata, struct uverbs_attr_bundle, driver_udata)->context;
}

/* The driver udata of a uverbs call; kernel callers pass no bundle. */
struct ib_udata *rrxe_bundle_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

int rrxe_copy_to_udata(struct ib_udata *udata, const void *src, size_t len)
{
	return ib_copy_to_udata(udata, (void *)src, len);
}

void rrxe_spin_lock_init(spinlock_t *lock, const char *name, struct lock_class_key *key)
{
#ifdef CONFIG_DEBUG_SPINLOCK
	__raw_spin_lock_init(spinlock_check(lock), name, key, LD_WAIT_CONFIG);
#else
	spin_lock_init(lock);
#endif
}

/* Tasks (glue/task.rs). */
void rrxe_init_work(struct work_struct *work, void (*fn)(struct work_struct *))
{
	INIT_WORK(work, fn);
}

/*
 * The driver's workqueue: high priority, as the system one rrxe used before (the
 * transport's timers are short), reclaim-safe since storage traffic (NVMe-oF) may run over
 * it.
 */
struct workqueue_struct *rrxe_alloc_task_queue(void)
{
	return alloc_workqueue("rrxe", WQ_HIGHPRI | WQ_MEM_RECLAIM, 0);
}

/* Sleeps a moment, for a wait on another thread's short work (process context). */
void rrxe_wait_briefly(void)
{
	usleep_range(10, 50);
}

/* Queues @work on this CPU, recording it in *@cpu if it was queued. */
bool rrxe_queue_work_on(struct workqueue_struct *wq, struct work_struct *work, int *cpu)
{
	int here = get_cpu();
	bool queued = queue_work_on(here, wq, work);

	if (queued)
		WRITE_ONCE(*cpu, here);
	put_cpu();
	return queued;
}

/*
 * Queues @work on the next online CPU after this one, or here on a single-CPU machine,
 * recording where in *@cpu. An item still pending on this CPU, as *@cpu says, is moved there
 * (and *@moved set): it was queued to run after what this CPU is doing, and the caller wants
 * it beside. Cancelling it hands the caller the reference its queueing gave it, so the return
 * value is the number of references to the owner the caller is left to drop: 0 (its own went
 * with the item), 1 or 2. With preemption off the chosen CPU cannot finish going offline
 * before the work is queued (CPU hot-unplug waits for a stop_machine that needs every CPU),
 * and the current CPU is the one whose successor is meant.
 */
unsigned int rrxe_queue_work_beside(struct workqueue_struct *wq, struct work_struct *work,
				    int *cpu, bool *moved)
{
	unsigned int here, next, left = 0;

	preempt_disable();
	here = smp_processor_id();
	next = cpumask_next(here, cpu_online_mask);
	if (next >= nr_cpu_ids)
		next = cpumask_first(cpu_online_mask);
	if (next >= nr_cpu_ids)
		next = here;
	if (queue_work_on(next, wq, work)) {
		WRITE_ONCE(*cpu, next);
		goto out;
	}
	left = 1;
	if (next != here && READ_ONCE(*cpu) == here && cancel_work(work)) {
		left++;
		if (queue_work_on(next, wq, work)) {
			WRITE_ONCE(*cpu, next);
			*moved = true;
			left--;
		}
	}
out:
	preempt_enable();
	return left;
}

/*
 * Soft mode: the callback runs in softirq context, as a timer-wheel callback did, so that
 * the reference it drops never frees an object in hard interrupt context.
 */
void rrxe_hrtimer_setup(struct hrtimer *timer, enum hrtimer_restart (*fn)(struct hrtimer *))
{
	hrtimer_init(timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_SOFT);
	timer->function = fn;
}

void rrxe_hrtimer_start(struct hrtimer *timer, u64 delay_ns, u64 slack_ns)
{
	hrtimer_start_range_ns(timer, ns_to_ktime(delay_ns), slack_ns, HRTIMER_MODE_REL_SOFT);
}

bool rrxe_hrtimer_is_queued(struct hrtimer *timer)
{
	return hrtimer_is_queued(timer);
}

/* Per-CPU counters (glue/percpu.rs); the cookie travels as a plain pointer. */
u64 *rrxe_percpu_u64_alloc(void)
{
	return (u64 __force *)alloc_percpu(u64);
}

u64 rrxe_percpu_u64_sum(u64 *p)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += READ_ONCE(*per_cpu_ptr((u64 __percpu __force *)p, cpu));
	return sum;
}

void rrxe_percpu_u64_add(u64 *p, u64 n)
{
	this_cpu_add(*(u64 __percpu __force *)p, n);
}

void rrxe_percpu_u64_free(u64 *p)
{
	free_percpu((u64 __percpu __force *)p);
}

/* ---- memory / tables: object tables, MR page arrays, memory access ---- */
#include <linux/highmem.h>
#include <linux/scatterlist.h>

/*
 * Object tables (glue/table.rs) look entries up from softirq, so their lock is taken with
 * interrupts disabled everywhere (XA_FLAGS_LOCK_IRQ).
 */
void rrxe_xa_init_alloc_irq(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC | XA_FLAGS_LOCK_IRQ);
}

/*
 * Returns 0 or 1 (wrapped) on success. May sleep to allocate unless `atomic`, in which case
 * it allocates with GFP_ATOMIC under an irqsave lock (callers may hold spinlocks with
 * interrupts disabled, e.g. the CM creating an address handle).
 */
int rrxe_xa_reserve_cyclic_irq(struct xarray *xa, u32 *id, u32 min, u32 max, u32 *next,
			       bool atomic)
{
	unsigned long flags;
	int ret;

	if (!atomic)
		return xa_alloc_cyclic_irq(xa, id, NULL, XA_LIMIT(min, max), next, GFP_KERNEL);
	xa_lock_irqsave(xa, flags);
	ret = __xa_alloc_cyclic(xa, id, NULL, XA_LIMIT(min, max), next, GFP_ATOMIC);
	xa_unlock_irqrestore(xa, flags);
	return ret;
}

/* Stores into a reserved slot, which needs no allocation. Any context. */
int rrxe_xa_fill_reserved_irq(struct xarray *xa, u32 index, void *entry)
{
	unsigned long flags;
	void *old;

	xa_lock_irqsave(xa, flags);
	old = __xa_store(xa, index, entry, GFP_ATOMIC);
	xa_unlock_irqrestore(xa, flags);
	return xa_err(old);
}

struct page *rrxe_sg_page_iter_page(struct sg_page_iter *piter)
{
	return sg_page_iter_page(piter);
}

void *rrxe_kmap_local_page(struct page *page)
{
	return kmap_local_page(page);
}

void rrxe_kunmap_local(const void *addr)
{
	kunmap_local(addr);
}

/*
 * IBA 10.7.2.4 requires atomics to be atomic among all of the CA's atomic operations, and
 * MRs (even of different devices) may share memory: one lock serialises every rrxe atomic.
 */
static DEFINE_SPINLOCK(rrxe_atomic_lock);

unsigned long rrxe_atomic_lock_irqsave(void)
{
	unsigned long flags;

	spin_lock_irqsave(&rrxe_atomic_lock, flags);
	return flags;
}

void rrxe_atomic_unlock_irqrestore(unsigned long flags)
{
	spin_unlock_irqrestore(&rrxe_atomic_lock, flags);
}
/* ---- end of memory / tables ---- */

/* --- UDP tunnel / skb (glue/net.rs) --------------------------------------------------- */

#include <linux/igmp.h>
#include <linux/inetdevice.h>
#include <linux/mutex.h>
#include <linux/skbuff.h>
#include <net/addrconf.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/ipv6_stubs.h>
#include <net/route.h>
#include <net/udp_tunnel.h>

/* Serialises opening and closing the RoCEv2 UDP sockets (glue/net.rs, Tunnel). */
static DEFINE_MUTEX(rrxe_tunnel_mutex);

/* Guards the soft-RoCE receive index (glue/net.rs, RxIndex); looked up in softirq. */
static DEFINE_SPINLOCK(rrxe_rx_index_spinlock);

unsigned long rrxe_rx_index_lock(void)
{
	unsigned long flags;

	spin_lock_irqsave(&rrxe_rx_index_spinlock, flags);
	return flags;
}

void rrxe_rx_index_unlock(unsigned long flags)
{
	spin_unlock_irqrestore(&rrxe_rx_index_spinlock, flags);
}

void rrxe_rcu_read_lock(void)
{
	rcu_read_lock();
}

void rrxe_rcu_read_unlock(void)
{
	rcu_read_unlock();
}

void rrxe_call_rcu(struct rcu_head *head, void (*func)(struct rcu_head *head))
{
	call_rcu(head, func);
}

void rrxe_rcu_barrier(void)
{
	rcu_barrier();
}

void rrxe_tunnel_lock(void)
{
	mutex_lock(&rrxe_tunnel_mutex);
}

void rrxe_tunnel_unlock(void)
{
	mutex_unlock(&rrxe_tunnel_mutex);
}

/*
 * A kernel UDP socket in @net bound to the wildcard address on @port (host order); the
 * IPv6 one is v6-only so that an IPv4 socket can share the port, and accepts zero UDP
 * checksums (rdma_rxe sends them). udp_sock_create() is a static inline and its config has
 * bitfields, hence this forward. Like every kernel socket it holds no reference on @net:
 * its owner closes it before the namespace goes (see rrxe_register_pernet()).
 */
int rrxe_udp_sock_create(struct net *net, bool ipv6, u16 port, struct socket **sockp)
{
	struct udp_port_cfg cfg = {};

	cfg.family = ipv6 ? AF_INET6 : AF_INET;
	cfg.ipv6_v6only = ipv6;
	cfg.local_udp_port = htons(port);
	return udp_sock_create(net, &cfg, sockp);
}

int rrxe_setup_udp_tunnel_sock(struct net *net, struct socket *sock,
			       int (*encap_rcv)(struct sock *, struct sk_buff *))
{
	struct udp_tunnel_sock_cfg cfg = {};

	cfg.encap_type = 1;
	cfg.encap_rcv = encap_rcv;
	setup_udp_tunnel_sock(net, sock, &cfg);
	return 0;
}

/*
 * Network namespace teardown: @exit runs for each namespace as it is dismantled, after its
 * netdevs were unregistered or moved back to init_net (pernet subsystems exit after pernet
 * devices), and for every namespace when unregistered. One registration per module.
 */
static struct pernet_operations rrxe_net_ops;

int rrxe_register_pernet(void (*exit)(struct net *net))
{
	rrxe_net_ops.exit = exit;
	return register_pernet_subsys(&rrxe_net_ops);
}

void rrxe_unregister_pernet(void)
{
	unregister_pernet_subsys(&rrxe_net_ops);
}

struct net *rrxe_dev_net(const struct net_device *ndev)
{
	return dev_net(ndev);
}

int rrxe_netdev_ifindex(const struct net_device *ndev)
{
	return READ_ONCE(ndev->ifindex);
}

unsigned int rrxe_ll_reserved_space(const struct net_device *ndev)
{
	return LL_RESERVED_SPACE(ndev);
}

struct sk_buff *rrxe_alloc_skb_atomic(unsigned int size)
{
	return alloc_skb(size, GFP_ATOMIC);
}

struct sk_buff *rrxe_skb_clone_atomic(struct sk_buff *skb)
{
	return skb_clone(skb, GFP_ATOMIC);
}

/*
 * Joins (@join) or leaves the IP multicast group of RoCEv2 multicast GID @gid on @ndev: the
 * IPv4 group of an IPv4-mapped GID (IGMP), else the IPv6 group (MLD). The IP layer counts
 * joins, programs the netdev's MAC filter, and delivers a group's packets to the RoCEv2
 * socket only while joined. Process context; IPv4 membership changes under RTNL, as
 * rdma_cm's own joins do.
 */
int rrxe_ip_mc_group(struct net_device *ndev, const u8 *gid, bool join)
{
	const struct in6_addr *addr = (const struct in6_addr *)gid;

	if (ipv6_addr_v4mapped(addr)) {
		struct in_device *in_dev;
		int err = 0;

		rtnl_lock();
		in_dev = __in_dev_get_rtnl(ndev);
		if (!in_dev)
			err = -ENODEV;
		else if (join)
			ip_mc_inc_group(in_dev, addr->s6_addr32[3]);
		else
			ip_mc_dec_group(in_dev, addr->s6_addr32[3]);
		rtnl_unlock();
		return err;
	}
#if IS_ENABLED(CONFIG_IPV6)
	if (join)
		return ipv6_dev_mc_inc(ndev, addr);
	return ipv6_dev_mc_dec(ndev, addr);
#else
	return -EAFNOSUPPORT;
#endif
}

void rrxe_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

void rrxe_consume_skb(struct sk_buff *skb)
{
	consume_skb(skb);
}

/* 0 or -ENOMEM; pulls with GFP_ATOMIC. */
int rrxe_skb_linearize(struct sk_buff *skb)
{
	return skb_linearize(skb);
}

unsigned char *rrxe_skb_data(const struct sk_buff *skb)
{
	return skb->data;
}

unsigned int rrxe_skb_len(const struct sk_buff *skb)
{
	return skb->len;
}

int rrxe_skb_network_offset(const struct sk_buff *skb)
{
	return skb_network_offset(skb);
}

/* skb->protocol in host order. */
u16 rrxe_skb_protocol(const struct sk_buff *skb)
{
	return ntohs(skb->protocol);
}

void rrxe_skb_set_protocol(struct sk_buff *skb, u16 protocol)
{
	skb->protocol = htons(protocol);
}

struct net_device *rrxe_skb_dev(const struct sk_buff *skb)
{
	return skb->dev;
}

void rrxe_skb_set_dev(struct sk_buff *skb, struct net_device *ndev)
{
	skb->dev = ndev;
}

void rrxe_skb_reserve(struct sk_buff *skb, unsigned int len)
{
	skb_reserve(skb, len);
}

void rrxe_skb_reset_network_header(struct sk_buff *skb)
{
	skb_reset_network_header(skb);
}

void rrxe_skb_reset_transport_header(struct sk_buff *skb)
{
	skb_reset_transport_header(skb);
}

void rrxe_skb_dst_drop(struct sk_buff *skb)
{
	skb_dst_drop(skb);
}

/* Hands the caller's reference on @dst to @skb. */
void rrxe_skb_dst_set(struct sk_buff *skb, struct dst_entry *dst)
{
	skb_dst_set(skb, dst);
}

/* Route for an IPv4 RoCEv2 packet leaving through @oif; addresses in network order. */
int rrxe_route4(struct net *net, int oif, const u8 *saddr, const u8 *daddr, u8 tos,
		struct dst_entry **dstp)
{
	struct flowi4 fl = {};
	struct rtable *rt;

	fl.flowi4_oif = oif;
	fl.flowi4_proto = IPPROTO_UDP;
	fl.flowi4_tos = tos & INET_DSCP_MASK;
	memcpy(&fl.saddr, saddr, 4);
	memcpy(&fl.daddr, daddr, 4);
	fl.fl4_sport = 0;
	fl.fl4_dport = htons(ROCE_V2_UDP_DPORT);
	rt = ip_route_output_key(net, &fl);
	if (IS_ERR(rt))
		return PTR_ERR(rt);
	*dstp = &rt->dst;
	return 0;
}

/*
 * Route for an IPv6 RoCEv2 packet leaving through @oif, and the cookie that tells a kept
 * route from one the FIB has since replaced (rrxe_dst_valid).
 */
int rrxe_route6(struct net *net, int oif, const u8 *saddr, const u8 *daddr,
		struct dst_entry **dstp, u32 *cookiep)
{
#if IS_ENABLED(CONFIG_IPV6)
	struct flowi6 fl6 = {};
	struct dst_entry *dst;
	int err;

	fl6.flowi6_oif = oif;
	fl6.flowi6_proto = IPPROTO_UDP;
	memcpy(&fl6.saddr, saddr, 16);
	memcpy(&fl6.daddr, daddr, 16);
	fl6.fl6_dport = htons(ROCE_V2_UDP_DPORT);
	dst = ipv6_stub->ipv6_dst_lookup_flow(net, NULL, &fl6, NULL);
	if (IS_ERR(dst))
		return PTR_ERR(dst);
	err = dst->error;
	if (err) {
		dst_release(dst);
		return err;
	}
	*cookiep = rt6_get_cookie(dst_rt6_info(dst));
	*dstp = dst;
	return 0;
#else
	return -EAFNOSUPPORT;
#endif
}

/*
 * Whether a route kept since its lookup may still be used: routes are marked obsolete when
 * the FIB changes (IPv4: the namespace's generation moves on; IPv6: the node's serial
 * number, which @cookie recorded), or their netdev goes.
 */
bool rrxe_dst_valid(struct dst_entry *dst, u32 cookie)
{
	return dst_check(dst, cookie) != NULL;
}

/* A further reference on a route the caller holds one on. */
void rrxe_dst_hold(struct dst_entry *dst)
{
	dst_hold(dst);
}

/*
 * The batch of kicks (glue/task.rs `Kicks`) that the receive path of this CPU adds to while a
 * QP's run ends a batch of sends: a packet a local netdev loops back (veth, the loopback
 * device) reaches rrxe's encap_rcv in the softirq that the batch's local_bh_enable() runs, on
 * this CPU, before rrxe_tx_batch_end() returns. NULL outside.
 */
static DEFINE_PER_CPU(void *, rrxe_rx_kicks);

/*
 * Opens a batch of sends: this CPU's softirqs wait for rrxe_tx_batch_end(), so a packet a
 * local netdev loops back waits on this CPU's backlog and the receive softirq takes the
 * batch's packets in one go (up to the backlog's weight a poll) rather than one softirq a
 * packet. Nothing between here and the end may sleep.
 */
void rrxe_tx_batch_begin(void)
{
	local_bh_disable();
}

/*
 * Adds @skb, a RoCEv2 packet built whole (data at its IP header) for the path of the packet
 * @head, to the frag_list of @head after @tail (its last member, NULL for the first), its IP
 * and UDP headers pulled as UDP GRO's fraglist members have them: @head then reads as one UDP
 * datagram of its packets' payloads. @skb's headers stay in place, for the segmentation
 * that restores it (skb_segment_list() keeps each member's own headers).
 */
void rrxe_skb_train_add(struct sk_buff *head, struct sk_buff *tail, struct sk_buff *skb)
{
	__skb_pull(skb, skb_transport_offset(skb) + sizeof(struct udphdr));
	skb->next = NULL;
	if (tail)
		tail->next = skb;
	else
		skb_shinfo(head)->frag_list = skb;
	head->len += skb->len;
	head->data_len += skb->len;
	head->truesize += skb->truesize;
}

/*
 * Makes @head, whose frag_list holds the @segs - 1 packets rrxe_skb_train_add() gave it, one
 * UDP fraglist GSO datagram (what UDP GRO builds for forwarding): its UDP length the whole
 * datagram's, @gso_size its own payload's, the longest of the train's. A device without
 * NETIF_F_GSO_FRAGLIST, or the receiving UDP tunnel socket, splits it back into the packets
 * as built (__udp_gso_segment_list(): each member's own headers; the first's UDP length put
 * back; inet_gso_segment(): the IPv4 IDs numbered on from the first's, the lengths and
 * checksums restored), so the ICRC each was built with holds. Checksum state as GRO's lists
 * have it: the UDP checksum is 0 (IPv4) or accepted as 0 by RoCEv2's sockets (IPv6), and
 * CHECKSUM_NONE would make a GSO skb "bad offload" to the segmenting code.
 */
void rrxe_skb_train_close(struct sk_buff *head, unsigned int segs, unsigned int gso_size)
{
	struct skb_shared_info *shinfo = skb_shinfo(head);

	udp_hdr(head)->len = htons(head->len - skb_transport_offset(head));
	shinfo->gso_size = gso_size;
	shinfo->gso_segs = segs;
	shinfo->gso_type = SKB_GSO_UDP_L4 | SKB_GSO_FRAGLIST;
	head->ip_summed = CHECKSUM_UNNECESSARY;
}

/* ip_local_out() or ip6_local_out() of @skb, inside a batch. */
int rrxe_local_out(struct net *net, struct sk_buff *skb, bool v4)
{
	return v4 ? ip_local_out(net, NULL, skb) : ip6_local_out(net, NULL, skb);
}

/*
 * Closes the batch rrxe_tx_batch_begin() opened, with @kicks (or NULL) collecting the kicks of
 * the packets the softirqs then run receive. Preemption stays off until the pointer is put
 * back, so that it is this CPU's it puts back.
 */
void rrxe_tx_batch_end(void *kicks)
{
	void *outer;

	preempt_disable();
	outer = this_cpu_read(rrxe_rx_kicks);
	this_cpu_write(rrxe_rx_kicks, kicks);
	local_bh_enable();
	this_cpu_write(rrxe_rx_kicks, outer);
	preempt_enable();
}

/* The batch rrxe_tx_batch_end() set on this CPU, or NULL. Softirq context. */
void *rrxe_rx_kicks_here(void)
{
	return this_cpu_read(rrxe_rx_kicks);
}
