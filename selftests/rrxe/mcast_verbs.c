// SPDX-License-Identifier: GPL-2.0
/*
 * UD multicast through plain verbs (ibv_attach_mcast), for groups rdma_cm cannot join on
 * RoCEv2 (IPv6: the 6.12 core refuses them) and for what mckey does not show (Q_Keys,
 * payloads, the sender's GID in each GRH, a QP left attached when its process exits).
 *
 *   mcast_verbs recv DEV GID_INDEX MGID NQP COUNT QKEY SECS [OPTIONS]
 *	NQP UD QPs (Q_Key QKEY) attach to MGID, each with COUNT receives posted; prints
 *	"ready" and waits up to SECS for COUNT messages on each. Every message is checked
 *	(length, index, bytes, the GRH's source GID if --from GID). Prints one line per QP;
 *	exits 0 if every QP got exactly COUNT good messages.
 *	--wrong-qkey	one more QP, attached with another Q_Key, must receive nothing
 *	--from GID	the sender's GID every GRH must carry
 *	--no-detach	exit without detaching (the kernel must clean up)
 *	--detach-after N  detach every QP after N messages on the first, keep polling
 *			for SECS and report what arrived (no exit status check)
 *   mcast_verbs send DEV GID_INDEX MGID COUNT QKEY SIZE
 *	Sends COUNT messages of SIZE bytes to MGID (QPN 0xFFFFFF); exits 0 when all
 *	completed successfully.
 *
 * Message i: its index (4 bytes, big endian), then bytes (i + k) & 0xff.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GRH_LEN 40
#define MAX_SIZE 1024
#define MAX_QPS 17
#define MCAST_QPN 0xffffff

static void die(const char *what)
{
	fprintf(stderr, "mcast_verbs: %s: %s\n", what, strerror(errno));
	exit(2);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	if (!list)
		die("ibv_get_device_list");
	for (i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx) {
		errno = ENODEV;
		die(name);
	}
	return ctx;
}

static void parse_gid(const char *s, union ibv_gid *gid)
{
	if (inet_pton(AF_INET6, s, gid->raw) != 1) {
		errno = EINVAL;
		die(s);
	}
}

/* A UD QP in RTS with Q_Key @qkey (IBA 10.3.1: INIT, RTR, RTS). */
static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t qkey, int depth)
{
	struct ibv_qp_init_attr init = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = depth, .max_recv_wr = depth,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_UD,
	};
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qkey = qkey,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);

	if (!qp)
		die("ibv_create_qp");
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_QKEY))
		die("modify to INIT");
	attr.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE))
		die("modify to RTR");
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 0;
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("modify to RTS");
	return qp;
}

static void fill(uint8_t *buf, uint32_t index, int size)
{
	uint32_t be = htonl(index);
	int k;

	for (k = 0; k < size; k++)
		buf[k] = (index + k) & 0xff;
	memcpy(buf, &be, 4);
}

/*
 * Whether the 40 bytes before a UD message name @from as its sender. RoCEv2 receive
 * buffers get the packet's IPv6 header there (source address at bytes 8..23), or for IPv4
 * its 20-byte IPv4 header in the last 20 bytes (source address at 32..35), as rdma_rxe
 * places them and ibv_init_ah_from_wc() reads them.
 */
static int from_sender(const uint8_t *grh, const union ibv_gid *from)
{
	static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };

	if (!memcmp(from->raw, v4_prefix, 12))
		return !memcmp(grh + 32, from->raw + 12, 4);
	return !memcmp(grh + 8, from->raw, 16);
}

struct receiver {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	int good, bad, attached;
};

static int do_recv(int argc, char **argv)
{
	const char *dev = argv[2];
	int nqp = atoi(argv[5]), count = atoi(argv[6]);
	uint32_t qkey = strtoul(argv[7], NULL, 0);
	double secs = atof(argv[8]), end;
	int wrong_qkey = 0, no_detach = 0, detach_after = -1, have_from = 0;
	union ibv_gid mgid, from;
	struct receiver r[MAX_QPS] = {};
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int i, j, total, ok = 1;

	parse_gid(argv[4], &mgid);
	for (i = 9; i < argc; i++) {
		if (!strcmp(argv[i], "--wrong-qkey")) {
			wrong_qkey = 1;
		} else if (!strcmp(argv[i], "--no-detach")) {
			no_detach = 1;
		} else if (!strcmp(argv[i], "--from") && i + 1 < argc) {
			parse_gid(argv[++i], &from);
			have_from = 1;
		} else if (!strcmp(argv[i], "--detach-after") && i + 1 < argc) {
			detach_after = atoi(argv[++i]);
		} else {
			errno = EINVAL;
			die(argv[i]);
		}
	}
	if (nqp < 1 || nqp + wrong_qkey > MAX_QPS || count < 1) {
		errno = EINVAL;
		die("NQP or COUNT");
	}
	total = nqp + wrong_qkey;
	ctx = open_dev(dev);
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd");
	for (i = 0; i < total; i++) {
		size_t len = (size_t)count * (GRH_LEN + MAX_SIZE);

		r[i].cq = ibv_create_cq(ctx, count + 1, NULL, NULL, 0);
		if (!r[i].cq)
			die("ibv_create_cq");
		r[i].qp = ud_qp(pd, r[i].cq, i < nqp ? qkey : qkey ^ 1, count);
		r[i].buf = calloc(1, len);
		if (!r[i].buf)
			die("calloc");
		r[i].mr = ibv_reg_mr(pd, r[i].buf, len, IBV_ACCESS_LOCAL_WRITE);
		if (!r[i].mr)
			die("ibv_reg_mr");
		for (j = 0; j < count; j++) {
			struct ibv_sge sge = {
				.addr = (uintptr_t)(r[i].buf + (size_t)j * (GRH_LEN + MAX_SIZE)),
				.length = GRH_LEN + MAX_SIZE,
				.lkey = r[i].mr->lkey,
			};
			struct ibv_recv_wr wr = { .wr_id = j, .sg_list = &sge, .num_sge = 1 };
			struct ibv_recv_wr *bad;

			if (ibv_post_recv(r[i].qp, &wr, &bad))
				die("ibv_post_recv");
		}
		if (ibv_attach_mcast(r[i].qp, &mgid, 0))
			die("ibv_attach_mcast");
		r[i].attached = 1;
	}
	printf("ready\n");
	fflush(stdout);

	end = now() + secs;
	while (now() < end) {
		int done = 1;

		for (i = 0; i < total; i++) {
			struct ibv_wc wc;

			while (ibv_poll_cq(r[i].cq, 1, &wc) == 1) {
				uint8_t *msg = r[i].buf + wc.wr_id * (GRH_LEN + MAX_SIZE);
				uint8_t want[MAX_SIZE];
				int size = (int)wc.byte_len - GRH_LEN;
				uint32_t index;

				if (wc.status != IBV_WC_SUCCESS || size < 4 || size > MAX_SIZE) {
					r[i].bad++;
					continue;
				}
				memcpy(&index, msg + GRH_LEN, 4);
				fill(want, ntohl(index), size);
				if (memcmp(msg + GRH_LEN, want, size) ||
				    !(wc.wc_flags & IBV_WC_GRH) ||
				    (have_from && !from_sender(msg, &from)) ||
				    wc.src_qp == 0 || wc.src_qp == MCAST_QPN)
					r[i].bad++;
				else
					r[i].good++;
			}
			if (i < nqp && r[i].good + r[i].bad < count)
				done = 0;
		}
		if (detach_after >= 0 && r[0].attached && r[0].good >= detach_after) {
			for (i = 0; i < total; i++) {
				if (ibv_detach_mcast(r[i].qp, &mgid, 0))
					die("ibv_detach_mcast");
				r[i].attached = 0;
			}
			printf("detached after %d\n", r[0].good);
			fflush(stdout);
		}
		if (done && detach_after < 0)
			break;
	}
	for (i = 0; i < total; i++) {
		int want = i < nqp ? count : 0;

		printf("qp %u (qkey %s): %d good, %d bad, expected %d\n", r[i].qp->qp_num,
		       i < nqp ? "right" : "wrong", r[i].good, r[i].bad, want);
		if (r[i].good != want || r[i].bad)
			ok = 0;
	}
	fflush(stdout);
	/* Detaching midway leaves what arrives after it to chance: reported, not judged. */
	if (detach_after >= 0)
		ok = 1;
	if (no_detach)
		return ok ? 0 : 1;
	for (i = 0; i < total; i++) {
		if (r[i].attached && ibv_detach_mcast(r[i].qp, &mgid, 0))
			die("ibv_detach_mcast");
		ibv_destroy_qp(r[i].qp);
		ibv_dereg_mr(r[i].mr);
		ibv_destroy_cq(r[i].cq);
		free(r[i].buf);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return ok ? 0 : 1;
}

static int do_send(char **argv)
{
	int gid_index = atoi(argv[3]), count = atoi(argv[5]), size = atoi(argv[7]);
	uint32_t qkey = strtoul(argv[6], NULL, 0);
	struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1 };
	struct ibv_context *ctx = open_dev(argv[2]);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	uint8_t *buf;
	int i, completed = 0, failed = 0;

	if (!pd)
		die("ibv_alloc_pd");
	if (size < 4 || size > MAX_SIZE || count < 1) {
		errno = EINVAL;
		die("COUNT or SIZE");
	}
	parse_gid(argv[4], &ah_attr.grh.dgid);
	ah_attr.grh.sgid_index = gid_index;
	ah_attr.grh.hop_limit = 64;
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq");
	qp = ud_qp(pd, cq, qkey, 32);
	ah = ibv_create_ah(pd, &ah_attr);
	if (!ah)
		die("ibv_create_ah");
	buf = calloc(32, size);
	if (!buf)
		die("calloc");
	mr = ibv_reg_mr(pd, buf, 32 * size, 0);
	if (!mr)
		die("ibv_reg_mr");
	for (i = 0; i < count; i++) {
		uint8_t *msg = buf + (i % 32) * size;
		struct ibv_sge sge = { .addr = (uintptr_t)msg, .length = size, .lkey = mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.ud = { .ah = ah, .remote_qpn = MCAST_QPN, .remote_qkey = qkey },
		};
		struct ibv_send_wr *bad;
		struct ibv_wc wc;

		/* At most 32 in flight, each buffer reused only once its Send completed. */
		while (i - completed >= 32) {
			if (ibv_poll_cq(cq, 1, &wc) == 1) {
				completed++;
				failed += wc.status != IBV_WC_SUCCESS;
			}
		}
		fill(msg, i, size);
		if (ibv_post_send(qp, &wr, &bad))
			die("ibv_post_send");
	}
	while (completed < count) {
		struct ibv_wc wc;

		if (ibv_poll_cq(cq, 1, &wc) == 1) {
			completed++;
			failed += wc.status != IBV_WC_SUCCESS;
		}
	}
	printf("sent %d, %d failed\n", count, failed);
	ibv_destroy_qp(qp);
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(buf);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 9 && !strcmp(argv[1], "recv"))
		return do_recv(argc, argv);
	if (argc == 8 && !strcmp(argv[1], "send"))
		return do_send(argv);
	fprintf(stderr, "usage: %s recv DEV GID_INDEX MGID NQP COUNT QKEY SECS [OPTIONS]\n"
		"       %s send DEV GID_INDEX MGID COUNT QKEY SIZE\n", argv[0], argv[0]);
	return 2;
}
