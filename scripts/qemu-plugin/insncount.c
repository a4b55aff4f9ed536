// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin that counts the guest instructions executed, per translation block:
 * each block's start address, its instruction count and how many times it ran, written to
 * the file given as out=PATH when QEMU exits. scripts/profile-insns.sh attributes them to
 * the guest kernel's symbols. Counting is exact but for blocks left early (an exception, an
 * interrupt taken in the middle), and increments from two vCPUs at once may race: both
 * are rare next to the millions of blocks a benchmark runs.
 *
 * Only the few calls of QEMU's plugin API version 1 (QEMU 7.2, Debian 12) it needs are
 * declared here, so that no QEMU source is needed to build it.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;

typedef struct {
	const char *target_name;
	struct {
		int min;
		int cur;
	} version;
	bool system_emulation;
	union {
		struct {
			int smp_vcpus;
			int max_vcpus;
		} system;
	};
} qemu_info_t;

struct qemu_plugin_tb;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb *));
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
					      void *ptr, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, void *),
				    void *userdata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* A block: its address, its instructions, its executions. */
struct block {
	uint64_t vaddr;
	uint64_t insns;
	uint64_t runs;
};

/* Open addressing; a boot and a benchmark translate a few hundred thousand blocks. */
#define SLOTS (1u << 22)
static struct block *blocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char out[4096];

/* The block of (vaddr, insns), made on first sight; NULL if the table is full. */
static struct block *block_of(uint64_t vaddr, uint64_t insns)
{
	uint64_t h = (vaddr * 0x9E3779B97F4A7C15ull) ^ insns;

	for (uint32_t i = 0; i < SLOTS; i++) {
		struct block *b = &blocks[(h + i) & (SLOTS - 1)];

		if (b->insns == 0) {
			b->vaddr = vaddr;
			b->insns = insns;
			return b;
		}
		if (b->vaddr == vaddr && b->insns == insns)
			return b;
	}
	return NULL;
}

/* A block translated (again): its runs are counted by an inline add, no callback. */
static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	struct block *b;

	pthread_mutex_lock(&lock);
	b = block_of(qemu_plugin_tb_vaddr(tb), qemu_plugin_tb_n_insns(tb));
	pthread_mutex_unlock(&lock);
	if (b)
		qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->runs, 1);
}

static void at_exit(qemu_plugin_id_t id, void *unused)
{
	FILE *f = fopen(out, "w");

	if (!f) {
		perror(out);
		return;
	}
	for (uint32_t i = 0; i < SLOTS; i++)
		if (blocks[i].runs)
			fprintf(f, "%llx %llu %llu\n", (unsigned long long)blocks[i].vaddr,
				(unsigned long long)blocks[i].insns,
				(unsigned long long)blocks[i].runs);
	fclose(f);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
							       const qemu_info_t *info, int argc,
							       char **argv)
{
	for (int i = 0; i < argc; i++)
		if (!strncmp(argv[i], "out=", 4))
			snprintf(out, sizeof(out), "%s", argv[i] + 4);
	if (!out[0]) {
		fprintf(stderr, "insncount: no out=PATH\n");
		return -1;
	}
	blocks = calloc(SLOTS, sizeof(*blocks));
	if (!blocks)
		return -1;
	qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
