#!/bin/bash
# Lay out every repository devstack would clone, so that it clones none
# (ERROR_ON_CLONE=True): $VM_DIR/opt-stack/<name>, copied to the guest's
# /opt/stack by run.sh.
#
# - devstack and requirements: the trees in $SHARED (devstack 493835a6,
#   openstack/requirements with its upper-constraints);
# - each OpenStack service: its source distribution from the package
#   index pip is configured with here (pip download --no-binary), at the
#   release tools/cloud runs (tools/cloud/constraints.txt), made a git
#   repository tagged with its version: devstack's git functions want a
#   repository and pbr reads the version from the tag;
# - vsmtio: a clone of this repository's HEAD (commit first).
set -eu -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
VM_DIR=${VM_DIR:-/work/devstack-vm}
SHARED=${SHARED:-$REPO/../shared}
OUT=$VM_DIR/opt-stack
SDISTS=$VM_DIR/sdists
# devstack's directory name and the distribution's name on the index
PROJECTS="keystone:keystone glance:glance nova:nova placement:openstack-placement
neutron:neutron tempest:tempest horizon:horizon"

mkdir -p "$OUT" "$SDISTS"

function git_repo {
    local dir=$1 tag=${2:-}
    git -C "$dir" init -q -b master
    git -C "$dir" add -A -f
    git -C "$dir" -c user.name=devstack-vm -c user.email=devstack-vm@localhost \
        commit -q -m "unpacked for devstack-vm" --no-verify
    if [[ -n "$tag" ]]; then
        git -C "$dir" tag "$tag"
    fi
}

function tree {
    local src=$1 name=$2
    [[ -d $OUT/$name/.git ]] && return
    rm -rf "${OUT:?}/$name"
    mkdir -p "$OUT/$name"
    (cd "$src" && tar -c --exclude=.git --exclude=.tox .) | tar -x -C "$OUT/$name"
    # the shared trees are read-only; devstack writes into its own
    chmod -R u+w "$OUT/$name"
    git_repo "$OUT/$name"
}

tree "$SHARED/devstack" devstack
tree "$SHARED/openstack-requirements" requirements

for entry in $PROJECTS; do
    name=${entry%%:*}
    dist=${entry#*:}
    version=$(grep -i "^$dist==" "$REPO/tools/cloud/constraints.txt" | cut -d= -f3)
    [[ -n "$version" ]] || { echo "no version of $dist in tools/cloud" >&2; exit 1; }
    [[ -d $OUT/$name/.git ]] && continue
    # openstack-placement's sdist is openstack_placement-16.0.0.tar.gz
    sdist=$SDISTS/${dist//-/_}-$version.tar.gz
    if [[ ! -f $sdist ]]; then
        pip download -q --no-deps --no-binary :all: -d "$SDISTS" "$dist==$version"
        [[ -f $sdist ]] || sdist=$SDISTS/$dist-$version.tar.gz
    fi
    rm -rf "${OUT:?}/$name"
    mkdir -p "$OUT/$name"
    tar -xzf "$sdist" -C "$OUT/$name" --strip-components=1
    git_repo "$OUT/$name" "$version"
    echo "$name $dist $version"
done

rm -rf "$OUT/vsmtio"
git clone -q "$REPO" "$OUT/vsmtio"
git -C "$OUT/vsmtio" log --oneline -1
