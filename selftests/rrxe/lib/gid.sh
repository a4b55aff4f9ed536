#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# GID table helpers for the verbs tests.
#
#   gid_index DEV ADDR   print the index of the RoCE v2 GID of ADDR (IPv4 or IPv6) on port 1

gid_index() {
	local dev=$1 addr=$2 want f
	if [[ $addr == *:* ]]; then
		want=$(python3 -c 'import ipaddress,sys; print(ipaddress.ip_address(sys.argv[1]).exploded)' "$addr")
	else
		local IFS=.
		# shellcheck disable=SC2086
		set -- $addr
		want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4")
	fi
	# Bash builtins only: under TCG every exec costs 150 ms (1.5 s on the debug kernel).
	local gid type
	for f in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
		read -r gid <"$f" 2>/dev/null || continue
		[ "$gid" = "$want" ] || continue
		read -r type <"/sys/class/infiniband/$dev/ports/1/gid_attrs/types/${f##*/}" 2>/dev/null
		if [ "$type" = "RoCE v2" ]; then
			echo "${f##*/}"
			return 0
		fi
	done
	return 1
}
