// SPDX-License-Identifier: GPL-2.0
/*
 * rrxe_kverbs_test - an in-kernel RDMA consumer that exercises one RoCE device
 * through the kernel verbs API, the way kernel ULPs (NVMe over Fabrics, rds,
 * iSER...) use it.
 *
 * Loading the module runs every test from module_init() against the device
 * named by the "dev" parameter (default rrxe0) and prints KTAP-style results to
 * the kernel log, one "ok N - ..." or "not ok N - ..." line per check, "# ..."
 * diagnostic lines before the result they explain, then "1..N" and a
 * "# totals: P passed, F failed, S skipped" line. module_init() returns 0 even
 * when checks fail, so selftests/rrxe/kverbs.sh can read the results and rmmod it.
 *
 * The code is generic kernel-verbs code: it knows nothing about rrxe and runs
 * as well against rdma_rxe (dev=rxe0) or any RoCE device. Everything happens on
 * one device in loopback: RC QP pairs whose address vectors name the device's
 * own RoCEv2 GID (IPv4 preferred) and whose destination QPs are each other.
 * Remote memory is registered with fast-register MRs (IB_WR_REG_MR), as ULPs
 * do; local SGEs use the PD's local DMA L_Key. The tests:
 *
 *  1. Send/Recv, RDMA Write and Read (64 KiB, page-crossing), fetch-and-add and
 *     compare-and-swap, data verified.
 *  2. A CQ completion handler that destroys the QP its completion belongs to,
 *     20 times, each time with a fresh PD, CQs and QPs.
 *  3. A completion handler that moves its QP to ERR on the first completion:
 *     the WRs queued behind it must be flushed, each completed once, in order.
 *  4. QP event handlers that modify their QP: RTR->RTS on IB_EVENT_COMM_EST,
 *     SQD->RTS on IB_EVENT_SQ_DRAINED; traffic must flow afterwards.
 *  5. ib_post_send() racing ib_modify_qp() to RESET (see kv_t5_race()).
 *  6. Fast-register MRs over non-contiguous pages with a first-page offset;
 *     Local Invalidate, Send with Invalidate, and Fast Registers that must fail;
 *     a key invalidated by one WR of a posted list and used by the next.
 *  7. SGE lists at odd offsets and lengths through the local DMA L_Key, and a
 *     receive buffer too small for the message.
 *  8. Path migration (IBA 17.2.8) on devices that claim IB_DEVICE_AUTO_PATH_MIG:
 *     both QPs load an alternate path and re-arm, arm on each other's traffic,
 *     A migrates by command and B follows; both event handlers must get
 *     IB_EVENT_PATH_MIG, and data must flow before and after.
 *
 * Every wait is bounded (KV_WAIT_MS), so a device that loses a completion or
 * an event gives a "not ok". A handler that does not return within KV_WAIT_MS
 * (deadlocked in the verbs call it makes) fails its test, whose objects are
 * then left allocated, and the later tests still run. Each test runs in a
 * kthread of its own that module_init() waits for with a timeout, so even a
 * deadlock of the test itself inside a verbs call cannot hang the module load:
 * the test is reported as hung and the remaining ones are not run. After
 * either kind of hang the module pins itself and keeps its device reference
 * (the stuck thread or handler may still use them), and the totals line says
 * "wedged".
 *
 * Handlers: rdma_rxe calls completion handlers with the CQ's spinlock held and
 * interrupts disabled, where polling that CQ, destroying or modifying a QP is
 * illegal. A handler that finds itself in atomic context (kv_in_atomic())
 * therefore defers its work to a work item and the test says so in a "#" line;
 * in process context it acts from inside the handler, which is what tests 2 to
 * 4 are about.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/highmem.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/preempt.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <net/ipv6.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

static char *dev = "rrxe0";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "name of the RDMA device to test (default rrxe0)");

static unsigned int race_cycles = 200;
module_param(race_cycles, uint, 0444);
MODULE_PARM_DESC(race_cycles, "RESET cycles of the post_send race test (default 200)");

#define KV_PORT		1
#define KV_WAIT_MS	10000	/* any one completion or event */
#define KV_TEST_S	180	/* a whole test thread, except test 5 */
#define KV_SEND_WR	64
#define KV_RECV_WR	64
#define KV_SGE		3
#define KV_ACCESS_REMOTE (IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE | \
			  IB_ACCESS_REMOTE_ATOMIC)
#define KV_ACCESS_MR	(IB_ACCESS_LOCAL_WRITE | KV_ACCESS_REMOTE)

struct kv_ctx {
	struct ib_device *dev;
	struct ib_pd *pd;
	const struct ib_gid_attr *sgid;
	union ib_gid gid;
	u8 mac[ETH_ALEN];
	u8 rd_atom;
	u32 max_sge;
	unsigned int n, pass, fail, skip;
	/* A thread or handler may still run module code: pin the module. */
	bool wedged;
	/* A test thread hangs: run no more tests. */
	bool stop;
};

static struct kv_ctx kv_ctx;
static struct workqueue_struct *kv_wq;

/* Results. Only the test thread module_init() waits for prints them. */

static bool kv_report(struct kv_ctx *c, bool ok, const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	c->n++;
	if (ok)
		c->pass++;
	else
		c->fail++;
	pr_info("%s %u - %pV\n", ok ? "ok" : "not ok", c->n, &vaf);
	va_end(args);
	return ok;
}

static void kv_skip(struct kv_ctx *c, const char *what, const char *why)
{
	c->n++;
	c->skip++;
	pr_info("ok %u - %s # SKIP %s\n", c->n, what, why);
}

static void kv_info(const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	pr_info("# %pV\n", &vaf);
	va_end(args);
}

/*
 * Whether a handler runs where it must not sleep. preemptible() sees spinlocks
 * only with CONFIG_PREEMPT_COUNT (the debug kernel has it); interrupts off and
 * softirq/hardirq context are visible either way.
 */
static bool kv_in_atomic(void)
{
	return in_interrupt() || irqs_disabled() ||
	       (IS_ENABLED(CONFIG_PREEMPT_COUNT) && !preemptible());
}

/* Buffers: kmalloc'd, mapped for the device with ib_dma_map_single(). */

struct kv_buf {
	void *va;
	u64 dma;
	size_t len;
};

static int kv_buf_alloc(struct kv_ctx *c, struct kv_buf *b, size_t len)
{
	b->len = len;
	b->va = kzalloc(len, GFP_KERNEL);
	if (!b->va)
		return -ENOMEM;
	b->dma = ib_dma_map_single(c->dev, b->va, len, DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(c->dev, b->dma)) {
		kfree(b->va);
		b->va = NULL;
		return -ENOMEM;
	}
	return 0;
}

static void kv_buf_free(struct kv_ctx *c, struct kv_buf *b)
{
	if (!b->va)
		return;
	ib_dma_unmap_single(c->dev, b->dma, b->len, DMA_BIDIRECTIONAL);
	kfree(b->va);
	b->va = NULL;
}

/* Before the CPU reads what the device wrote. */
static void kv_buf_cpu(struct kv_ctx *c, struct kv_buf *b)
{
	ib_dma_sync_single_for_cpu(c->dev, b->dma, b->len, DMA_BIDIRECTIONAL);
}

/* After the CPU wrote what the device will read. */
static void kv_buf_dev(struct kv_ctx *c, struct kv_buf *b)
{
	ib_dma_sync_single_for_device(c->dev, b->dma, b->len, DMA_BIDIRECTIONAL);
}

static struct ib_sge kv_sge(struct kv_buf *b, size_t off, u32 len, u32 lkey)
{
	return (struct ib_sge){ .addr = b->dma + off, .length = len, .lkey = lkey };
}

static u8 kv_byte(size_t i, u32 seed)
{
	return ((u32)i * 2654435761u ^ seed * 40503u) >> 24;
}

static void kv_fill(void *p, size_t len, u32 seed)
{
	u8 *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = kv_byte(i, seed);
}

/* The offset of the first byte of @p that is not the pattern, or -1. */
static long kv_check(const void *p, size_t len, u32 seed)
{
	const u8 *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		if (b[i] != kv_byte(i, seed))
			return i;
	return -1;
}

/* The offset of the first byte of @p that is not @v, or -1. */
static long kv_check_byte(const void *p, size_t len, u8 v)
{
	const u8 *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		if (b[i] != v)
			return i;
	return -1;
}

/* Connected RC QP pairs in loopback. */

struct kv_side {
	struct ib_cq *cq;
	struct ib_qp *qp;
	struct completion ev;	/* signalled by kv_cq_comp() */
	u32 psn;		/* initial send PSN */
};

struct kv_pair {
	struct kv_side s[2];	/* s[0] is "A", s[1] is "B" */
};

struct kv_qp_opts {
	ib_comp_handler comp;	/* NULL: kv_cq_comp() on the side */
	void *comp_ctx;
	void (*event)(struct ib_event *ev, void *ctx); /* NULL: kv_qp_event() */
	void *event_ctx;
	int cqe;		/* 0: default */
	bool rtr_only;		/* leave the QP in RTR */
};

static void kv_cq_comp(struct ib_cq *cq, void *ctx)
{
	struct kv_side *s = ctx;

	complete(&s->ev);
}

static void kv_cq_event(struct ib_event *ev, void *ctx)
{
	pr_info("# unexpected CQ event: %s\n", ib_event_msg(ev->event));
}

static void kv_qp_event(struct ib_event *ev, void *ctx)
{
	pr_info("# QP 0x%x event: %s\n", ev->element.qp->qp_num,
		ib_event_msg(ev->event));
}

static int kv_modify_state(struct ib_qp *qp, enum ib_qp_state state)
{
	struct ib_qp_attr a = { .qp_state = state };

	return ib_modify_qp(qp, &a, IB_QP_STATE);
}

static int kv_to_init(struct ib_qp *qp)
{
	struct ib_qp_attr a = {
		.qp_state = IB_QPS_INIT,
		.pkey_index = 0,
		.port_num = KV_PORT,
		.qp_access_flags = KV_ACCESS_REMOTE,
	};

	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX |
			    IB_QP_PORT | IB_QP_ACCESS_FLAGS);
}

static int kv_to_rtr(struct kv_ctx *c, struct ib_qp *qp, u32 dqpn, u32 rq_psn)
{
	struct ib_qp_attr a = {
		.qp_state = IB_QPS_RTR,
		.path_mtu = IB_MTU_1024,
		.dest_qp_num = dqpn,
		.rq_psn = rq_psn,
		.max_dest_rd_atomic = c->rd_atom,
		.min_rnr_timer = 12,
	};

	a.ah_attr.type = rdma_ah_find_type(c->dev, KV_PORT);
	rdma_ah_set_port_num(&a.ah_attr, KV_PORT);
	rdma_ah_set_grh(&a.ah_attr, &c->gid, 0, c->sgid->index, 64, 0);
	/* Kernel consumers pass a resolved address: our own MAC. */
	memcpy(a.ah_attr.roce.dmac, c->mac, ETH_ALEN);
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			    IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			    IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
}

static void kv_rts_attr(struct kv_ctx *c, u32 sq_psn, struct ib_qp_attr *a,
			int *mask)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IB_QPS_RTS;
	a->sq_psn = sq_psn;
	a->timeout = 14;
	a->retry_cnt = 7;
	a->rnr_retry = 7;
	a->max_rd_atomic = c->rd_atom;
	*mask = IB_QP_STATE | IB_QP_SQ_PSN | IB_QP_TIMEOUT | IB_QP_RETRY_CNT |
		IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC;
}

static int kv_to_rts(struct kv_ctx *c, struct ib_qp *qp, u32 sq_psn)
{
	struct ib_qp_attr a;
	int mask;

	kv_rts_attr(c, sq_psn, &a, &mask);
	return ib_modify_qp(qp, &a, mask);
}

static enum ib_qp_state kv_qp_state(struct ib_qp *qp)
{
	struct ib_qp_init_attr init;
	struct ib_qp_attr a;

	if (ib_query_qp(qp, &a, IB_QP_STATE, &init))
		return -1;
	return a.qp_state;
}

static void kv_pair_destroy(struct kv_pair *p)
{
	int i, ret;

	for (i = 0; i < 2; i++) {
		if (!p->s[i].qp)
			continue;
		ret = ib_destroy_qp(p->s[i].qp);
		if (ret)
			kv_info("ib_destroy_qp: %d", ret);
		p->s[i].qp = NULL;
	}
	for (i = 0; i < 2; i++) {
		if (p->s[i].cq)
			ib_destroy_cq(p->s[i].cq);
		p->s[i].cq = NULL;
	}
}

static int kv_side_create(struct kv_ctx *c, struct ib_pd *pd,
			  struct kv_side *s, const struct kv_qp_opts *o)
{
	struct ib_cq_init_attr cqa = {
		.cqe = o && o->cqe ? o->cqe : 2 * (KV_SEND_WR + KV_RECV_WR),
	};
	struct ib_qp_init_attr qia = {
		.qp_type = IB_QPT_RC,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.cap = {
			.max_send_wr = KV_SEND_WR,
			.max_recv_wr = KV_RECV_WR,
			.max_send_sge = c->max_sge,
			.max_recv_sge = c->max_sge,
		},
	};
	struct ib_cq *cq;
	struct ib_qp *qp;

	init_completion(&s->ev);
	if (o && o->comp)
		cq = ib_create_cq(c->dev, o->comp, kv_cq_event, o->comp_ctx, &cqa);
	else
		cq = ib_create_cq(c->dev, kv_cq_comp, kv_cq_event, s, &cqa);
	if (IS_ERR(cq)) {
		kv_info("ib_create_cq(%d entries): %ld", cqa.cqe, PTR_ERR(cq));
		return PTR_ERR(cq);
	}
	s->cq = cq;
	qia.send_cq = cq;
	qia.recv_cq = cq;
	qia.event_handler = o && o->event ? o->event : kv_qp_event;
	qia.qp_context = o && o->event ? o->event_ctx : s;
	qp = ib_create_qp(pd, &qia);
	if (IS_ERR(qp)) {
		kv_info("ib_create_qp: %ld", PTR_ERR(qp));
		return PTR_ERR(qp);
	}
	s->qp = qp;
	return 0;
}

/* Brings both QPs (back) from RESET to RTS (A only to RTR with rtr_only). */
static int kv_pair_connect(struct kv_ctx *c, struct kv_pair *p, bool a_rtr_only)
{
	struct kv_side *a = &p->s[0], *b = &p->s[1];
	int ret;

	ret = kv_to_init(a->qp);
	if (!ret)
		ret = kv_to_init(b->qp);
	if (!ret)
		ret = kv_to_rtr(c, a->qp, b->qp->qp_num, b->psn);
	if (!ret)
		ret = kv_to_rtr(c, b->qp, a->qp->qp_num, a->psn);
	if (!ret)
		ret = kv_to_rts(c, b->qp, b->psn);
	if (!ret && !a_rtr_only)
		ret = kv_to_rts(c, a->qp, a->psn);
	if (ret)
		kv_info("ib_modify_qp while connecting QPs 0x%x and 0x%x: %d",
			a->qp->qp_num, b->qp->qp_num, ret);
	return ret;
}

static int kv_pair_create(struct kv_ctx *c, struct ib_pd *pd, struct kv_pair *p,
			  const struct kv_qp_opts *oa,
			  const struct kv_qp_opts *ob)
{
	int ret;

	memset(p, 0, sizeof(*p));
	p->s[0].psn = 0x1000;
	p->s[1].psn = 0x2000;
	ret = kv_side_create(c, pd, &p->s[0], oa);
	if (!ret)
		ret = kv_side_create(c, pd, &p->s[1], ob);
	if (!ret)
		ret = kv_pair_connect(c, p, oa && oa->rtr_only);
	if (ret)
		kv_pair_destroy(p);
	return ret;
}

/* Work requests. Each post helper says in a "#" line why it failed. */

static int kv_post_recv(struct kv_side *s, u64 wr_id, struct ib_sge *sge,
			int nsge)
{
	struct ib_recv_wr wr = { .wr_id = wr_id, .sg_list = sge, .num_sge = nsge };
	const struct ib_recv_wr *bad;
	int ret;

	ret = ib_post_recv(s->qp, &wr, &bad);
	if (ret)
		kv_info("ib_post_recv(wr_id %llu): %d", wr_id, ret);
	return ret;
}

static int kv_post(struct ib_qp *qp, struct ib_send_wr *wr)
{
	const struct ib_send_wr *bad;
	int ret;

	ret = ib_post_send(qp, wr, &bad);
	if (ret)
		kv_info("ib_post_send(wr_id %llu, opcode %d): %d", wr->wr_id,
			wr->opcode, ret);
	return ret;
}

/* Send, RDMA Write or RDMA Read (signalled). */
static int kv_post_rdma(struct ib_qp *qp, u64 wr_id, enum ib_wr_opcode op,
			struct ib_sge *sge, int nsge, u64 raddr, u32 rkey)
{
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_id = wr_id,
			.opcode = op,
			.sg_list = sge,
			.num_sge = nsge,
			.send_flags = IB_SEND_SIGNALED,
		},
		.remote_addr = raddr,
		.rkey = rkey,
	};

	return kv_post(qp, &wr.wr);
}

static int kv_post_atomic(struct ib_qp *qp, u64 wr_id, enum ib_wr_opcode op,
			  struct ib_sge *sge, u64 raddr, u32 rkey, u64 cmp_add,
			  u64 swap)
{
	struct ib_atomic_wr wr = {
		.wr = {
			.wr_id = wr_id,
			.opcode = op,
			.sg_list = sge,
			.num_sge = 1,
			.send_flags = IB_SEND_SIGNALED,
		},
		.remote_addr = raddr,
		.rkey = rkey,
		.compare_add = cmp_add,
		.swap = swap,
	};

	return kv_post(qp, &wr.wr);
}

static int kv_post_reg(struct ib_qp *qp, u64 wr_id, struct ib_mr *mr, int access)
{
	struct ib_reg_wr wr = {
		.wr = {
			.wr_id = wr_id,
			.opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED,
		},
		.mr = mr,
		.key = mr->rkey,
		.access = access,
	};

	return kv_post(qp, &wr.wr);
}

static int kv_post_inv(struct ib_qp *qp, u64 wr_id, enum ib_wr_opcode op,
		       struct ib_sge *sge, int nsge, u32 rkey)
{
	struct ib_send_wr wr = {
		.wr_id = wr_id,
		.opcode = op,
		.sg_list = sge,
		.num_sge = nsge,
		.send_flags = IB_SEND_SIGNALED,
		.ex.invalidate_rkey = rkey,
	};

	return kv_post(qp, &wr);
}

/*
 * Waits (at most @ms) for one completion on @s's CQ, polling and re-arming it
 * with IB_CQ_REPORT_MISSED_EVENTS; the CQ's handler must be kv_cq_comp().
 */
static int kv_poll_one(struct kv_side *s, struct ib_wc *wc, unsigned int ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(ms);
	long left;
	int n;

	for (;;) {
		n = ib_poll_cq(s->cq, 1, wc);
		if (n)
			return n < 0 ? n : 0;
		left = (long)(deadline - jiffies);
		if (left <= 0)
			return -ETIMEDOUT;
		reinit_completion(&s->ev);
		n = ib_req_notify_cq(s->cq, IB_CQ_NEXT_COMP |
				     IB_CQ_REPORT_MISSED_EVENTS);
		if (n < 0)
			return n;
		if (n > 0)
			continue;
		wait_for_completion_timeout(&s->ev, left);
	}
}

/* Waits for the completion of @wr_id on @s and checks its status. */
static bool kv_expect(struct kv_side *s, u64 wr_id, enum ib_wc_status status,
		      struct ib_wc *out)
{
	struct ib_wc wc;
	int ret;

	ret = kv_poll_one(s, &wc, KV_WAIT_MS);
	if (ret) {
		kv_info("no completion for wr_id %llu on QP 0x%x: %s", wr_id,
			s->qp ? s->qp->qp_num : 0,
			ret == -ETIMEDOUT ? "timed out" : "ib_poll_cq failed");
		return false;
	}
	if (out)
		*out = wc;
	if (wc.wr_id != wr_id || wc.status != status) {
		kv_info("completion wr_id %llu status %s (%d, vendor_err %u); expected wr_id %llu %s",
			wc.wr_id, ib_wc_status_msg(wc.status), wc.status,
			wc.vendor_err, wr_id, ib_wc_status_msg(status));
		return false;
	}
	return true;
}

/* Waits for the completion of @wr_id on @s and returns its status (-1: none). */
static int kv_status(struct kv_side *s, u64 wr_id)
{
	struct ib_wc wc;

	if (kv_poll_one(s, &wc, KV_WAIT_MS)) {
		kv_info("no completion for wr_id %llu", wr_id);
		return -1;
	}
	if (wc.wr_id != wr_id) {
		kv_info("completion for wr_id %llu, expected %llu", wc.wr_id, wr_id);
		return -1;
	}
	return wc.status;
}

/*
 * Fast-registers the kmalloc'd (physically contiguous) buffer @b for local
 * write and remote access through @s's QP and returns the MR.
 */
static struct ib_mr *kv_reg_buf(struct kv_ctx *c, struct kv_side *s,
				struct kv_buf *b, u64 wr_id)
{
	u32 npages = DIV_ROUND_UP(offset_in_page(b->dma) + b->len, PAGE_SIZE);
	struct scatterlist sg;
	struct ib_mr *mr;
	int n;

	mr = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, npages);
	if (IS_ERR(mr)) {
		kv_info("ib_alloc_mr(%u pages): %ld", npages, PTR_ERR(mr));
		return mr;
	}
	/* ib_map_mr_sg() reads the DMA address and length of each entry only. */
	sg_init_table(&sg, 1);
	sg_dma_address(&sg) = b->dma;
	sg_dma_len(&sg) = b->len;
	n = ib_map_mr_sg(mr, &sg, 1, NULL, PAGE_SIZE);
	if (n != 1) {
		kv_info("ib_map_mr_sg: %d", n);
		ib_dereg_mr(mr);
		return ERR_PTR(n < 0 ? n : -EINVAL);
	}
	ib_update_fast_reg_key(mr, (u8)ib_inc_rkey(mr->rkey));
	if (kv_post_reg(s->qp, wr_id, mr, KV_ACCESS_MR) ||
	    !kv_expect(s, wr_id, IB_WC_SUCCESS, NULL)) {
		ib_dereg_mr(mr);
		return ERR_PTR(-EIO);
	}
	return mr;
}

/*
 * Handlers that act on their own QP share this: @lock serialises them (and the
 * work item they defer to in atomic context) with kv_quiesce(), @stop tells
 * them to do nothing more.
 */
struct kv_handler {
	struct mutex lock;	/* the handler's body; @stop */
	bool stop;
	bool atomic_ctx;
	struct work_struct work;
	struct completion done;
};

static void kv_handler_init(struct kv_handler *h, work_func_t fn)
{
	mutex_init(&h->lock);
	INIT_WORK(&h->work, fn);
	init_completion(&h->done);
}

/* Defers to the work item when called in atomic context; true if it did. */
static bool kv_handler_defer(struct kv_handler *h)
{
	if (!kv_in_atomic())
		return false;
	WRITE_ONCE(h->atomic_ctx, true);
	queue_work(kv_wq, &h->work);
	return true;
}

/*
 * Stops the handler. -EBUSY if it has been running for KV_WAIT_MS (stuck in a
 * verbs call): then nothing it may use can be freed.
 */
static int kv_quiesce(struct kv_handler *h)
{
	unsigned long end = jiffies + msecs_to_jiffies(KV_WAIT_MS);

	while (!mutex_trylock(&h->lock)) {
		if (time_after(jiffies, end))
			return -EBUSY;
		msleep(20);
	}
	h->stop = true;
	mutex_unlock(&h->lock);
	flush_work(&h->work);
	return 0;
}

/* After the handler's CQ or QP is gone: no new call can defer any more. */
static void kv_handler_free(struct kv_handler *h)
{
	flush_work(&h->work);
	mutex_destroy(&h->lock);
	kfree(h);
}

static void kv_wedge(struct kv_ctx *c, const char *why)
{
	kv_info("%s: leaving its objects allocated and the module pinned", why);
	c->wedged = true;
}

/* 1. Basic data path. */

#define KV_T1_REMOTE	(SZ_64K + SZ_4K)	/* RDMA target, 17 pages */
#define KV_T1_OFF	100			/* Write/Read offset in it */
#define KV_T1_ATOMIC	(KV_T1_REMOTE - 64)	/* atomic target in it */

static void kv_t1_basic(struct kv_ctx *c)
{
	struct kv_buf sb = {}, rb = {}, lb = {}, tb = {}, ab = {};
	u32 lkey = c->pd->local_dma_lkey;
	struct kv_pair p = {};
	struct ib_mr *mr = NULL;
	u64 raddr, init, add, *tgt, *res;
	struct ib_sge sge;
	struct ib_wc wc;
	long bad;
	bool ok;

	if (kv_buf_alloc(c, &sb, SZ_4K) || kv_buf_alloc(c, &rb, SZ_4K) ||
	    kv_buf_alloc(c, &lb, SZ_64K) || kv_buf_alloc(c, &tb, KV_T1_REMOTE) ||
	    kv_buf_alloc(c, &ab, 16)) {
		kv_report(c, false, "basic: allocate and map buffers");
		goto out;
	}
	if (!kv_report(c, !kv_pair_create(c, c->pd, &p, NULL, NULL),
		       "basic: RC QP pair connected in loopback"))
		goto out;

	/* Send/Recv, 4 KiB. */
	kv_fill(sb.va, SZ_4K, 1);
	kv_buf_dev(c, &sb);
	sge = kv_sge(&rb, 0, SZ_4K, lkey);
	ok = !kv_post_recv(&p.s[1], 1, &sge, 1);
	sge = kv_sge(&sb, 0, SZ_4K, lkey);
	ok = ok && !kv_post_rdma(p.s[0].qp, 2, IB_WR_SEND, &sge, 1, 0, 0);
	ok = ok && kv_expect(&p.s[0], 2, IB_WC_SUCCESS, NULL);
	ok = ok && kv_expect(&p.s[1], 1, IB_WC_SUCCESS, &wc);
	if (ok && (wc.opcode != IB_WC_RECV || wc.byte_len != SZ_4K ||
		   wc.qp != p.s[1].qp)) {
		kv_info("receive completion: opcode %d byte_len %u", wc.opcode,
			wc.byte_len);
		ok = false;
	}
	if (ok) {
		kv_buf_cpu(c, &rb);
		bad = kv_check(rb.va, SZ_4K, 1);
		if (bad >= 0)
			kv_info("received data differs at byte %ld", bad);
		ok = bad < 0;
	}
	kv_report(c, ok, "basic: Send/Recv of 4 KiB, data verified");

	/* The peer registers its buffer for remote access. */
	memset(tb.va, 0xa5, tb.len);
	kv_buf_dev(c, &tb);
	mr = kv_reg_buf(c, &p.s[1], &tb, 3);
	if (!kv_report(c, !IS_ERR(mr),
		       "basic: fast-register a 68 KiB kmalloc buffer at the peer")) {
		mr = NULL;
		goto out;
	}
	raddr = mr->iova;

	/* RDMA Write, 64 KiB at offset 100: 17 pages touched. */
	kv_fill(lb.va, SZ_64K, 2);
	kv_buf_dev(c, &lb);
	sge = kv_sge(&lb, 0, SZ_64K, lkey);
	ok = !kv_post_rdma(p.s[0].qp, 4, IB_WR_RDMA_WRITE, &sge, 1,
			   raddr + KV_T1_OFF, mr->rkey);
	ok = ok && kv_expect(&p.s[0], 4, IB_WC_SUCCESS, NULL);
	if (ok) {
		kv_buf_cpu(c, &tb);
		bad = kv_check(tb.va + KV_T1_OFF, SZ_64K, 2);
		if (bad >= 0)
			kv_info("written data differs at byte %ld", bad);
		ok = bad < 0 && kv_check_byte(tb.va, KV_T1_OFF, 0xa5) < 0 &&
		     kv_check_byte(tb.va + KV_T1_OFF + SZ_64K,
				   tb.len - KV_T1_OFF - SZ_64K, 0xa5) < 0;
	}
	kv_report(c, ok, "basic: RDMA Write of 64 KiB across pages, data verified");

	/* RDMA Read, 64 KiB at offset 300. */
	kv_fill(tb.va + 300, SZ_64K, 3);
	kv_buf_dev(c, &tb);
	memset(lb.va, 0, lb.len);
	kv_buf_dev(c, &lb);
	ok = !kv_post_rdma(p.s[0].qp, 5, IB_WR_RDMA_READ, &sge, 1, raddr + 300,
			   mr->rkey);
	ok = ok && kv_expect(&p.s[0], 5, IB_WC_SUCCESS, NULL);
	if (ok) {
		kv_buf_cpu(c, &lb);
		bad = kv_check(lb.va, SZ_64K, 3);
		if (bad >= 0)
			kv_info("read data differs at byte %ld", bad);
		ok = bad < 0;
	}
	kv_report(c, ok, "basic: RDMA Read of 64 KiB across pages, data verified");

	/* Atomics on an 8-byte target. */
	if (c->dev->attrs.atomic_cap == IB_ATOMIC_NONE) {
		kv_skip(c, "basic: fetch-and-add", "device has no atomics");
		kv_skip(c, "basic: compare-and-swap", "device has no atomics");
		goto out;
	}
	tgt = tb.va + KV_T1_ATOMIC;
	res = ab.va;
	init = 0x00000001fffffffeULL;
	add = 0x0000000100000003ULL;
	*tgt = init;
	kv_buf_dev(c, &tb);
	sge = kv_sge(&ab, 0, 8, lkey);
	ok = !kv_post_atomic(p.s[0].qp, 6, IB_WR_ATOMIC_FETCH_AND_ADD, &sge,
			     raddr + KV_T1_ATOMIC, mr->rkey, add, 0);
	ok = ok && kv_expect(&p.s[0], 6, IB_WC_SUCCESS, NULL);
	if (ok) {
		kv_buf_cpu(c, &ab);
		kv_buf_cpu(c, &tb);
		if (*res != init || *tgt != init + add)
			kv_info("fetch-and-add returned 0x%llx (want 0x%llx), target 0x%llx (want 0x%llx)",
				*res, init, *tgt, init + add);
		ok = *res == init && *tgt == init + add;
	}
	kv_report(c, ok, "basic: fetch-and-add returns the old value and adds");

	/* A matching compare-and-swap swaps, a mismatching one does not. */
	init += add;
	ok = !kv_post_atomic(p.s[0].qp, 7, IB_WR_ATOMIC_CMP_AND_SWP, &sge,
			     raddr + KV_T1_ATOMIC, mr->rkey, init,
			     0x5555aaaa5555aaaaULL);
	ok = ok && kv_expect(&p.s[0], 7, IB_WC_SUCCESS, NULL);
	if (ok) {
		kv_buf_cpu(c, &ab);
		kv_buf_cpu(c, &tb);
		if (*res != init || *tgt != 0x5555aaaa5555aaaaULL)
			kv_info("compare-and-swap returned 0x%llx, target 0x%llx",
				*res, *tgt);
		ok = *res == init && *tgt == 0x5555aaaa5555aaaaULL;
	}
	ok = ok && !kv_post_atomic(p.s[0].qp, 8, IB_WR_ATOMIC_CMP_AND_SWP,
				   &sge, raddr + KV_T1_ATOMIC, mr->rkey, init,
				   0x1234);
	ok = ok && kv_expect(&p.s[0], 8, IB_WC_SUCCESS, NULL);
	if (ok) {
		kv_buf_cpu(c, &ab);
		kv_buf_cpu(c, &tb);
		if (*res != 0x5555aaaa5555aaaaULL || *tgt != 0x5555aaaa5555aaaaULL)
			kv_info("failing compare-and-swap returned 0x%llx, target 0x%llx",
				*res, *tgt);
		ok = *res == 0x5555aaaa5555aaaaULL && *tgt == 0x5555aaaa5555aaaaULL;
	}
	kv_report(c, ok, "basic: compare-and-swap swaps on a match only, returns the old value");
out:
	kv_pair_destroy(&p);
	if (mr)
		ib_dereg_mr(mr);
	kv_buf_free(c, &ab);
	kv_buf_free(c, &tb);
	kv_buf_free(c, &lb);
	kv_buf_free(c, &rb);
	kv_buf_free(c, &sb);
}

/* 2. A completion handler that destroys its own QP. */

#define KV_T2_ROUNDS	20

struct kv_t2 {
	struct kv_handler h;
	struct ib_cq *cq;
	struct ib_qp *qp;
	int poll_ret;
	struct ib_wc wc;
	int destroy_ret;
	bool destroyed;
};

static void kv_t2_act(struct kv_t2 *t)
{
	mutex_lock(&t->h.lock);
	if (t->h.stop)
		goto out;
	t->h.stop = true;	/* once */
	t->poll_ret = ib_poll_cq(t->cq, 1, &t->wc);
	if (t->poll_ret == 1 && t->wc.qp == t->qp) {
		t->destroy_ret = ib_destroy_qp(t->wc.qp);
		t->destroyed = !t->destroy_ret;
	}
	complete(&t->h.done);
out:
	mutex_unlock(&t->h.lock);
}

static void kv_t2_work(struct work_struct *w)
{
	kv_t2_act(container_of(w, struct kv_t2, h.work));
}

static void kv_t2_comp(struct ib_cq *cq, void *ctx)
{
	struct kv_t2 *t = ctx;

	if (!kv_handler_defer(&t->h))
		kv_t2_act(t);
}

/*
 * One round: fresh PD, CQs and QPs; A sends to B; A's completion handler
 * polls A's Send completion and destroys A from inside the handler. Returns
 * a bit mask of what went wrong (KV_T2_*), or -EBUSY if the handler hangs.
 */
#define KV_T2_DESTROY	BIT(0)	/* destroy from the handler failed */
#define KV_T2_DATA	BIT(1)	/* the Send did not arrive */
#define KV_T2_TEARDOWN	BIT(2)	/* set-up or teardown failed */

static int kv_t2_round(struct kv_ctx *c, struct kv_buf *sb, struct kv_buf *rb,
		       u32 seed, bool *atomic_ctx)
{
	struct kv_qp_opts oa = { .comp = kv_t2_comp };
	struct kv_pair p = {};
	struct ib_sge sge;
	struct ib_wc wc;
	struct ib_pd *pd;
	struct kv_t2 *t;
	int err = 0;
	long bad;

	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t)
		return KV_T2_TEARDOWN;
	kv_handler_init(&t->h, kv_t2_work);
	pd = ib_alloc_pd(c->dev, 0);
	if (IS_ERR(pd)) {
		kv_info("ib_alloc_pd: %ld", PTR_ERR(pd));
		kv_handler_free(&t->h);
		return KV_T2_TEARDOWN;
	}
	oa.comp_ctx = t;
	if (kv_pair_create(c, pd, &p, &oa, NULL)) {
		err = KV_T2_TEARDOWN;
		goto out;
	}
	t->cq = p.s[0].cq;
	t->qp = p.s[0].qp;

	kv_fill(sb->va, 256, seed);
	kv_buf_dev(c, sb);
	sge = kv_sge(rb, 0, 256, pd->local_dma_lkey);
	if (kv_post_recv(&p.s[1], 1, &sge, 1) ||
	    ib_req_notify_cq(t->cq, IB_CQ_NEXT_COMP)) {
		err = KV_T2_TEARDOWN;
		goto out;
	}
	sge = kv_sge(sb, 0, 256, pd->local_dma_lkey);
	if (kv_post_rdma(t->qp, 2, IB_WR_SEND, &sge, 1, 0, 0)) {
		err = KV_T2_TEARDOWN;
		goto out;
	}
	if (!wait_for_completion_timeout(&t->h.done,
					 msecs_to_jiffies(KV_WAIT_MS))) {
		kv_info("round %u: the completion handler did not finish within %u ms",
			seed, KV_WAIT_MS);
		err = KV_T2_DESTROY;
	} else if (t->poll_ret != 1 || t->wc.qp != t->qp ||
		   t->wc.status != IB_WC_SUCCESS || t->wc.wr_id != 2) {
		kv_info("round %u: handler polled %d: wr_id %llu status %s, QP %s",
			seed, t->poll_ret, t->wc.wr_id,
			ib_wc_status_msg(t->wc.status),
			t->wc.qp == t->qp ? "its own" : "another");
		err = KV_T2_DESTROY;
	} else if (!t->destroyed) {
		kv_info("round %u: ib_destroy_qp() in the handler returned %d",
			seed, t->destroy_ret);
		err = KV_T2_DESTROY;
	}
	if (kv_quiesce(&t->h)) {
		kv_wedge(c, "completion handler stuck (in ib_destroy_qp?)");
		return -EBUSY;
	}
	if (t->destroyed)
		p.s[0].qp = NULL;
	*atomic_ctx |= READ_ONCE(t->h.atomic_ctx);

	if (kv_expect(&p.s[1], 1, IB_WC_SUCCESS, &wc) && wc.byte_len == 256) {
		kv_buf_cpu(c, rb);
		bad = kv_check(rb->va, 256, seed);
		if (bad >= 0) {
			kv_info("round %u: received data differs at %ld", seed, bad);
			err |= KV_T2_DATA;
		}
	} else {
		err |= KV_T2_DATA;
	}
out:
	if (p.s[1].qp && ib_destroy_qp(p.s[1].qp)) {
		kv_info("round %u: ib_destroy_qp(peer) failed", seed);
		err |= KV_T2_TEARDOWN;
	} else {
		p.s[1].qp = NULL;
	}
	kv_pair_destroy(&p);
	ib_dealloc_pd(pd);
	kv_handler_free(&t->h);
	return err;
}

static void kv_t2_destroy_in_handler(struct kv_ctx *c)
{
	struct kv_buf sb = {}, rb = {};
	unsigned int i, bad_destroy = 0, bad_data = 0, bad_teardown = 0;
	bool atomic_ctx = false;
	int err = 0;

	if (kv_buf_alloc(c, &sb, 256) || kv_buf_alloc(c, &rb, 256)) {
		kv_report(c, false, "destroy in handler: allocate buffers");
		goto out;
	}
	for (i = 0; i < KV_T2_ROUNDS; i++) {
		err = kv_t2_round(c, &sb, &rb, i, &atomic_ctx);
		if (err < 0)
			break;
		bad_destroy += !!(err & KV_T2_DESTROY);
		bad_data += !!(err & KV_T2_DATA);
		bad_teardown += !!(err & KV_T2_TEARDOWN);
	}
	if (atomic_ctx)
		kv_info("the device calls completion handlers in atomic context: polling and ib_destroy_qp() deferred to a work item");
	if (err < 0) {
		kv_report(c, false, "completion handler destroys its own QP: round %u hung", i);
		return;	/* wedged: the buffers may still be in use */
	}
	kv_report(c, !bad_destroy,
		  "completion handler destroys its own QP (ib_destroy_qp() returns 0), %u rounds (%u failed)",
		  KV_T2_ROUNDS, bad_destroy);
	kv_report(c, !bad_data,
		  "the Send whose completion destroyed its QP arrived at the peer, %u rounds (%u failed)",
		  KV_T2_ROUNDS, bad_data);
	kv_report(c, !bad_teardown,
		  "peer QP, CQs and PD set up and torn down after each round (%u failed)",
		  bad_teardown);
out:
	kv_buf_free(c, &rb);
	kv_buf_free(c, &sb);
}

/* 3. A completion handler that moves its own QP to ERR. */

#define KV_T3_WRS	16

struct kv_t3 {
	struct kv_handler h;
	struct ib_cq *cq;
	struct ib_qp *qp;
	bool modified;
	int modify_ret;
	int poll_err;
	int notify_err;
	bool wrong_qp;
	unsigned int n, extra;
	u64 wr_id[KV_T3_WRS];
	enum ib_wc_status status[KV_T3_WRS];
};

static void kv_t3_act(struct kv_t3 *t)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	struct ib_wc wc;
	int ret;

	mutex_lock(&t->h.lock);
	if (t->h.stop)
		goto out;
	do {
		while ((ret = ib_poll_cq(t->cq, 1, &wc)) == 1) {
			if (t->n < KV_T3_WRS) {
				t->wr_id[t->n] = wc.wr_id;
				t->status[t->n] = wc.status;
				t->n++;
			} else {
				t->extra++;
			}
			if (wc.qp != t->qp)
				t->wrong_qp = true;
			if (!t->modified && wc.status == IB_WC_SUCCESS) {
				t->modified = true;
				t->modify_ret = ib_modify_qp(t->qp, &attr,
							     IB_QP_STATE);
			}
		}
		if (ret < 0)
			t->poll_err = ret;
		if (t->n == KV_T3_WRS)
			complete(&t->h.done);
		/* Re-arm; catch what arrived between the last poll and now. */
		ret = ib_req_notify_cq(t->cq, IB_CQ_NEXT_COMP |
				       IB_CQ_REPORT_MISSED_EVENTS);
		if (ret < 0)
			t->notify_err = ret;
	} while (ret > 0);
out:
	mutex_unlock(&t->h.lock);
}

static void kv_t3_work(struct work_struct *w)
{
	kv_t3_act(container_of(w, struct kv_t3, h.work));
}

static void kv_t3_comp(struct ib_cq *cq, void *ctx)
{
	struct kv_t3 *t = ctx;

	if (!kv_handler_defer(&t->h))
		kv_t3_act(t);
}

/*
 * A posts 16 signalled Sends in one chain; B has one receive. The first Send
 * completes; the second meets RNR NAKs (rnr_retry 7: forever) and holds the
 * queue, so all 15 are still queued when the handler, on the first successful
 * completion, moves A to ERR: they must be flushed, each exactly once, in order.
 */
static void kv_t3_modify_in_handler(struct kv_ctx *c)
{
	struct ib_send_wr wrs[KV_T3_WRS] = {};
	struct kv_qp_opts oa = { .comp = kv_t3_comp };
	u32 lkey = c->pd->local_dma_lkey;
	const struct ib_send_wr *bad_wr;
	struct kv_buf sb = {}, rb = {};
	struct ib_sge ssge, rsge;
	struct kv_pair p = {};
	struct kv_t3 *t = NULL;
	bool ok, order = true, flushed = true;
	unsigned int i;
	struct ib_wc wc;
	int ret;

	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (t)
		kv_handler_init(&t->h, kv_t3_work);
	if (!t || kv_buf_alloc(c, &sb, 64) || kv_buf_alloc(c, &rb, 64)) {
		kv_report(c, false, "modify in handler: allocate");
		goto out;
	}
	oa.comp_ctx = t;
	if (!kv_report(c, !kv_pair_create(c, c->pd, &p, &oa, NULL),
		       "modify in handler: RC QP pair with a completion handler"))
		goto out;
	t->cq = p.s[0].cq;
	t->qp = p.s[0].qp;

	kv_fill(sb.va, 64, 33);
	kv_buf_dev(c, &sb);
	rsge = kv_sge(&rb, 0, 64, lkey);
	ssge = kv_sge(&sb, 0, 64, lkey);
	for (i = 0; i < KV_T3_WRS; i++) {
		wrs[i].wr_id = i;
		wrs[i].opcode = IB_WR_SEND;
		wrs[i].sg_list = &ssge;
		wrs[i].num_sge = 1;
		wrs[i].send_flags = IB_SEND_SIGNALED;
		wrs[i].next = i + 1 < KV_T3_WRS ? &wrs[i + 1] : NULL;
	}
	ok = !kv_post_recv(&p.s[1], 100, &rsge, 1) &&
	     !ib_req_notify_cq(t->cq, IB_CQ_NEXT_COMP);
	ret = ok ? ib_post_send(t->qp, wrs, &bad_wr) : -EIO;
	if (ret) {
		kv_report(c, false, "modify in handler: post 16 Sends (%d)", ret);
		goto quiesce;
	}
	if (!wait_for_completion_timeout(&t->h.done, msecs_to_jiffies(KV_WAIT_MS)))
		kv_info("%u of %u completions within %u ms", t->n, KV_T3_WRS,
			KV_WAIT_MS);
	/* Time for a completion too many to show up. */
	msleep(100);
quiesce:
	if (kv_quiesce(&t->h)) {
		kv_wedge(c, "completion handler stuck (in ib_modify_qp?)");
		kv_report(c, false, "completion handler moves its own QP to ERR: handler hung");
		return;
	}
	if (ret)
		goto out;
	while (ib_poll_cq(t->cq, 1, &wc) == 1)
		t->extra++;
	if (READ_ONCE(t->h.atomic_ctx))
		kv_info("the device calls completion handlers in atomic context: polling and ib_modify_qp() deferred to a work item");
	if (t->modified && t->modify_ret)
		kv_info("ib_modify_qp(ERR) in the handler: %d", t->modify_ret);
	kv_report(c, t->modified && !t->modify_ret,
		  "completion handler moves its own QP to ERR (ib_modify_qp() returns 0)");
	for (i = 0; i < t->n; i++) {
		if (t->wr_id[i] != i)
			order = false;
		if (i && t->status[i] != IB_WC_WR_FLUSH_ERR)
			flushed = false;
	}
	if (!order || t->n != KV_T3_WRS || t->extra || t->wrong_qp || t->poll_err ||
	    t->notify_err)
		kv_info("%u completions (+%u extra), in order: %s, all of this QP: %s, poll %d, notify %d",
			t->n, t->extra, order ? "yes" : "no",
			t->wrong_qp ? "no" : "yes", t->poll_err, t->notify_err);
	kv_report(c, order && t->n == KV_T3_WRS && !t->extra && !t->wrong_qp &&
		  !t->poll_err && !t->notify_err,
		  "every WR completed exactly once, in order, handler re-arming the CQ");
	if (t->n && (t->status[0] != IB_WC_SUCCESS || !flushed)) {
		for (i = 0; i < t->n; i++)
			if (t->status[i] != (i ? IB_WC_WR_FLUSH_ERR : IB_WC_SUCCESS))
				kv_info("wr_id %llu: %s", t->wr_id[i],
					ib_wc_status_msg(t->status[i]));
	}
	kv_report(c, t->n == KV_T3_WRS && t->status[0] == IB_WC_SUCCESS && flushed,
		  "first Send succeeded, the 15 queued behind it completed with IB_WC_WR_FLUSH_ERR");
	kv_report(c, kv_expect(&p.s[1], 100, IB_WC_SUCCESS, NULL),
		  "peer received the first Send");
out:
	kv_pair_destroy(&p);
	if (t)
		kv_handler_free(&t->h);
	kv_buf_free(c, &rb);
	kv_buf_free(c, &sb);
}

/* 4. Event handlers that modify their QP. */

struct kv_t4 {
	struct kv_handler h;
	struct ib_qp *qp;
	enum ib_event_type want;
	struct ib_qp_attr attr;	/* what the handler applies */
	int mask;
	bool seen;
	bool wrong_qp;
	int modify_ret;
	atomic_t others;
	int other;
};

static void kv_t4_act(struct kv_t4 *t, struct ib_qp *qp)
{
	mutex_lock(&t->h.lock);
	if (!t->h.stop) {
		t->h.stop = true;	/* once */
		t->seen = true;
		t->wrong_qp = qp != t->qp;
		t->modify_ret = ib_modify_qp(t->qp, &t->attr, t->mask);
		complete(&t->h.done);
	}
	mutex_unlock(&t->h.lock);
}

static void kv_t4_work(struct work_struct *w)
{
	struct kv_t4 *t = container_of(w, struct kv_t4, h.work);

	kv_t4_act(t, t->qp);
}

static void kv_t4_event(struct ib_event *ev, void *ctx)
{
	struct kv_t4 *t = ctx;

	if (ev->event != t->want) {
		atomic_inc(&t->others);
		WRITE_ONCE(t->other, ev->event);
		return;
	}
	if (!kv_handler_defer(&t->h))
		kv_t4_act(t, ev->element.qp);
}

static struct kv_t4 *kv_t4_alloc(enum ib_event_type want)
{
	struct kv_t4 *t = kzalloc(sizeof(*t), GFP_KERNEL);

	if (!t)
		return NULL;
	kv_handler_init(&t->h, kv_t4_work);
	t->want = want;
	atomic_set(&t->others, 0);
	return t;
}

/* Reports what the handler did; false (and wedged) if it hangs. */
static bool kv_t4_wait(struct kv_ctx *c, struct kv_t4 *t, const char *name,
		       const char *transition)
{
	bool seen;

	seen = wait_for_completion_timeout(&t->h.done,
					   msecs_to_jiffies(KV_WAIT_MS)) > 0;
	if (kv_quiesce(&t->h)) {
		kv_wedge(c, "QP event handler stuck (in ib_modify_qp?)");
		kv_report(c, false, "%s: event handler hung", name);
		return false;
	}
	if (READ_ONCE(t->h.atomic_ctx))
		kv_info("the device calls QP event handlers in atomic context: ib_modify_qp() deferred to a work item");
	if (!seen)
		kv_info("no %s within %u ms", name, KV_WAIT_MS);
	if (atomic_read(&t->others))
		kv_info("%d other QP events, the last %s", atomic_read(&t->others),
			ib_event_msg(t->other));
	kv_report(c, seen && !t->wrong_qp, "%s delivered to the QP's event handler",
		  name);
	if (seen && t->modify_ret)
		kv_info("ib_modify_qp(%s) in the handler: %d", transition,
			t->modify_ret);
	kv_report(c, seen && !t->modify_ret,
		  "ib_modify_qp(%s) from the %s handler returns 0", transition,
		  name);
	return true;
}

/* Sends 64 bytes from @from to @to and checks them; wr_ids from @id. */
static bool kv_send_check(struct kv_ctx *c, struct kv_side *from,
			  struct kv_side *to, struct kv_buf *sb,
			  struct kv_buf *rb, u64 id)
{
	u32 lkey = c->pd->local_dma_lkey;
	struct ib_sge sge;
	bool ok;

	kv_fill(sb->va, 64, id);
	kv_buf_dev(c, sb);
	memset(rb->va, 0, 64);
	kv_buf_dev(c, rb);
	sge = kv_sge(rb, 0, 64, lkey);
	ok = !kv_post_recv(to, id, &sge, 1);
	sge = kv_sge(sb, 0, 64, lkey);
	ok = ok && !kv_post_rdma(from->qp, id + 1, IB_WR_SEND, &sge, 1, 0, 0);
	ok = ok && kv_expect(from, id + 1, IB_WC_SUCCESS, NULL);
	ok = ok && kv_expect(to, id, IB_WC_SUCCESS, NULL);
	if (ok) {
		kv_buf_cpu(c, rb);
		ok = kv_check(rb->va, 64, id) < 0;
		if (!ok)
			kv_info("received data differs");
	}
	return ok;
}

/* (a) RTR->RTS from the IB_EVENT_COMM_EST handler. */
static void kv_t4a_comm_est(struct kv_ctx *c)
{
	struct kv_qp_opts oa = { .event = kv_t4_event, .rtr_only = true };
	u32 lkey = c->pd->local_dma_lkey;
	struct kv_buf sb = {}, rb = {};
	struct kv_pair p = {};
	struct kv_t4 *t;
	struct ib_sge sge;
	bool ok;

	t = kv_t4_alloc(IB_EVENT_COMM_EST);
	if (!t || kv_buf_alloc(c, &sb, 64) || kv_buf_alloc(c, &rb, 64)) {
		kv_report(c, false, "COMM_EST: allocate");
		goto out;
	}
	oa.event_ctx = t;
	if (!kv_report(c, !kv_pair_create(c, c->pd, &p, &oa, NULL),
		       "COMM_EST: QP A left in RTR, its peer B in RTS"))
		goto out;
	t->qp = p.s[0].qp;
	kv_rts_attr(c, p.s[0].psn, &t->attr, &t->mask);

	/* B's Send is the first packet A receives in RTR. */
	kv_fill(sb.va, 64, 41);
	kv_buf_dev(c, &sb);
	sge = kv_sge(&rb, 0, 64, lkey);
	ok = !kv_post_recv(&p.s[0], 1, &sge, 1);
	sge = kv_sge(&sb, 0, 64, lkey);
	ok = ok && !kv_post_rdma(p.s[1].qp, 2, IB_WR_SEND, &sge, 1, 0, 0);
	ok = ok && kv_expect(&p.s[1], 2, IB_WC_SUCCESS, NULL);
	ok = ok && kv_expect(&p.s[0], 1, IB_WC_SUCCESS, NULL);
	kv_report(c, ok, "COMM_EST: a QP in RTR receives a Send");
	if (!kv_t4_wait(c, t, "IB_EVENT_COMM_EST", "RTR->RTS"))
		return;	/* wedged */
	if (!t->seen || t->modify_ret) {
		kv_report(c, false,
			  "QP moved to RTS by its event handler sends # not run: no RTR->RTS");
		goto out;
	}
	ok = kv_qp_state(p.s[0].qp) == IB_QPS_RTS;
	if (!ok)
		kv_info("ib_query_qp: state %d", kv_qp_state(p.s[0].qp));
	ok = ok && kv_send_check(c, &p.s[0], &p.s[1], &sb, &rb, 10);
	kv_report(c, ok, "QP moved to RTS by its event handler sends, data verified");
out:
	kv_pair_destroy(&p);
	if (t)
		kv_handler_free(&t->h);
	kv_buf_free(c, &rb);
	kv_buf_free(c, &sb);
}

/* (b) SQD->RTS from the IB_EVENT_SQ_DRAINED handler. */
#define KV_T4B_WRS	16

static void kv_t4b_sq_drained(struct kv_ctx *c)
{
	struct kv_qp_opts oa = { .event = kv_t4_event };
	u32 lkey = c->pd->local_dma_lkey;
	struct kv_buf sb = {}, rb = {};
	struct ib_qp_attr sqd = {
		.qp_state = IB_QPS_SQD,
		.en_sqd_async_notify = 1,
	};
	unsigned int i, bad = 0;
	struct kv_pair p = {};
	struct kv_t4 *t;
	struct ib_sge sge;
	int ret;
	bool ok;

	t = kv_t4_alloc(IB_EVENT_SQ_DRAINED);
	if (!t || kv_buf_alloc(c, &sb, KV_T4B_WRS * SZ_4K) ||
	    kv_buf_alloc(c, &rb, (KV_T4B_WRS + 1) * SZ_4K)) {
		kv_report(c, false, "SQ_DRAINED: allocate");
		goto out;
	}
	oa.event_ctx = t;
	if (!kv_report(c, !kv_pair_create(c, c->pd, &p, &oa, NULL),
		       "SQ_DRAINED: RC QP pair with a QP event handler"))
		goto out;
	t->qp = p.s[0].qp;
	t->attr.qp_state = IB_QPS_RTS;
	t->mask = IB_QP_STATE;

	kv_fill(sb.va, sb.len, 51);
	kv_buf_dev(c, &sb);
	ok = true;
	for (i = 0; ok && i <= KV_T4B_WRS; i++) {
		sge = kv_sge(&rb, i * SZ_4K, SZ_4K, lkey);
		ok = !kv_post_recv(&p.s[1], 100 + i, &sge, 1);
	}
	for (i = 0; ok && i < KV_T4B_WRS; i++) {
		sge = kv_sge(&sb, i * SZ_4K, SZ_4K, lkey);
		ok = !kv_post_rdma(p.s[0].qp, i, IB_WR_SEND, &sge, 1, 0, 0);
	}
	ret = ok ? ib_modify_qp(p.s[0].qp, &sqd,
				IB_QP_STATE | IB_QP_EN_SQD_ASYNC_NOTIFY) : -EIO;
	if (ret)
		kv_info("ib_modify_qp(RTS->SQD): %d", ret);
	kv_report(c, !ret, "SQ_DRAINED: RTS->SQD with 16 Sends of 4 KiB in flight");
	if (!kv_t4_wait(c, t, "IB_EVENT_SQ_DRAINED", "SQD->RTS"))
		return;	/* wedged */
	for (i = 0; i < KV_T4B_WRS; i++) {
		if (!kv_expect(&p.s[0], i, IB_WC_SUCCESS, NULL) ||
		    !kv_expect(&p.s[1], 100 + i, IB_WC_SUCCESS, NULL)) {
			bad++;
			break;
		}
	}
	kv_report(c, !bad, "the 16 Sends in flight across SQD completed successfully, in order");
	if (ret || !t->seen || t->modify_ret) {
		kv_report(c, false, "traffic resumes after SQD->RTS from the handler # not run");
		goto out;
	}
	ok = kv_qp_state(p.s[0].qp) == IB_QPS_RTS;
	if (!ok)
		kv_info("ib_query_qp: state %d", kv_qp_state(p.s[0].qp));
	if (ok) {
		sge = kv_sge(&sb, 0, SZ_4K, lkey);
		ok = !kv_post_rdma(p.s[0].qp, 50, IB_WR_SEND, &sge, 1, 0, 0) &&
		     kv_expect(&p.s[0], 50, IB_WC_SUCCESS, NULL) &&
		     kv_expect(&p.s[1], 100 + KV_T4B_WRS, IB_WC_SUCCESS, NULL);
	}
	if (ok) {
		kv_buf_cpu(c, &rb);
		ok = !memcmp(rb.va, sb.va, KV_T4B_WRS * SZ_4K) &&
		     !memcmp(rb.va + KV_T4B_WRS * SZ_4K, sb.va, SZ_4K);
		if (!ok)
			kv_info("received data differs");
	}
	kv_report(c, ok, "traffic resumes after SQD->RTS from the handler, data verified");
out:
	kv_pair_destroy(&p);
	if (t)
		kv_handler_free(&t->h);
	kv_buf_free(c, &rb);
	kv_buf_free(c, &sb);
}

/*
 * 5. ib_post_send() racing ib_modify_qp() to RESET.
 *
 * A poster thread posts signalled 8-byte RDMA Writes (to B's fast-registered
 * buffer) on QP A in a tight loop. Each wr_id carries the generation it read
 * before calling ib_post_send() (upper 32 bits) and a sequence number of the
 * successful posts (lower 32 bits); after the call returns it reads the
 * generation again. The checker (this thread), race_cycles times: polls A's
 * CQ for a while in RTS, moves A to RESET, waits 20 ms for the device to
 * settle, drains A's CQ, increments the generation, and brings B (RESET first)
 * and A back to RTS with fresh PSNs.
 *
 * Soundness. Reading the same generation g before and after a successful
 * post means the post returned before the checker's increment to g + 1 was
 * visible (full barriers on both sides), so the WR went into the incarnation
 * of A that ended with the RESET before that increment: it may complete
 * (success or flush) before, during or shortly after the RESET, and the
 * checker polls those completions before it increments. A completion polled
 * after the increment that carries an older generation and whose post was
 * unambiguous is a WR of a previous incarnation that ran (or was completed)
 * in a later one: the failure this test looks for. A post whose generation
 * changed while it ran is ambiguous: it may legitimately have entered the new
 * incarnation, so it is never counted. The RESET-settle-drain order is what
 * keeps legitimate completions of the old incarnation from looking like
 * violations; a straggler more than 20 ms after RESET returned would be one,
 * and is reported with its status. Whether a post was ambiguous is only
 * known after ib_post_send() returns, which can be after its completion was
 * polled, so suspects are collected and judged after the poster stopped.
 */
#define KV_RACE_MAX_POSTS	BIT(19)
#define KV_RACE_SUSPECTS	4096
#define KV_RACE_RTS_MS		10
#define KV_RACE_SETTLE_MS	20
/*
 * A's CQ: loopback Writes of 8 bytes complete faster on a release kernel than
 * the checker, sleeping 0.2-0.4 ms between polls, drains them; an overrun
 * would lose completions and report CQ errors, which is not what this test is
 * about.
 */
#define KV_RACE_CQE		4096

struct kv_race_suspect {
	u64 wr_id;
	u32 gen;		/* the generation when it was polled */
	enum ib_wc_status status;
};

struct kv_race {
	struct ib_qp *qp;
	struct ib_sge sge;
	u64 raddr;
	u32 rkey;
	u32 gen;		/* written by the checker only */
	unsigned long *ambiguous;	/* by sequence number */
	/* poster */
	u32 nseq;
	u64 posted, einval, enomem, other, nambiguous;
	int other_err;
	bool capped;
	/* checker */
	struct ib_wc wc[8];
	u64 wc_ok, wc_flush, wc_other;
	enum ib_wc_status other_status;
	int poll_err;
	unsigned int nsus, nsus_total;
	struct kv_race_suspect sus[KV_RACE_SUSPECTS];
};

static int kv_race_poster(void *arg)
{
	struct kv_race *r = arg;
	struct ib_rdma_wr wr = {
		.wr = {
			.opcode = IB_WR_RDMA_WRITE,
			.sg_list = &r->sge,
			.num_sge = 1,
			.send_flags = IB_SEND_SIGNALED,
		},
		.remote_addr = r->raddr,
		.rkey = r->rkey,
	};
	const struct ib_send_wr *bad;
	u32 g0, g1;
	int ret;

	while (!kthread_should_stop()) {
		if (r->nseq >= KV_RACE_MAX_POSTS) {
			r->capped = true;
			usleep_range(1000, 2000);
			continue;
		}
		g0 = READ_ONCE(r->gen);
		/* Pairs with the checker's barrier after its increment. */
		smp_mb();
		wr.wr.wr_id = (u64)g0 << 32 | r->nseq;
		ret = ib_post_send(r->qp, &wr.wr, &bad);
		/* The post's effects before the second read of the generation. */
		smp_mb();
		g1 = READ_ONCE(r->gen);
		if (!ret) {
			if (g1 != g0) {
				set_bit(r->nseq, r->ambiguous);
				r->nambiguous++;
			}
			r->nseq++;
			r->posted++;
		} else if (ret == -EINVAL) {
			r->einval++;
		} else if (ret == -ENOMEM) {
			r->enomem++;
		} else {
			r->other++;
			r->other_err = ret;
		}
		cond_resched();
	}
	return 0;
}

static void kv_race_poll(struct kv_race *r, struct ib_cq *cq)
{
	struct ib_wc *wc;
	int n, i;

	while ((n = ib_poll_cq(cq, ARRAY_SIZE(r->wc), r->wc)) > 0) {
		for (i = 0; i < n; i++) {
			wc = &r->wc[i];
			if (wc->status == IB_WC_SUCCESS) {
				r->wc_ok++;
			} else if (wc->status == IB_WC_WR_FLUSH_ERR) {
				r->wc_flush++;
			} else {
				r->wc_other++;
				r->other_status = wc->status;
			}
			if ((u32)(wc->wr_id >> 32) == r->gen)
				continue;
			r->nsus_total++;
			if (r->nsus < KV_RACE_SUSPECTS) {
				r->sus[r->nsus].wr_id = wc->wr_id;
				r->sus[r->nsus].gen = r->gen;
				r->sus[r->nsus].status = wc->status;
				r->nsus++;
			}
		}
	}
	if (n < 0)
		r->poll_err = n;
}

/* RESET, settle, drain, next generation, both QPs back to RTS. */
static int kv_race_cycle(struct kv_ctx *c, struct kv_race *r, struct kv_pair *p,
			 const char **step)
{
	struct ib_qp *a = p->s[0].qp, *b = p->s[1].qp;
	u32 psn_a, psn_b;
	int ret;

	*step = "A to RESET";
	ret = kv_modify_state(a, IB_QPS_RESET);
	if (ret)
		return ret;
	msleep(KV_RACE_SETTLE_MS);
	kv_race_poll(r, p->s[0].cq);
	WRITE_ONCE(r->gen, r->gen + 1);
	/* The increment before the QP can take WRs again. */
	smp_mb();
	psn_a = (0x100000 + r->gen * 0x101) & 0xffffff;
	psn_b = (0x800000 + r->gen * 0x103) & 0xffffff;
	*step = "B to RESET";
	ret = kv_modify_state(b, IB_QPS_RESET);
	if (ret)
		return ret;
	*step = "B to INIT";
	ret = kv_to_init(b);
	if (ret)
		return ret;
	*step = "A to INIT";
	ret = kv_to_init(a);
	if (ret)
		return ret;
	*step = "B to RTR";
	ret = kv_to_rtr(c, b, a->qp_num, psn_a);
	if (ret)
		return ret;
	*step = "A to RTR";
	ret = kv_to_rtr(c, a, b->qp_num, psn_b);
	if (ret)
		return ret;
	*step = "B to RTS";
	ret = kv_to_rts(c, b, psn_b);
	if (ret)
		return ret;
	*step = "A to RTS";
	return kv_to_rts(c, a, psn_a);
}

static void kv_t5_race(struct kv_ctx *c)
{
	const struct kv_qp_opts race_opts = { .cqe = KV_RACE_CQE };
	u32 lkey = c->pd->local_dma_lkey;
	struct kv_buf lb = {}, tb = {};
	struct task_struct *poster;
	unsigned int cyc, i, bad = 0;
	const char *step = "";
	struct kv_pair p = {};
	struct ib_mr *mr = NULL;
	struct kv_race *r;
	unsigned long end;
	struct ib_sge sge;
	int ret = 0;
	bool ok;

	r = kvzalloc(sizeof(*r), GFP_KERNEL);
	if (!r || kv_buf_alloc(c, &lb, SZ_4K) || kv_buf_alloc(c, &tb, SZ_8K)) {
		kv_report(c, false, "post_send vs RESET: allocate");
		goto out;
	}
	r->ambiguous = bitmap_zalloc(KV_RACE_MAX_POSTS, GFP_KERNEL);
	if (!r->ambiguous) {
		kv_report(c, false, "post_send vs RESET: allocate");
		goto out;
	}
	if (kv_pair_create(c, c->pd, &p, &race_opts, NULL)) {
		kv_report(c, false, "post_send vs RESET: RC QP pair");
		goto out;
	}
	mr = kv_reg_buf(c, &p.s[1], &tb, 1);
	if (IS_ERR(mr)) {
		mr = NULL;
		kv_report(c, false, "post_send vs RESET: register the peer's buffer");
		goto out;
	}
	r->qp = p.s[0].qp;
	r->sge = kv_sge(&lb, 0, 8, lkey);
	r->raddr = mr->iova;
	r->rkey = mr->rkey;

	poster = kthread_run(kv_race_poster, r, "kverbs-poster");
	if (IS_ERR(poster)) {
		kv_report(c, false, "post_send vs RESET: start the poster thread");
		goto out;
	}
	for (cyc = 0; cyc < race_cycles; cyc++) {
		end = jiffies + msecs_to_jiffies(KV_RACE_RTS_MS);
		do {
			kv_race_poll(r, p.s[0].cq);
			usleep_range(200, 400);
		} while (time_before(jiffies, end));
		ret = kv_race_cycle(c, r, &p, &step);
		if (ret)
			break;
	}
	kthread_stop(poster);
	/* One more cycle without the poster: what it left behind drains. */
	if (!ret)
		ret = kv_race_cycle(c, r, &p, &step);
	if (ret)
		kv_info("cycle %u: ib_modify_qp(%s): %d", cyc, step, ret);
	kv_report(c, !ret,
		  "post_send vs RESET: %u RESET->RTS cycles of A and B, every ib_modify_qp() returns 0",
		  race_cycles);

	kv_info("posts: %llu succeeded (%llu ambiguous), %llu -EINVAL, %llu -ENOMEM, %llu other (last %d)%s",
		r->posted, r->nambiguous, r->einval, r->enomem, r->other,
		r->other_err, r->capped ? ", capped" : "");
	kv_info("completions: %llu success, %llu flushed, %llu other (last %s); %u from an earlier generation",
		r->wc_ok, r->wc_flush, r->wc_other,
		r->wc_other ? ib_wc_status_msg(r->other_status) : "-",
		r->nsus_total);
	kv_report(c, r->posted && r->wc_ok && r->einval + r->other && !r->poll_err,
		  "post_send vs RESET: posts succeeded in RTS and were refused around RESET");
	for (i = 0; i < r->nsus; i++) {
		u64 seq = r->sus[i].wr_id & 0xffffffff;

		if (seq < KV_RACE_MAX_POSTS && test_bit(seq, r->ambiguous))
			continue;
		if (bad++ < 5)
			kv_info("WR seq %llu posted unambiguously in generation %llu completed (%s) in generation %u",
				seq, r->sus[i].wr_id >> 32,
				ib_wc_status_msg(r->sus[i].status), r->sus[i].gen);
	}
	if (r->nsus < r->nsus_total)
		kv_info("%u completions from earlier generations not judged (list full)",
			r->nsus_total - r->nsus);
	kv_report(c, !bad,
		  "no WR posted into an earlier incarnation of the QP completed in a later one (%u violations)",
		  bad);

	/* The pair still works: a 4 KiB Write and Read back. */
	ok = !ret;
	if (ok) {
		kv_fill(lb.va, SZ_4K, 77);
		kv_buf_dev(c, &lb);
		sge = kv_sge(&lb, 0, SZ_4K, lkey);
		ok = !kv_post_rdma(p.s[0].qp, 1, IB_WR_RDMA_WRITE, &sge, 1,
				   mr->iova + SZ_4K, mr->rkey) &&
		     kv_expect(&p.s[0], 1, IB_WC_SUCCESS, NULL);
	}
	if (ok) {
		memset(lb.va, 0, SZ_4K);
		kv_buf_dev(c, &lb);
		ok = !kv_post_rdma(p.s[0].qp, 2, IB_WR_RDMA_READ, &sge, 1,
				   mr->iova + SZ_4K, mr->rkey) &&
		     kv_expect(&p.s[0], 2, IB_WC_SUCCESS, NULL);
	}
	if (ok) {
		kv_buf_cpu(c, &lb);
		kv_buf_cpu(c, &tb);
		ok = kv_check(lb.va, SZ_4K, 77) < 0 &&
		     kv_check(tb.va + SZ_4K, SZ_4K, 77) < 0;
		if (!ok)
			kv_info("data differs");
	}
	kv_report(c, ok,
		  "post_send vs RESET: the QP pair carries data afterwards (Write and Read verified)");
out:
	kv_pair_destroy(&p);
	if (mr)
		ib_dereg_mr(mr);
	kv_buf_free(c, &tb);
	kv_buf_free(c, &lb);
	if (r)
		bitmap_free(r->ambiguous);
	kvfree(r);
}

/* 6. Fast-register MRs over non-contiguous pages. */

#define KV_T6_PAGES	4
#define KV_T6_OFF	100	/* first-page offset */
#define KV_T6_MAX_SG	8

/* The pages in the order the scatterlist lists them: never ascending. */
static const unsigned int kv_t6_order[KV_T6_PAGES] = { 1, 3, 0, 2 };

struct kv_pages {
	struct page *page[KV_T6_PAGES];
	struct sg_table sgt;
	int mapped;
};

/* Copies between @buf and the bytes at offset @off of the MR (from its iova). */
static void kv_pages_copy(struct kv_pages *pg, size_t off, void *buf,
			  size_t len, bool to_pages)
{
	size_t q = off + KV_T6_OFF, n;
	unsigned int po;
	void *va;

	while (len) {
		po = offset_in_page(q);
		n = min_t(size_t, len, PAGE_SIZE - po);
		va = kmap_local_page(pg->page[kv_t6_order[q / PAGE_SIZE]]);
		if (to_pages)
			memcpy(va + po, buf, n);
		else
			memcpy(buf, va + po, n);
		kunmap_local(va);
		buf += n;
		q += n;
		len -= n;
	}
}

/* The scatterlist has no ib_dma_sync_sg_*(); sync each entry. */
static void kv_pages_sync(struct kv_ctx *c, struct kv_pages *pg, bool for_cpu)
{
	struct scatterlist *sg;
	int i;

	for_each_sg(pg->sgt.sgl, sg, pg->mapped, i) {
		if (for_cpu)
			ib_dma_sync_single_for_cpu(c->dev, sg_dma_address(sg),
						   sg_dma_len(sg), DMA_BIDIRECTIONAL);
		else
			ib_dma_sync_single_for_device(c->dev, sg_dma_address(sg),
						      sg_dma_len(sg),
						      DMA_BIDIRECTIONAL);
	}
}

static void kv_pages_free(struct kv_ctx *c, struct kv_pages *pg)
{
	int i;

	if (pg->mapped > 0)
		ib_dma_unmap_sg(c->dev, pg->sgt.sgl, KV_T6_PAGES, DMA_BIDIRECTIONAL);
	sg_free_table(&pg->sgt);
	for (i = 0; i < KV_T6_PAGES; i++)
		if (pg->page[i])
			__free_page(pg->page[i]);
	kfree(pg);
}

static struct kv_pages *kv_pages_alloc(struct kv_ctx *c)
{
	struct scatterlist *sg;
	struct kv_pages *pg;
	int i;

	pg = kzalloc(sizeof(*pg), GFP_KERNEL);
	if (!pg)
		return NULL;
	for (i = 0; i < KV_T6_PAGES; i++) {
		pg->page[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!pg->page[i])
			goto err;
	}
	if (sg_alloc_table(&pg->sgt, KV_T6_PAGES, GFP_KERNEL))
		goto err;
	for_each_sg(pg->sgt.sgl, sg, KV_T6_PAGES, i)
		sg_set_page(sg, pg->page[kv_t6_order[i]], PAGE_SIZE, 0);
	pg->mapped = ib_dma_map_sg(c->dev, pg->sgt.sgl, KV_T6_PAGES,
				   DMA_BIDIRECTIONAL);
	if (pg->mapped <= 0)
		goto err;
	return pg;
err:
	kv_pages_free(c, pg);
	return NULL;
}

/*
 * Waits for the completion of a Fast Register that must fail; reports it and
 * whether its QP is now unusable (any error moves it to ERR).
 */
static bool kv_t6_expect_fail(struct kv_ctx *c, struct kv_side *s, u64 wr_id,
			      const char *what)
{
	int st = kv_status(s, wr_id);

	if (st >= 0)
		kv_info("%s completed with %s (%d)", what,
			ib_wc_status_msg(st), st);
	kv_report(c, st > 0, "%s completes in error", what);
	return st != IB_WC_SUCCESS;
}

/* A fresh QP pair in place of one whose QPs went to ERR. */
static bool kv_t6_fresh(struct kv_ctx *c, struct kv_pair *p)
{
	kv_pair_destroy(p);
	return !kv_pair_create(c, c->pd, p, NULL, NULL);
}

/* Local Invalidate of @rkey on A (status reported); a fresh pair if it failed. */
static bool kv_t6_inv(struct kv_ctx *c, struct kv_pair *p, u32 rkey, u64 wr_id)
{
	int st = -1;

	if (!kv_post_inv(p->s[0].qp, wr_id, IB_WR_LOCAL_INV, NULL, 0, rkey))
		st = kv_status(&p->s[0], wr_id);
	kv_info("IB_WR_LOCAL_INV of R_Key 0x%x then: %s", rkey,
		st < 0 ? "no completion" : ib_wc_status_msg(st));
	return st == IB_WC_SUCCESS || kv_t6_fresh(c, p);
}

/* A fresh key for @mr and a Fast Register of it on @s (KV_ACCESS_MR) that completes. */
static bool kv_t6_reg(struct kv_side *s, struct ib_mr *mr, u64 wr_id)
{
	ib_update_fast_reg_key(mr, (u8)ib_inc_rkey(mr->rkey));
	return !kv_post_reg(s->qp, wr_id, mr, KV_ACCESS_MR) &&
	       kv_expect(s, wr_id, IB_WC_SUCCESS, NULL);
}

/* Whether receive completion @wc reports the invalidation of @rkey. */
static bool kv_t6_invalidated(const struct ib_wc *wc, u32 rkey)
{
	if ((wc->wc_flags & IB_WC_WITH_INVALIDATE) && wc->ex.invalidate_rkey == rkey)
		return true;
	kv_info("receive completion: wc_flags 0x%x invalidate_rkey 0x%x (R_Key 0x%x)",
		wc->wc_flags, wc->ex.invalidate_rkey, rkey);
	return false;
}

/*
 * Registers @mr again on A and has B post, as one list, an RDMA Write of 8
 * bytes to @raddr through its R_Key, a Send with Invalidate of that R_Key and
 * a second RDMA Write of other bytes to @raddr: the first two must succeed,
 * the second Write fail with IB_WC_REM_ACCESS_ERR, and the pages must hold
 * the first Write's bytes. @lb is B's buffer (local DMA L_Key).
 */
static bool kv_t6_batch_remote(struct kv_ctx *c, struct kv_pair *p,
			       struct ib_mr *mr, struct kv_pages *pg, u64 raddr,
			       struct kv_buf *lb)
{
	u32 lkey = c->pd->local_dma_lkey;
	struct ib_sge s1, s2, s3, rs;
	struct ib_rdma_wr w1, w2;
	struct ib_send_wr inv;
	struct ib_wc wc;
	u8 got[8];
	u32 rkey;
	bool ok;

	if (!kv_t6_reg(&p->s[0], mr, 40)) {
		kv_info("registering the MR again failed");
		return false;
	}
	rkey = mr->rkey;
	/* A's receive for the Send: 64 bytes of its own buffer at 3 KiB. */
	rs = kv_sge(lb, 3072, 64, lkey);
	if (kv_post_recv(&p->s[0], 41, &rs, 1))
		return false;
	kv_fill(lb->va + 2048, 8, 71);
	kv_fill(lb->va + 2056, 8, 81);
	kv_fill(lb->va + 2064, 64, 91);
	kv_buf_dev(c, lb);
	s1 = kv_sge(lb, 2048, 8, lkey);
	s2 = kv_sge(lb, 2064, 64, lkey);
	s3 = kv_sge(lb, 2056, 8, lkey);
	w1 = (struct ib_rdma_wr){
		.wr = { .wr_id = 42, .opcode = IB_WR_RDMA_WRITE, .sg_list = &s1,
			.num_sge = 1, .send_flags = IB_SEND_SIGNALED, .next = &inv },
		.remote_addr = raddr,
		.rkey = rkey,
	};
	inv = (struct ib_send_wr){
		.wr_id = 43, .opcode = IB_WR_SEND_WITH_INV, .sg_list = &s2,
		.num_sge = 1, .send_flags = IB_SEND_SIGNALED,
		.ex.invalidate_rkey = rkey, .next = &w2.wr,
	};
	w2 = (struct ib_rdma_wr){
		.wr = { .wr_id = 44, .opcode = IB_WR_RDMA_WRITE, .sg_list = &s3,
			.num_sge = 1, .send_flags = IB_SEND_SIGNALED },
		.remote_addr = raddr,
		.rkey = rkey,
	};
	if (kv_post(p->s[1].qp, &w1.wr))
		return false;
	ok = kv_expect(&p->s[1], 42, IB_WC_SUCCESS, NULL) &&
	     kv_expect(&p->s[1], 43, IB_WC_SUCCESS, NULL) &&
	     kv_expect(&p->s[1], 44, IB_WC_REM_ACCESS_ERR, NULL);
	ok = kv_expect(&p->s[0], 41, IB_WC_SUCCESS, &wc) && ok;
	ok = ok && kv_t6_invalidated(&wc, rkey);
	kv_pages_sync(c, pg, true);
	kv_pages_copy(pg, raddr - mr->iova, got, 8, false);
	if (kv_check(got, 8, 71) >= 0) {
		kv_info("the pages do not hold the first Write's bytes%s",
			kv_check(got, 8, 81) < 0 ? " but the second's" : "");
		ok = false;
	}
	return ok;
}

/*
 * Registers @mr again on A and has A post, as one list, a Send of 64 bytes of
 * the MR's pages through its L_Key, a Local Invalidate of that key and a
 * second Send through it: the first two must succeed and the second Send
 * fail with IB_WC_LOC_PROT_ERR and never leave; B receives the first into
 * @lb (and has @rb posted for the second).
 */
static bool kv_t6_batch_local(struct kv_ctx *c, struct kv_pair *p,
			      struct ib_mr *mr, struct kv_pages *pg, u64 iova,
			      struct kv_buf *lb, struct kv_buf *rb)
{
	u32 lkey = c->pd->local_dma_lkey;
	struct ib_send_wr s1, inv, s2;
	struct ib_sge sg, rs1, rs2;
	struct ib_wc wc;
	u8 want[64];
	int st[3], i;
	u32 key;
	bool ok;

	if (!kv_t6_reg(&p->s[0], mr, 50)) {
		kv_info("registering the MR again failed");
		return false;
	}
	key = mr->lkey;
	kv_fill(want, 64, 101);
	kv_pages_copy(pg, 0, want, 64, true);
	kv_pages_sync(c, pg, false);
	memset(want, 0, 64);
	rs1 = kv_sge(lb, 3072, 64, lkey);
	rs2 = kv_sge(rb, 0, 64, lkey);
	if (kv_post_recv(&p->s[1], 51, &rs1, 1) ||
	    kv_post_recv(&p->s[1], 52, &rs2, 1))
		return false;
	sg = (struct ib_sge){ .addr = iova, .length = 64, .lkey = key };
	s1 = (struct ib_send_wr){
		.wr_id = 53, .opcode = IB_WR_SEND, .sg_list = &sg, .num_sge = 1,
		.send_flags = IB_SEND_SIGNALED, .next = &inv,
	};
	inv = (struct ib_send_wr){
		.wr_id = 54, .opcode = IB_WR_LOCAL_INV,
		.send_flags = IB_SEND_SIGNALED, .ex.invalidate_rkey = key,
		.next = &s2,
	};
	s2 = s1;
	s2.wr_id = 55;
	s2.next = NULL;
	if (kv_post(p->s[0].qp, &s1))
		return false;
	/*
	 * In order (IBA 10.8.3.1). The first Send left before the error and B
	 * executes it: it completes successfully, as does the Local Invalidate,
	 * and only then the failed Send, moving A to ERR.
	 */
	for (i = 0; i < 3; i++) {
		st[i] = kv_status(&p->s[0], 53 + i);
		if (st[i] < 0)
			return false;
	}
	kv_info("A's completions: %s, %s, %s", ib_wc_status_msg(st[0]),
		ib_wc_status_msg(st[1]), ib_wc_status_msg(st[2]));
	ok = st[0] == IB_WC_SUCCESS && st[1] == IB_WC_SUCCESS &&
	     st[2] == IB_WC_LOC_PROT_ERR;
	/* The first Send's bytes arrived; the second Send never left. */
	if (!kv_expect(&p->s[1], 51, IB_WC_SUCCESS, NULL))
		return false;
	kv_buf_cpu(c, lb);
	if (kv_check(lb->va + 3072, 64, 101) >= 0) {
		kv_info("the received bytes are not the MR's");
		ok = false;
	}
	if (ib_poll_cq(p->s[1].cq, 1, &wc) != 0) {
		kv_info("B has a second completion: wr_id %llu status %s", wc.wr_id,
			ib_wc_status_msg(wc.status));
		ok = false;
	}
	return ok;
}

static void kv_t6_frmr(struct kv_ctx *c)
{
	const size_t o1 = PAGE_SIZE - KV_T6_OFF - 150;	/* crosses a page */
	const size_t o2 = 2 * PAGE_SIZE + 64 - KV_T6_OFF;	/* 8-aligned */
	const u64 init = 0x0123456789abcdefULL, add = 0x1111;
	u32 lkey = c->pd->local_dma_lkey;
	struct kv_buf lb = {}, ab = {};
	struct kv_pages *pg = NULL;
	struct kv_pair p = {};
	struct ib_mr *mr = NULL;
	unsigned int off = KV_T6_OFF;
	u8 *vb = NULL;
	struct ib_sge sge;
	struct ib_wc wc;
	u64 v, iova;
	bool ok;
	u32 rkey;
	int n;

	if (!(c->dev->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS) ||
	    c->dev->attrs.max_fast_reg_page_list_len < KV_T6_MAX_SG) {
		kv_skip(c, "fast-register MRs", "no memory management extensions");
		return;
	}
	pg = kv_pages_alloc(c);
	vb = kzalloc(512, GFP_KERNEL);
	if (!pg || !vb || kv_buf_alloc(c, &lb, SZ_4K) || kv_buf_alloc(c, &ab, 64)) {
		kv_report(c, false, "FRMR: allocate and map 4 pages and buffers");
		goto out;
	}
	mr = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, KV_T6_MAX_SG);
	if (IS_ERR(mr))
		kv_info("ib_alloc_mr: %ld", PTR_ERR(mr));
	if (!kv_report(c, !IS_ERR(mr), "FRMR: ib_alloc_mr(IB_MR_TYPE_MEM_REG, 8)")) {
		mr = NULL;
		goto out;
	}
	n = ib_map_mr_sg(mr, pg->sgt.sgl, pg->mapped, &off, PAGE_SIZE);
	ok = n == pg->mapped && mr->length == KV_T6_PAGES * PAGE_SIZE - KV_T6_OFF &&
	     mr->iova == sg_dma_address(pg->sgt.sgl) + KV_T6_OFF;
	if (!ok)
		kv_info("ib_map_mr_sg: %d of %d, length %llu, iova 0x%llx", n,
			pg->mapped, mr->length, mr->iova);
	if (!kv_report(c, ok,
		       "FRMR: ib_map_mr_sg maps 4 non-contiguous pages at first-page offset %u",
		       KV_T6_OFF))
		goto out;
	iova = mr->iova;
	if (!kv_report(c, !kv_pair_create(c, c->pd, &p, NULL, NULL),
		       "FRMR: RC QP pair, A owns the MR"))
		goto out;

	ok = kv_t6_reg(&p.s[0], mr, 1);
	rkey = mr->rkey;
	if (!kv_report(c, ok, "FRMR: IB_WR_REG_MR with remote read/write/atomic completes"))
		goto out;

	/* B writes 300 bytes across the first page boundary. */
	kv_fill(lb.va, 300, 61);
	kv_buf_dev(c, &lb);
	sge = kv_sge(&lb, 0, 300, lkey);
	ok = !kv_post_rdma(p.s[1].qp, 2, IB_WR_RDMA_WRITE, &sge, 1, iova + o1, rkey) &&
	     kv_expect(&p.s[1], 2, IB_WC_SUCCESS, NULL);
	if (ok) {
		kv_pages_sync(c, pg, true);
		kv_pages_copy(pg, o1 - 16, vb, 332, false);
		ok = kv_check_byte(vb, 16, 0) < 0 && kv_check(vb + 16, 300, 61) < 0 &&
		     kv_check_byte(vb + 316, 16, 0) < 0;
		if (!ok)
			kv_info("the pages do not hold what was written where it was written");
	}
	kv_report(c, ok,
		  "FRMR: RDMA Write from the peer across a page boundary lands in the listed pages");

	/* ... and reads it back. */
	sge = kv_sge(&lb, 512, 300, lkey);
	ok = !kv_post_rdma(p.s[1].qp, 3, IB_WR_RDMA_READ, &sge, 1, iova + o1, rkey) &&
	     kv_expect(&p.s[1], 3, IB_WC_SUCCESS, NULL);
	if (ok) {
		kv_buf_cpu(c, &lb);
		ok = kv_check(lb.va + 512, 300, 61) < 0;
		if (!ok)
			kv_info("read data differs");
	}
	kv_report(c, ok, "FRMR: RDMA Read from the peer across a page boundary returns it");

	/* Fetch-and-add on 8 aligned bytes in the third page. */
	v = init;
	kv_pages_copy(pg, o2, &v, 8, true);
	kv_pages_sync(c, pg, false);
	sge = kv_sge(&ab, 0, 8, lkey);
	if (c->dev->attrs.atomic_cap == IB_ATOMIC_NONE) {
		kv_skip(c, "FRMR: fetch-and-add", "device has no atomics");
	} else {
		ok = !kv_post_atomic(p.s[1].qp, 4, IB_WR_ATOMIC_FETCH_AND_ADD, &sge,
				     iova + o2, rkey, add, 0) &&
		     kv_expect(&p.s[1], 4, IB_WC_SUCCESS, NULL);
		if (ok) {
			kv_buf_cpu(c, &ab);
			kv_pages_sync(c, pg, true);
			kv_pages_copy(pg, o2, &v, 8, false);
			ok = *(u64 *)ab.va == init && v == init + add;
			if (!ok)
				kv_info("fetch-and-add returned 0x%llx, target 0x%llx",
					*(u64 *)ab.va, v);
		}
		kv_report(c, ok,
			  "FRMR: fetch-and-add from the peer returns the old value, the page holds the sum");
	}

	/* Local Invalidate; the R_Key is dead. */
	ok = !kv_post_inv(p.s[0].qp, 5, IB_WR_LOCAL_INV, NULL, 0, rkey) &&
	     kv_expect(&p.s[0], 5, IB_WC_SUCCESS, NULL);
	kv_report(c, ok, "FRMR: IB_WR_LOCAL_INV of the R_Key completes");
	sge = kv_sge(&lb, 1024, 8, lkey);
	ok = !kv_post_rdma(p.s[1].qp, 6, IB_WR_RDMA_WRITE, &sge, 1, iova + o1, rkey) &&
	     kv_expect(&p.s[1], 6, IB_WC_REM_ACCESS_ERR, NULL);
	if (ok) {
		kv_pages_sync(c, pg, true);
		kv_pages_copy(pg, o1, vb, 8, false);
		ok = kv_check(vb, 8, 61) < 0;
		if (!ok)
			kv_info("the invalidated MR's pages changed");
	}
	kv_report(c, ok,
		  "FRMR: RDMA Write with the invalidated R_Key fails with IB_WC_REM_ACCESS_ERR");

	/* A Fast Register on a valid MR must fail (its QP goes to ERR). */
	if (!kv_t6_fresh(c, &p))
		goto pair_failed;
	ok = kv_t6_reg(&p.s[0], mr, 10);
	if (!kv_report(c, ok, "FRMR: IB_WR_REG_MR again after the invalidation completes"))
		goto out;
	if (kv_post_reg(p.s[0].qp, 11, mr, KV_ACCESS_MR))
		kv_report(c, false, "FRMR: IB_WR_REG_MR on a valid MR (same key) # post failed");
	else if (kv_t6_expect_fail(c, &p.s[0], 11, "FRMR: IB_WR_REG_MR on a valid MR (same key)") &&
		 !kv_t6_fresh(c, &p))
		goto pair_failed;
	/* Whatever happened, the MR should be valid: free it for what follows. */
	if (!kv_t6_inv(c, &p, mr->rkey, 12))
		goto pair_failed;

	/* Remote Write without Local Write must fail (IBA 10.6.3.2, o10-37). */
	ib_update_fast_reg_key(mr, (u8)ib_inc_rkey(mr->rkey));
	if (kv_post_reg(p.s[0].qp, 20, mr, IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ)) {
		kv_report(c, false,
			  "FRMR: IB_WR_REG_MR with remote write but no local write # post failed");
	} else if (kv_t6_expect_fail(c, &p.s[0], 20,
				     "FRMR: IB_WR_REG_MR with remote write but no local write")) {
		if (!kv_t6_fresh(c, &p))
			goto pair_failed;
	} else if (!kv_t6_inv(c, &p, mr->rkey, 21)) {
		goto pair_failed;	/* accepted: invalidate it again */
	}

	/* Send with Invalidate from B invalidates A's R_Key. */
	ok = kv_t6_reg(&p.s[0], mr, 30);
	rkey = mr->rkey;
	if (!kv_report(c, ok, "FRMR: register again for Send with Invalidate"))
		goto out;
	sge = kv_sge(&ab, 0, 64, lkey);
	ok = !kv_post_recv(&p.s[0], 31, &sge, 1);
	sge = kv_sge(&lb, 0, 64, lkey);
	ok = ok && !kv_post_inv(p.s[1].qp, 32, IB_WR_SEND_WITH_INV, &sge, 1, rkey) &&
	     kv_expect(&p.s[1], 32, IB_WC_SUCCESS, NULL);
	ok = ok && kv_expect(&p.s[0], 31, IB_WC_SUCCESS, &wc);
	ok = ok && kv_t6_invalidated(&wc, rkey);
	kv_report(c, ok,
		  "FRMR: Send with Invalidate: the receive completion has IB_WC_WITH_INVALIDATE and the R_Key");
	sge = kv_sge(&lb, 1024, 8, lkey);
	ok = !kv_post_rdma(p.s[1].qp, 33, IB_WR_RDMA_WRITE, &sge, 1, iova + o1, rkey) &&
	     kv_expect(&p.s[1], 33, IB_WC_REM_ACCESS_ERR, NULL);
	kv_report(c, ok,
		  "FRMR: RDMA Write with the remotely invalidated R_Key fails with IB_WC_REM_ACCESS_ERR");

	/*
	 * Invalidations between two WRs of one list. A device may keep the MR it
	 * last reached through a key while it works through a batch of packets
	 * or WQEs (rrxe does, for a task run); the key must still be checked
	 * anew at each use, so an MR invalidated by the WR before is dead for
	 * the WR after (IBA 10.6.6: an invalidated key is no longer usable).
	 */
	if (!kv_t6_fresh(c, &p))
		goto pair_failed;
	ok = kv_t6_batch_remote(c, &p, mr, pg, iova + o1, &lb);
	kv_report(c, ok,
		  "FRMR: one list of RDMA Write, Send with Invalidate, RDMA Write through one R_Key: the second Write fails and leaves the pages alone");
	if (!kv_t6_fresh(c, &p))
		goto pair_failed;
	ok = kv_t6_batch_local(c, &p, mr, pg, iova, &lb, &ab);
	kv_report(c, ok,
		  "FRMR: one list of Send, Local Invalidate, Send through one L_Key: the first two succeed, the second Send fails with IB_WC_LOC_PROT_ERR");
	goto out;
pair_failed:
	kv_report(c, false, "FRMR: a fresh RC QP pair");
out:
	kv_pair_destroy(&p);
	if (mr)
		ib_dereg_mr(mr);
	kv_buf_free(c, &ab);
	kv_buf_free(c, &lb);
	kfree(vb);
	if (pg)
		kv_pages_free(c, pg);
}

/* 7. SGE lists through the local DMA L_Key; a receive buffer too small. */

static const struct { u32 off, len; } kv_t7_send[] = {
	{ 1, 1 }, { 4099, 4095 }, { 9001, 5000 },
};

static const struct { u32 off, len; } kv_t7_recv[] = {
	{ 3, 3001 }, { 5003, 4000 }, { 11007, 3100 },
};

static void kv_t7_sge(struct kv_ctx *c)
{
	struct ib_sge ssge[ARRAY_SIZE(kv_t7_send)], rsge[ARRAY_SIZE(kv_t7_recv)];
	u32 lkey = c->pd->local_dma_lkey;
	struct kv_buf sb = {}, rb = {};
	u32 total = 0, done, n;
	struct kv_pair p = {};
	u8 *msg = NULL, *r;
	struct ib_sge sge;
	struct ib_wc wc;
	unsigned int i;
	int st;
	bool ok;

	if (c->max_sge < KV_SGE) {
		kv_skip(c, "SGE lists", "device has fewer than 3 SGEs per WR");
		return;
	}
	msg = kmalloc(SZ_16K, GFP_KERNEL);
	if (!msg || kv_buf_alloc(c, &sb, SZ_16K) || kv_buf_alloc(c, &rb, SZ_16K)) {
		kv_report(c, false, "SGE lists: allocate");
		goto out;
	}
	if (!kv_report(c, !kv_pair_create(c, c->pd, &p, NULL, NULL),
		       "SGE lists: RC QP pair"))
		goto out;

	/* The message is the send SGEs' bytes in order. */
	kv_fill(sb.va, SZ_16K, 71);
	kv_buf_dev(c, &sb);
	memset(rb.va, 0x5a, SZ_16K);
	kv_buf_dev(c, &rb);
	for (i = 0; i < ARRAY_SIZE(kv_t7_send); i++) {
		ssge[i] = kv_sge(&sb, kv_t7_send[i].off, kv_t7_send[i].len, lkey);
		memcpy(msg + total, sb.va + kv_t7_send[i].off, kv_t7_send[i].len);
		total += kv_t7_send[i].len;
	}
	for (i = 0; i < ARRAY_SIZE(kv_t7_recv); i++)
		rsge[i] = kv_sge(&rb, kv_t7_recv[i].off, kv_t7_recv[i].len, lkey);
	ok = !kv_post_recv(&p.s[1], 1, rsge, ARRAY_SIZE(rsge)) &&
	     !kv_post_rdma(p.s[0].qp, 2, IB_WR_SEND, ssge, ARRAY_SIZE(ssge), 0, 0) &&
	     kv_expect(&p.s[0], 2, IB_WC_SUCCESS, NULL) &&
	     kv_expect(&p.s[1], 1, IB_WC_SUCCESS, &wc);
	if (ok && wc.byte_len != total) {
		kv_info("byte_len %u, sent %u", wc.byte_len, total);
		ok = false;
	}
	if (ok) {
		/* Scattered over the receive SGEs in order; nothing else touched. */
		kv_buf_cpu(c, &rb);
		r = rb.va;
		done = 0;
		for (i = 0; i < ARRAY_SIZE(kv_t7_recv) && ok; i++) {
			n = min(kv_t7_recv[i].len, total - done);
			ok = !memcmp(r + kv_t7_recv[i].off, msg + done, n);
			done += n;
			memset(r + kv_t7_recv[i].off, 0x5a, n);
		}
		ok = ok && kv_check_byte(r, SZ_16K, 0x5a) < 0;
		if (!ok)
			kv_info("received bytes misplaced (receive SGE %u)", i);
	}
	kv_report(c, ok,
		  "SGE lists: Send of 3 SGEs (1, 4095, 5000 bytes at odd offsets) into 3 receive SGEs, data verified");

	/* A receive buffer too small. */
	sge = kv_sge(&rb, 0, 100, lkey);
	ok = !kv_post_recv(&p.s[1], 3, &sge, 1);
	sge = kv_sge(&sb, 0, 200, lkey);
	ok = ok && !kv_post_rdma(p.s[0].qp, 4, IB_WR_SEND, &sge, 1, 0, 0);
	ok = ok && kv_expect(&p.s[1], 3, IB_WC_LOC_LEN_ERR, NULL);
	kv_report(c, ok,
		  "a 200-byte Send into a 100-byte receive: IB_WC_LOC_LEN_ERR at the receiver");
	st = kv_status(&p.s[0], 4);
	if (st >= 0)
		kv_info("the sender's completion: %s", ib_wc_status_msg(st));
out:
	kv_pair_destroy(&p);
	kv_buf_free(c, &rb);
	kv_buf_free(c, &sb);
	kfree(msg);
}

/* Set-up, the test threads, module_init. */

static int kv_setup(struct kv_ctx *c)
{
	const struct ib_gid_attr *attr;
	struct ib_port_attr pa;
	unsigned long end;
	u16 vlan;
	int i, ret;

	c->dev = ib_device_get_by_name(dev, RDMA_DRIVER_UNKNOWN);
	if (!c->dev) {
		kv_report(c, false, "setup: no RDMA device %s", dev);
		return -ENODEV;
	}
	if (!rdma_protocol_roce(c->dev, KV_PORT)) {
		kv_report(c, false, "setup: %s port %d is not RoCE", dev, KV_PORT);
		return -EINVAL;
	}
	end = jiffies + msecs_to_jiffies(KV_WAIT_MS);
	for (;;) {
		ret = ib_query_port(c->dev, KV_PORT, &pa);
		if (ret || pa.state == IB_PORT_ACTIVE || time_after(jiffies, end))
			break;
		msleep(100);
	}
	if (ret || pa.state != IB_PORT_ACTIVE) {
		kv_report(c, false, "setup: %s port %d active (%d, state %d)", dev,
			  KV_PORT, ret, pa.state);
		return -ENETDOWN;
	}
	/* The first RoCEv2 GID, an IPv4 one if there is one. */
	for (i = 0; i < pa.gid_tbl_len; i++) {
		attr = rdma_get_gid_attr(c->dev, KV_PORT, i);
		if (IS_ERR(attr))
			continue;
		if (attr->gid_type != IB_GID_TYPE_ROCE_UDP_ENCAP ||
		    (c->sgid && !ipv6_addr_v4mapped((struct in6_addr *)attr->gid.raw))) {
			rdma_put_gid_attr(attr);
			continue;
		}
		if (c->sgid)
			rdma_put_gid_attr(c->sgid);
		c->sgid = attr;
		if (ipv6_addr_v4mapped((struct in6_addr *)attr->gid.raw))
			break;
	}
	if (!c->sgid) {
		kv_report(c, false, "setup: %s has no RoCEv2 GID", dev);
		return -ENODATA;
	}
	c->gid = c->sgid->gid;
	ret = rdma_read_gid_l2_fields(c->sgid, &vlan, c->mac);
	if (ret) {
		kv_report(c, false, "setup: rdma_read_gid_l2_fields: %d", ret);
		return ret;
	}
	c->pd = ib_alloc_pd(c->dev, 0);
	if (IS_ERR(c->pd)) {
		kv_report(c, false, "setup: ib_alloc_pd: %ld", PTR_ERR(c->pd));
		c->pd = NULL;
		return -ENOMEM;
	}
	c->rd_atom = min3(4, c->dev->attrs.max_qp_rd_atom,
			  c->dev->attrs.max_qp_init_rd_atom);
	c->max_sge = min3(KV_SGE, c->dev->attrs.max_send_sge,
			  c->dev->attrs.max_recv_sge);
	kv_info("%s: GID %u %pI6c (RoCEv2), max_qp_wr %d, max_sge %d/%d, max_fast_reg_page_list_len %u, atomic_cap %d, local DMA lkey 0x%x",
		dev, c->sgid->index, c->gid.raw, c->dev->attrs.max_qp_wr,
		c->dev->attrs.max_send_sge, c->dev->attrs.max_recv_sge,
		c->dev->attrs.max_fast_reg_page_list_len,
		c->dev->attrs.atomic_cap, c->pd->local_dma_lkey);
	kv_report(c, true, "setup: device %s, PD, RoCEv2 GID index %u", dev,
		  c->sgid->index);
	return 0;
}

static void kv_teardown(struct kv_ctx *c)
{
	if (c->pd)
		ib_dealloc_pd(c->pd);
	if (c->sgid)
		rdma_put_gid_attr(c->sgid);
	if (c->dev)
		ib_device_put(c->dev);
}

/* 8. Path migration events. */

struct kv_t8 {
	atomic_t mig, mig_err, others;
};

static void kv_t8_event(struct ib_event *ev, void *ctx)
{
	struct kv_t8 *t = ctx;

	if (ev->event == IB_EVENT_PATH_MIG)
		atomic_inc(&t->mig);
	else if (ev->event == IB_EVENT_PATH_MIG_ERR)
		atomic_inc(&t->mig_err);
	else
		atomic_inc(&t->others);
}

/* Loads the alternate path (in loopback, the same GID pair) and re-arms. */
static int kv_t8_rearm(struct kv_ctx *c, struct ib_qp *qp)
{
	struct ib_qp_attr a = {
		.qp_state = IB_QPS_RTS,
		.alt_port_num = KV_PORT,
		.alt_pkey_index = 0,
		.alt_timeout = 14,
		.path_mig_state = IB_MIG_REARM,
	};

	a.alt_ah_attr.type = rdma_ah_find_type(c->dev, KV_PORT);
	rdma_ah_set_port_num(&a.alt_ah_attr, KV_PORT);
	rdma_ah_set_grh(&a.alt_ah_attr, &c->gid, 0, c->sgid->index, 64, 0);
	memcpy(a.alt_ah_attr.roce.dmac, c->mac, ETH_ALEN);
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_ALT_PATH |
			    IB_QP_PATH_MIG_STATE);
}

static int kv_t8_mig_state(struct ib_qp *qp)
{
	struct ib_qp_init_attr init;
	struct ib_qp_attr a;

	if (ib_query_qp(qp, &a, IB_QP_PATH_MIG_STATE | IB_QP_ALT_PATH, &init))
		return -1;
	return a.path_mig_state;
}

static void kv_t8_path_migration(struct kv_ctx *c)
{
	struct kv_t8 *t = kcalloc(2, sizeof(*t), GFP_KERNEL);
	struct kv_qp_opts oa = { .event = kv_t8_event }, ob = oa;
	struct ib_qp_attr mig = {
		.qp_state = IB_QPS_RTS,
		.path_mig_state = IB_MIG_MIGRATED,
	};
	struct kv_buf sb = {}, rb = {};
	struct kv_pair p = {};
	unsigned long end;
	bool ok;

	if (!(c->dev->attrs.device_cap_flags & IB_DEVICE_AUTO_PATH_MIG)) {
		kv_skip(c, "path migration",
			"the device does not claim IB_DEVICE_AUTO_PATH_MIG");
		kfree(t);
		return;
	}
	if (!t || kv_buf_alloc(c, &sb, 64) || kv_buf_alloc(c, &rb, 64)) {
		kv_report(c, false, "path migration: allocate");
		goto out;
	}
	oa.event_ctx = &t[0];
	ob.event_ctx = &t[1];
	if (!kv_report(c, !kv_pair_create(c, c->pd, &p, &oa, &ob),
		       "path migration: QP pair in RTS"))
		goto out;
	ok = !kv_t8_rearm(c, p.s[0].qp) && !kv_t8_rearm(c, p.s[1].qp);
	kv_report(c, ok, "path migration: ib_modify_qp(IB_QP_ALT_PATH | IB_QP_PATH_MIG_STATE=REARM) on both QPs");
	ok = ok && kv_send_check(c, &p.s[0], &p.s[1], &sb, &rb, 80) &&
	     kv_send_check(c, &p.s[1], &p.s[0], &sb, &rb, 82);
	kv_report(c, ok && kv_t8_mig_state(p.s[0].qp) == IB_MIG_ARMED &&
		  kv_t8_mig_state(p.s[1].qp) == IB_MIG_ARMED,
		  "path migration: both QPs ARMED after traffic both ways");
	ok = ok && !ib_modify_qp(p.s[0].qp, &mig, IB_QP_STATE | IB_QP_PATH_MIG_STATE);
	ok = ok && kv_send_check(c, &p.s[0], &p.s[1], &sb, &rb, 84);
	kv_report(c, ok, "path migration: A migrated by command, a Send after it verified");
	end = jiffies + msecs_to_jiffies(KV_WAIT_MS);
	while ((atomic_read(&t[0].mig) < 1 || atomic_read(&t[1].mig) < 1) &&
	       time_before(jiffies, end))
		msleep(20);
	if (atomic_read(&t[0].others) || atomic_read(&t[1].others) ||
	    atomic_read(&t[0].mig_err) || atomic_read(&t[1].mig_err))
		kv_info("other QP events: A %d, B %d; PATH_MIG_ERR: A %d, B %d",
			atomic_read(&t[0].others), atomic_read(&t[1].others),
			atomic_read(&t[0].mig_err), atomic_read(&t[1].mig_err));
	kv_report(c, atomic_read(&t[0].mig) == 1 && atomic_read(&t[1].mig) == 1 &&
		  !atomic_read(&t[0].mig_err) && !atomic_read(&t[1].mig_err),
		  "path migration: IB_EVENT_PATH_MIG delivered to both QPs' handlers once (A %d, B %d)",
		  atomic_read(&t[0].mig), atomic_read(&t[1].mig));
	kv_report(c, kv_t8_mig_state(p.s[0].qp) == IB_MIG_MIGRATED &&
		  kv_t8_mig_state(p.s[1].qp) == IB_MIG_MIGRATED,
		  "path migration: ib_query_qp reports both MIGRATED");
out:
	kv_pair_destroy(&p);
	kv_buf_free(c, &rb);
	kv_buf_free(c, &sb);
	kfree(t);
}

struct kv_test {
	const char *name;
	void (*fn)(struct kv_ctx *c);
	unsigned int timeout_s;
};

static const struct kv_test kv_tests[] = {
	{ "basic data path", kv_t1_basic, KV_TEST_S },
	{ "completion handler destroys its own QP", kv_t2_destroy_in_handler, KV_TEST_S },
	{ "completion handler moves its own QP to ERR", kv_t3_modify_in_handler, KV_TEST_S },
	{ "COMM_EST handler moves its QP to RTS", kv_t4a_comm_est, KV_TEST_S },
	{ "SQ_DRAINED handler moves its QP to RTS", kv_t4b_sq_drained, KV_TEST_S },
	{ "post_send racing a modify to RESET", kv_t5_race, 600 },
	{ "fast-register MRs", kv_t6_frmr, KV_TEST_S },
	{ "SGE lists and a short receive buffer", kv_t7_sge, KV_TEST_S },
	{ "path migration events", kv_t8_path_migration, KV_TEST_S },
};

struct kv_run {
	const struct kv_test *test;
	struct kv_ctx *c;
	struct completion done;
};

static int kv_run_thread(void *arg)
{
	struct kv_run *run = arg;

	run->test->fn(run->c);
	kthread_complete_and_exit(&run->done, 0);
}

static void kv_run_test(struct kv_ctx *c, const struct kv_test *t)
{
	struct task_struct *task;
	struct kv_run *run;

	run = kzalloc(sizeof(*run), GFP_KERNEL);
	if (!run) {
		kv_report(c, false, "%s: allocate", t->name);
		return;
	}
	run->test = t;
	run->c = c;
	init_completion(&run->done);
	task = kthread_run(kv_run_thread, run, "kverbs-test");
	if (IS_ERR(task)) {
		kv_report(c, false, "%s: start its thread (%ld)", t->name,
			  PTR_ERR(task));
		kfree(run);
		return;
	}
	if (!wait_for_completion_timeout(&run->done, t->timeout_s * HZ)) {
		kv_report(c, false, "%s: the test thread hangs (%u s) in a verbs call",
			  t->name, t->timeout_s);
		kv_wedge(c, "test thread stuck");
		c->stop = true;
		return;	/* @run stays with the thread */
	}
	kfree(run);
}

static int __init kv_init(void)
{
	struct kv_ctx *c = &kv_ctx;
	unsigned int i;

	pr_info("KTAP version 1\n");
	pr_info("# device %s\n", dev);
	kv_wq = alloc_workqueue("rrxe_kverbs", 0, 0);
	if (!kv_wq) {
		kv_report(c, false, "setup: allocate a workqueue");
		goto out;
	}
	if (kv_setup(c))
		goto teardown;
	for (i = 0; i < ARRAY_SIZE(kv_tests); i++) {
		if (c->stop) {
			kv_report(c, false, "%s # not run: an earlier test hangs",
				  kv_tests[i].name);
			continue;
		}
		kv_run_test(c, &kv_tests[i]);
	}
teardown:
	if (c->wedged) {
		/* Code, device and objects may still be in use: keep them. */
		__module_get(THIS_MODULE);
	} else {
		kv_teardown(c);
		destroy_workqueue(kv_wq);
		kv_wq = NULL;
	}
out:
	pr_info("1..%u\n", c->n);
	pr_info("# totals: %u passed, %u failed, %u skipped%s\n", c->pass,
		c->fail, c->skip,
		c->wedged ? " (wedged: module pinned, device reference kept)" : "");
	return 0;
}

static void __exit kv_exit(void)
{
}

module_init(kv_init);
module_exit(kv_exit);

MODULE_DESCRIPTION("Kernel verbs consumer tests for a RoCE device (rrxe, rdma_rxe)");
MODULE_LICENSE("GPL");
