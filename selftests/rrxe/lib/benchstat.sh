#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Devices and figures of the benchmarks (bench.sh, bench-peer.sh, bench-local.sh): fig[KEY]
# holds one figure per repetition, space-separated.
#
#   bench_device MOD NETDEV ADDR
#                      load MOD (rrxe or rdma_rxe), add its device ($dev: rrxe0 or rxe0)
#                      over NETDEV, and set g4 to the index of ADDR's RoCE v2 GID
#   routed_pair        the veth pair bw1 ($PAIR_A) and bw2 ($PAIR_B) in this namespace,
#                      whose ends reach each other's address over the pair rather than as
#                      a local one
#   netns_pair         the veth pair bnv1 ($NS_CLI_ADDR, in namespace $NS_CLI) and bnv2
#                      ($NS_SRV_ADDR, in $NS_SRV)
#   pair_devices MOD WHERE
#                      load MOD and add a device on each end of the pair that WHERE names
#                      (veth: routed_pair's; netns: netns_pair's): ${MOD#rdma_}a for the
#                      client, ${MOD#rdma_}b for the server; point start_server and the
#                      caller's client at them (srv_in, srv_dev, srv_gid; cli_in, cli_dev,
#                      cli_gid, dst) and set dev to the client's and count_devs to both
#   pair_done          delete pair_devices' devices and unset what it set
#   stat KEY           "median (min-max)" of fig[KEY], or "-"
#   median KEY         the median alone
#   spread KEY         (max - min) / median in percent, or "-"
#   ratio KEY1 KEY2    median(KEY1) / median(KEY2), or "-"
#   bench_rounds       the two-VM benchmark's rounds (BENCH_REPEAT, default 3), which both
#                      sides must agree on
#   bench_order ROUND  the drivers in the order round ROUND measures them: rrxe first in odd
#                      rounds, rdma_rxe first in even ones, so that neither always has the
#                      boot's first (or last) minutes
#   kernel_ticks       the guest's system + irq + softirq time so far, in USER_HZ ticks
#   no_figure KEY KIND ROW OUT
#                      true (saying why) when perftest's summary ROW of a bw or rate KIND
#                      has a rate of zero, its clock's calibration failing (OUT: its output)
#   add_figure KEY KIND ROW TICKS [ROUND]
#                      append ROW's figure to fig[KEY] (bw: average MB/s; lat: average us;
#                      rate: thousands of messages a second) and, for bw and rate, the
#                      kernel CPU its TICKS make to fig[KEY,cpu] (ms a MB; us a message);
#                      with ROUND, keep the figure in byround[KEY,ROUND] too
#   paired KEY1 KEY2 KIND ROUNDS
#                      KEY1's figure over KEY2's round by round, in the rounds 1..ROUNDS
#                      where both have one: "median (min-max)" of the ratios and the rounds
#                      in which KEY1's was the faster (higher bandwidth or rate, lower
#                      latency), or "-". Two figures of one round were measured minutes
#                      apart, so a slow spell of the host's that spans the round slows both
#   start_server PROG ARGS...
#                      start PROG's perftest server on $dev (set by bench_device) at the
#                      next port ($port, which the caller starts at a free one) and wait
#                      until it listens; its PID in $server. When set, srv_in (a command
#                      prefix, such as ip netns exec NS), srv_dev and srv_gid run it there,
#                      on that device and GID instead

declare -A fig byround
# start_server's and the callers' command prefixes (pair_devices sets them).
srv_in=() cli_in=()
PAIR_A=198.18.11.1 PAIR_B=198.18.11.2
NS_CLI=bns1 NS_SRV=bns2 NS_CLI_ADDR=198.18.10.1 NS_SRV_ADDR=198.18.10.2

bench_rounds() { echo "${BENCH_REPEAT:-3}"; }

bench_order() {
	if (($1 % 2)); then echo rrxe rdma_rxe; else echo rdma_rxe rrxe; fi
}

kernel_ticks() {
	awk '$1 == "cpu" { print $4 + $7 + $8; exit }' /proc/stat
}

# perftest's summary rows: bw "#bytes #iterations BW-peak BW-average MsgRate" (MB/s, Mpps);
# lat "#bytes #iterations t_min t_max t_typical t_avg ..." (us).
no_figure() {
	[ "$2" != lat ] && awk '{ exit !($4 + 0 == 0) }' <<<"$3" || return 1
	echo "# $1: no figure (perftest's clock: $(grep -iE 'correlation|conflicting|mhz' <<<"$4" | head -2 | tr '\n' ' '))"
}

add_figure() {
	local key=$1 kind=$2 row=$3 ticks=$4 hz
	hz=$(getconf CLK_TCK)
	case $kind in
	bw)
		fig[$key]+="$(awk '{ print $4 }' <<<"$row") "
		fig[$key,cpu]+="$(awk -v t="$ticks" -v hz="$hz" \
			'{ printf "%.3f", t / hz * 1000 / ($1 * $2 / 1e6) }' <<<"$row") "
		;;
	rate)
		fig[$key]+="$(awk '{ printf "%.1f", $5 * 1000 }' <<<"$row") "
		fig[$key,cpu]+="$(awk -v t="$ticks" -v hz="$hz" \
			'{ printf "%.2f", t / hz * 1e6 / $2 }' <<<"$row") "
		;;
	lat) fig[$key]+="$(awk '{ print $6 }' <<<"$row") " ;;
	esac
	if [ -n "${5:-}" ]; then
		local all=${fig[$key]% }
		byround[$key,$5]=${all##* }
	fi
}

paired() {
	local r
	for r in $(seq "$4"); do
		[ -n "${byround[$1,$r]:-}" ] && [ -n "${byround[$2,$r]:-}" ] &&
			echo "${byround[$1,$r]} ${byround[$2,$r]}"
	done | awk -v lat="$([ "$3" = lat ] && echo 1 || echo 0)" '
		$2 > 0 { q[n++] = $1 / $2; if (lat ? $1 < $2 : $1 > $2) won++ }
		END {
			if (!n) { print "-"; exit }
			for (i = 0; i < n; i++) for (j = i + 1; j < n; j++)
				if (q[j] < q[i]) { t = q[i]; q[i] = q[j]; q[j] = t }
			m = n % 2 ? q[(n - 1) / 2] : (q[n / 2 - 1] + q[n / 2]) / 2
			printf "%.2f (%.2f-%.2f), faster in %d of %d rounds\n", m, q[0], q[n - 1], won, n
		}'
}

start_server() {
	local prog=$1 i
	shift
	port=$((port + 1))
	"${srv_in[@]}" "$prog" -d "${srv_dev:-$dev}" -F -x "${srv_gid:-$g4}" "$@" -p "$port" \
		>/dev/null 2>&1 &
	server=$!
	for i in $(seq 100); do
		"${srv_in[@]}" ss -Hltn "sport = :$port" | grep -q . && return
		sleep 0.1
	done
}

# Traffic for an address of the host goes to the local address, whatever device the
# sender names, unless routed otherwise: rules ahead of the local table (needing
# CONFIG_IP_MULTIPLE_TABLES) send each end's traffic for the other's address out of that
# end, the neighbours are set so no ARP asks for a local address, and each end accepts
# packets from a local source.
routed_pair() {
	local end nd na peer pa pref=10 table=101
	ip link add bw1 type veth peer name bw2 || return
	sysctl -qw net.ipv4.conf.all.rp_filter=0
	for end in "bw1 $PAIR_A bw2 $PAIR_B" "bw2 $PAIR_B bw1 $PAIR_A"; do
		read -r nd na peer pa <<<"$end"
		sysctl -qw "net.ipv4.conf.$nd.accept_local=1" "net.ipv4.conf.$nd.rp_filter=0"
		ip addr add "$na/32" dev "$nd" && ip link set "$nd" up &&
			ip route add "$pa" dev "$nd" src "$na" table "$table" &&
			ip rule add pref "$pref" iif lo to "$pa" lookup "$table" &&
			ip neigh replace "$pa" lladdr "$(cat "/sys/class/net/$peer/address")" \
				dev "$nd" nud permanent || return
		pref=$((pref + 1)) table=$((table + 1))
	done
	ip rule add pref 100 lookup local && ip rule del pref 0 lookup local
}

netns_pair() {
	local side ns nd na
	ip netns add "$NS_CLI" && ip netns add "$NS_SRV" &&
		ip link add bnv1 netns "$NS_CLI" type veth peer name bnv2 netns "$NS_SRV" || return
	for side in "$NS_CLI bnv1 $NS_CLI_ADDR" "$NS_SRV bnv2 $NS_SRV_ADDR"; do
		read -r ns nd na <<<"$side"
		ip -n "$ns" -batch - <<-EOF || return
		link set lo up
		addr add $na/24 dev $nd
		link set $nd up
		EOF
	done
}

# counts NAMES: rrxe's values of the counters NAMES so far, in that order, on one line
# (nothing on rdma_rxe, which has none of them): $dev's, or the sum over $count_devs.
counts() {
	local d
	for d in ${count_devs:-$dev}; do
		rdma statistic show link "$d/1" 2>/dev/null
		echo
	done | tr ' ' '\n' |
		awk -v names="$1" 'BEGIN { n = split(names, want, " ") }
			{ for (i = 1; i <= n; i++) if ($1 == want[i]) { getline v; c[i] += v; seen = 1 } }
			END { if (seen) { for (i = 1; i <= n; i++) printf "%.0f ", c[i]; print "" } }'
}

pair_devices() {
	local type=${1#rdma_} ca sa
	modprobe "$1" || return
	if [ "$2" = netns ]; then
		cli_in=(ip netns exec "$NS_CLI") srv_in=(ip netns exec "$NS_SRV")
		ca=$NS_CLI_ADDR sa=$NS_SRV_ADDR
		"${cli_in[@]}" rdma link add "${type}a" type "$type" netdev bnv1 &&
			"${srv_in[@]}" rdma link add "${type}b" type "$type" netdev bnv2 || return
	else
		cli_in=() srv_in=()
		ca=$PAIR_A sa=$PAIR_B
		rdma link add "${type}a" type "$type" netdev bw1 &&
			rdma link add "${type}b" type "$type" netdev bw2 || return
	fi
	cli_gid='' srv_gid=''
	for _ in $(seq 100); do
		cli_gid=$(gid_index "${type}a" "$ca") && srv_gid=$(gid_index "${type}b" "$sa") && break
		sleep 0.1
	done
	[ -n "$cli_gid" ] && [ -n "$srv_gid" ] || return 1
	cli_dev=${type}a srv_dev=${type}b dst=$sa dev=${type}a count_devs="${type}a ${type}b"
}

pair_done() {
	"${cli_in[@]}" rdma link delete "$cli_dev"
	"${srv_in[@]}" rdma link delete "$srv_dev"
	cli_in=() srv_in=()
	unset cli_dev srv_dev cli_gid srv_gid dst count_devs
}

bench_device() {
	dev=${1#rdma_}0
	modprobe "$1" && rdma link add "$dev" type "${1#rdma_}" netdev "$2" || return
	for _ in $(seq 100); do
		g4=$(gid_index "$dev" "$3") && return
		sleep 0.1
	done
	return 1
}

# _sorted KEY: the figures of KEY, one a line, in increasing order.
_sorted() {
	tr ' ' '\n' <<<"${fig[$1]:-}" | awk 'NF' | sort -g
}

stat() {
	_sorted "$1" | awk '
		{ v[NR] = $1 }
		END {
			if (NR == 0) { print "-"; exit }
			m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%.2f (%.2f-%.2f)\n", m, v[1], v[NR]
		}'
}

median() { stat "$1" | awk '{ print $1 }'; }

spread() {
	stat "$1" | awk -F'[ ()-]+' '
		$1 == "-" || $1 + 0 == 0 { print "-"; next }
		{ printf "%.0f%%\n", ($3 - $2) / $1 * 100 }'
}

ratio() {
	awk -v a="$(median "$1")" -v b="$(median "$2")" \
		'BEGIN { if (a != "-" && b != "-" && b + 0 > 0) printf "%.2f", a / b; else print "-" }'
}
