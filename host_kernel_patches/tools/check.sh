#!/bin/bash
# Check the host kernel series against Debian's linux-source-6.12:
#   1. install linux-source-6.12 and the build tools from Debian (as root);
#   2. unpack a pristine tree in a work dir outside the repository;
#   3. configure it (x86_64 defconfig + KVM, KVM_INTEL, KVM_AMD, DEBUG_FS);
#   4. apply the patches one by one and, after each, compile every directory
#      whose sources that patch touches (so each patch builds on its own),
#      with -Werror; the KVM selftest is compiled after the patch adding it;
#   5. run scripts/checkpatch.pl --strict on every patch: zero errors;
#   6. check that abi.json is what ABI.rst says.
# Each step's wall time is printed.  The selftest cannot run here (no VMX).
#
# Environment:
#   VSMTIO_KERNEL_WORKDIR  work dir (default /var/tmp/vsmtio-kernel-check);
#                          holds the .deb cache and the build tree
#   VSMTIO_KERNEL_JOBS     make -j (default 2)
#   VSMTIO_KERNEL_NO_APT   set to 1 to skip the apt step (tools present)
set -euo pipefail
# Debian's tools first (a pyenv/venv python lacks checkpatch's ply, git).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

here=$(cd "$(dirname "$0")/.." && pwd)
work=${VSMTIO_KERNEL_WORKDIR:-/var/tmp/vsmtio-kernel-check}
jobs=${VSMTIO_KERNEL_JOBS:-2}
tree=$work/linux
expected_version=$(sed -n 's/^Debian package version: *//p' "$here/README.rst")
packages=(linux-source-6.12 gcc make bc bison flex libelf-dev libssl-dev
          xz-utils perl python3 python3-ply python3-git libc6-dev rsync patch)

case "$work" in
    "$here"|"$here"/*) echo "work dir must be outside the repository" >&2
                       exit 2 ;;
esac
mkdir -p "$work"

t_all=$(date +%s)
step_start=0
step() { step_name=$1; step_start=$(date +%s); echo "==> $step_name"; }
done_step() {
    printf '<== %-48s %4ds\n' "$step_name" $(($(date +%s) - step_start))
    timings+=("$(printf '%-48s %4ds' "$step_name" $(($(date +%s) - step_start)))")
}
timings=()
fail() { echo "FAILED: $*" >&2; exit 1; }

step "apt: linux-source-6.12 and build tools"
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
        missing+=("$p")
done
if [ "${#missing[@]}" != 0 ] && [ "${VSMTIO_KERNEL_NO_APT:-0}" != 1 ]; then
    [ "$(id -u)" = 0 ] || fail "need root to install: ${missing[*]}"
    mkdir -p "$work/debs/partial"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -qq update
    # The image empties /var/cache/apt/archives after each dpkg run.
    apt-get -qq -o Dir::Cache::Archives="$work/debs" install -y \
        --no-install-recommends "${missing[@]}" >/dev/null
fi
version=$(dpkg-query -W -f='${Version}' linux-source-6.12)
echo "linux-source-6.12 $version (series written against $expected_version)"
[ "$version" = "$expected_version" ] ||
    echo "WARNING: package version differs from the README's"
done_step

if [ -e "$tree" ]; then
    step "remove the previous run's tree"
    rm -rf "$tree"
    done_step
fi

step "unpack pristine tree"
mkdir -p "$tree"
tar -xaf /usr/src/linux-source-6.12.tar.xz -C "$tree" --strip-components=1
done_step

step "configure: defconfig + KVM, KVM_INTEL, KVM_AMD"
cd "$tree"
make -s defconfig
scripts/config --enable VIRTUALIZATION --enable KVM --enable KVM_INTEL \
    --enable KVM_AMD --enable DEBUG_FS --enable KVM_WERROR
make -s olddefconfig
for opt in KVM KVM_INTEL KVM_AMD SCHED_SMT DEBUG_FS; do
    grep -q "^CONFIG_$opt=y" .config || fail "CONFIG_$opt not set"
done
done_step

step "make prepare"
make -s -j"$jobs" prepare
done_step

# Map the files a patch touches to what must be compiled for them.
build_targets() {
    local f t=()
    while read -r f; do
        case "$f" in
            tools/testing/selftests/kvm/*) t+=(SELFTEST) ;;
            Documentation/*) ;;
            arch/x86/kvm/*.c|arch/x86/kvm/*.h) t+=(arch/x86/kvm/) ;;
            arch/x86/include/*) t+=(arch/x86/kvm/) ;;
            include/linux/sched*|kernel/sched/*) t+=(kernel/sched/) ;;
            fs/proc/*) t+=(fs/proc/) ;;
            *.c) t+=("$(dirname "$f")/") ;;
        esac
    done < <(grep -E '^\+\+\+ b/' "$1" | sed 's|^+++ b/||')
    printf '%s\n' "${t[@]}" | sort -u
}

selftest=""
while read -r patch; do
    case "$patch" in ''|'#'*) continue ;; esac
    step "apply $patch"
    patch -p1 -s --fuzz=0 --no-backup-if-mismatch < "$here/patches/$patch" ||
        fail "$patch does not apply"
    done_step
    mapfile -t targets < <(build_targets "$here/patches/$patch")
    dirs=()
    for t in "${targets[@]}"; do
        [ "$t" = SELFTEST ] && selftest=yes || dirs+=("$t")
    done
    if [ "${#dirs[@]}" != 0 ]; then
        step "  build ${dirs[*]}"
        make -s -j"$jobs" KCFLAGS=-Werror "${dirs[@]}" ||
            fail "$patch does not build"
        done_step
    fi
    if [ -n "$selftest" ]; then
        step "  build KVM selftest x86_64/ctx_retention_test"
        make -s headers_install
        make -s -C tools/testing/selftests/kvm -j"$jobs" \
            "$tree/tools/testing/selftests/kvm/x86_64/ctx_retention_test" ||
            fail "selftest does not build"
        ls -l tools/testing/selftests/kvm/x86_64/ctx_retention_test
        selftest=""
        done_step
    fi
done < "$here/patches/series"

step "checkpatch --strict on every patch"
errors=0
while read -r patch; do
    case "$patch" in ''|'#'*) continue ;; esac
    out=$(perl scripts/checkpatch.pl --strict -q \
          "$here/patches/$patch" 2>&1 || true)
    summary=$(printf '%s\n' "$out" | grep -E '^total:' || echo "total: 0 errors")
    echo "  $patch: $summary"
    printf '%s\n' "$out" | grep -E '^(ERROR|WARNING|CHECK)' | sed 's/^/    /' || true
    n=$(printf '%s\n' "$summary" | sed -n 's/^total: \([0-9]*\) errors.*/\1/p')
    errors=$((errors + ${n:-0}))
done < "$here/patches/series"
[ "$errors" = 0 ] || fail "checkpatch: $errors errors"
done_step

step "abi.json matches ABI.rst"
python3 "$here/tools/abi2json.py" --check
done_step

echo
echo "Step times:"
printf '  %s\n' "${timings[@]}"
echo "Total: $(($(date +%s) - t_all))s"
echo "OK: the series applies to linux-source-6.12 $version, every patch builds"
echo "    on its own, checkpatch reports no errors.  The KVM selftest was"
echo "    compiled, not run (it needs VMX/SVM; this host has neither)."
