/* SPDX-License-Identifier: GPL-2.0 */
/*
 * TAP rows for the C halves of the tests (apm_verbs.c, xrc_seed_verbs.c): "ok N - ..." or
 * "not ok N - ...", flushed at once so that they interleave with the shell's lines, and
 * the count and failure the program's plan and exit status come from.
 */
#ifndef RRXE_VERBS_TAP_H
#define RRXE_VERBS_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int tap_n, tap_failed;

static void tap(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tap(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", ok ? "" : "not ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	tap_failed |= !ok;
}

#endif
