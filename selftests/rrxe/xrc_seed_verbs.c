// SPDX-License-Identifier: GPL-2.0
/*
 * The XRC seed's scenario through plain verbs, with real processes, on one device in
 * loopback. It needs a provider with the XRC verbs (librrxe; rdma-core's rxe provider has
 * none):
 *
 *   xrc_seed_verbs DEV GID_INDEX DOMAIN_FILE
 *
 * P1, a child process, opens the XRC domain on DOMAIN_FILE, creates an XRC SRQ and the XRC
 * target QP (IBV_QPT_XRC_RECV, owned by the kernel), brings the target to RTR towards the
 * initiator and reports both numbers. P2, this process, opens the same domain, opens the
 * target by number (ibv_open_qp) and creates an XRC SRQ of its own; then P1 is killed with
 * SIGKILL. The target must survive its creator (IBA A14.4.3: it lives while a process of
 * the domain holds it). An XRC initiator (in this process: the wire is a loopback) sends
 * messages naming P2's SRQ: they must land in P2's buffers and complete on P2's CQ with
 * the target's QP number. A Send naming P1's SRQ, gone with P1, must be refused (remote
 * access error). When P2 destroys its handle, the last, the target is gone: opening it by
 * number fails.
 *
 * TAP lines on stdout; exit 1 if a row failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "verbs_tap.h"

#define PORT 1
#define NRECV 8
#define SLOT 4096
#define DEADLINE_S 60

static void die(const char *what)
{
	fprintf(stderr, "xrc_seed_verbs: %s: %s\n", what, strerror(errno));
	exit(2);
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!ctx)
		die("open device");
	return ctx;
}

static struct ibv_xrcd *open_domain(struct ibv_context *ctx, const char *file)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.oflags = O_CREAT,
	};
	struct ibv_xrcd *xrcd;

	a.fd = open(file, O_RDONLY | O_CREAT, 0600);
	if (a.fd < 0)
		die("open domain file");
	xrcd = ibv_open_xrcd(ctx, &a);
	if (!xrcd)
		die("ibv_open_xrcd");
	return xrcd;
}

static struct ibv_srq *xrc_srq(struct ibv_context *ctx, struct ibv_xrcd *xrcd,
			       struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex a = {
		.attr = { .max_wr = NRECV * 2, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
			     IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_XRC,
		.xrcd = xrcd,
		.cq = cq,
		.pd = pd,
	};
	struct ibv_srq *srq = ibv_create_srq_ex(ctx, &a);

	if (!srq)
		die("ibv_create_srq_ex(XRC)");
	return srq;
}

static uint32_t srq_num(struct ibv_srq *srq)
{
	uint32_t n = 0;

	if (ibv_get_srq_num(srq, &n))
		die("ibv_get_srq_num");
	return n;
}

static struct ibv_ah_attr loop_av(struct ibv_context *ctx, int gid_index)
{
	struct ibv_ah_attr av = { .is_global = 1, .port_num = PORT };

	if (ibv_query_gid(ctx, PORT, gid_index, &av.grh.dgid))
		die("ibv_query_gid");
	av.grh.sgid_index = gid_index;
	av.grh.hop_limit = 1;
	return av;
}

/* INIT, then RTR towards dest_qpn; the target takes the responder's attributes. */
static int to_rtr(struct ibv_qp *qp, uint32_t dest_qpn, struct ibv_ah_attr av, int target)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = PORT,
		.qp_access_flags = target ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = 0;
	a.ah_attr = av;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     (target ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0));
}

static int to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.sq_psn = 0,
		.max_rd_atomic = 1,
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

struct p1_report {
	uint32_t target_qpn, srqn;
	int ok;
};

/* P1: the target's creator. Reports, waits for the initiator's QPN, brings the target to
 * RTR, reports again, and waits to be killed. */
static void p1(const char *dev, int gid_index, const char *file, int rd, int wr)
{
	struct ibv_context *ctx = open_dev(dev);
	struct ibv_xrcd *xrcd = open_domain(ctx, file);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_XRC_RECV,
		.comp_mask = IBV_QP_INIT_ATTR_XRCD,
		.xrcd = xrcd,
	};
	struct p1_report r = { 0 };
	struct ibv_srq *srq;
	struct ibv_qp *tgt;
	uint32_t ini_qpn;

	if (!pd || !cq)
		die("P1: PD or CQ");
	srq = xrc_srq(ctx, xrcd, pd, cq);
	tgt = ibv_create_qp_ex(ctx, &qa);
	if (!tgt)
		die("P1: ibv_create_qp_ex(XRC_RECV)");
	r.target_qpn = tgt->qp_num;
	r.srqn = srq_num(srq);
	if (write(wr, &r, sizeof(r)) != sizeof(r) || read(rd, &ini_qpn, 4) != 4)
		die("P1: pipe");
	r.ok = !to_rtr(tgt, ini_qpn, loop_av(ctx, gid_index), 1);
	if (write(wr, &r, sizeof(r)) != sizeof(r))
		die("P1: pipe");
	for (;;)
		pause();
}

/* Polls one completion from cq within the deadline. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	time_t end = time(NULL) + DEADLINE_S;

	while (time(NULL) < end) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
		usleep(1000);
	}
	return 0;
}

static int send_one(struct ibv_qp *ini, struct ibv_mr *mr, uint32_t len, uint32_t srqn,
		    uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	wr.qp_type.xrc.remote_srqn = srqn;
	return ibv_post_send(ini, &wr, &bad);
}

int main(int argc, char **argv)
{
	static const uint32_t sizes[] = { 64, 1024, 3000, 200 };
	int to_p1[2], from_p1[2], gid_index, st;
	struct p1_report r1, r2;
	struct ibv_context *ctx;
	struct ibv_xrcd *xrcd;
	struct ibv_pd *pd;
	struct ibv_cq *rcq, *scq;
	struct ibv_srq *srq;
	struct ibv_qp *ini, *tgt;
	struct ibv_mr *rmr, *smr;
	struct ibv_qp_attr qattr;
	struct ibv_qp_init_attr qinit;
	struct ibv_qp_open_attr oa;
	struct ibv_qp_init_attr ia;
	struct ibv_wc wc;
	char *rbuf, *sbuf;
	uint32_t srqn;
	pid_t pid;

	if (argc != 4) {
		fprintf(stderr, "usage: %s DEV GID_INDEX DOMAIN_FILE\n", argv[0]);
		return 2;
	}
	gid_index = atoi(argv[2]);
	printf("TAP version 13\n# the XRC seed with real processes: P1 creates the target and dies, "
	       "P2 keeps receiving\n");
	fflush(stdout);
	if (pipe(to_p1) || pipe(from_p1))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		close(to_p1[1]);
		close(from_p1[0]);
		p1(argv[1], gid_index, argv[3], to_p1[0], from_p1[1]);
	}
	close(to_p1[0]);
	close(from_p1[1]);

	ctx = open_dev(argv[1]);
	pd = ibv_alloc_pd(ctx);
	rcq = ibv_create_cq(ctx, 2 * NRECV, NULL, NULL, 0);
	scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	rbuf = calloc(NRECV, SLOT);
	sbuf = calloc(1, SLOT);
	if (!pd || !rcq || !scq || !rbuf || !sbuf)
		die("P2: PD, CQs, buffers");
	rmr = ibv_reg_mr(pd, rbuf, NRECV * SLOT, IBV_ACCESS_LOCAL_WRITE);
	smr = ibv_reg_mr(pd, sbuf, SLOT, 0);
	if (!rmr || !smr)
		die("P2: MRs");

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_XRC_SEND;
	ia.send_cq = scq;
	ia.recv_cq = scq;
	ia.cap.max_send_wr = 16;
	ia.cap.max_send_sge = 1;
	ini = ibv_create_qp(pd, &ia);
	tap(ini != NULL, "an XRC initiator (IBV_QPT_XRC_SEND) is created");
	if (!ini)
		return 1;

	if (read(from_p1[0], &r1, sizeof(r1)) != sizeof(r1) ||
	    write(to_p1[1], &ini->qp_num, 4) != 4 || read(from_p1[0], &r2, sizeof(r2)) != sizeof(r2))
		die("P2: pipe");
	tap(r2.ok, "P1 created XRC SRQ %#x and target QP %#x and brought the target to RTR",
	    r1.srqn, r1.target_qpn);

	xrcd = open_domain(ctx, argv[3]);
	memset(&oa, 0, sizeof(oa));
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
	oa.qp_num = r1.target_qpn;
	oa.qp_type = IBV_QPT_XRC_RECV;
	oa.xrcd = xrcd;
	tgt = ibv_open_qp(ctx, &oa);
	tap(tgt != NULL, "P2 opens the domain on the same file and the target by number");
	if (!tgt)
		return 1;
	srq = xrc_srq(ctx, xrcd, pd, rcq);
	srqn = srq_num(srq);
	tap(srqn && srqn != r1.srqn, "P2 has an XRC SRQ of its own (%#x)", srqn);
	for (int i = 0; i < NRECV; i++) {
		struct ibv_sge sge = { (uintptr_t)(rbuf + i * SLOT), SLOT, rmr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_srq_recv(srq, &wr, &bad))
			die("P2: ibv_post_srq_recv");
	}

	kill(pid, SIGKILL);
	tap(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st), "P1, the target's creator, is killed");
	memset(&qattr, 0, sizeof(qattr));
	tap(!ibv_query_qp(tgt, &qattr, IBV_QP_STATE, &qinit) && qattr.qp_state == IBV_QPS_RTR,
	    "the target outlives its creator: RTR through P2's handle");

	tap(!to_rtr(ini, r1.target_qpn, loop_av(ctx, gid_index), 0) && !to_rts(ini),
	    "the initiator is connected to the target (RTS)");
	for (unsigned int k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		int ok;

		for (uint32_t b = 0; b < sizes[k]; b++)
			sbuf[b] = (char)(k * 31 + b);
		ok = !send_one(ini, smr, sizes[k], srqn, k) && poll_one(scq, &wc) &&
		     wc.status == IBV_WC_SUCCESS;
		tap(ok, "Send of %u bytes naming P2's SRQ completes at the initiator", sizes[k]);
		ok = poll_one(rcq, &wc) && wc.status == IBV_WC_SUCCESS &&
		     wc.qp_num == r1.target_qpn && wc.byte_len == sizes[k] && wc.wr_id == k &&
		     !memcmp(rbuf + k * SLOT, sbuf, sizes[k]);
		tap(ok, "... and lands in P2's buffer, on P2's CQ with the target's QP number");
	}
	memset(&wc, 0, sizeof(wc));
	st = !send_one(ini, smr, 64, r1.srqn, 99) && poll_one(scq, &wc);
	tap(st && wc.status == IBV_WC_REM_ACCESS_ERR,
	    "a Send naming P1's SRQ, gone with P1, is refused: %s",
	    st ? ibv_wc_status_str(wc.status) : "no completion");
	tap(!ibv_destroy_qp(tgt), "P2 destroys its handle on the target, the last");
	tgt = ibv_open_qp(ctx, &oa);
	tap(!tgt, "the target is gone with it: opening it by number fails (%s)",
	    tgt ? "it opened" : strerror(errno));

	ibv_destroy_qp(ini);
	ibv_destroy_srq(srq);
	ibv_close_xrcd(xrcd);
	ibv_dereg_mr(rmr);
	ibv_dereg_mr(smr);
	ibv_destroy_cq(rcq);
	ibv_destroy_cq(scq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(rbuf);
	free(sbuf);
	printf("1..%d\n", tap_n);
	return tap_failed;
}
