#!/usr/bin/env bash
# Boots the rrxe kernel in one QEMU VM, or two joined by a wire, and runs commands in them.
# See Documentation/rrxe/vm.rst.
#
#   scripts/vm.sh [--variant release|debug] [--out DIR] [--timeout SECONDS]
#                 [--module PATH.ko]... [--env NAME=VALUE]... [--allow-splat]
#                 [--ignore-splat REGEX]... [--pcap FILE] [--two] [--wire tcp|unix]
#                 [--wires 1|2] [--icount SHIFT] [--plugin 'FILE.so[,ARG=VALUE...]']
#                 [--cmd 'COMMAND'] [--cmd-b 'COMMAND'] [--append 'KERNEL ARGS']
#   scripts/vm.sh --check-dmesg [--ignore-splat REGEX]... FILE...
#
# The command's output goes to stdout (prefixed [a] / [b] with --two), the harness's own
# messages to stderr. Exit status: the command's (with --two: A's if it failed, else B's);
# 124 if a VM timed out; 125 if a VM ended without a status (crash, panic, QEMU failure);
# 99 if the commands succeeded but a kernel log has a splat (unless --allow-splat).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=selftests/rrxe/lib/splats.sh disable=SC1091 # followed with shellcheck -x
. "$here/../selftests/rrxe/lib/splats.sh"

usage() {
	sed -n '5,16s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

die() {
	echo "vm.sh: $*" >&2
	exit 2
}

variant=release
out=
timeout=
modules=()
envs=()
pcap=
two=0
cmd=true
cmd_b=true
allow_splat=0
ignore=()
check=0
files=()
append_extra=
wire=tcp
wires=1
icount=
plugin=

while (($#)); do
	case "$1" in
	--variant | --out | --timeout | --module | --env | --pcap | --cmd | --cmd-b | --ignore-splat | --append | --wire | --wires | --icount | --plugin)
		(($# >= 2)) || die "$1 needs an argument"
		;;
	esac
	case "$1" in
	--variant) variant=$2 ;;
	--out) out=$2 ;;
	--timeout) timeout=$2 ;;
	--module) modules+=("$2") ;;
	--env) envs+=("$2") ;;
	--pcap) pcap=$2 ;;
	--cmd) cmd=$2 ;;
	--cmd-b) cmd_b=$2 ;;
	--append) append_extra+=" $2" ;;
	--wire) wire=$2 ;;
	--wires) wires=$2 ;;
	--icount) icount=$2 ;;
	--plugin) plugin=$2 ;;
	--ignore-splat) ignore+=(-i "$2") ;;
	--two)
		two=1
		shift
		continue
		;;
	--allow-splat)
		allow_splat=1
		shift
		continue
		;;
	--check-dmesg)
		check=1
		shift
		continue
		;;
	-h | --help) usage ;;
	-*) die "unknown option '$1' (see --help)" ;;
	*)
		((check)) || die "unexpected argument '$1' (see --help)"
		files+=("$1")
		shift
		continue
		;;
	esac
	shift 2
done

if ((check)); then
	((${#files[@]})) || die "--check-dmesg needs files"
	for f in "${files[@]}"; do [ -f "$f" ] || die "no such file: $f"; done
	rrxe_check_splats "${ignore[@]}" -- "${files[@]}"
	exit
fi

case "$variant" in release | debug) ;; *) die "unknown variant '$variant' (release or debug)" ;; esac
if [ -z "$timeout" ]; then
	if [ "$variant" = debug ]; then timeout=900; else timeout=300; fi
fi
[[ "$timeout" =~ ^[1-9][0-9]*$ ]] || die "--timeout wants a positive number of seconds"
[ -z "$pcap" ] || ((two)) || die "--pcap needs --two (a single VM has no wire)"
case "$wire" in tcp | unix) ;; *) die "unknown wire '$wire' (tcp or unix)" ;; esac
case "$wires" in 1 | 2) ;; *) die "--wires wants 1 or 2, not '$wires'" ;; esac
((wires == 1)) || ((two)) || die "--wires 2 needs --two"
[ -z "$icount" ] || [[ "$icount" =~ ^([0-9]|10)$ ]] || die "--icount wants a shift of 0 to 10"
for m in "${modules[@]}"; do
	[ -f "$m" ] || die "no such module: $m"
	case "$m" in *.ko) ;; *) die "not a .ko file: $m" ;; esac
done
for e in "${envs[@]}"; do
	[[ "$e" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env wants NAME=VALUE, not '$e'"
done
case "$repo" in *[[:space:]]*) die "the checkout's path ($repo) must not contain white space" ;; esac
[ -x "$here/vm-init.sh" ] || die "$here/vm-init.sh is not executable"

kdir=$("$here/kernel.sh" build "$variant")
release=$(<"$kdir/kernelrelease")
bzimage=$kdir/arch/x86/boot/bzImage
[ -f "$bzimage" ] || die "no kernel image at $bzimage"
[ -d "$kdir/modroot/lib/modules/$release" ] || die "no modules at $kdir/modroot/lib/modules/$release"

if [ -n "$out" ]; then
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
else
	out=$(mktemp -d "${TMPDIR:-/tmp}/rrxe-vm.XXXXXX")
fi
case "$out" in *,* | *[[:space:]]*) die "the results directory ($out) must not contain commas or white space" ;; esac
rm -rf "$out/.rrxe"
rm -f "$out"/[ab].{out,status,times,dmesg,kmemleak,console,qemu.log} "$out/console.log"
# The guest's module tree, module tool wrappers and busybox applet links (see
# setup_modules in vm-init.sh). Built here: on the host it takes milliseconds, in the
# guest (TCG, programs loaded over 9p) seconds.
modtree=$out/.rrxe/modroot/lib/modules/$release
mkdir -p "$modtree" "$out/.rrxe/bin" "$out/.rrxe/busybox"
cp -a "$kdir/modroot/lib/modules/$release/." "$modtree/"
rm -f "$modtree/build" "$modtree/source"
mkdir -p "$modtree/extra"
for m in "${modules[@]}"; do
	cp "$m" "$modtree/extra/"
done
/sbin/depmod -b "$out/.rrxe/modroot" -a "$release"
# modprobe takes the root as -d, modinfo and depmod as -b. The guest sees $out as
# /run/results.
for tool in "modprobe -d" "modinfo -b" "depmod -b"; do
	printf '#!/bin/sh\nexec /sbin/%s /run/results/.rrxe/modroot "$@"\n' "$tool" >"$out/.rrxe/bin/${tool%% *}"
done
chmod 755 "$out"/.rrxe/bin/*
# Busybox applets for programs the host lacks (ping, ping6, ...): last in the guest's PATH.
/bin/busybox --install -s "$out/.rrxe/busybox"
if [ -n "$pcap" ]; then
	mkdir -p "$(dirname "$pcap")"
	pcap=$(cd "$(dirname "$pcap")" && pwd)/$(basename "$pcap")
	case "$pcap" in *,*) die "the pcap path must not contain commas" ;; esac
	rm -f "$pcap" "${pcap%.*}-2.${pcap##*.}"
fi

sides=(a)
((two)) && sides=(a b)
declare -A ip4=([a]=198.18.0.1 [b]=198.18.0.2) ip6=([a]=2001:db8::1 [b]=2001:db8::2)
declare -A mac=([a]=02:00:c6:12:00:01 [b]=02:00:c6:12:00:02)
# The second wire (--wires 2): eth1 in each VM, on networks of its own.
declare -A ip4_2=([a]=198.19.0.1 [b]=198.19.0.2) ip6_2=([a]=2001:db8:1::1 [b]=2001:db8:1::2)
declare -A mac_2=([a]=02:00:c6:13:00:01 [b]=02:00:c6:13:00:02)
declare -A command=([a]=$cmd [b]=$cmd_b)
declare -A peer=([a]=b [b]=a)

for s in "${sides[@]}"; do
	{
		printf 'RRXE_%s=%q\n' TWO "$two" REPO "$repo" RELEASE "$release" \
			VARIANT "$variant" TIMEOUT "$timeout" CMD "${command[$s]}" \
			LOCAL_IP4 "${ip4[$s]}" LOCAL_IP6 "${ip6[$s]}" \
			PEER_IP4 "${ip4[${peer[$s]}]}" PEER_IP6 "${ip6[${peer[$s]}]}" WIRES "$wires"
		if ((wires == 2)); then
			printf 'RRXE_%s=%q\n' LOCAL2_IP4 "${ip4_2[$s]}" LOCAL2_IP6 "${ip6_2[$s]}" \
				PEER2_IP4 "${ip4_2[${peer[$s]}]}" PEER2_IP6 "${ip6_2[${peer[$s]}]}"
		fi
		printf 'RRXE_ENV=('
		for e in "${envs[@]}"; do printf ' %q' "$e"; done
		printf ' )\n'
	} >"$out/.rrxe/$s.env"
	: >"$out/$s.out"
done
((two)) || ln -s a.console "$out/console.log"

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

listening() {
	ss -Hltn "sport = :$1" 2>/dev/null | grep -q .
}

# wire_args SIDE ID ADDR MAC [PCAP]: the QEMU arguments of one wire.
wire_args() {
	local s=$1 id=$2 addr=$3 mac=$4 pcap=${5:-} role=off
	[ "$s" = a ] && role=on
	if [ "$wire" = unix ]; then
		args+=(-netdev "stream,id=$id,server=$role,addr.type=unix,addr.path=$addr")
	elif [ "$s" = a ]; then
		args+=(-netdev "socket,id=$id,listen=127.0.0.1:$addr")
	else
		args+=(-netdev "socket,id=$id,connect=127.0.0.1:$addr")
	fi
	if [ "$s" = a ] && [ -n "$pcap" ]; then
		args+=(-object "filter-dump,id=f$id,netdev=$id,file=$pcap")
	fi
	args+=(-device "virtio-net-pci,netdev=$id,mac=$mac")
}

# The accelerator. --icount: one TCG thread for all vCPUs, and guest time that advances
# with the instructions executed (2^SHIFT ns each), not with the host's clock: a figure then
# measures the code path, not the host's scheduling (Documentation/rrxe/benchmarks.rst).
accel=(-accel tcg)
[ -z "$icount" ] || accel=(-accel tcg,thread=single -icount "shift=$icount,sleep=off")

qemu_args() {
	local s=$1 addr=$2
	local append="console=ttyS0 root=/dev/root rootfstype=9p"
	append+=" rootflags=trans=virtio,version=9p2000.L,msize=512000,cache=loose ro"
	# acpi=noirq: PCI interrupt routing without ACPI _PRT evaluation, ~0.5 s faster under TCG.
	# no_timer_check: a loaded host can delay TCG timer ticks enough that the IO-APIC timer
	# check panics at boot ("IO-APIC + timer doesn't work").
	# tsc=reliable: the same delays make the clocksource watchdog see TSC skew and switch
	# the guest to the emulated HPET, every clock read then an MMIO exit: a debug guest ran
	# its remaining tests twice as slowly after the switch.
	append+=" acpi=noirq no_timer_check tsc=reliable init=$repo/scripts/vm-init.sh rrxevm=$s panic=-1 log_buf_len=4M printk.devkmsg=on$append_extra"
	args=(
		qemu-system-x86_64 "${accel[@]}" -cpu max -smp 2 -m 2G
		-nodefaults -no-user-config -nic none -display none -no-reboot
		-serial "file:$out/$s.console"
		-kernel "$bzimage" -append "$append"
		-fsdev "local,id=root,path=/,security_model=none,readonly=on,multidevs=remap"
		-device "virtio-9p-pci,fsdev=root,mount_tag=/dev/root"
		-fsdev "local,id=results,path=$out,security_model=none"
		-device "virtio-9p-pci,fsdev=results,mount_tag=results"
	)
	# A TCG plugin (scripts/profile-insns.sh counts the guest's instructions with one).
	[ -z "$plugin" ] || args+=(-plugin "$plugin")
	if ((two)); then
		# A listens, B connects. The TCP wire is QEMU's socket netdev, Nagle on: a guest
		# that pauses after a few frames (a ping-pong, a credit-limited requester) has its
		# last ones held until the peer's delayed ACK, ~40 ms. The Unix wire, a stream
		# netdev on a Unix socket, holds nothing (Documentation/rrxe/vm.rst has both).
		wire_args "$s" w0 "$addr" "${mac[$s]}" "$pcap"
		# The second wire's capture is the first's name with "-2" before the extension.
		((wires == 1)) ||
			wire_args "$s" w1 "$addr2" "${mac_2[$s]}" "${pcap:+${pcap%.*}-2.${pcap##*.}}"
	fi
}

declare -A qpid=() done_=() rc=() why=()
tails=()

# stop SIDE: ends that VM's QEMU. SIGTERM makes QEMU exit at once (and spares us bash's
# "Killed" notice); SIGKILL if it is still there after 3 s.
stop() {
	local p=${qpid[$1]}
	[ -z "${done_[$1]:-}" ] || return 0
	kill -TERM "$p" 2>/dev/null || return 0
	for _ in $(seq 30); do
		kill -0 "$p" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$p" 2>/dev/null || true
}

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	local s
	for s in "${!qpid[@]}"; do
		stop "$s"
	done
	for s in "${tails[@]}"; do
		kill "$s" 2>/dev/null || true
	done
	[ -z "${wire_dir:-}" ] || rm -rf "$wire_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Copies the growing SIDE.out to stdout until the VM's QEMU is gone (tail's --pid reads
# the file once more after that).
follow() {
	local s=$1
	if ((two)); then
		tail -n +1 -s 0.3 --pid="${qpid[$s]}" -F "$out/$s.out" 2>/dev/null | sed -u "s/^/[$s] /" &
	else
		tail -n +1 -s 0.3 --pid="${qpid[$s]}" -F "$out/$s.out" 2>/dev/null &
	fi
	tails+=($!)
}

# The wire's address: a free TCP port, or a Unix socket in a new directory (a short path: a
# Unix socket's must fit in 108 bytes, which --out need not).
addr= addr2=
if ((two)) && [ "$wire" = unix ]; then
	wire_dir=$(mktemp -d "${TMPDIR:-/tmp}/rrxe-wire.XXXXXX")
	addr=$wire_dir/sock
	addr2=$wire_dir/sock2
elif ((two)); then
	addr=$(free_port)
	addr2=$(free_port)
	# free_port closes the port before QEMU binds it: two calls can return the same one.
	while [ "$addr2" = "$addr" ]; do addr2=$(free_port); done
fi
start=$SECONDS
for s in "${sides[@]}"; do
	qemu_args "$s" "$addr"
	"${args[@]}" >"$out/$s.qemu.log" 2>&1 &
	qpid[$s]=$!
	follow "$s"
	if ((two)) && [ "$s" = a ]; then
		# B connects to A's listening socket, so A must be listening first.
		for _ in $(seq 100); do
			if [ "$wire" = unix ]; then
				[ -S "$addr" ] && { ((wires == 1)) || [ -S "$addr2" ]; } && break
			else
				listening "$addr" && { ((wires == 1)) || listening "$addr2"; } && break
			fi
			kill -0 "${qpid[a]}" 2>/dev/null || break
			sleep 0.1
		done
	fi
done
echo "vm.sh: $variant kernel $release; ${#sides[@]} VM(s); results in $out" >&2

# Wait for every QEMU; kill them all on the deadline, and kill the others when one ends
# without a status (its peer would wait for it in vain).
timed_out=0
while :; do
	running=0
	for s in "${sides[@]}"; do
		[ -z "${done_[$s]:-}" ] || continue
		if kill -0 "${qpid[$s]}" 2>/dev/null; then
			running=1
			continue
		fi
		rc[$s]=0
		{ wait "${qpid[$s]}" || rc[$s]=$?; } 2>/dev/null # no "Killed" notice
		done_[$s]=1
		if [ ! -s "$out/$s.status" ]; then
			for o in "${sides[@]}"; do
				[ -n "${done_[$o]:-}" ] || why[$o]="stopped because vm-$s ended without a status"
				stop "$o"
			done
		fi
	done
	((running)) || break
	if ((SECONDS - start >= timeout)); then
		timed_out=1
		for s in "${sides[@]}"; do
			stop "$s"
		done
	fi
	sleep 0.2
done
for t in "${tails[@]}"; do
	wait "$t" 2>/dev/null || true
done
tails=()

# Verdict.
result=0
failed_cmd=0
for s in "${sides[@]}"; do
	st=$(cat "$out/$s.status" 2>/dev/null || true)
	times=$(tr '\n' ' ' 2>/dev/null <"$out/$s.times" || true)
	if [ -z "$st" ]; then
		if [ -n "${why[$s]:-}" ]; then
			echo "vm.sh: vm-$s: ${why[$s]}" >&2
			((result == 124)) || result=125
		elif ((timed_out)); then
			# The guest did not stop its command in time (its kernel hung, or a task in it
			# could not be killed): the console's last lines hold what its kernel last said
			# (a lockup or hung-task report), which CI's log would not show otherwise.
			echo "vm.sh: vm-$s timed out: killed after ${timeout}s (--timeout); last console lines ($out/$s.console):" >&2
			tail -n 40 "$out/$s.console" 2>/dev/null | sed 's/^/  /' >&2 || true
			result=124
		else
			echo "vm.sh: vm-$s ended without an exit status (QEMU status ${rc[$s]}); last console lines ($out/$s.console):" >&2
			tail -n 25 "$out/$s.console" 2>/dev/null | sed 's/^/  /' >&2 || true
			sed 's/^/  qemu: /' "$out/$s.qemu.log" >&2 2>/dev/null || true
			((result == 124)) || result=125
		fi
		continue
	fi
	echo "vm.sh: vm-$s: status $st; ${times:-no times}" >&2
	if [ "$st" != 0 ]; then
		if [ "$st" = 124 ]; then
			echo "vm.sh: vm-$s: the command timed out inside the guest (stopped before the ${timeout}s --timeout so that its dmesg could be captured)" >&2
		fi
		if ((!failed_cmd && result == 0)); then
			result=$st
			failed_cmd=1
		fi
	fi
done

splat_files=()
for s in "${sides[@]}"; do
	if [ -f "$out/$s.dmesg" ]; then
		splat_files+=("$out/$s.dmesg")
	else
		splat_files+=("$out/$s.console")
	fi
	[ ! -f "$out/$s.kmemleak" ] || splat_files+=("$out/$s.kmemleak")
done
if ! rrxe_check_splats "${ignore[@]}" -- "${splat_files[@]}"; then
	if ((allow_splat)); then
		echo "vm.sh: kernel splat allowed (--allow-splat)" >&2
	elif ((result == 0)); then
		result=99
	fi
fi
if [ -n "$pcap" ]; then
	echo "vm.sh: wire recorded in $pcap" >&2
fi
((result == 0)) || echo "vm.sh: FAILED (exit $result); results in $out" >&2
exit "$result"
