#!/bin/bash
# Run what this machine's hardware cannot: boot the patched kernel under
# QEMU TCG (emulated AMD CPU with SVM, 2 cores x 2 threads), check the
# series' knobs and RASS from inside it (tools/tcg-init.sh as /init), and
# run the KVM selftest in a nested VM that TCG's SVM emulation provides.
#
# Needs tools/check.sh to have run first (it leaves the patched tree and
# the compiled selftest in the work dir).  Builds a small kernel
# (tinyconfig + what the test needs): about 16 minutes on 2 cores, so it
# is not part of `tox -e kernel`.  VSMTIO_TCG_BZIMAGE=<path> reuses a
# kernel built before.
set -euo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

here=$(cd "$(dirname "$0")/.." && pwd)
work=${VSMTIO_KERNEL_WORKDIR:-/var/tmp/vsmtio-kernel-check}
jobs=${VSMTIO_KERNEL_JOBS:-2}
checked=$work/linux
selftest=$checked/tools/testing/selftests/kvm/x86_64/ctx_retention_test
[ -x "$selftest" ] || { echo "run tools/check.sh first" >&2; exit 2; }

for p in qemu-system-x86 busybox-static cpio; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
        missing="${missing:-} $p"
done
if [ -n "${missing:-}" ]; then
    [ "$(id -u)" = 0 ] || { echo "need:$missing" >&2; exit 2; }
    mkdir -p "$work/debs/partial"
    DEBIAN_FRONTEND=noninteractive apt-get -qq \
        -o Dir::Cache::Archives="$work/debs" install -y \
        --no-install-recommends $missing >/dev/null
fi

bzimage=${VSMTIO_TCG_BZIMAGE:-}
if [ -z "$bzimage" ]; then
    tree=$work/tiny
    start=$(date +%s)
    rm -rf "$tree"
    mkdir -p "$tree"
    tar -xaf /usr/src/linux-source-6.12.tar.xz -C "$tree" --strip-components=1
    cd "$tree"
    while read -r patch; do
        case "$patch" in ''|'#'*) continue ;; esac
        patch -p1 -s --fuzz=0 < "$here/patches/$patch"
    done < "$here/patches/series"
    make -s tinyconfig
    scripts/config -e 64BIT -e SMP --set-val NR_CPUS 4 -e SCHED_SMT \
        -e ACPI -e PCI -e PRINTK -e TTY -e SERIAL_8250 \
        -e SERIAL_8250_CONSOLE -e BLK_DEV_INITRD -e RD_GZIP -e BINFMT_ELF \
        -e BINFMT_SCRIPT -e PROC_FS -e SYSFS -e DEVTMPFS -e DEVTMPFS_MOUNT \
        -e DEBUG_FS -e DEBUG_FS_ALLOW_ALL -e VIRTUALIZATION -e KVM \
        -e KVM_AMD -e KVM_INTEL -e KVM_WERROR -d KVM_HYPERV -d KVM_XEN \
        -d KVM_SMM -e HIGH_RES_TIMERS -e FUTEX -e EPOLL -e EVENTFD \
        -e SIGNALFD -e TIMERFD -e SHMEM -e TMPFS -e MULTIUSER \
        -e POSIX_TIMERS -e FILE_LOCKING -e HYPERVISOR_GUEST -e PARAVIRT \
        -e KVM_GUEST -e CPU_SUP_AMD -e CPU_SUP_INTEL -e UNIX -e NET \
        -e INET -e SCHED_MC -e MEMFD_CREATE
    make -s olddefconfig
    for o in SMP SCHED_SMT ACPI KVM KVM_AMD DEBUG_FS SERIAL_8250_CONSOLE \
             BLK_DEV_INITRD FUTEX; do
        grep -q "^CONFIG_$o=y" .config || { echo "no CONFIG_$o" >&2; exit 1; }
    done
    make -s -j"$jobs" bzImage
    bzimage=$tree/arch/x86/boot/bzImage
    echo "kernel built in $(($(date +%s) - start))s"
fi

root=$work/tcg-initramfs
rm -rf "$root"
mkdir -p "$root"/{bin,proc,sys,dev,tmp,lib64,lib/x86_64-linux-gnu}
cp /bin/busybox "$root/bin/busybox"
for applet in $(busybox --list); do
    [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
cp "$selftest" "$root/bin/"
for lib in $(ldd "$selftest" | grep -o '/[^ ]*'); do
    cp "$lib" "$root$lib"
done
cp "$here/tools/tcg-init.sh" "$root/init"
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) \
    > "$work/tcg-initramfs.cpio.gz"

log=$work/tcg.log
start=$(date +%s)
timeout 1500 qemu-system-x86_64 -accel tcg -cpu max,+topoext \
    -smp 4,sockets=1,cores=2,threads=2 -m 1024 -kernel "$bzimage" \
    -initrd "$work/tcg-initramfs.cpio.gz" -nographic -no-reboot \
    -append "console=ttyS0 panic=-1 quiet" > "$log" 2>&1 || true
grep -a 'VSMTIO-GUEST' "$log"
echo "guest ran for $(($(date +%s) - start))s (log: $log)"
grep -aq 'VSMTIO-GUEST: abi checks: [0-9]* ok, 0 failed' "$log" &&
    grep -aq 'VSMTIO-GUEST: selftest rc=0' "$log"
