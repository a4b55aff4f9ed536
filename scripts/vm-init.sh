#!/bin/bash
# PID 1 of an rrxe test VM, started by scripts/vm.sh (init= on the kernel command line).
#
# The root file system is the host's, read-only over 9p. The host's results directory
# (vm.sh --out) arrives as the 9p tag "results" and is mounted on /run/results. vm.sh
# prepared .rrxe/ there: SIDE.env (the run's parameters; SIDE, a or b, comes from
# rrxevm=SIDE on the kernel command line), the module tree, the module tool wrappers and
# busybox applet links.
#
# This script sets up a minimal system, runs the command, stores SIDE.out, SIDE.status,
# SIDE.times, SIDE.dmesg (and SIDE.kmemleak when kmemleak is there) in the results
# directory and powers off. Whatever goes wrong, it powers off: PID 1 must never hang or
# exit (if it exits anyway, the kernel panics and, with panic=-1 and QEMU's -no-reboot,
# the VM ends all the same).
#
# Under TCG every exec of a dynamically linked program costs ~150 ms (busybox, static:
# ~15 ms), so this script uses bash builtins and busybox for its own work.
#
# Not set -e: a failing step is reported, and the run goes on to the power-off.
set -u

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
BB=/bin/busybox
RES=/run/results
X=$RES/.rrxe
side=a

say() { echo "rrxe-init[$side]: $*"; }

poweroff_now() {
	"$BB" sync
	"$BB" poweroff -f
	# Not reached unless reboot(2) failed: exiting PID 1 panics the kernel, and
	# panic=-1 with -no-reboot ends QEMU.
	say "poweroff failed"
	exit 1
}

is_mounted() {
	local _d m _r
	[ -r /proc/mounts ] || return 1
	while read -r _d m _r; do
		[ "$m" = "$1" ] && return 0
	done </proc/mounts
	return 1
}

# mnt TYPE SOURCE DIR [OPTIONS]: mounts unless DIR is a mount point already.
mnt() {
	is_mounted "$3" && return 0
	[ -d "$3" ] || "$BB" mkdir -p "$3" || return 1
	"$BB" mount -t "$1" ${4:+-o "$4"} "$2" "$3" || {
		say "cannot mount $1 on $3"
		return 1
	}
}

uptime_s() {
	local up _
	read -r up _ </proc/uptime
	echo "$up"
}

# The processes other than this one and the kernel's threads (whose exe link is empty).
user_pids() {
	local d p
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" = 1 ] || [ "$p" = "$BASHPID" ] && continue
		[ -e "$d/exe" ] && echo "$p"
	done
}

# After a command that timed out: the kernel stacks of the tasks that are still blocked in
# the kernel (state D), on the console and in the results, which a hung test (or a QP whose
# run never came) leaves behind; a task that cannot be killed shows here, not in dmesg.
blocked_report() {
	local d k v state comm
	for d in /proc/[0-9]*; do
		state=
		while read -r k v _; do
			[ "$k" = State: ] && { state=$v; break; }
		done 2>/dev/null <"$d/status"
		[ "$state" = D ] || continue
		read -r comm 2>/dev/null <"$d/comm"
		say "blocked: ${d#/proc/} ($comm)"
		"$BB" sed 's/^/    /' "$d/stack" 2>/dev/null
	done | "$BB" tee -a "$RES/$side.out"
}

kill_leftovers() {
	[ -n "$(user_pids)" ] || return 0
	say "killing the processes the command left behind"
	kill -TERM -1 2>/dev/null
	local i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		"$BB" sleep 0.2
		[ -n "$(user_pids)" ] || return 0
	done
	kill -KILL -1 2>/dev/null
	"$BB" sleep 0.2
}

setup_base() {
	mnt proc proc /proc &&
		mnt sysfs sysfs /sys &&
		mnt devtmpfs devtmpfs /dev || return 1
	exec </dev/null >/dev/console 2>&1
	mnt tmpfs tmpfs /run mode=0755 &&
		mnt 9p results "$RES" trans=virtio,version=9p2000.L,msize=512000 || return 1
}

load_params() {
	local w
	for w in $(</proc/cmdline); do
		case "$w" in rrxevm=?*) side=${w#rrxevm=} ;; esac
	done
	# shellcheck source=/dev/null
	. "$X/$side.env" || {
		say "cannot read $X/$side.env"
		return 1
	}
}

# vm.sh built the module tree ($X/modroot/lib/modules/RELEASE: the kernel's modules and
# the --module files under extra/, depmod'ed) and the modprobe/modinfo/depmod wrappers
# that point the real tools at it ($X/bin, first in PATH). The host root usually has no
# /lib/modules to mount over; if it has one, the tree is bind-mounted there too. The
# kernel's request_module() goes through /proc/sys/kernel/modprobe.
setup_modules() {
	echo "$X/bin/modprobe" >/proc/sys/kernel/modprobe || return 1
	if [ -d /lib/modules ]; then
		"$BB" mount -o bind "$X/modroot/lib/modules" /lib/modules ||
			say "cannot bind the module tree onto /lib/modules (the wrappers still work)"
	fi
}

# tmpfs over the directories programs expect to be writable. If the checkout lives under
# one of them (a clone in /tmp), it is bind-mounted back to its path afterwards.
setup_writable() {
	local d keep=
	for d in /tmp /var/tmp /root; do
		case "$RRXE_REPO/" in "$d"/*) keep=$d ;; esac
	done
	if [ -n "$keep" ]; then
		"$BB" mkdir -p /run/rrxe/repo && "$BB" mount -o bind "$RRXE_REPO" /run/rrxe/repo || return 1
	fi
	mnt tmpfs tmpfs /tmp mode=1777 &&
		mnt tmpfs tmpfs /var/tmp mode=1777 &&
		mnt tmpfs tmpfs /root mode=0700 || return 1
	mnt devpts devpts /dev/pts gid=5,mode=620,ptmxmode=666
	mnt tmpfs tmpfs /dev/shm mode=1777
	# The links udev would make: the kselftest runner writes each program's output to
	# /dev/stdout, and bash's process substitution uses /dev/fd.
	"$BB" ln -sfn /proc/self/fd /dev/fd
	"$BB" ln -sfn /proc/self/fd/0 /dev/stdin
	"$BB" ln -sfn /proc/self/fd/1 /dev/stdout
	"$BB" ln -sfn /proc/self/fd/2 /dev/stderr
	[ -L /var/run ] || mnt tmpfs tmpfs /var/run mode=0755
	mnt debugfs debugfs /sys/kernel/debug
	# kmemleak's own thread scans every 10 minutes; under KASAN and TCG a scan holds a vCPU
	# for 15 s or more in the middle of whatever test runs then. The scans after the
	# command (kmemleak_report) find the same leaks.
	[ ! -e /sys/kernel/debug/kmemleak ] || echo scan=off >/sys/kernel/debug/kmemleak 2>/dev/null || true
	if [ -n "$keep" ]; then
		"$BB" mkdir -p "$RRXE_REPO" && "$BB" mount -o bind /run/rrxe/repo "$RRXE_REPO" || return 1
	fi
	echo "vm-$side" >/proc/sys/kernel/hostname
}

setup_net() {
	"$BB" ip link set lo up || return 1
	[ "$RRXE_TWO" = 1 ] || return 0
	wire_up eth0 "$RRXE_LOCAL_IP4" "$RRXE_LOCAL_IP6" || return 1
	[ "${RRXE_WIRES:-1}" = 1 ] || wire_up eth1 "$RRXE_LOCAL2_IP4" "$RRXE_LOCAL2_IP6"
}

# wire_up NETDEV IP4 IP6: addresses on NETDEV, up, with a carrier.
wire_up() {
	local n=$1 i c
	[ -e "/sys/class/net/$n" ] || {
		say "no $n"
		return 1
	}
	# No duplicate address detection: the addresses are usable at once. No router
	# solicitations: less noise on the wire.
	echo 0 >"/proc/sys/net/ipv6/conf/$n/accept_dad"
	echo 0 >"/proc/sys/net/ipv6/conf/$n/router_solicitations"
	# Keep the IPv6 address across `ip link set $n down/up` (the port-state tests flap
	# the link; by default Linux drops IPv6 addresses on link down).
	echo 1 >"/proc/sys/net/ipv6/conf/$n/keep_addr_on_down"
	"$BB" ip addr add "$2/24" dev "$n" &&
		"$BB" ip addr add "$3/64" dev "$n" &&
		"$BB" ip link set "$n" up || return 1
	for ((i = 0; i < 100; i++)); do
		read -r c <"/sys/class/net/$n/carrier" 2>/dev/null
		[ "${c:-0}" = 1 ] && return 0
		"$BB" sleep 0.1
	done
	say "$n has no carrier"
	return 1
}

# The debug kernel's boot leaves kmemleak nothing to report, so there is no scan+clear
# before the command (under KASAN a scan takes ~15 s). After it: two scans, at least 5 s
# (kmemleak's minimum object age) apart.
kmemleak_report() {
	local k=/sys/kernel/debug/kmemleak
	[ -e "$k" ] || return 0
	local t0=$SECONDS
	say "kmemleak scan"
	echo scan >"$k" 2>/dev/null
	((SECONDS - t0 >= 5)) || "$BB" sleep $((5 - (SECONDS - t0)))
	echo scan >"$k" 2>/dev/null
	"$BB" cat "$k" >"$RES/$side.kmemleak" 2>/dev/null
}

# "12.34" -> 1234
centi() {
	local i=${1%.*} f=${1#*.}00
	echo $((10#$i * 100 + 10#${f:0:2}))
}

# The host kills the VM RRXE_TIMEOUT seconds after starting it. The command, and the wait
# for the peer, end a margin earlier (at this uptime), so that the dmesg of a hung test
# still reaches the host.
deadline() {
	local margin=$((RRXE_TIMEOUT / 10 > 30 ? RRXE_TIMEOUT / 10 : 30))
	echo $((RRXE_TIMEOUT - margin))
}

# With two VMs, each waits after its command until the peer's has ended too (or the
# deadline has passed) before it captures its kernel log and powers off: the wire and
# this kernel stay up for the peer's command, and what that command does to this kernel
# lands in this dmesg. The results directory is the same on both sides.
wait_for_peer() {
	local peer=b up d
	[ "$RRXE_TWO" = 1 ] || return 0
	[ "$side" = b ] && peer=a
	: >"$X/$side.cmd-done"
	[ -e "$X/$peer.cmd-done" ] && return 0
	say "waiting for vm-$peer's command to end"
	d=$(deadline)
	while [ ! -e "$X/$peer.cmd-done" ]; do
		up=$(uptime_s)
		((${up%.*} < d)) || {
			say "gave up waiting for vm-$peer"
			return 0
		}
		"$BB" sleep 0.2
	done
}

run_command() {
	local up end budget pre=() v path=$PATH
	up=$(uptime_s)
	budget=$(($(deadline) - ${up%.*}))
	((budget >= 5)) && pre=(timeout -k 5 "$budget")
	echo "boot_s=$up" >"$RES/$side.times"
	say "running the command (up ${up}s${pre:+, guest-side timeout ${budget}s})"
	(
		# A clean environment, without exec'ing env(1).
		for v in $(compgen -e); do unset "$v"; done
		export PATH="$X/bin:$path:$X/busybox" HOME=/root TERM=dumb LANG=C.UTF-8 \
			SHELL=/bin/bash USER=root LOGNAME=root \
			RRXE_VM="$side" RRXE_RESULTS="$RES" RRXE_VARIANT="$RRXE_VARIANT" \
			RRXE_RELEASE="$RRXE_RELEASE" RRXE_REPO="$RRXE_REPO"
		if [ "$RRXE_TWO" = 1 ]; then
			export RRXE_LOCAL_IP4="$RRXE_LOCAL_IP4" RRXE_PEER_IP4="$RRXE_PEER_IP4" \
				RRXE_LOCAL_IP6="$RRXE_LOCAL_IP6" RRXE_PEER_IP6="$RRXE_PEER_IP6"
			[ "${RRXE_WIRES:-1}" = 1 ] ||
				export RRXE_LOCAL2_IP4="$RRXE_LOCAL2_IP4" RRXE_PEER2_IP4="$RRXE_PEER2_IP4" \
					RRXE_LOCAL2_IP6="$RRXE_LOCAL2_IP6" RRXE_PEER2_IP6="$RRXE_PEER2_IP6"
		fi
		for v in "${RRXE_ENV[@]}"; do export "${v?}"; done
		ulimit -l unlimited
		ulimit -c 0
		cd "$RRXE_REPO" && exec "${pre[@]}" /bin/bash -c "$RRXE_CMD"
	) >"$RES/$side.out" 2>&1 </dev/null
	status=$?
	end=$(uptime_s)
	v=$(($(centi "$end") - $(centi "$up")))
	printf 'cmd_s=%d.%02d\n' $((v / 100)) $((v % 100)) >>"$RES/$side.times"
	say "command exited with status $status"
	# timeout(1)'s status, or its KILL's.
	if [ "$status" = 124 ] || [ "$status" = 137 ]; then
		blocked_report
	fi
}

status=125
if setup_base; then
	if load_params && setup_modules && setup_writable && setup_net; then
		run_command
	else
		say "setup failed"
		echo "rrxe-init: setup of vm-$side failed; see its console log" >>"$RES/$side.out"
	fi
	kill_leftovers
	wait_for_peer
	kmemleak_report
	"$BB" dmesg -s 16777216 >"$RES/$side.dmesg" 2>&1
	echo "$status" >"$RES/$side.status"
	say "done (up $(uptime_s)s)"
else
	say "basic setup failed"
fi
poweroff_now
