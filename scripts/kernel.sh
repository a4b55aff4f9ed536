#!/usr/bin/env bash
# Builds (once) and locates the rrxe VM kernel.
#
#   scripts/kernel.sh build VARIANT   build if the cache has no complete build; print its dir
#   scripts/kernel.sh dir VARIANT     print the cache dir a build of VARIANT lives (or would live) in
#
# VARIANT is release or debug. The cache lives outside the checkout (RRXE_CACHE, default
# /var/cache/rrxe) and is keyed by the linux-source package version and a hash of the config
# fragments, of the core patches and of this script, so a changed fragment, patch or recipe
# makes a new build and an unchanged one is reused.
#
# The core patches (kernel-patches/*.patch, in name order, `patch -p1` form) are applied to
# a source tree of their own, shared by both variants; Documentation/rrxe/kernel.rst says
# what each one is for.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
CACHE=${RRXE_CACHE:-/var/cache/rrxe}
SRC_TAR=/usr/src/linux-source-6.12.tar.xz
export PATH="$HOME/.cargo/bin:$PATH"
export LIBCLANG_PATH=/usr/lib/llvm-19/lib
KMAKE=(make ARCH=x86_64 LLVM=-19)

cmd=${1:-}
variant=${2:-release}
case "$variant" in release | debug) ;; *)
	echo "kernel.sh: unknown variant '$variant' (release or debug)" >&2
	exit 2
	;;
esac

pkgver() {
	dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || {
		echo "kernel.sh: linux-source-6.12 is not installed (run scripts/deps.sh)" >&2
		exit 1
	}
}

# The core patches, in the order they apply.
patches() {
	local p
	for p in "$here/../kernel-patches/"*.patch; do
		[ -f "$p" ] && echo "$p"
	done
}

patches_key() {
	local list
	list=$(patches)
	[ -n "$list" ] || return 0
	# shellcheck disable=SC2086
	cat $list | sha256sum | cut -c1-12
}

key() {
	{
		pkgver
		echo "$variant"
		cat "$here/kconfig/base.config" "$here/kconfig/$variant.config" "$here/kernel.sh"
		patches_key
	} | sha256sum | cut -c1-16
}

outdir() {
	local v
	v=$(pkgver)
	echo "$CACHE/kernel/$variant-${v//[^A-Za-z0-9.]/_}-$(key)"
}

srcdir() {
	local v p
	v=$(pkgver)
	p=$(patches_key)
	echo "$CACHE/src/linux-${v//[^A-Za-z0-9.]/_}${p:+-p$p}"
}

extract() {
	local src p
	src=$(srcdir)
	[ -f "$src/.extracted" ] && return
	echo "kernel.sh: extracting $SRC_TAR" >&2
	rm -rf "$src" "$src.tmp"
	mkdir -p "$src.tmp"
	tar -C "$src.tmp" --strip-components=1 -xf "$SRC_TAR"
	for p in $(patches); do
		echo "kernel.sh: applying ${p##*/}" >&2
		patch -d "$src.tmp" -p1 --forward --quiet <"$p" || {
			echo "kernel.sh: ${p##*/} does not apply to linux-source $(pkgver)" >&2
			exit 1
		}
	done
	mv "$src.tmp" "$src"
	touch "$src/.extracted"
}

# Every option the fragments set must have survived olddefconfig: a dependency we missed
# would otherwise silently drop it.
verify_config() {
	local out=$1 frag line opt val
	for frag in "$here/kconfig/base.config" "$here/kconfig/$variant.config"; do
		while IFS= read -r line; do
			case "$line" in CONFIG_*=*) ;; *) continue ;; esac
			opt=${line%%=*}
			val=${line#*=}
			if [ "$val" = n ]; then
				if grep -q "^$opt=" "$out/.config"; then
					echo "kernel.sh: $opt should be unset but is $(grep "^$opt=" "$out/.config")" >&2
					return 1
				fi
			elif ! grep -qx "$line" "$out/.config"; then
				echo "kernel.sh: $line from $(basename "$frag") did not survive olddefconfig" >&2
				return 1
			fi
		done <"$frag"
	done
}

build() {
	local src out
	extract
	src=$(srcdir)
	out=$(outdir)
	if [ -f "$out/.complete" ]; then
		echo "$out"
		return
	fi
	mkdir -p "$CACHE/kernel"
	exec 9>"$CACHE/kernel/.lock-$variant"
	flock 9
	if [ -f "$out/.complete" ]; then
		echo "$out"
		return
	fi
	echo "kernel.sh: building the $variant kernel into $out (about 10 minutes)" >&2
	rm -rf "$out"
	mkdir -p "$out"
	{
		"${KMAKE[@]}" -C "$src" O="$out" tinyconfig
		KCONFIG_CONFIG="$out/.config" "$src/scripts/kconfig/merge_config.sh" -m -O "$out" \
			"$out/.config" "$here/kconfig/base.config" "$here/kconfig/$variant.config"
		"${KMAKE[@]}" -C "$src" O="$out" olddefconfig
		verify_config "$out"
		"${KMAKE[@]}" -C "$src" O="$out" -j"$(($(nproc) + 1))" bzImage modules
		"${KMAKE[@]}" -C "$src" O="$out" INSTALL_MOD_PATH="$out/modroot" modules_install
	} >"$out/build.log" 2>&1 || {
		echo "kernel.sh: build failed; last lines of $out/build.log:" >&2
		tail -30 "$out/build.log" >&2
		exit 1
	}
	"${KMAKE[@]}" -s -C "$src" O="$out" kernelrelease >"$out/kernelrelease"
	touch "$out/.complete"
	# Builds of other keys belong to older recipes or to other checkouts sharing the cache
	# (a branch and main): the newest other one stays, older ones go.
	ls -dt "$CACHE/kernel/$variant-"* | tail -n +3 | while read -r d; do
		[ "$d" = "$out" ] || rm -rf "$d"
	done
	echo "$out"
}

case "$cmd" in
build) build ;;
dir) outdir ;;
*)
	echo "usage: kernel.sh build|dir release|debug" >&2
	exit 2
	;;
esac
