// SPDX-License-Identifier: GPL-2.0
/*
 * Automatic path migration (IBA 17.2.8) between two VMs through plain verbs: one RC QP per
 * side whose primary path joins the VMs' first IPv4 addresses and whose alternate path
 * joins their second ones, loaded and re-armed with
 * ibv_modify_qp(IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE). The alternate addresses are on
 * port 1 too (two GID pairs of one port and wire), or, with APM_ALT_PORT=2 and
 * APM_ALT_NETDEV=eth1 in the environment, on port 2 of a two-port device, over a second
 * wire.
 *
 *   apm_verbs server DEV TCP_PORT LOCAL_IP LOCAL_ALT_IP PEER_IP PEER_ALT_IP
 *   apm_verbs client DEV TCP_PORT LOCAL_IP LOCAL_ALT_IP PEER_IP PEER_ALT_IP
 *   apm_verbs interop DEV TCP_PORT LOCAL_IP LOCAL_ALT_IP PEER_IP PEER_ALT_IP
 *	against a server on a device without path migration (rdma_rxe): only this side
 *	loads an alternate path and re-arms; traffic must run as before over the primary
 *	path, and nothing may migrate.
 *
 * The client drives and prints TAP lines; the server follows its commands over a TCP
 * connection to PEER_ALT_IP:TCP_PORT (the first path is the one that fails). A path "fails"
 * on both VMs at once, in one of three ways (APM_FAIL in the client's environment; a second
 * failure later in the run with APM_FAIL2, if set):
 *   neigh  (default) each points its neighbour entry for the peer's address on that path at
 *          a MAC no NIC has, so the peer's NIC drops the frames; restoring deletes the entry;
 *   netem  each loses every packet it sends out of the path's netdev (tc netem loss 100%);
 *   down   each takes the path's netdev down, and up again to restore it.
 * The last two take the whole netdev, so they need the alternate path on another port.
 *
 * Traffic is rounds of a Send (checked by the server: sequence number and bytes), an RDMA
 * Write (read back and compared at the end), an RDMA Read of a known pattern and a
 * Fetch&Add (its returned values must count up one by one, and the server's counter
 * must equal the number of adds): every WR must succeed exactly once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "verbs_tap.h"

#define SEND_MAX 2048
#define RECV_DEPTH 64
#define SLOTS 16
#define SLOT_LEN 1024
#define READ_LEN 1024
#define TIMEOUT 14	/* 4.096 us << 14: 67 ms */
#define RETRY_CNT 3
#define BOGUS_MAC "02:00:5e:00:00:01"

enum { PRIMARY, ALTERNATE, MISMATCHED };
enum { FAIL_NEIGH, FAIL_NETEM, FAIL_DOWN };
static const char *const fail_names[] = { "neigh", "netem", "down" };
enum { CTL_FAIL = 1, CTL_RESTORE, CTL_REARM, CTL_STATS, CTL_QUIT };

struct ctl {
	uint32_t op, arg;
};

/* The server's answer to a command: what it saw, and the command's status (rc). */
struct stats {
	int64_t recv_ok, recv_bad, ev_mig, ev_mig_err, mig_state, qp_state, primary, counter, rc;
};

struct conn_info {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
};

/* Server memory: receive buffers, the Write target, the Read source, the counter. */
struct region {
	char recv[RECV_DEPTH][SEND_MAX];
	char write_area[SLOTS][SLOT_LEN];
	char read_area[READ_LEN];
	uint64_t counter;
	/* Client side: what it sends, reads and fetches. */
	char send_buf[SEND_MAX];
	char read_buf[READ_LEN];
	uint64_t fetched;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr;
static struct region *mem;
static union ibv_gid gids[2], peer_gids[2];
static int gid_index[2];
/* The port and netdev of each local address. */
static int gid_port[2] = { 1, 1 };
static const char *netdev_of[2] = { "eth0", "eth0" };
static const char *peer_ip[2];
static struct conn_info peer;
static int sock;
static int64_t ev_mig, ev_mig_err;
static double ev_mig_at;

static void die(const char *what)
{
	fprintf(stderr, "apm_verbs: %s: %s\n", what, strerror(errno));
	exit(2);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void v4_gid(const char *ip, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	if (inet_pton(AF_INET, ip, &gid->raw[12]) != 1) {
		fprintf(stderr, "apm_verbs: not an IPv4 address: %s\n", ip);
		exit(2);
	}
}

/* The RoCE v2 GID index of @gid on @port. */
static int find_gid(const union ibv_gid *gid, int port)
{
	struct ibv_port_attr pa;
	struct ibv_gid_entry e;
	int i, tries;

	if (ibv_query_port(ctx, port, &pa))
		die("ibv_query_port");
	/* A new address reaches the GID table through the core's netdev notifier. */
	for (tries = 0; tries < 100; tries++) {
		for (i = 0; i < pa.gid_tbl_len; i++)
			if (!ibv_query_gid_ex(ctx, port, i, &e, 0) &&
			    e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
			    !memcmp(&e.gid, gid, sizeof(*gid)))
				return i;
		usleep(100000);
	}
	fprintf(stderr, "apm_verbs: no RoCE v2 GID for that address\n");
	exit(2);
}

static void xfer(void *buf, size_t len, int out)
{
	char *p = buf;

	while (len) {
		ssize_t n = out ? write(sock, p, len) : read(sock, p, len);

		if (n <= 0)
			die(out ? "control write" : "control read");
		p += n;
		len -= n;
	}
}

static void poll_events(void)
{
	struct ibv_async_event ev;

	while (!ibv_get_async_event(ctx, &ev)) {
		if (ev.event_type == IBV_EVENT_PATH_MIG) {
			ev_mig++;
			ev_mig_at = now();
		} else if (ev.event_type == IBV_EVENT_PATH_MIG_ERR) {
			ev_mig_err++;
		}
		ibv_ack_async_event(&ev);
	}
}

static void path_attr(struct ibv_ah_attr *ah, int local, int remote)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->port_num = gid_port[local];
	ah->grh.dgid = peer_gids[remote];
	ah->grh.sgid_index = gid_index[local];
	ah->grh.hop_limit = 64;
}

/* Loads the alternate path (@which: the other GID pair, or one the peer never uses) and
 * re-arms, RTS to RTS. */
static int rearm(int which)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.alt_timeout = TIMEOUT,
		.path_mig_state = IBV_MIG_REARM,
	};

	switch (which) {
	case PRIMARY:
		path_attr(&a.alt_ah_attr, PRIMARY, PRIMARY);
		break;
	case ALTERNATE:
		path_attr(&a.alt_ah_attr, ALTERNATE, ALTERNATE);
		break;
	default:
		/* From the local alternate address to the peer's primary one. */
		path_attr(&a.alt_ah_attr, ALTERNATE, PRIMARY);
		break;
	}
	a.alt_port_num = a.alt_ah_attr.port_num;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE);
}

static void setup(const char *dev, const char *ips[4])
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = RECV_DEPTH, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.sq_sig_all = 1,
	};
	int i;

	if (!list)
		die("ibv_get_device_list");
	for (i = 0; list[i] && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		die("ibv_open_device");
	ibv_free_device_list(list);
	if (fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK))
		die("async fd");
	if (getenv("APM_ALT_PORT"))
		gid_port[ALTERNATE] = atoi(getenv("APM_ALT_PORT"));
	if (getenv("APM_ALT_NETDEV"))
		netdev_of[ALTERNATE] = getenv("APM_ALT_NETDEV");
	for (i = 0; i < 2; i++) {
		v4_gid(ips[i], &gids[i]);
		v4_gid(ips[2 + i], &peer_gids[i]);
		gid_index[i] = find_gid(&gids[i], gid_port[i]);
		peer_ip[i] = ips[2 + i];
	}
	mem = aligned_alloc(4096, (sizeof(*mem) + 4095) & ~4095UL);
	if (!mem)
		die("aligned_alloc");
	memset(mem, 0, sizeof(*mem));
	for (i = 0; i < READ_LEN; i++)
		mem->read_area[i] = (char)(i * 7 + 3);
	pd = ibv_alloc_pd(ctx);
	mr = pd ? ibv_reg_mr(pd, mem, sizeof(*mem),
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC) : NULL;
	cq = mr ? ibv_create_cq(ctx, 256, NULL, NULL, 0) : NULL;
	init.send_cq = init.recv_cq = cq;
	qp = cq ? ibv_create_qp(pd, &init) : NULL;
	if (!qp)
		die("verbs objects");
}

static void connect_qp(void)
{
	struct conn_info me = { qp->qp_num, (uint32_t)(getpid() & 0xffffff), mr->rkey,
				(uintptr_t)mem };
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};

	xfer(&me, sizeof(me), 1);
	xfer(&peer, sizeof(peer), 0);
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer.qpn;
	a.rq_psn = peer.psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	path_attr(&a.ah_attr, PRIMARY, PRIMARY);
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = me.psn;
	a.timeout = TIMEOUT;
	a.retry_cnt = RETRY_CNT;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

/* Which of the local GID pairs the QP's primary path uses now, and its migration state. */
static void query(int64_t *mig_state, int64_t *qp_state, int64_t *primary)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr init;

	*primary = -1;
	if (ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_ALT_PATH |
			 IBV_QP_PATH_MIG_STATE, &init)) {
		*mig_state = *qp_state = -1;
		return;
	}
	*mig_state = a.path_mig_state;
	*qp_state = a.qp_state;
	if (!memcmp(&a.ah_attr.grh.dgid, &peer_gids[PRIMARY], 16))
		*primary = PRIMARY;
	else if (!memcmp(&a.ah_attr.grh.dgid, &peer_gids[ALTERNATE], 16))
		*primary = ALTERNATE;
	/* The path in use leaves over the port of its local address. */
	if (*primary >= 0 && a.ah_attr.port_num != gid_port[*primary])
		*primary = -2;
}

/* The failure mode named by environment variable @var: -1 if unset. */
static int fail_mode(const char *var)
{
	const char *v = getenv(var);
	int i;

	if (!v)
		return -1;
	for (i = 0; i < 3; i++)
		if (!strcmp(v, fail_names[i]))
			return i;
	fprintf(stderr, "apm_verbs: %s: not neigh, netem or down: %s\n", var, v);
	exit(2);
}

/* Fails (@fail) or restores @path in the way @mode names (see the top of the file). */
static void set_path(int path, int fail, int mode)
{
	const char *n = netdev_of[path];
	char cmd[384];

	if (mode == FAIL_NETEM && fail)
		snprintf(cmd, sizeof(cmd), "tc qdisc replace dev %s root netem loss 100%%", n);
	else if (mode == FAIL_NETEM)
		snprintf(cmd, sizeof(cmd), "tc qdisc del dev %s root", n);
	else if (mode == FAIL_DOWN && fail)
		snprintf(cmd, sizeof(cmd), "ip link set %s down", n);
	else if (mode == FAIL_DOWN)
		/* Up, and back on the wire: the carrier returns a moment later. */
		snprintf(cmd, sizeof(cmd),
			 "ip link set %s up && for i in $(seq 50); do "
			 "grep -q 1 /sys/class/net/%s/carrier && exit 0; sleep 0.1; done; exit 1",
			 n, n);
	else if (fail)
		snprintf(cmd, sizeof(cmd),
			 "ip neigh replace %s lladdr " BOGUS_MAC " dev %s nud permanent",
			 peer_ip[path], n);
	else
		snprintf(cmd, sizeof(cmd), "ip neigh del %s dev %s 2>/dev/null; true",
			 peer_ip[path], n);
	if (system(cmd))
		fprintf(stderr, "apm_verbs: '%s' failed\n", cmd);
}

static void post_recv(int i)
{
	struct ibv_sge sge = { (uintptr_t)mem->recv[i], SEND_MAX, mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv");
}

static int serve(void)
{
	uint32_t expect = 0;
	struct stats st = { 0 };
	struct ctl c;
	int i, flags = fcntl(sock, F_GETFL);

	/* Receive queues take WRs from INIT on (IBA 10.3.1); the client sends after RTS. */
	connect_qp();
	for (i = 0; i < RECV_DEPTH; i++)
		post_recv(i);
	for (;;) {
		struct ibv_wc wc;
		ssize_t n;

		poll_events();
		while (ibv_poll_cq(cq, 1, &wc) > 0) {
			char *m = mem->recv[wc.wr_id];
			uint32_t seq;
			int ok = wc.status == IBV_WC_SUCCESS && wc.byte_len >= 4;

			memcpy(&seq, m, 4);
			ok = ok && seq == expect;
			for (i = 4; ok && i < (int)wc.byte_len; i++)
				ok = m[i] == (char)(seq + i);
			if (ok)
				st.recv_ok++;
			else
				st.recv_bad++;
			expect++;
			if (wc.status == IBV_WC_SUCCESS)
				post_recv((int)wc.wr_id);
		}
		fcntl(sock, F_SETFL, flags | O_NONBLOCK);
		n = read(sock, &c, sizeof(c));
		fcntl(sock, F_SETFL, flags);
		if (n < 0 && errno == EAGAIN) {
			usleep(1000);
			continue;
		}
		if (n < (ssize_t)sizeof(c)) {
			if (n <= 0)
				return 1;
			xfer((char *)&c + n, sizeof(c) - n, 0);
		}
		switch (c.op) {
		case CTL_FAIL:
		case CTL_RESTORE:
			set_path((int)(c.arg & 0xff), c.op == CTL_FAIL, (int)(c.arg >> 8));
			st.rc = 0;
			break;
		case CTL_REARM:
			st.rc = rearm((int)c.arg);
			break;
		case CTL_STATS:
			poll_events();
			st.ev_mig = ev_mig;
			st.ev_mig_err = ev_mig_err;
			query(&st.mig_state, &st.qp_state, &st.primary);
			st.counter = (int64_t)mem->counter;
			break;
		case CTL_QUIT:
			return 0;
		}
		xfer(&st, sizeof(st), 1);
	}
}

static struct stats command(uint32_t op, uint32_t arg)
{
	struct ctl c = { op, arg };
	struct stats st;

	xfer(&c, sizeof(c), 1);
	xfer(&st, sizeof(st), 0);
	return st;
}

static uint32_t sends, adds, writes_done;

/* Waits for @n completions; returns how many failed, and when the first one came. */
static int reap(int n, double *first)
{
	struct ibv_wc wc;
	double deadline = now() + 120;
	int bad = 0;

	while (n > 0 && now() < deadline) {
		poll_events();
		if (ibv_poll_cq(cq, 1, &wc) <= 0) {
			usleep(200);
			continue;
		}
		if (first && !*first)
			*first = now();
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "apm_verbs: wr %llu: %s\n", (unsigned long long)wc.wr_id,
				ibv_wc_status_str(wc.status));
			bad++;
		}
		if (wc.opcode == IBV_WC_FETCH_ADD && wc.status == IBV_WC_SUCCESS &&
		    mem->fetched != wc.wr_id)
			bad++;
		if (wc.opcode == IBV_WC_RDMA_READ && wc.status == IBV_WC_SUCCESS &&
		    memcmp(mem->read_buf, mem->read_area, READ_LEN))
			bad++;
		n--;
	}
	return bad + n;
}

static int post(struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	return ibv_post_send(qp, wr, &bad);
}

/* One round: Send, Write, Read, Fetch&Add, each waited for (the Read and the atomic land
 * in single buffers). Returns the failures; @first gets the time of the first completion. */
static int round_trip(double *first)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr;
	uint32_t len = 64 + (sends * 97) % (SEND_MAX - 64), i;
	int bad = 0;

	memcpy(mem->send_buf, &sends, 4);
	for (i = 4; i < len; i++)
		mem->send_buf[i] = (char)(sends + i);
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	sge = (struct ibv_sge){ (uintptr_t)mem->send_buf, len, mr->lkey };
	wr.opcode = IBV_WR_SEND;
	bad |= post(&wr);
	sends++;
	bad += reap(1, first);
	/* The Write target slot gets the Send's bytes. */
	sge.length = SLOT_LEN;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = peer.addr + offsetof(struct region, write_area) +
				 (writes_done % SLOTS) * SLOT_LEN;
	wr.wr.rdma.rkey = peer.rkey;
	bad |= post(&wr);
	writes_done++;
	bad += reap(1, first);
	sge = (struct ibv_sge){ (uintptr_t)mem->read_buf, READ_LEN, mr->lkey };
	memset(mem->read_buf, 0, READ_LEN);
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = peer.addr + offsetof(struct region, read_area);
	bad |= post(&wr);
	bad += reap(1, first);
	sge = (struct ibv_sge){ (uintptr_t)&mem->fetched, 8, mr->lkey };
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr_id = adds;
	wr.wr.atomic.remote_addr = peer.addr + offsetof(struct region, counter);
	wr.wr.atomic.rkey = peer.rkey;
	wr.wr.atomic.compare_add = 1;
	bad |= post(&wr);
	adds++;
	bad += reap(1, first);
	return bad;
}

/* Reads the Write area back and compares it with what the last SLOTS Writes sent. */
static int check_writes(void)
{
	static char back[SLOTS][SLOT_LEN];
	struct ibv_sge sge;
	struct ibv_send_wr wr;
	struct ibv_mr *bmr = ibv_reg_mr(pd, back, sizeof(back), IBV_ACCESS_LOCAL_WRITE);
	uint32_t w, i;
	int bad;

	if (!bmr)
		return 1;
	memset(&wr, 0, sizeof(wr));
	sge = (struct ibv_sge){ (uintptr_t)back, sizeof(back), bmr->lkey };
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = peer.addr + offsetof(struct region, write_area);
	wr.wr.rdma.rkey = peer.rkey;
	bad = post(&wr) + reap(1, NULL);
	/* Write k carried Send k's buffer: its sequence number, then bytes (k + i). */
	for (w = writes_done > SLOTS ? writes_done - SLOTS : 0; !bad && w < writes_done; w++) {
		char *s = back[w % SLOTS];
		uint32_t len = 64 + (w * 97) % (SEND_MAX - 64), seq;

		memcpy(&seq, s, 4);
		bad = seq != w;
		for (i = 4; !bad && i < len && i < SLOT_LEN; i++)
			bad = s[i] != (char)(w + i);
	}
	ibv_dereg_mr(bmr);
	return bad;
}

static int rounds(int n, int *bad)
{
	int i;

	for (i = 0; i < n; i++)
		*bad += round_trip(NULL);
	return *bad;
}

static int run_client(void)
{
	struct stats st;
	int64_t mig, qps, prim;
	double t_fail, resumed = 0, bound;
	int bad = 0, i, fail1 = fail_mode("APM_FAIL"), fail2 = fail_mode("APM_FAIL2");

	if (fail1 < 0)
		fail1 = FAIL_NEIGH;
	connect_qp();
	printf("TAP version 13\n# automatic path migration, the alternate path over port %d (%s); "
	       "the first path fails by %s\n", gid_port[ALTERNATE], netdev_of[ALTERNATE],
	       fail_names[fail1]);
	tap(!rearm(ALTERNATE), "client: alternate path loaded and re-armed (RTS to RTS)");
	st = command(CTL_REARM, ALTERNATE);
	tap(!st.rc, "server: alternate path loaded and re-armed");
	rounds(3, &bad);
	query(&mig, &qps, &prim);
	st = command(CTL_STATS, 0);
	tap(!bad && mig == IBV_MIG_ARMED && st.mig_state == IBV_MIG_ARMED,
	    "both sides ARMED after their first packets (client %lld, server %lld)",
	    (long long)mig, (long long)st.mig_state);

	/* The primary path fails both ways in the middle of the traffic. */
	rounds(10, &bad);
	command(CTL_FAIL, PRIMARY | fail1 << 8);
	set_path(PRIMARY, 1, fail1);
	t_fail = now();
	bad += round_trip(&resumed);
	rounds(10, &bad);
	bad += check_writes();
	st = command(CTL_STATS, 0);
	query(&mig, &qps, &prim);
	tap(!bad && st.recv_ok == sends && !st.recv_bad && st.counter == adds,
	    "primary path failed mid-transfer: %u rounds of Send, Write, Read, Fetch&Add all "
	    "succeeded once with exact data (server: %lld Sends good, %lld bad, counter %lld)",
	    sends, (long long)st.recv_ok, (long long)st.recv_bad, (long long)st.counter);
	tap(ev_mig == 1 && st.ev_mig == 1,
	    "IBV_EVENT_PATH_MIG on both sides (client %lld, server %lld)", (long long)ev_mig,
	    (long long)st.ev_mig);
	tap(mig == IBV_MIG_MIGRATED && prim == ALTERNATE && st.mig_state == IBV_MIG_MIGRATED &&
		    st.primary == ALTERNATE,
	    "Query QP: both MIGRATED, primary path now the alternate GID pair");
	/* Local ACK Timeout 4.096 us << TIMEOUT, doubled after each timeout up to 4x. */
	for (bound = 0, i = 0; i <= RETRY_CNT; i++)
		bound += 4.096e-6 * (1 << TIMEOUT) * (1 << (i < 2 ? i : 2));
	printf("# failover: %.0f ms from the failure to the event, %.0f ms to resumed traffic; "
	       "timeout x (retry_cnt + 1) with back-off is %.0f ms\n",
	       (ev_mig_at - t_fail) * 1e3, (resumed - t_fail) * 1e3, bound * 1e3);
	tap(resumed && resumed - t_fail >= bound * 0.9,
	    "traffic resumed only after the retries on the old path ran out");

	/* Restore the first path, re-arm onto it, migrate back by command: no loss. */
	command(CTL_RESTORE, PRIMARY | fail1 << 8);
	set_path(PRIMARY, 0, fail1);
	tap(!rearm(PRIMARY) && !command(CTL_REARM, PRIMARY).rc,
	    "both re-armed onto the restored first path");
	rounds(3, &bad);
	query(&mig, &qps, &prim);
	st = command(CTL_STATS, 0);
	tap(mig == IBV_MIG_ARMED && st.mig_state == IBV_MIG_ARMED, "both ARMED again");
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .path_mig_state = IBV_MIG_MIGRATED };

		tap(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE),
		    "commanded migration (ARMED to MIGRATED)");
	}
	rounds(5, &bad);
	bad += check_writes();
	st = command(CTL_STATS, 0);
	query(&mig, &qps, &prim);
	tap(!bad && st.recv_ok == sends && st.counter == adds && prim == PRIMARY &&
		    st.primary == PRIMARY && ev_mig == 2 && st.ev_mig == 2,
	    "after the commanded migration both use the first path again, nothing lost "
	    "(events: client %lld, server %lld)", (long long)ev_mig, (long long)st.ev_mig);
	if (fail2 >= 0) {
		/* Armed again, the first path fails another way, and they fail back again. */
		tap(!rearm(ALTERNATE) && !command(CTL_REARM, ALTERNATE).rc,
		    "both re-armed onto the alternate path");
		rounds(3, &bad);
		command(CTL_FAIL, PRIMARY | fail2 << 8);
		set_path(PRIMARY, 1, fail2);
		t_fail = now();
		resumed = 0;
		bad += round_trip(&resumed);
		rounds(5, &bad);
		bad += check_writes();
		st = command(CTL_STATS, 0);
		query(&mig, &qps, &prim);
		printf("# failover (%s): %.0f ms to resumed traffic\n", fail_names[fail2],
		       (resumed - t_fail) * 1e3);
		tap(!bad && st.recv_ok == sends && st.counter == adds && ev_mig == 3 &&
			    st.ev_mig == 3 && prim == ALTERNATE && st.primary == ALTERNATE &&
			    resumed - t_fail >= bound * 0.9,
		    "the first path failed again (%s): both migrated to the alternate path after "
		    "the retries, nothing lost (events: client %lld, server %lld)",
		    fail_names[fail2], (long long)ev_mig, (long long)st.ev_mig);
		command(CTL_RESTORE, PRIMARY | fail2 << 8);
		set_path(PRIMARY, 0, fail2);
		tap(!rearm(PRIMARY) && !command(CTL_REARM, PRIMARY).rc,
		    "both re-armed onto the restored first path");
		rounds(3, &bad);
		{
			struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS,
						 .path_mig_state = IBV_MIG_MIGRATED };

			ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE);
		}
		rounds(3, &bad);
		st = command(CTL_STATS, 0);
		query(&mig, &qps, &prim);
		tap(!bad && prim == PRIMARY && st.primary == PRIMARY && ev_mig == 4 &&
			    st.ev_mig == 4,
		    "commanded back onto the first path, nothing lost");
	}

	/* The server's alternate path names an address pair the client never uses: the
	 * client's migration request is refused. */
	tap(!rearm(ALTERNATE) && !command(CTL_REARM, MISMATCHED).rc,
	    "re-armed; the server's alternate path does not match the client's");
	rounds(2, &bad);
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .path_mig_state = IBV_MIG_MIGRATED };

		ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE);
	}
	i = round_trip(NULL);
	st = command(CTL_STATS, 0);
	tap(i && st.ev_mig_err == 1 && st.mig_state == IBV_MIG_ARMED && st.primary == PRIMARY &&
		    st.qp_state == IBV_QPS_RTS,
	    "server: IBV_EVENT_PATH_MIG_ERR, its path and state unchanged, the client's "
	    "requests over the other path dropped (client WRs failed: %d)", i);
	{
		/* The server exits without an answer. */
		struct ctl quit = { CTL_QUIT, 0 };

		xfer(&quit, sizeof(quit), 1);
	}
	printf("1..%d\n", tap_n);
	return tap_failed;
}

static int run_interop(void)
{
	int64_t mig, qps, prim;
	struct stats st;
	struct ctl quit = { CTL_QUIT, 0 };
	int bad = 0;

	connect_qp();
	printf("TAP version 13\n# an armed QP against a peer that never migrates\n");
	tap(!rearm(ALTERNATE), "alternate path loaded and re-armed on this side only");
	rounds(20, &bad);
	bad += check_writes();
	st = command(CTL_STATS, 0);
	query(&mig, &qps, &prim);
	tap(!bad && st.recv_ok == sends && !st.recv_bad && st.counter == adds,
	    "%u rounds of Send, Write, Read, Fetch&Add over the primary path, exact data", sends);
	/* The peer's packets carry MigReq = 0: to this side it looks armed too. */
	tap(mig == IBV_MIG_ARMED && prim == PRIMARY && !ev_mig && !ev_mig_err,
	    "still on the primary path, ARMED, no migration event");
	xfer(&quit, sizeof(quit), 1);
	printf("1..%d\n", tap_n);
	return tap_failed;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int server, one = 1;

	if (argc != 8 || (strcmp(argv[1], "server") && strcmp(argv[1], "client") &&
			  strcmp(argv[1], "interop"))) {
		fprintf(stderr, "usage: apm_verbs server|client|interop DEV TCP_PORT LOCAL_IP "
				"LOCAL_ALT_IP PEER_IP PEER_ALT_IP\n");
		return 2;
	}
	server = !strcmp(argv[1], "server");
	setup(argv[2], (const char **)&argv[4]);
	sa.sin_port = htons(atoi(argv[3]));
	sock = socket(AF_INET, SOCK_STREAM, 0);
	if (sock < 0)
		die("socket");
	if (server) {
		int l = sock;

		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1))
			die("listen");
		sock = accept(l, NULL, NULL);
		if (sock < 0)
			die("accept");
		close(l);
		return serve();
	}
	inet_pton(AF_INET, argv[7], &sa.sin_addr);
	for (int tries = 0; connect(sock, (struct sockaddr *)&sa, sizeof(sa)); tries++) {
		if (tries > 600)
			die("connect");
		close(sock);
		sock = socket(AF_INET, SOCK_STREAM, 0);
		sleep(1);
	}
	return strcmp(argv[1], "interop") ? run_client() : run_interop();
}
