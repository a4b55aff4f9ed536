#!/bin/bash
# PID 1 of an rrxe test VM, started by scripts/vm.sh (init= on the kernel command line).
#
# The root file system is the host's, read-only over 9p. The writable results directory
# of the host (vm.sh --out) arrives as the 9p tag "results" and is mounted on
# /run/results; vm.sh put the run's parameters into .rrxe/SIDE.env there, SIDE (a or b)
# comes from rrxevm=SIDE on the kernel command line.
#
# This script sets up a minimal system, runs the command, stores SIDE.out, SIDE.status,
# SIDE.times, SIDE.dmesg (and SIDE.kmemleak when kmemleak is there) in the results
# directory and powers off. Whatever goes wrong, it powers off: PID 1 must never hang or
# exit (if it exits anyway, the kernel panics and, with panic=-1 and QEMU's -no-reboot,
# the VM ends all the same).
#
# Not set -e: a failing step is reported, and the run goes on to the power-off.
set -u

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
BB=/bin/busybox
RES=/run/results
RUN=/run/rrxe
side=

say() { echo "rrxe-init[${side:-?}]: $*"; }

poweroff_now() {
	sync
	"$BB" poweroff -f
	# Not reached unless reboot(2) failed: exiting PID 1 panics the kernel, and
	# panic=-1 with -no-reboot ends QEMU.
	say "poweroff failed"
	exit 1
}

# mnt TYPE SOURCE DIR [OPTIONS]: mounts unless DIR is a mount point already.
mnt() {
	mountpoint -q "$3" && return 0
	mkdir -p "$3" 2>/dev/null
	mount -t "$1" ${4:+-o "$4"} "$2" "$3" || {
		say "cannot mount $1 on $3"
		return 1
	}
}

uptime_s() {
	local up _
	read -r up _ </proc/uptime
	echo "$up"
}

# The processes other than this one and the kernel's threads.
user_pids() {
	local d p
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" = 1 ] || [ "$p" = "$BASHPID" ] && continue
		readlink "$d/exe" >/dev/null 2>&1 && echo "$p"
	done
}

kill_leftovers() {
	[ -n "$(user_pids)" ] || return 0
	kill -TERM -1 2>/dev/null
	local i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		sleep 0.2
		[ -n "$(user_pids)" ] || return 0
	done
	kill -KILL -1 2>/dev/null
	sleep 0.2
}

setup_base() {
	mnt proc proc /proc &&
		mnt sysfs sysfs /sys &&
		mnt devtmpfs devtmpfs /dev || return 1
	exec </dev/null >/dev/console 2>&1
	mnt tmpfs tmpfs /run mode=0755 &&
		mnt 9p results "$RES" trans=virtio,version=9p2000.L,msize=512000 || return 1
	mkdir -p "$RUN"
}

# Loads SIDE.env; falls back to side a if the command line has no rrxevm=.
load_params() {
	local w
	side=a
	for w in $(</proc/cmdline); do
		case "$w" in rrxevm=?*) side=${w#rrxevm=} ;; esac
	done
	# shellcheck source=/dev/null
	. "$RES/.rrxe/$side.env" || {
		say "cannot read $RES/.rrxe/$side.env"
		return 1
	}
}

# /lib/modules: a tmpfs copy of the kernel's installed modules plus the run's extra ones
# under extra/, indexed by depmod. The host root usually has no /lib/modules to mount
# over, so the tree lives at $RUN/modroot/lib/modules and modprobe, depmod and modinfo
# are wrapped to use it (-d/-b $RUN/modroot): the wrappers come first in PATH and the
# kernel's request_module() goes through /proc/sys/kernel/modprobe. If the host root has
# a /lib/modules, the tree is bind-mounted there as well.
setup_modules() {
	local md=$RUN/modroot/lib/modules/$RRXE_RELEASE tool
	mkdir -p "$md" "$RUN/bin" || return 1
	cp -a "$RRXE_KDIR/modroot/lib/modules/$RRXE_RELEASE/." "$md/" || {
		say "cannot copy $RRXE_KDIR/modroot/lib/modules/$RRXE_RELEASE"
		return 1
	}
	rm -f "$md/build" "$md/source"
	mkdir -p "$md/extra"
	if compgen -G "$RES/.rrxe/extra/*.ko" >/dev/null; then
		cp "$RES"/.rrxe/extra/*.ko "$md/extra/" || return 1
	fi
	depmod -b "$RUN/modroot" -a "$RRXE_RELEASE" || {
		say "depmod failed"
		return 1
	}
	# modprobe takes the root as -d, modinfo and depmod as -b.
	for tool in "modprobe -d" "modinfo -b" "depmod -b"; do
		printf '#!/bin/sh\nexec /sbin/%s %s "$@"\n' "$tool" "$RUN/modroot" >"$RUN/bin/${tool%% *}"
	done
	chmod 755 "$RUN"/bin/*
	echo "$RUN/bin/modprobe" >/proc/sys/kernel/modprobe
	if [ -d /lib/modules ]; then
		mount --bind "$RUN/modroot/lib/modules" /lib/modules ||
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
		mkdir -p "$RUN/repo" && mount --bind "$RRXE_REPO" "$RUN/repo" || return 1
	fi
	mnt tmpfs tmpfs /tmp mode=1777 &&
		mnt tmpfs tmpfs /var/tmp mode=1777 &&
		mnt tmpfs tmpfs /root mode=0700 || return 1
	mkdir -p /dev/pts /dev/shm
	mnt devpts devpts /dev/pts gid=5,mode=620,ptmxmode=666
	mnt tmpfs tmpfs /dev/shm mode=1777
	[ -L /var/run ] || mnt tmpfs tmpfs /var/run mode=0755
	mnt debugfs debugfs /sys/kernel/debug
	if [ -n "$keep" ]; then
		mkdir -p "$RRXE_REPO" && mount --bind "$RUN/repo" "$RRXE_REPO" || return 1
	fi
	# Busybox applets the host lacks (ping, ping6, ...) go last in PATH.
	mkdir -p "$RUN/busybox" && "$BB" --install -s "$RUN/busybox"
	echo "vm-$side" >/proc/sys/kernel/hostname
}

setup_net() {
	local i
	ip link set lo up || return 1
	[ "$RRXE_TWO" = 1 ] || return 0
	[ -e /sys/class/net/eth0 ] || {
		say "no eth0"
		return 1
	}
	ip addr add "$RRXE_LOCAL_IP4/24" dev eth0 &&
		ip -6 addr add "$RRXE_LOCAL_IP6/64" dev eth0 nodad &&
		ip link set eth0 up || return 1
	for ((i = 0; i < 100; i++)); do
		[ "$(cat /sys/class/net/eth0/carrier 2>/dev/null)" = 1 ] && return 0
		sleep 0.1
	done
	say "eth0 has no carrier"
	return 1
}

# Forget the leaks kmemleak already knows of (boot-time ones), so that SIDE.kmemleak
# reports what the command leaked.
kmemleak_reset() {
	local k=/sys/kernel/debug/kmemleak
	[ -e "$k" ] || return 0
	echo scan >"$k" 2>/dev/null
	echo clear >"$k" 2>/dev/null
}

kmemleak_report() {
	local k=/sys/kernel/debug/kmemleak
	[ -e "$k" ] || return 0
	say "kmemleak scan"
	echo scan >"$k" 2>/dev/null
	sleep 5
	echo scan >"$k" 2>/dev/null
	cat "$k" >"$RES/$side.kmemleak" 2>/dev/null
}

run_command() {
	local envv=() up budget margin
	envv=(
		PATH="$RUN/bin:$PATH:$RUN/busybox" HOME=/root TERM=dumb LANG=C.UTF-8 SHELL=/bin/bash
		USER=root LOGNAME=root
		RRXE_VM="$side" RRXE_RESULTS="$RES" RRXE_VARIANT="$RRXE_VARIANT"
		RRXE_RELEASE="$RRXE_RELEASE" RRXE_REPO="$RRXE_REPO"
	)
	if [ "$RRXE_TWO" = 1 ]; then
		envv+=(RRXE_LOCAL_IP4="$RRXE_LOCAL_IP4" RRXE_PEER_IP4="$RRXE_PEER_IP4"
			RRXE_LOCAL_IP6="$RRXE_LOCAL_IP6" RRXE_PEER_IP6="$RRXE_PEER_IP6")
	fi
	envv+=("${RRXE_ENV[@]}")
	# The host kills the VM RRXE_TIMEOUT seconds after starting it. Stop the command a
	# margin earlier, so that the dmesg of a hung test still reaches the host.
	up=$(uptime_s)
	margin=$((RRXE_TIMEOUT / 10 > 30 ? RRXE_TIMEOUT / 10 : 30))
	budget=$((RRXE_TIMEOUT - ${up%.*} - margin))
	local pre=()
	((budget >= 5)) && pre=(timeout -k 5 "$budget")
	echo "boot_s=$up" >"$RES/$side.times"
	say "running the command (up ${up}s${pre:+, guest-side timeout ${budget}s})"
	ulimit -l unlimited
	ulimit -c 0
	(cd "$RRXE_REPO" && exec env -i "${envv[@]}" "${pre[@]}" /bin/bash -c "$RRXE_CMD") \
		>"$RES/$side.out" 2>&1 </dev/null
	status=$?
	local end
	end=$(uptime_s)
	echo "cmd_s=$(awk -v a="$up" -v b="$end" 'BEGIN { printf "%.2f", b - a }')" >>"$RES/$side.times"
	say "command exited with status $status"
}

status=125
if setup_base; then
	if load_params && setup_modules && setup_writable && setup_net; then
		kmemleak_reset
		run_command
	else
		say "setup failed"
		echo "rrxe-init: setup of vm-$side failed; see its console log" >>"$RES/$side.out"
	fi
	kill_leftovers
	kmemleak_report
	dmesg >"$RES/$side.dmesg" 2>&1
	echo "$status" >"$RES/$side.status"
	say "done (up $(uptime_s)s)"
else
	say "basic setup failed"
fi
poweroff_now
