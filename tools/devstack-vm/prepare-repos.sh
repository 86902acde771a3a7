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
# - os-test-images: a stand-in (below);
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

# The requirements tree's upper-constraints predate the release's last
# service tags: nova 34.0.0 wants keystoneauth1>=5.16.0 and
# oslo.versionedobjects>=3.12.0 over its 5.15.0 and 3.11.0. Every pin a
# service's own requirements exclude is raised to the version tools/cloud
# runs on this machine, and the change is its own commit.
reqs=()
for e in $PROJECTS; do
    reqs+=("$OUT/${e%%:*}/requirements.txt")
done
python3 - "$OUT/requirements/upper-constraints.txt" \
        "$REPO/tools/cloud/constraints.txt" "${reqs[@]}" <<'EOP'
import re
import sys

from packaging.requirements import Requirement


def key(name):
    return re.sub(r'[-_.]+', '-', name).lower()


uc_path, cloud_path, reqs = sys.argv[1], sys.argv[2], sys.argv[3:]
cloud = {}
for line in open(cloud_path):
    if '==' in line:
        name, version = line.strip().split('==', 1)
        cloud[key(name)] = version
lines = open(uc_path).read().splitlines()
pins = {key(line.split('===')[0]): i for i, line in enumerate(lines)
        if '===' in line}
for path in reqs:
    for line in open(path):
        line = line.split('#')[0].strip()
        if not line or line.startswith('-'):
            continue
        req = Requirement(line)
        i = pins.get(key(req.name))
        if i is None:
            continue
        pinned = lines[i].split('===')[1].split(';')[0]
        if req.specifier.contains(pinned, prereleases=True):
            continue
        lines[i] = lines[i].replace('===' + pinned,
                                    '===' + cloud[key(req.name)], 1)
        print('upper-constraints: %s %s -> %s (%s)'
              % (req.name, pinned, cloud[key(req.name)], path))
open(uc_path, 'w').write('\n'.join(lines) + '\n')
EOP
if [[ -n "$(git -C "$OUT/requirements" status --porcelain)" ]]; then
    git -C "$OUT/requirements" -c user.name=devstack-vm \
        -c user.email=devstack-vm@localhost commit -q -a \
        -m "raise the pins the services' requirements exclude"
fi

# os-test-images (tempest's configuration runs its "tox -egenerate" for
# glance's image format tests) has no source distribution on the index: a
# stand-in whose generate writes an empty manifest, so those tests have no
# images to check. vsmtio's tests do not use them.
if [[ ! -d $OUT/os-test-images/.git ]]; then
    mkdir -p "$OUT/os-test-images"
    cat > "$OUT/os-test-images/tox.ini" <<'EOF'
[tox]
skipsdist = True

[testenv:generate]
skip_install = True
allowlist_externals = sh
commands = sh -c 'mkdir -p images && echo "images: []" > images/manifest.yaml'
EOF
    git_repo "$OUT/os-test-images"
fi

rm -rf "$OUT/vsmtio"
git clone -q "$REPO" "$OUT/vsmtio"
git -C "$OUT/vsmtio" log --oneline -1
