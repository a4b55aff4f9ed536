/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C shim for rrxe: static inline functions and macros of the kernel that Rust cannot call
 * directly. Every function here is a one-line forward; the logic lives in Rust.
 */
#ifndef RRXE_SHIM_H
#define RRXE_SHIM_H

#include <linux/spinlock_types.h>
#include <linux/types.h>

struct device;
struct ib_device;
struct ib_ucontext;
struct ib_udata;
struct lock_class_key;
struct net_device;
struct vm_area_struct;

void rrxe_dev_hold(struct net_device *ndev);
void rrxe_dev_put(struct net_device *ndev);
bool rrxe_netif_running(const struct net_device *ndev);
bool rrxe_netif_carrier_ok(const struct net_device *ndev);
bool rrxe_netdev_is_registered(const struct net_device *ndev);
bool rrxe_netdev_is_vlan(const struct net_device *ndev);
unsigned int rrxe_netdev_mtu(const struct net_device *ndev);
struct net_device *rrxe_netdev_notifier_info_to_dev(void *info);
bool rrxe_ib_device_try_get(struct ib_device *ibdev);
unsigned int rrxe_num_possible_cpus(void);

struct uverbs_attr_bundle;
void *rrxe_vmalloc_user(unsigned long size);

struct xarray;
void rrxe_xa_init_alloc(struct xarray *xa);
int rrxe_xa_reserve_cyclic(struct xarray *xa, u32 *id, u32 min, u32 max, u32 *next);
struct ib_ucontext *rrxe_udata_to_ucontext(struct ib_udata *udata);
struct ib_udata *rrxe_bundle_udata(struct uverbs_attr_bundle *attrs);
int rrxe_copy_to_udata(struct ib_udata *udata, const void *src, size_t len);

void rrxe_spin_lock_init(spinlock_t *lock, const char *name, struct lock_class_key *key);

/* Tasks: a work item plus a timer that queues it (glue/task.rs). */
struct work_struct;
struct hrtimer;
void rrxe_init_work(struct work_struct *work, void (*fn)(struct work_struct *));
struct workqueue_struct;
struct workqueue_struct *rrxe_alloc_task_queue(void);
void rrxe_wait_briefly(void);
bool rrxe_queue_work_on(struct workqueue_struct *wq, struct work_struct *work, int *cpu);
void rrxe_tx_batch_begin(void);
void rrxe_skb_train_add(struct sk_buff *head, struct sk_buff *tail, struct sk_buff *skb);
void rrxe_skb_train_close(struct sk_buff *head, unsigned int segs, unsigned int gso_size);
int rrxe_local_out(struct net *net, struct sk_buff *skb, bool v4);
void rrxe_tx_batch_end(void *kicks);
void *rrxe_rx_kicks_here(void);
unsigned int rrxe_queue_work_beside(struct workqueue_struct *wq, struct work_struct *work,
				    int *cpu, bool *moved);
void rrxe_hrtimer_setup(struct hrtimer *timer, enum hrtimer_restart (*fn)(struct hrtimer *));
void rrxe_hrtimer_start(struct hrtimer *timer, u64 delay_ns, u64 slack_ns);
bool rrxe_hrtimer_is_queued(struct hrtimer *timer);

/* ---- memory / tables: object tables, MR page arrays, memory access ---- */
struct page;
struct sg_page_iter;
void rrxe_xa_init_alloc_irq(struct xarray *xa);
int rrxe_xa_reserve_cyclic_irq(struct xarray *xa, u32 *id, u32 min, u32 max, u32 *next,
			       bool atomic);
int rrxe_xa_fill_reserved_irq(struct xarray *xa, u32 index, void *entry);
struct page *rrxe_sg_page_iter_page(struct sg_page_iter *piter);
void *rrxe_kmap_local_page(struct page *page);
void rrxe_kunmap_local(const void *addr);
unsigned long rrxe_atomic_lock_irqsave(void);
void rrxe_atomic_unlock_irqrestore(unsigned long flags);
/* ---- end of memory / tables ---- */

/* --- UDP tunnel / skb (glue/net.rs) --------------------------------------------------- */
struct dst_entry;
struct in6_addr;
struct net;
struct sk_buff;
struct sock;
struct socket;

void rrxe_tunnel_lock(void);
void rrxe_tunnel_unlock(void);
unsigned long rrxe_rx_index_lock(void);
void rrxe_rx_index_unlock(unsigned long flags);
void rrxe_rcu_read_lock(void);
void rrxe_rcu_read_unlock(void);
struct rcu_head;
void rrxe_call_rcu(struct rcu_head *head, void (*func)(struct rcu_head *head));
void rrxe_rcu_barrier(void);
int rrxe_udp_sock_create(struct net *net, bool ipv6, u16 port, struct socket **sockp);
int rrxe_setup_udp_tunnel_sock(struct net *net, struct socket *sock,
			       int (*encap_rcv)(struct sock *, struct sk_buff *));
int rrxe_register_pernet(void (*exit)(struct net *net));
void rrxe_unregister_pernet(void);
struct net *rrxe_dev_net(const struct net_device *ndev);
int rrxe_netdev_ifindex(const struct net_device *ndev);
unsigned int rrxe_ll_reserved_space(const struct net_device *ndev);
struct sk_buff *rrxe_alloc_skb_atomic(unsigned int size);
void rrxe_kfree_skb(struct sk_buff *skb);
struct sk_buff *rrxe_skb_clone_atomic(struct sk_buff *skb);
int rrxe_ip_mc_group(struct net_device *ndev, const u8 *gid, bool join);
void rrxe_consume_skb(struct sk_buff *skb);
int rrxe_skb_linearize(struct sk_buff *skb);
unsigned char *rrxe_skb_data(const struct sk_buff *skb);
unsigned int rrxe_skb_len(const struct sk_buff *skb);
int rrxe_skb_network_offset(const struct sk_buff *skb);
u16 rrxe_skb_protocol(const struct sk_buff *skb);
void rrxe_skb_set_protocol(struct sk_buff *skb, u16 protocol);
struct net_device *rrxe_skb_dev(const struct sk_buff *skb);
void rrxe_skb_set_dev(struct sk_buff *skb, struct net_device *ndev);
void rrxe_skb_reserve(struct sk_buff *skb, unsigned int len);
void rrxe_skb_reset_network_header(struct sk_buff *skb);
void rrxe_skb_reset_transport_header(struct sk_buff *skb);
void rrxe_skb_dst_drop(struct sk_buff *skb);
void rrxe_skb_dst_set(struct sk_buff *skb, struct dst_entry *dst);
int rrxe_route4(struct net *net, int oif, const u8 *saddr, const u8 *daddr, u8 tos,
		struct dst_entry **dstp);
int rrxe_route6(struct net *net, int oif, const u8 *saddr, const u8 *daddr,
		struct dst_entry **dstp, u32 *cookiep);
bool rrxe_dst_valid(struct dst_entry *dst, u32 cookie);
void rrxe_dst_hold(struct dst_entry *dst);
bool rrxe_param_credits(void);
/*
 * Per-CPU u64 counters (glue/percpu.rs): the offset cookie of a zeroed allocation (NULL if
 * none), the sum of its copies, this CPU's add (for architectures the glue has no inline
 * add for) and the free (any context).
 */
u64 *rrxe_percpu_u64_alloc(void);
u64 rrxe_percpu_u64_sum(u64 *p);
void rrxe_percpu_u64_add(u64 *p, u64 n);
void rrxe_percpu_u64_free(u64 *p);
/* The run_times parameter, read by the glue at each task run without a call. */
extern bool rrxe_run_times;
/* The answer_waits parameter, read by the glue at each answer's doorbell without a call. */
extern int rrxe_answer_waits;
/*
 * The netdev the port2 parameter names for a device over @first: 0 if none, 1 with *@second
 * held, -ENODEV if @name (IFNAMSIZ bytes) is not a netdev of @first's namespace.
 */
int rrxe_param_port2(const struct net_device *first, char *name, struct net_device **second);

/*
 * Objects a device may hold of each kind (IBA 11.2.1.2 Query HCA), the defaults of the module
 * parameters of the same names in lower case. Each is also the most a device can hold: MR and
 * MW keys carry a 23-bit index each, AH numbers 24 bits.
 */
#define RRXE_MAX_PD 65536
#define RRXE_MAX_CQ 65536
#define RRXE_MAX_QP 65536
#define RRXE_MAX_SRQ 65536
#define RRXE_MAX_MR 8388607
#define RRXE_MAX_MW 8388608
#define RRXE_MAX_AH 16777215

enum rrxe_limit {
	RRXE_LIMIT_PD,
	RRXE_LIMIT_CQ,
	RRXE_LIMIT_QP,
	RRXE_LIMIT_SRQ,
	RRXE_LIMIT_MR,
	RRXE_LIMIT_MW,
	RRXE_LIMIT_AH,
};
unsigned int rrxe_param_limit(enum rrxe_limit limit);

#endif /* RRXE_SHIM_H */
