#!/bin/bash
# devstack's own stack.sh with the vsmtio plugin, then tempest with its
# plugin, offline but for the package archives (tools/devstack-vm/README.rst).
#
#   run.sh stage     repositories, image, certificates, pip and local.conf
#   run.sh stack     stack.sh as "stack", timed ($VM_DIR/stack.time), after
#                    unstack.sh where a stack.sh ran before
#   run.sh tempest   vsmtio's tempest tests, timed ($VM_DIR/tempest.time)
#
# local.conf is $SAMPLE (devstack/local.conf.sample) unchanged, followed by
# a second localrc section with what is this site's: the container's
# address, no cloning, no KVM for nova's servers, OVS's userspace datapath
# (this kernel has no openvswitch module), the locally built image and
# tempest's constraints from the laid-out requirements (not the master ones
# devstack fetches by default).
set -eu -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
VM_DIR=${VM_DIR:-/work/devstack-vm}
SAMPLE=${SAMPLE:-$REPO/devstack/local.conf.sample}
ROOTFS=$VM_DIR/rootfs
C=$HERE/container.sh
IMAGE=/opt/stack/images/vsmtio-guest.tar.gz
# A Python with the project's test requirements (guest-image.py imports
# the functional tests' guest module)
PYTHON=${PYTHON:-python3}

# This machine's pip configuration for the container's /etc/pip.conf: the
# index and certificate settings only (pip config list: scope.key='value').
function pip_conf {
    echo '[global]'
    pip config list 2>/dev/null | python3 -c '
import sys
keep = {"index-url", "extra-index-url", "trusted-host", "cert",
        "default-timeout", "timeout"}
for line in sys.stdin:
    name, _, value = line.strip().partition("=")
    key = name.split(".", 1)[-1]
    if key in keep:
        print("%s = %s" % (key, value.strip("\x27\"")))
' | sort -u
}

function stage {
    "$HERE/prepare-repos.sh"
    rsync -a "$VM_DIR/opt-stack/" "$ROOTFS/opt/stack/"
    # this machine's certificate authorities, which its network may need
    cp /usr/local/share/ca-certificates/*.crt \
        "$ROOTFS/usr/local/share/ca-certificates/" 2>/dev/null || true
    "$C" exec update-ca-certificates >/dev/null
    pip_conf > "$ROOTFS/etc/pip.conf"
    mkdir -p "$ROOTFS${IMAGE%/*}"
    PYTHONPATH=$REPO "$PYTHON" "$HERE/guest-image.py" \
        "$(find /boot -maxdepth 1 -name 'vmlinuz-*' | sort -V | tail -1)" \
        "$ROOTFS$IMAGE"
    {
        cat "$SAMPLE"
        cat <<EOF

# --- this site (tools/devstack-vm/run.sh) ---
[[local|localrc]]
HOST_IP=10.0.2.15
ERROR_ON_CLONE=True
LIBVIRT_TYPE=qemu
OVS_DATAPATH_TYPE=netdev
DOWNLOAD_DEFAULT_IMAGES=False
IMAGE_URLS=file://$IMAGE
LOGFILE=/opt/stack/logs/stack.sh.log
TEMPEST_VENV_UPPER_CONSTRAINTS=/opt/stack/requirements/upper-constraints.txt
EOF
    } > "$ROOTFS/opt/stack/devstack/local.conf"
    # devstack's own hook, run at the end of stack.sh: nspawn gives the
    # container the cgroup v1 controllers read-only, and libvirt could
    # start no domain ("Failed to create v1 controller cpu for group:
    # Read-only file system"), so it uses none here. nova-compute and the
    # agent stop across libvirtd's restart: nova-compute would otherwise
    # disable its host for a while (lost connection to libvirt).
    cat > "$ROOTFS/opt/stack/devstack/local.sh" <<'EOS'
#!/bin/bash
set -e
sudo sed -i 's/^#\?cgroup_controllers = .*/cgroup_controllers = [ ]/' \
    /etc/libvirt/qemu.conf
sudo systemctl stop devstack@vsmtio-agent devstack@n-cpu
sudo systemctl restart libvirtd
sudo systemctl start devstack@n-cpu devstack@vsmtio-agent
EOS
    chmod +x "$ROOTFS/opt/stack/devstack/local.sh"
    "$C" exec chown -R stack:stack /opt/stack
}

function timed {
    local name=$1 start rc=0
    shift
    start=$(date +%s)
    "$C" exec su - stack -c "$*" || rc=$?
    echo "$name: rc=$rc $(( $(date +%s) - start )) s" | tee "$VM_DIR/$name.time"
    return $rc
}

case ${1:-} in
    stage) stage ;;
    stack)
        # a stack.sh run over running services keeps them on dropped
        # databases: stop them first, as devstack asks
        "$C" exec su - stack -c \
            'cd /opt/stack/devstack && if [ -f .stackenv ]; then ./unstack.sh; fi'
        timed stack 'cd /opt/stack/devstack && ./stack.sh' ;;
    tempest)
        timed tempest 'cd /opt/stack/tempest &&
            .tox/tempest/bin/tempest run --regex "^vsmtio_tempest_plugin\."' ;;
    *) echo "usage: $0 stage|stack|tempest" >&2; exit 2 ;;
esac
