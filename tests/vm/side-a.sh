#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Everything VM A runs in the `make check` boot, one TAP stream per script.
here=$(dirname "$0")
rc=0
for t in foundation.sh objects.sh verbs.sh srq.sh mw.sh negative.sh; do
	echo "# === $t"
	"$here/$t" || rc=1
done
exit $rc
