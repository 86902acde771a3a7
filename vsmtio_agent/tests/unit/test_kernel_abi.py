"""ABI.rst, abi.json and the kernel patches must say the same thing.

ABI.rst is parsed here by its own small parser (not by the generator that
wrote abi.json), and both are compared with the constants and names in the
patch series, so the agent, its fixtures and the kernel cannot drift apart.
"""

import os
import re

import testtools

from vsmtio_agent.tests.unit import kernel_abi

_KEYS = ('Kind', 'Type', 'Units', 'Range', 'Values', 'Default', 'Writer',
         'Reader')


def parse_rst(text):
    """{path: {key: value}} for every ``What:`` block of ABI.rst."""
    blocks, cur = {}, None
    for line in text.splitlines():
        if line.startswith('What:'):
            cur = blocks.setdefault(line[len('What:'):].strip(), {})
        elif cur is not None:
            m = re.match(r'\s+(%s):\s+(.*\S)' % '|'.join(_KEYS), line)
            if m and m.group(1) not in cur:
                cur[m.group(1)] = m.group(2)
    return blocks


def parse_record(text):
    """[(offset, size, name, writer)] from the record layout table."""
    rows = []
    for m in re.finditer(r'^\s+0x([0-9a-f]{2})\s+(u8\[(\d+)\]|u(\d+))\s+'
                         r'(\w+)\s+(guest|host|-)\s', text, re.M):
        size = int(m.group(3)) if m.group(3) else int(m.group(4)) // 8
        rows.append((int(m.group(1), 16), size, m.group(5), m.group(6)))
    return rows


def read_patches():
    pdir = os.path.join(kernel_abi.PATCHES_DIR, 'patches')
    with open(os.path.join(pdir, 'series')) as f:
        names = [n.strip() for n in f if n.strip() and n[0] != '#']
    text = ''
    for name in names:
        with open(os.path.join(pdir, name)) as f:
            text += f.read()
    return names, text


def added_lines(patch_text):
    return '\n'.join(line[1:] for line in patch_text.splitlines()
                     if line.startswith('+') and not line.startswith('+++'))


class TestAbiDocumentAndJson(testtools.TestCase):

    def setUp(self):
        super().setUp()
        with open(kernel_abi.ABI_RST) as f:
            self.rst_text = f.read()
        self.rst = parse_rst(self.rst_text)
        self.json = kernel_abi.load()
        self.entries = {e['path']: e for e in self.json['entries']}

    def test_same_paths_both_ways(self):
        self.assertEqual([], sorted(set(self.rst) - set(self.entries)),
                         'in ABI.rst, missing from abi.json')
        self.assertEqual([], sorted(set(self.entries) - set(self.rst)),
                         'in abi.json, missing from ABI.rst')
        self.assertEqual(len(self.rst), len(self.json['entries']))

    def test_same_attributes(self):
        for path, doc in self.rst.items():
            e = self.entries[path]
            self.assertEqual(doc['Kind'], e['kind'], path)
            self.assertIn(e['kind'], ('knob', 'stat'), path)
            self.assertEqual(doc['Type'], e['type'], path)
            self.assertEqual(doc['Units'], e['units'], path)
            self.assertEqual(doc['Writer'], e['writer'], path)
            self.assertEqual(doc['Reader'], e['reader'], path)
            if doc['Range'] == '-':
                self.assertIsNone(e['min'], path)
                self.assertIsNone(e['max'], path)
            else:
                lo, hi = doc['Range'].split('..')
                self.assertEqual((int(lo), int(hi)), (e['min'], e['max']),
                                 path)
                self.assertEqual(int(doc['Default']), e['default'], path)
                self.assertTrue(e['min'] <= e['default'] <= e['max'], path)
            self.assertEqual(doc.get('Values', '').split(),
                             e.get('values', []), path)
            if 'Values' in doc:
                self.assertIn(e['default'], e['values'], path)

    def test_every_knob_documents_bounds_or_values(self):
        for e in kernel_abi.entries('knob'):
            if e['type'] == 'enum':
                self.assertTrue(e['values'], e['path'])
            elif e['type'] != 'cpulist':
                self.assertIsNotNone(e['max'], e['path'])
                self.assertFalse(kernel_abi.accepts(e, str(e['max'] + 1)))
                self.assertFalse(kernel_abi.accepts(e, str(e['min'] - 1)))
                self.assertTrue(kernel_abi.accepts(e, str(e['default'])))

    def test_record_layout(self):
        pv = self.json['pv']
        rows = parse_record(self.rst_text)
        self.assertEqual(
            [(f['offset'], f['size'], f['name'], f['writer'])
             for f in pv['fields']], rows)
        offset = 0
        for off, size, name, _ in rows:
            self.assertEqual(offset, off, name)
            self.assertEqual(0, off % min(size, 8), name)
            offset += size
        self.assertEqual(64, offset)
        self.assertEqual(64, pv['record_size'])
        self.assertEqual(64, pv['gpa_align'])


class TestPatchesMatchAbi(testtools.TestCase):
    """The constants and names in the series are the documented ones."""

    def setUp(self):
        super().setUp()
        self.names, text = read_patches()
        self.code = added_lines(text)
        self.abi = kernel_abi.load()

    def _has(self, needle):
        # Not assertIn: its failure message would print every patch.
        if needle not in self.code:
            self.fail('not in the series: ' + needle)

    def _has_re(self, pattern):
        self.assertTrue(re.search(pattern, self.code),
                        'not in the series: ' + pattern)

    def _define(self, name):
        m = re.search(r'#define\s+%s\s+(\S+)' % name, self.code)
        self.assertIsNotNone(m, name)
        return m.group(1)

    def test_feature_bit_and_msr(self):
        self.assertEqual(str(self.abi['pv']['feature_bit']),
                         self._define('KVM_FEATURE_CTX_RETENTION'))
        self.assertEqual(self.abi['pv']['msr'],
                         self._define('MSR_KVM_CTX_RETENTION'))
        self.assertEqual('6', self._define('KVM_CTX_RETENTION_ALIGNMENT_BITS'))

    def test_uapi_struct_matches_record(self):
        m = re.search(r'^struct kvm_ctx_retention \{\n(.*?)\n\};',
                      self.code, re.S | re.M)
        self.assertIsNotNone(m)
        fields = re.findall(r'__u(\d+)\s+(\w+)(?:\[(\d+)\])?;', m.group(1))
        got = [(name, int(bits) // 8 * int(n or 1))
               for bits, name, n in fields]
        want = [(f['name'], f['size']) for f in self.abi['pv']['fields']]
        self.assertEqual(want, got)

    def test_timeout_bounds_and_default(self):
        units = {'NSEC_PER_MSEC': 10 ** 6, 'NSEC_PER_USEC': 10 ** 3}
        m = re.search(r'#define\s+KVM_CTX_RET_MAX_TIMEOUT_NS\s+'
                      r'\((\d+) \* (NSEC_PER_\w+)\)', self.code)
        self.assertIsNotNone(m)
        max_ns = int(m.group(1)) * units[m.group(2)]
        m = re.search(r'ctx_retention_timeout_ns = (\d+) \* (NSEC_PER_\w+);',
                      self.code)
        self.assertIsNotNone(m)
        default_ns = int(m.group(1)) * units[m.group(2)]
        entries = {e['path']: e for e in self.abi['entries']}
        glob = entries['/sys/module/kvm/parameters/ctx_retention_timeout_ns']
        self.assertEqual((0, max_ns, default_ns),
                         (glob['min'], glob['max'], glob['default']))
        per_vm = entries['/sys/kernel/debug/kvm/<pid>-<vmfd>/'
                         'ctx_retention_timeout_ns']
        self.assertEqual((-1, max_ns), (per_vm['min'], per_vm['max']))
        self._has('ctx_ret_timeout_ns = -1;')

    def test_every_name_is_created_by_the_series(self):
        for e in self.abi['entries']:
            leaf = re.split(r'[/:]', e['path'])[-1]
            if e['path'].startswith('KVM_GET_STATS_FD:'):
                self._has_re(r'STATS_DESC_\w+\(VCPU, %s\)' % leaf)
            elif e['path'].startswith('/sys/module/kvm/parameters/'):
                self._has('module_param_cb(%s,' % leaf)
            elif re.match(r'/sys/kernel/debug/kvm/<pid>-<vmfd>/[a-z_]+$',
                          e['path']) and leaf != 'ctx_retention_timeout_ns':
                # KVM's generic per-VM sum of the vCPU stat of that name.
                self._has_re(r'STATS_DESC_\w+\(VCPU, %s\)' % leaf)
            elif e['path'] == '/proc/<pid>/task/<tid>/sched_rass':
                self._has('REG("sched_rass"')
                for word in e['values']:
                    self._has('"%s",' % word)
            elif e['path'].startswith('/sys/kernel/vsmtio/'):
                self._has('__ATTR_R')
                self._has_re(r'%s_attr\b' % leaf)
            else:
                self._has('"%s"' % leaf)

    def test_abi_version(self):
        self._has('return sysfs_emit(buf, "%d\\n");' % self.abi['abi_version'])


class TestFixtureTree(testtools.TestCase):

    def test_every_file_exists_with_its_default(self):
        tree = self.useFixture(kernel_abi.PatchedKernelTree(tids=(7, 8)))
        for e in kernel_abi.entries():
            if not e['path'].startswith('/'):
                continue
            for vcpu, tid in enumerate((7, 8)):
                with open(tree.path(e['path'], vcpu, tid)) as f:
                    self.assertEqual(kernel_abi.render(e), f.read())
        with open(tree.path('/sys/kernel/debug/kvm/<pid>-<vmfd>/vcpu1/pid')
                  ) as f:
            self.assertEqual('8\n', f.read())

    def test_accepts_mirrors_the_kernel_checks(self):
        by_path = {e['path']: e for e in kernel_abi.entries()}
        rass = by_path['/proc/<pid>/task/<tid>/sched_rass']
        self.assertTrue(kernel_abi.accepts(rass, 'io\n'))
        self.assertFalse(kernel_abi.accepts(rass, 'IO'))
        cpus = by_path['/sys/kernel/vsmtio/rass_io_cpus']
        self.assertTrue(kernel_abi.accepts(cpus, '1,3,5-7\n'))
        self.assertTrue(kernel_abi.accepts(cpus, '\n'))
        self.assertFalse(kernel_abi.accepts(cpus, 'all'))
        stat = by_path['/sys/kernel/vsmtio/rass_evictions']
        self.assertFalse(kernel_abi.accepts(stat, '0'))
