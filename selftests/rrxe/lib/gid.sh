#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# GID table helpers for the verbs tests.
#
#   gid_index DEV ADDR [PORT]
#                        print the index of the RoCE v2 GID of ADDR (IPv4 or IPv6) on PORT
#                        (default 1)
#   ip6_exploded ADDR    print IPv6 ADDR in full (sysfs's GID form)

# The full form of an IPv6 address as sysfs prints GIDs (eight groups of four hex digits),
# in builtins: a python3 spawn costs 7 s in a debug guest. Mixed notation (::ffff:1.2.3.4)
# is not taken.
ip6_exploded() {
	local addr=${1,,} g w res= gap=0
	local -a h=() t=() out=()
	[[ $addr =~ ^[0-9a-f:]+$ ]] || return 1
	IFS=: read -r -a h <<<"${addr%%::*}"
	if [[ $addr == *::* ]]; then
		[[ ${addr#*::} == *::* ]] && return 1
		IFS=: read -r -a t <<<"${addr#*::}"
		gap=$((8 - ${#h[@]} - ${#t[@]}))
		[ "$gap" -ge 1 ] || return 1
	fi
	out=("${h[@]}")
	for ((; gap > 0; gap--)); do out+=(0); done
	out+=("${t[@]}")
	[ ${#out[@]} -eq 8 ] || return 1
	for g in "${out[@]}"; do
		[[ $g =~ ^[0-9a-f]{1,4}$ ]] || return 1
		printf -v w '%04x' "0x$g"
		res+=$w:
	done
	echo "${res%:}"
}

gid_index() {
	local dev=$1 addr=$2 port=${3:-1} want f
	if [[ $addr == *:* ]]; then
		want=$(ip6_exploded "$addr") || return 1
	else
		local IFS=.
		# shellcheck disable=SC2086
		set -- $addr
		want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4")
	fi
	# Bash builtins only: under TCG every exec costs 150 ms (1.5 s on the debug kernel).
	local gid type
	for f in /sys/class/infiniband/"$dev"/ports/"$port"/gids/*; do
		read -r gid <"$f" 2>/dev/null || continue
		[ "$gid" = "$want" ] || continue
		read -r type <"/sys/class/infiniband/$dev/ports/$port/gid_attrs/types/${f##*/}" \
			2>/dev/null
		if [ "$type" = "RoCE v2" ]; then
			echo "${f##*/}"
			return 0
		fi
	done
	return 1
}
