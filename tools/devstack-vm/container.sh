#!/bin/bash
# Boot, enter and stop the system devstack runs in (build-rootfs.sh).
#
#   container.sh start         boot $VM_DIR/rootfs, systemd as its PID 1
#   container.sh exec CMD...   run CMD in it as root
#   container.sh stop          power it off
#
# devstack starts every service as a systemd unit; this machine has no
# systemd as PID 1 and its KVM cannot boot a Linux guest (the kernel never
# gets past its decompressor; vsmtio_agent/tests/functional/guest.py says
# the same), so the system is a container on this kernel: systemd-nspawn
# with all capabilities (libvirt, OVS and iptables inside) and its own
# network namespace, reaching the network through slirp4netns (qemu's user
# network: 10.0.2.15, DNS at 10.0.2.3, nothing configured on this host).
set -eu -o pipefail

VM_DIR=${VM_DIR:-/work/devstack-vm}
NSPAWN_PID=$VM_DIR/nspawn.pid

function leader {
    local pid
    pid=$(cat "$NSPAWN_PID" 2>/dev/null) || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    pgrep -P "$pid" | head -1
}

case ${1:-} in
    start)
        if leader >/dev/null; then
            exit 0
        fi
        # The host is no systemd: nspawn neither registers nor makes a
        # scope. seccomp off: libvirt and OVS make calls nspawn filters.
        SYSTEMD_SECCOMP=0 setsid systemd-nspawn -D "$VM_DIR/rootfs" \
            --boot --register=no --keep-unit --private-network \
            --capability=all --machine=devstack \
            > "$VM_DIR/console.log" 2>&1 < /dev/null &
        echo $! > "$NSPAWN_PID"
        for _ in $(seq 60); do
            pid=$(leader || true)
            [[ -n "$pid" ]] && break
            sleep 1
        done
        [[ -n "$pid" ]] || { echo "no container: see $VM_DIR/console.log" >&2; exit 1; }
        setsid slirp4netns --mtu=65520 --disable-host-loopback "$pid" eth0 \
            > "$VM_DIR/slirp.log" 2>&1 < /dev/null &
        for _ in $(seq 60); do
            if nsenter -t "$pid" -a systemctl is-system-running 2>/dev/null |
                    grep -q -E 'running|degraded' &&
                    nsenter -t "$pid" -a ip -4 -br addr show eth0 |
                    grep -q 10.0.2.15; then
                exit 0
            fi
            sleep 2
        done
        echo "container up but not on the network: see $VM_DIR/console.log" >&2
        exit 1
        ;;
    exec)
        shift
        nsenter -t "$(leader)" -a "$@"
        ;;
    stop)
        if pid=$(leader); then
            nsenter -t "$pid" -a systemctl poweroff || true
            for _ in $(seq 60); do
                leader >/dev/null || exit 0
                sleep 2
            done
            kill "$(cat "$NSPAWN_PID")"
        fi
        ;;
    *)
        echo "usage: $0 start|exec CMD...|stop" >&2
        exit 2
        ;;
esac
