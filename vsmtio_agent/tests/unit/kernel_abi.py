"""The patched kernel's ABI as test data, read from host_kernel_patches/.

``host_kernel_patches/ABI.rst`` is the contract; ``abi.json`` beside it is
its machine-readable twin (``test_kernel_abi`` keeps them equal). Tests of
the agent's patched-kernel driver build their fake /sys, debugfs and /proc
trees from here, so a knob renamed or re-bounded in the kernel series
breaks the agent's tests instead of a production host.
"""

import json
import os
import re

import fixtures

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
PATCHES_DIR = os.path.join(REPO, 'host_kernel_patches')
ABI_RST = os.path.join(PATCHES_DIR, 'ABI.rst')
ABI_JSON = os.path.join(PATCHES_DIR, 'abi.json')


def load():
    """Return abi.json as a dict."""
    with open(ABI_JSON) as f:
        return json.load(f)


def entries(kind=None):
    """ABI entries, optionally only knobs or only stats."""
    return [e for e in load()['entries'] if kind in (None, e['kind'])]


def render(entry, value=None):
    """The text the kernel shows for ``entry`` holding ``value``."""
    return '%s\n' % (entry['default'] if value is None else value)


def accepts(entry, text):
    """Whether the kernel accepts ``text`` written to ``entry``.

    Mirrors the checks in the series: knobs only, the type's syntax, then
    the documented bounds (or the documented words for enums).
    """
    if entry['kind'] != 'knob':
        return False
    word = text.strip()
    if entry['type'] == 'enum':
        return word in entry['values']
    if entry['type'] == 'cpulist':
        return re.fullmatch(r'(\d+(-\d+)?(,\d+(-\d+)?)*)?', word) is not None
    if not re.fullmatch(r'-?\d+', word):
        return False
    return entry['min'] <= int(word) <= entry['max']


def expand(path, pid, vmfd, vcpu=None, tid=None):
    """``path`` with its ``<...>`` placeholders filled in."""
    path = path.replace('<pid>', str(pid)).replace('<vmfd>', str(vmfd))
    if vcpu is not None:
        path = path.replace('<vcpu>', str(vcpu))
    if tid is not None:
        path = path.replace('<tid>', str(tid))
    return path


class PatchedKernelTree(fixtures.Fixture):
    """A temp dir holding every file of the ABI, at its default value.

    ``root`` stands for ``/``: ``/sys/...``, ``/sys/kernel/debug/...`` and
    ``/proc/...`` live below it. One VM: QEMU ``pid`` with VM fd ``vmfd``
    and vCPU ``i`` run by thread ``tids[i]`` (KVM's debugfs ``pid`` file).
    Paths that are not files (the KVM_GET_STATS_FD binary statistics) are
    skipped.
    """

    def __init__(self, pid=4242, vmfd=11, tids=(4250, 4251)):
        super().__init__()
        self.pid, self.vmfd, self.tids = pid, vmfd, tuple(tids)

    def path(self, abi_path, vcpu=None, tid=None):
        rel = expand(abi_path, self.pid, self.vmfd, vcpu, tid)
        return os.path.join(self.root, rel.lstrip('/'))

    def _write(self, path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)

    def _setUp(self):
        self.root = self.useFixture(fixtures.TempDir()).path
        self.files = []
        for entry in entries():
            if not entry['path'].startswith('/'):
                continue
            for vcpu, tid in enumerate(self.tids):
                path = self.path(entry['path'], vcpu, tid)
                if path not in self.files:
                    self._write(path, render(entry))
                    self.files.append(path)
        for vcpu, tid in enumerate(self.tids):
            vcpu_dir = self.path('/sys/kernel/debug/kvm/<pid>-<vmfd>/'
                                 'vcpu<vcpu>', vcpu)
            self._write(os.path.join(vcpu_dir, 'pid'), '%d\n' % tid)
