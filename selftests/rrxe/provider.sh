#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# librrxe, rrxe's own libibverbs provider (providers/rrxe/), on one VM: which provider binds
# which device, and libibverbs' unmodified example programs through it, server and client
# on one rrxe device in loopback.
#
# librrxe is loaded by naming it in RDMAV_DRIVERS (libibverbs registers those providers
# first, so it is tried before the stock rxe provider, which also matches rrxe's driver
# id). Its match accepts rrxe devices only. provider.py tells the two providers apart by a
# verb only librrxe has (ibv_get_srq_num on a basic SRQ).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/tap.sh"
. "$here/lib/gid.sh"
. "$here/lib/device.sh"
TMO=${RRXE_PP_TIMEOUT:-120}
LOG=$(mktemp -d /tmp/provider.XXXXXX)
# load_driver() appends the provider suffix, -rdmav34.so.
lib=$here/provider/librrxe
ours() { RDMAV_DRIVERS=$lib "$@"; }

tap_begin "librrxe: binding and libibverbs' examples through it"
if [ ! -f "$lib-rdmav34.so" ]; then
	skip "librrxe" "no $lib-rdmav34.so (scripts/kselftest.sh builds it with the kselftests)"
	tap_end
	exit $?
fi
device_up rrxe rrxe0 || exit 1

bound() { # DEV WANT [env...]: provider.py reports WANT for DEV
	local dev=$1 want=$2 out
	shift 2
	out=$("$@" python3 "$here/provider.py" "$dev") || { echo "$out"; return 1; }
	echo "$out"
	[[ $out == "provider: $want"* ]]
}
check "with RDMAV_DRIVERS naming librrxe, librrxe drives rrxe0" bound rrxe0 rrxe env RDMAV_DRIVERS="$lib"
check "without it, the stock rxe provider drives rrxe0 as before" bound rrxe0 rxe env
installed() { # CMD...: CMD seeing /etc/libibverbs.d as `scripts/provider.sh install` leaves it
	# (rxe.driver diverted away, provider/rrxe.driver in its place, here naming the library by
	# its path), in a mount namespace of its own: the guest's root is the host's, read-only.
	unshare -m bash -c '
		set -e
		conf=$(mktemp -d)
		cp -a /etc/libibverbs.d/. "$conf/"
		rm -f "$conf/rxe.driver"
		sed "s|^driver rrxe\$|driver $1|" "$2" >"$conf/rrxe.driver"
		mount --bind "$conf" /etc/libibverbs.d
		shift 2
		"$@"' _ "$lib" "$here/provider/rrxe.driver" "$@"
}
check "installed (no RDMAV_DRIVERS), librrxe drives rrxe0" bound rrxe0 rrxe installed
check "ibv_devinfo through librrxe: rrxe0, port 1 active, fw and GUID reported" \
	bash -c 'o=$(RDMAV_DRIVERS='"$lib"' ibv_devinfo -d rrxe0) && echo "$o" &&
		grep -q "PORT_ACTIVE" <<<"$o" && grep -q "node_guid" <<<"$o"'

stock_xrc() { # the server fails at once, opening its domain, without librrxe
	local out
	out=$(timeout 30 ibv_xsrq_pingpong -d rrxe0 -g "$gid" -p 18809 2>&1) && return 1
	echo "$out"
	grep -q "Couldn't Open the XRC Domain" <<<"$out"
}
only_gsi() {
	local out
	out=$(rdma resource show qp link rrxe0/1) || return 1
	echo "$out"
	! grep -v "type GSI" <<<"$out" | grep -q lqpn
}
stock() { "$@"; }
server_up() { listening "$2" || ! kill -0 "$1" 2>/dev/null; } # PID PORT: listens, or has exited
via=ours
pp() { # NAME PROG ARGS...: PROG as server and client on rrxe0 in loopback, both through librrxe
	# (through the stock provider with via=stock)
	local name=$1 prog=$2 spid ok=1 g=-g
	shift 2
	[[ $prog == ib_* ]] && g=-x # perftest names the GID index -x
	$via timeout "$TMO" "$prog" -d rrxe0 "$g" "$gid" "$@" >"$LOG/$name.server" 2>&1 &
	spid=$!
	# A client that connects before its server listens is refused at once, and a server can
	# take longer than any fixed pause to start (an XRC ib_send_bw's on the debug kernel
	# took more than the one second this waited): wait for the listener, or the server's end.
	wait_for 60 server_up "$spid" "$(port_of "$@")"
	$via timeout "$TMO" "$prog" -d rrxe0 "$g" "$gid" "$@" 127.0.0.1 >"$LOG/$name.client" 2>&1 || ok=0
	wait "$spid" || ok=0
	tail -n 3 "$LOG/$name.server" "$LOG/$name.client"
	[ $ok = 1 ]
}
if [ -z "$gid" ]; then
	skip "the pingpongs" "no RoCE v2 GID on rrxe0"
else
	check "ibv_rc_pingpong -n 200 -c (data checked) through librrxe" pp rc ibv_rc_pingpong -n 200 -c -p 18801
	check "ibv_rc_pingpong -s 65536 -n 50 -c through librrxe" pp rcbig ibv_rc_pingpong -s 65536 -n 50 -c -p 18802
	check "ibv_rc_pingpong -e (completion events) through librrxe" pp rcev ibv_rc_pingpong -n 100 -e -p 18803
	check "ibv_uc_pingpong -n 200 through librrxe" pp uc ibv_uc_pingpong -n 200 -p 18804
	check "ibv_ud_pingpong -s 512 -n 200 -c through librrxe" pp ud ibv_ud_pingpong -s 512 -n 200 -c -p 18805
	check "ibv_srq_pingpong -q 8 -n 100 -c through librrxe" pp srq ibv_srq_pingpong -q 8 -n 100 -c -p 18806
	# XRC (IBA Annex A14): a domain opened on a file by both processes, an XRC SRQ and a
	# target QP in the server, XRC initiators in the client naming the server's SRQs.
	check "ibv_xsrq_pingpong -n 100 (XRC domain, XRC SRQs, XRC_SEND and XRC_RECV QPs) through librrxe" \
		pp xsrq ibv_xsrq_pingpong -n 100 -p 18807
	check "ibv_xsrq_pingpong -n 100 -e (completion events) through librrxe" \
		pp xsrqev ibv_xsrq_pingpong -n 100 -e -p 18808
	check "the stock rxe provider cannot run ibv_xsrq_pingpong: it has no ibv_open_xrcd" stock_xrc
	subtest "xrc_seed_verbs: the target's creator is killed, the process that opened it keeps receiving" \
		env RDMAV_DRIVERS="$lib" "$here/xrc_seed_verbs" rrxe0 "$gid" "$LOG/xrc-domain"
	check "... and no QP but the GSI QP is left on rrxe0 (rdma resource show qp)" only_gsi
	# perftest over XRC: its default post path is the extended send API (ibv_wr_*,
	# ibv_wr_set_xrc_srqn), --use_old_post_send takes ibv_post_send.
	check "ib_send_bw -c XRC (ibv_wr_* API) through librrxe" pp xsbw ib_send_bw -c XRC -F -n 200 -p 18810
	check "ib_send_bw -c XRC --use_old_post_send through librrxe" \
		pp xsbwo ib_send_bw -c XRC -F -n 200 --use_old_post_send -p 18811
	check "ib_write_bw -c XRC through librrxe" pp xwbw ib_write_bw -c XRC -F -n 200 -p 18812
	check "ib_read_bw -c XRC through librrxe" pp xrbw ib_read_bw -c XRC -F -n 200 -p 18813
	# End-to-end credits: while a requester waits for credits, rrxe asks the receiver's
	# provider, in a word of the receive ring's header, for a doorbell on its next post
	# (Documentation/rrxe/uverbs-abi.rst). ib_send_bw -r 1 keeps one receive posted, so every
	# Send takes the last credit and each repost is wanted; librrxe rings for it, at most
	# once a post. The stock provider knows no such word and rings nothing (the driver's
	# rechecks of the ring find its receives), and a receiver whose requester never runs out
	# of credits is never asked. A doorbell that was asked for sends the credit update
	# itself, from its system call (recv_doorbell_acks): ACKLO of them at least.
	counted() { # C1 WHAT1 C2 WHAT2 VIA NAME PROG ARGS...: pp through VIA; sets d1 and d2,
		# what rrxe0's counters C1 and C2 rose by, and prints them as WHAT1 and WHAT2 with
		# the client's last figures (also kept in rung, for after the check)
		local c1=$1 what1=$2 c2=$3 what2=$4 b1 b2 ok=0
		via=$5
		shift 5
		b1=$(rdma_stat rrxe0 "$c1")
		b2=$(rdma_stat rrxe0 "$c2")
		pp "$@" && ok=1
		via=ours
		d1=$(($(rdma_stat rrxe0 "$c1") - ${b1:-0}))
		d2=$(($(rdma_stat rrxe0 "$c2") - ${b2:-0}))
		rung="$d1 $what1, $d2 $what2, $(grep -h '^ *[0-9]' "$LOG/$1.client" | tail -1)"
		echo "$rung"
		[ $ok = 1 ]
	}
	doorbells() { # LO HI ACKLO VIA NAME PROG ARGS...: pp through VIA rang LO to HI receive doorbells
		local lo=$1 hi=$2 acklo=$3
		shift 3
		counted recv_doorbells "receive doorbells" recv_doorbell_acks "updates sent by them" "$@" &&
			[ "$d1" -ge "$lo" ] && [ "$d1" -le "$hi" ] && [ "$d2" -ge "$acklo" ] && [ "$d2" -le "$d1" ]
	}
	rung="" d1=0 d2=0 # counted's figures, reported after each check
	check "ib_send_bw -r 1 -n 200 through librrxe: the receiver rings a doorbell for the reposts it is asked for (at least 20, and one a post at most: 201), at least 10 of which send the update from the system call" \
		doorbells 20 201 10 ours crd1 ib_send_bw -s 4096 -r 1 -n 200 -F -p 18814
	echo "# $rung"
	check "... through the stock rxe provider: no doorbell, the transfer completes all the same" \
		doorbells 0 0 0 stock crd1s ib_send_bw -s 4096 -r 1 -n 200 -F -p 18815
	echo "# $rung"
	# The requester of a queue kept 64 deep runs out of credits now and then (a release
	# guest's server reposts in bursts): the doorbell, asked for once half the depth is
	# back, rang 4 times there, where one on every post while asked rang 812. Since the
	# sender's runs got shorter (2026-11-29) it runs out more often: 11 to 21 doorbells in
	# debug boots, 0 to 3 before.
	check "ib_send_bw -r 64 -n 2000 through librrxe (64 receives posted): a doorbell for two posts in a hundred at most" \
		doorbells 0 40 0 ours crd64 ib_send_bw -s 64 -r 64 -t 16 -n 2000 -F -p 18816
	echo "# $rung"
	# Send doorbells: while a run of a connected QP's task is going, which looks at the send
	# ring once more before it ends, the driver says so in another word of the ring's header
	# and librrxe posts without a doorbell; that last look finds those WQEs and queues the
	# next run (send_ring_rechecks). ib_write_bw posts its 2,000 Writes one a call, from up
	# to 128 outstanding, while the QP's runs send them on the other vCPU. The stock
	# provider reads no such word and rings for every post.
	senddb() { # LO HI MINRECHECKS VIA NAME PROG ARGS...: pp through VIA rang LO to HI send doorbells
		local lo=$1 hi=$2 minre=$3
		shift 3
		counted send_doorbells "send doorbells" send_ring_rechecks "runs queued by a recheck" "$@" &&
			[ "$d1" -ge "$lo" ] && [ "$d1" -le "$hi" ] && [ "$d2" -ge "$minre" ]
	}
	check "ib_write_bw -s 64 -n 2000 through librrxe: fewer send doorbells than posts (at most 1,999), the runs' rechecks found the rest" \
		senddb 1 1999 1 ours sdb ib_write_bw -s 64 -n 2000 -F -p 18817
	echo "# $rung"
	check "... through the stock rxe provider: a doorbell for every post (2,000 at least)" \
		senddb 2000 1000000 0 stock sdbs ib_write_bw -s 64 -n 2000 -F -p 18818
	echo "# $rung"
	# A run leaves its QP's armed timer alone when it fires by the run's new deadline
	# anyway (Task::arm in glue/task.rs): a ping-pong moves its local ACK timeout (perftest's
	# 67 ms) forward at every run, which restarted the hrtimer at two runs in five before
	# (about 1,000 times here); now it restarts when the armed one has fired, some 15 times a
	# second a QP (26 in 2,540 runs in a debug boot). One run in ten leaves room for a guest
	# ten times slower than that one.
	timers() { # VIA NAME PROG ARGS...: pp through VIA restarted timers in one run in ten at most
		counted qp_timer_arms "timer restarts" qp_task_runs "runs" "$@" &&
			[ "$d2" -ge 1000 ] && [ $((d1 * 10)) -le "$d2" ]
	}
	check "ib_write_lat -s 2 -n 500: the QPs' runs (1,000 at least) restarted their timers in one run in ten at most" \
		timers stock tlat ib_write_lat -s 2 -n 500 -F -p 18819
	echo "# $rung"
	# Loopback: a run hands the packets it looped back to their QPs together, at the end of
	# its transmit loop (loopback_handovers), where each packet was handed over alone
	# before; each travels in the buffer it was built in, which the receiving run gives back
	# to the device's pool (loopback_buffers_allocated), where each packet had one allocated
	# (or an skb) before. 200 64 KiB Writes at path MTU 1024 are 12,800 packets; a debug
	# boot handed them over in 410 batches and allocated 944 buffers, for the packets sent
	# while more than the pool's 64 were in flight.
	looped() { # VIA NAME PROG ARGS...: pp through VIA handed packets over in batches from a pool
		counted loopback_handovers "hand-overs" loopback_buffers_allocated "buffers allocated" "$@" &&
			[ "$d1" -ge 1 ] && [ "$d1" -le 1600 ] && [ "$d2" -le 3200 ]
	}
	check "ib_write_bw -s 65536 -n 200 (12,800 packets): handed over in 1,600 batches at most, in 3,200 buffers allocated at most" \
		looped stock lbw ib_write_bw -s 65536 -n 200 -F -p 18820
	echo "# $rung"
	# A 64 KiB Read's responder builds a message a run and kicks the requester to the other
	# vCPU (Place::Beside in glue/task.rs); a requester still queued on the responder's vCPU
	# (its own cut run or the poster's doorbell put it there) is moved there
	# (qp_runs_moved). Before, such a kick found it queued and left it: from then on both
	# QPs ran on one vCPU, one after the other, and Read moved two thirds of Write's bytes.
	moved() { # VIA NAME PROG ARGS...: pp through VIA moved runs beside at least once
		counted qp_runs_moved "runs moved beside" qp_task_runs "runs" "$@" &&
			[ "$d1" -ge 1 ]
	}
	check "ib_read_bw -s 65536 -n 200: a requester's run queued on its responder's vCPU is moved to the other (once at least)" \
		moved stock lrd ib_read_bw -s 65536 -n 200 -F -p 18821
	echo "# $rung"
	# A run that loops a few packets back to an idle QP has its worker make that QP's run
	# at once after it (Place::Now in glue/task.rs; qp_runs_now), where it queued it to
	# follow on its CPU, and so on down the chain (Kicks::CHAIN): the 2-byte Write's
	# responder writes the data without waiting for a work item, and its requester takes
	# the ACK in the same way. 1,000 Writes in a ping-pong: a debug boot made 1,990 runs
	# at once (999 when only the responder's was, runs nesting one deep).
	ran_now() { # VIA NAME PROG ARGS...: pp through VIA made runs at once for most messages
		counted qp_runs_now "runs made at once" qp_task_runs "runs" "$@" &&
			[ "$d1" -ge 1500 ]
	}
	check "ib_write_lat -s 2 -n 500: the responder's run, and the requester's that takes its ACK, are made at once after the requester's (1,500 of the 2,000 at least)" \
		ran_now stock nlat ib_write_lat -s 2 -n 500 -F -p 18822
	echo "# $rung"
	# A ping-pong's answer is posted while the run that took in the peer's message is still
	# going (it sends the ACK after writing the data): the answer's doorbell, on the poster's
	# vCPU, waits for that run's end and makes the next run in its system call
	# (Task::run_now_after in glue/task.rs, qp_doorbell_runs), and the run, finding the
	# answer at its last look, leaves it to that doorbell (qp_answers_awaited). Before, the
	# run queued the answer's run on the poster's vCPU (qp_answers_beside), a worker woken
	# there for every message, and no Write's doorbell made a run. The waits are bounded
	# (50 and 20 us), which a debug guest's slower runs and system calls often outlast: in a
	# release boot 20,000 Writes made 19,944 doorbell runs and left 19,535 answers to their
	# doorbells, in debug boots 1,000 Writes made 728-791 and left 17-24 (a quarter leaves
	# room for a slower machine).
	#
	# The waits pay where each vCPU has a host core; between two guests sharing two cores
	# they made latency worse. So the device times both its spins (qp_wait_ns) and its
	# workers' wake-ups (qp_wakeup_ns) and spins while spins cost less
	# (transport/wait_gauge.rs); the module parameter answer_waits (2, the default) says so,
	# 0 turns the waits off and 1 makes them unconditional. Which the default chooses is
	# the host's doing (this guest shares the host's cores with side B's): these checks
	# set the parameter, and the one of the default checks that every chance was weighed.
	# The device's figures so far are printed after each.
	with_waits() { # N CMD...: CMD with answer_waits at N, then back at the default
		local ok=0
		echo "$1" >/sys/module/rrxe/parameters/answer_waits || return
		shift
		"$@" && ok=1
		echo 2 >/sys/module/rrxe/parameters/answer_waits
		[ $ok = 1 ]
	}
	gauge() {
		local w n k kn
		w=$(rdma_stat rrxe0 qp_waits) n=$(rdma_stat rrxe0 qp_wait_ns)
		k=$(rdma_stat rrxe0 qp_wakeups) kn=$(rdma_stat rrxe0 qp_wakeup_ns)
		w=${w:-0} n=${n:-0} k=${k:-0} kn=${kn:-0}
		echo "spins so far: $w, $((n / 1000 / (w > 0 ? w : 1))) us on average, in vain $(rdma_stat rrxe0 qp_doorbell_waits_expired) doorbells' and $(rdma_stat rrxe0 qp_answer_waits_expired) runs'; wake-ups $k, $((kn / 1000 / (k > 0 ? k : 1))) us on average; chances skipped $(rdma_stat rrxe0 qp_waits_skipped)"
	}
	# Whether a run finds the answer in the ring before its doorbell made the run is a
	# race, which a slow guest loses: in one CI boot (side B busy, round trips of 1 ms),
	# 996 of librrxe's 1,000 doorbells found the QP idle and no run left an answer to one.
	# So if runs found answers (qp_answers_beside, qp_answers_awaited), they waited for the
	# doorbells, which came (qp_answers_awaited) or not in time (qp_answer_waits_expired):
	# one wait at least (a run whose ring held a second WQE, the answer before not yet
	# acknowledged, does not wait).
	answers() { # VIA NAME PROG ARGS...: pp through VIA made most answers' runs in their doorbells
		local b0 e0 found waited
		b0=$(rdma_stat rrxe0 qp_answers_beside) e0=$(rdma_stat rrxe0 qp_answer_waits_expired)
		counted qp_doorbell_runs "doorbell runs at once" qp_answers_awaited "answers left to their doorbells" "$@" || return
		found=$((d2 + $(rdma_stat rrxe0 qp_answers_beside) - b0))
		waited=$((d2 + $(rdma_stat rrxe0 qp_answer_waits_expired) - e0))
		rung+="; $found runs found an answer, $waited waited for its doorbell; $(gauge)"
		[ "$d1" -ge 250 ] && { [ "$found" = 0 ] || [ "$waited" -ge 1 ]; }
	}
	check "ib_write_lat -s 2 -n 500 with answer_waits=1: answers' doorbells make their runs in the system call (250 of the 1,000 Writes at least), runs that find an answer wait for its doorbell" \
		with_waits 1 answers stock wlat ib_write_lat -s 2 -n 500 -F -p 18828
	echo "# $rung"
	# librrxe posts without a doorbell while a run of its QP is going, but for a post to a
	# send queue with nothing outstanding (below): a ping-pong's answers ring too.
	check "... through librrxe: the same" \
		with_waits 1 answers ours alat ib_write_lat -s 2 -n 500 -F -p 18823
	echo "# $rung"
	# answer_waits=0: every chance to spin is let go (counted; two a Write answered, the
	# doorbell's and the run's), and none is taken.
	no_spins() { # VIA NAME PROG ARGS...: pp through VIA made no spin
		local w0 ok=0
		w0=$(rdma_stat rrxe0 qp_waits)
		counted qp_waits_skipped "chances skipped" qp_answers_awaited "answers left to their doorbells" "$@" && ok=1
		rung+="; $(($(rdma_stat rrxe0 qp_waits) - w0)) spins"
		[ $ok = 1 ] && [ "$d1" -ge 500 ] && [ "$d2" = 0 ] && [ "$(rdma_stat rrxe0 qp_waits)" = "$w0" ]
	}
	check "ib_write_lat -s 2 -n 500 with answer_waits=0: no doorbell or run spins for the other (500 chances skipped at least, no answer left to a doorbell)" \
		with_waits 0 no_spins stock zlat ib_write_lat -s 2 -n 500 -F -p 18829
	echo "# $rung"
	# The default weighs each chance: it spins, or lets the chance go (a doorbell that finds
	# the QP idle does neither: it makes the run without waiting). Which, is decided by the
	# samples, whose rule `cargo test` checks (wait_gauge.rs) on figures as one guest and
	# two guests measured them; here, that 100 of the 1,000 Writes at least did one or the
	# other (a debug boot with side B busy skipped 1,749 chances, see answer_waits=0).
	weighed() { # VIA NAME PROG ARGS...: pp through VIA spun or skipped 100 times at least
		local s0
		s0=$(rdma_stat rrxe0 qp_waits_skipped)
		counted qp_waits "spins" qp_answers_awaited "answers left to their doorbells" "$@" &&
			rung+="; $(($(rdma_stat rrxe0 qp_waits_skipped) - s0)) chances skipped; $(gauge)" &&
			[ $((d1 + $(rdma_stat rrxe0 qp_waits_skipped) - s0)) -ge 100 ]
	}
	check "ib_write_lat -s 2 -n 500 with answer_waits=2 (the default): answers' chances to spin are weighed (100 spins or chances skipped at least)" \
		weighed stock glat ib_write_lat -s 2 -n 500 -F -p 18830
	echo "# $rung"
	# A post to a send queue with nothing outstanding rings even while a run is going
	# (post_chain in providers/rrxe/src/qp.rs): likely a ping-pong's answer, whose
	# doorbell on the poster's vCPU gets its run going sooner than the run's last look.
	# 2,000 Writes (ib_write_lat -n 1000) in a release boot: 2,000 doorbells, 17-23 before.
	idle_rings() { # VIA NAME PROG ARGS...: pp through VIA rang for most posts
		counted send_doorbells "send doorbells" send_ring_rechecks "rechecks" "$@" &&
			[ "$d1" -ge 900 ]
	}
	check "ib_write_lat -s 2 -n 500 through librrxe: posts to a send queue with nothing outstanding ring the doorbell (900 of the 1,000 Writes at least)" \
		idle_rings ours ilat ib_write_lat -s 2 -n 500 -F -p 18824
	echo "# $rung"
	# A doorbell after the response to the QP's last outstanding Read is a ping-pong's next
	# request: its run is made at once in the system call (qp::object::doorbell,
	# qp_doorbell_runs), where it was queued on the next vCPU, whose worker had often gone
	# idle since the response's run. 500 Reads: 499 in a debug boot, none before.
	read_answers() { # VIA NAME PROG ARGS...: pp through VIA ran most Reads' doorbells at once
		counted qp_doorbell_runs "doorbell runs at once" send_doorbells "send doorbells" "$@" &&
			[ "$d1" -ge 250 ]
	}
	check "ib_read_lat -s 2 -n 500: the doorbell of a Read posted after the last one's response makes its run at once (250 of the 500 at least)" \
		read_answers stock rlat ib_read_lat -s 2 -n 500 -F -p 18825
	echo "# $rung"
	# A hand-over that finds the receiving QP idle with an empty backlog claims its next
	# run and gives it the packets directly (Inbox in qp/backlog.rs, loopback_handed_in),
	# where it pushed them to the backlog and the run popped them, under an
	# interrupt-saving lock each way: a Read's request and its response both go so. 500
	# Reads are 1,000 packets (and their doorbell runs): 1,001 of 1,002 in a debug boot.
	handed_in() { # VIA NAME PROG ARGS...: pp through VIA handed most packets in directly
		counted loopback_handed_in "packets handed in" sent_pkts "sent" "$@" &&
			[ "$d1" -ge 500 ] && [ "$d1" -le "$d2" ]
	}
	check "ib_read_lat -s 2 -n 500: requests and responses are handed straight to their QPs' claimed runs (500 of the 1,000 packets at least)" \
		handed_in stock hlat ib_read_lat -s 2 -n 500 -F -p 18826
	echo "# $rung"
	# A stream mixes the two: a hand-over of more packets than an inbox holds claims the
	# run, gives it the first eight and queues the rest behind them, and the next claims
	# it only once the backlog is empty again. The responder takes every sender's packets
	# in the order sent: none out of sequence (a packet taken in out of order is counted
	# and NAKed, and the Write retransmitted), with some handed in (1,389 in a debug boot).
	in_order() { # VIA NAME PROG ARGS...: pp through VIA handed some in, none taken out of order
		counted loopback_handed_in "packets handed in" out_of_seq_requests "out of sequence" "$@" &&
			[ "$d1" -ge 1 ] && [ "$d2" = 0 ]
	}
	check "ib_write_bw -s 16384 -n 2000 (32,000 packets): some handed straight in, none taken in out of order" \
		in_order stock ordw ib_write_bw -s 16384 -n 2000 -F -p 18827
	echo "# $rung"
fi

device_down

# rdma_rxe (alone: it and rrxe both need UDP port 4791): librrxe declines its devices even
# when loaded first.
if device_up rdma_rxe rxe0; then
	check "with RDMAV_DRIVERS naming librrxe, the stock provider still drives rdma_rxe's rxe0" \
		bound rxe0 rxe env RDMAV_DRIVERS="$lib"
	check "with librrxe installed, the stock provider still drives rdma_rxe's rxe0" \
		bound rxe0 rxe installed
	device_down
else
	skip "librrxe declines rdma_rxe devices" "rdma_rxe could not be added"
fi
rm -rf "$LOG"
tap_end
