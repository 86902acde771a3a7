#!/bin/bash
# Build the Debian 12 system devstack runs in (tools/devstack-vm/README.rst):
# debootstrap's bookworm in $VM_DIR/rootfs, which container.sh boots with
# systemd as its PID 1, with a "stack" user (devstack refuses root) and
# DHCP on its one interface (slirp4netns's user network).
#
# The apt archive is this machine's (tools/apt_sources.py): the project
# names no mirror.
#
#   tools/devstack-vm/build-rootfs.sh        # -> $VM_DIR/rootfs
set -eu -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
VM_DIR=${VM_DIR:-/work/devstack-vm}
ROOTFS=$VM_DIR/rootfs

ARCHIVE=$("$HERE/../apt_sources.py" bookworm)
SECURITY=$("$HERE/../apt_sources.py" bookworm-security)
# devstack's libvirt on Debian 12 comes from bookworm-backports, which it
# wants in the sources already: this machine's, else the bookworm archive's
BACKPORTS=$("$HERE/../apt_sources.py" bookworm-backports 2>/dev/null || echo "$ARCHIVE")

if [[ ! -f $ROOTFS/etc/debian_version ]]; then
    rm -rf "$ROOTFS"
    debootstrap --variant=minbase \
        --include=systemd-sysv,udev,dbus,sudo,git,rsync,ca-certificates,iproute2,iputils-ping,curl,lsb-release,python3,procps,less,psmisc,kmod,netbase,gnupg,iptables,bsdextrautils,locales \
        bookworm "$ROOTFS" "$ARCHIVE"
fi

cat > "$ROOTFS/etc/apt/sources.list" <<EOF
deb $ARCHIVE bookworm main
deb $ARCHIVE bookworm-updates main
deb $BACKPORTS bookworm-backports main
deb $SECURITY bookworm-security main
EOF
echo devstack > "$ROOTFS/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 devstack\n' > "$ROOTFS/etc/hosts"
cat > "$ROOTFS/etc/systemd/network/10-dhcp.network" <<'EOF'
[Match]
Name=en* eth*

[Network]
DHCP=yes
EOF
chroot "$ROOTFS" systemctl enable systemd-networkd >/dev/null 2>&1
# slirp4netns's DNS forwarder
rm -f "$ROOTFS/etc/resolv.conf"
echo 'nameserver 10.0.2.3' > "$ROOTFS/etc/resolv.conf"
# This kernel has no iSCSI initiator, so iscsid exits as soon as it forks,
# and devstack restarts it for nova-compute (volumes: none here, no cinder):
# the unit is a no-op.
mkdir -p "$ROOTFS/etc/systemd/system/iscsid.service.d"
cat > "$ROOTFS/etc/systemd/system/iscsid.service.d/devstack-vm.conf" <<'EOF'
[Service]
Type=oneshot
RemainAfterExit=yes
PIDFile=
ExecStartPre=
ExecStart=
ExecStart=/bin/true
EOF
# devstack's user: it refuses to run as root
if ! chroot "$ROOTFS" id stack >/dev/null 2>&1; then
    chroot "$ROOTFS" useradd -m -d /opt/stack -s /bin/bash stack
fi
chmod 0755 "$ROOTFS/opt/stack"
echo 'stack ALL=(ALL) NOPASSWD: ALL' > "$ROOTFS/etc/sudoers.d/stack"
echo "$ROOTFS"
