#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`, side A: perftest bandwidth (64 KiB) and latency (2 B) for RDMA Write, Send and
# RDMA Read over the wire to side B, on rrxe and then on rdma_rxe in the same boot and the
# same topology; prints each figure and the rrxe/rdma_rxe ratio. A benchmark, not a test:
# it fails only if a program does.
here=$(dirname "$0")
. "$here/../lib/gid.sh"
ITER=${BENCH_ITERS:-1000}
LAT_ITER=${BENCH_LAT_ITERS:-500}
declare -A fig
rc=0

ctl() { echo "$*" >&3 && read -r -t 300 CTL_REPLY <&3; }

for mod in rrxe rdma_rxe; do
	dev=${mod#rdma_}0
	modprobe "$mod" && rdma link add "$dev" type "${mod#rdma_}" netdev eth0 || exit 1
	for _ in $(seq 100); do
		g4=$(gid_index "$dev" "$RRXE_LOCAL_IP4") && break
		sleep 0.1
	done
	for _ in $(seq 600); do
		exec 3<>"/dev/tcp/$RRXE_PEER_IP4/4793" 2>/dev/null && break
		sleep 1
	done
	port=19000
	for op in write send read; do
		for kind in bw lat; do
			port=$((port + 1))
			prog=ib_${op}_$kind
			if [ "$kind" = bw ]; then
				args=(-d "$dev" -F -x @GID4@ -s 65536 -n "$ITER")
			else
				args=(-d "$dev" -F -x @GID4@ -s 2 -n "$LAT_ITER")
			fi
			ctl start "$mod-$prog" "$port" 300 "$prog" "${args[@]}" -p "$port"
			if [ "$CTL_REPLY" != ready ]; then
				echo "# $mod $prog: server did not start ($CTL_REPLY)"
				rc=1
				continue
			fi
			out=$(timeout 300 "$prog" "${args[@]//@GID4@/$g4}" -p "$port" "$RRXE_PEER_IP4" 2>&1) || rc=1
			ctl wait "$mod-$prog"
			# bw: "#bytes #iterations BW-peak BW-average MsgRate" (MB/s);
			# lat: "#bytes #iterations t_min t_max t_typical t_avg ..." (us).
			row=$(echo "$out" | awk '$1 ~ /^[0-9]+$/ && NF >= 5 { r = $0 } END { print r }')
			if [ "$kind" = bw ]; then
				fig[$mod,$op,$kind]=$(echo "$row" | awk '{ print $4 }')
			else
				fig[$mod,$op,$kind]=$(echo "$row" | awk '{ print $6 }')
			fi
			echo "# $mod $prog: $row"
		done
	done
	ctl done
	exec 3>&-
	rdma link delete "$dev"
	rmmod "$mod"
	sleep 2
done

printf '\n%-22s %14s %14s %10s\n' "perftest" "rrxe" "rdma_rxe" "rrxe/rxe"
for op in write send read; do
	for kind in bw lat; do
		a=${fig[rrxe,$op,$kind]:-} b=${fig[rdma_rxe,$op,$kind]:-}
		unit=$([ "$kind" = bw ] && echo "MB/s" || echo "us")
		ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a != "" && b + 0 > 0) printf "%.2f", a / b; else print "-" }')
		label="ib_${op}_$kind ($([ "$kind" = bw ] && echo 64KiB || echo 2B))"
		printf '%-22s %9s %-4s %9s %-4s %10s\n' "$label" "${a:--}" "$unit" "${b:--}" "$unit" "$ratio"
	done
done
echo "(bandwidth: average MB/s, higher is better; latency: average us, lower is better)"
exit $rc
