# SPDX-License-Identifier: GPL-2.0
# Helpers for the SRQ tests (sourced).

# Exchanges per QP of the two-VM ibv_srq_pingpong (8 QPs), the same on both sides: 100 in
# make check, 500 in make soak (tap.sh's soak; both scripts source tap.sh first).
if soak; then SRQ_WIRE_N=500; else SRQ_WIRE_N=100; fi

# Runs an ibv_srq_pingpong client against $1, retrying while the server is not listening.
srq_pp_client() {
	local host=$1 tries=0 log=/tmp/srq-pp-client.log
	shift
	while :; do
		# The bound only ends a hang: 16 QPs x 500 exchanges between two debug guests once
		# took over 120 s while the host was busy, and over 300 s on a host running at half
		# its usual speed. The server side waits 900 s too.
		timeout 900 ibv_srq_pingpong "$@" "$host" >"$log" 2>&1 && { cat "$log"; return 0; }
		if ! grep -q "Couldn't connect" "$log" || [ $tries -ge 20 ]; then
			cat "$log"
			return 1
		fi
		tries=$((tries + 1))
		sleep 1
	done
}
