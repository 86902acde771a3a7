"""The mix filter's verdicts per host, from nova's records: pure.

The rule is nova's filter's own (``vsmtio_nova.mix.violates``); these
tests check what the panel counts and says with it.
"""

import itertools
import unittest

from vsmtio_dashboard.content.hosts import tables
from vsmtio_dashboard import mixfilter
from vsmtio_nova import mix

IO, CPU = mixfilter.IO, mixfilter.CPU
HOST = 'compute-1'


def node(vcpus=2, used=1, ratio=1.0, host=HOST, name=None):
    return mixfilter.Node(host, name or host, vcpus, used, ratio)


def server(cls, vcpus=1, host=HOST, name=None):
    specs = {} if cls is None else {'vsmtio:workload': cls}
    return mixfilter.Server(host, name or host,
                            mixfilter.Flavor('f-%s' % cls, vcpus, specs))


def no_io(*hosts):
    """The cloud walk's aggregate: the band [0, 0]."""
    return mixfilter.Aggregate('no-io', hosts or (HOST,), {
        'vsmtio:min_io_fraction': '0', 'vsmtio:max_io_fraction': '0'})


def cells(row):
    """What the table shows of a row, by column name."""
    return {name: str(column.get_raw_data(row))
            for name, column in tables.MixTable.base_columns.items()}


class OptionsTest(unittest.TestCase):
    def test_no_setting_gives_novas_defaults(self):
        opts = mixfilter.options(None)
        self.assertEqual((0.1, 0.9, 16), opts[:3])
        self.assertFalse(opts.configured)
        self.assertEqual((), opts.problems)
        self.assertEqual('min_io_fraction 0.1, max_io_fraction 0.9, '
                         'filter_min_classified_vcpus 16', opts.described())

    def test_setting_mirrors_nova_names(self):
        opts = mixfilter.options({'filter_min_classified_vcpus': 1,
                                  'max_io_fraction': '0.8'})
        self.assertEqual((0.1, 0.8, 1), opts[:3])
        self.assertTrue(opts.configured)
        self.assertEqual((), opts.problems)

    def test_a_value_nova_refuses_takes_the_default_and_is_said(self):
        opts = mixfilter.options({'max_io_fraction': 2, 'min_io_fraction':
                                  'nan', 'weight_multiplier': 2})
        self.assertEqual((0.1, 0.9, 16), opts[:3])
        problems = ' | '.join(str(p) for p in opts.problems)
        self.assertIn('max_io_fraction=2 is refused', problems)
        self.assertIn('min_io_fraction=\'nan\' is refused', problems)
        self.assertIn('weight_multiplier is not an option the mix filter '
                      'reads', problems)

    def test_min_above_max_gives_both_defaults(self):
        opts = mixfilter.options({'min_io_fraction': 0.8,
                                  'max_io_fraction': 0.2})
        self.assertEqual((0.1, 0.9), opts[:2])
        self.assertIn('would not start', str(opts.problems[0]))

    def test_not_a_dict(self):
        opts = mixfilter.options(['min_io_fraction'])
        self.assertEqual((0.1, 0.9, 16), opts[:3])
        self.assertIn('is not a dict', str(opts.problems[0]))


class HostsTest(unittest.TestCase):
    def test_a_host_outside_its_band_says_why(self):
        # the cloud walk's refusal: one cpu server, an aggregate [0, 0]
        opts = mixfilter.options({'filter_min_classified_vcpus': 1})
        [row] = mixfilter.hosts([node(vcpus=10, used=1)],
                                [server('cpu')], [no_io()], opts)
        self.assertEqual(mix.Mix(0, 1), row.mix)
        self.assertEqual(1, row.verdicts[IO].refused_from)
        shown = cells(row)
        self.assertEqual('io:cpu 0:1 vCPUs, I/O share 0.000',
                         shown['counted'])
        self.assertEqual('[0.000, 0.000] from aggregate no-io',
                         shown['band'])
        self.assertEqual('9 of 10 (10 vCPUs × allocation ratio 1)',
                         shown['free'])
        # the numbers of the filter's INFO line for that boot
        self.assertEqual('refused from 1 vCPU: I/O share 0.000 -> 0.500 '
                         'outside [0.000, 0.000], 8 vCPUs free', shown['io'])
        self.assertEqual('passes, up to the 9 vCPUs left', shown['cpu'])

    def test_nothing_refused_where_the_band_holds(self):
        opts = mixfilter.options(None)
        servers = [server('io', 8), server('cpu', 8)]
        [row] = mixfilter.hosts([node(vcpus=32, used=16)], servers, [],
                                opts)
        shown = cells(row)
        self.assertEqual('io:cpu 8:8 vCPUs, I/O share 0.500',
                         shown['counted'])
        self.assertEqual('[0.100, 0.900] from the options', shown['band'])
        for cls in ('io', 'cpu'):
            self.assertEqual('passes, up to the 16 vCPUs left', shown[cls])
        self.assertNotIn('refused', ' '.join(shown.values()))

    def test_the_smallest_size_refused(self):
        # 17 io, 2 cpu on 24 vCPUs: 4 more io vCPUs leave one free, to
        # come back to 21/24 = 0.875; 5 more end at 22/24, with none
        opts = mixfilter.options(None)
        [row] = mixfilter.hosts([node(vcpus=24, used=19)],
                                [server('io', 17), server('cpu', 2)], [],
                                opts)
        self.assertEqual('passes up to 4 vCPUs; refused from 5 vCPUs: I/O '
                         'share 0.895 -> 0.917 outside [0.100, 0.900], 0 '
                         'vCPUs free', cells(row)['io'])

    def test_not_judged_below_the_classified_vcpus_it_judges_from(self):
        opts = mixfilter.options(None)
        [row] = mixfilter.hosts([node()], [server('cpu')], [no_io()], opts)
        self.assertFalse(row.verdicts[IO].judged)
        self.assertIsNone(row.verdicts[IO].refused_from)
        self.assertEqual('passes unjudged: the host has 1 classified '
                         'vCPUs, the filter judges from 16', cells(row)['io'])

    def test_auto_and_unset_flavors_are_said_not_counted(self):
        opts = mixfilter.options(None)
        [row] = mixfilter.hosts(
            [node(vcpus=8, used=7)],
            [server('io', 2), server('auto', 3), server(None, 1),
             server('banana', 1)], [], opts)
        self.assertEqual(mix.Mix(2, 0), row.mix)
        self.assertEqual(5, row.uncounted)
        self.assertEqual(4, row.servers)
        self.assertEqual('io:cpu 2:0 vCPUs, I/O share 1.000; 5 vCPUs '
                         'without a declared class (auto) not counted here',
                         cells(row)['counted'])

    def test_servers_count_on_their_node_only(self):
        opts = mixfilter.options(None)
        rows = mixfilter.hosts(
            [node(host='a'), node(host='b')],
            [server('io', host='a'), server('cpu', host='b'),
             server('cpu', host='c'), server('cpu', host='a', name='x')],
            [], opts)
        self.assertEqual([('a', mix.Mix(1, 0)), ('b', mix.Mix(0, 1))],
                         [(r.host, r.mix) for r in rows])

    def test_band_as_the_filter_reads_aggregates(self):
        opts = mixfilter.options(None)
        aggregates = [
            mixfilter.Aggregate('a1', (HOST,),
                                {'vsmtio:max_io_fraction': '0.7'}),
            mixfilter.Aggregate('a2', (HOST,),
                                {'vsmtio:max_io_fraction': '0.8',
                                 'vsmtio:min_io_fraction': 'x'}),
            mixfilter.Aggregate('other', ('elsewhere',),
                                {'vsmtio:max_io_fraction': '0.1'}),
            mixfilter.Aggregate('az', (HOST,), {'availability_zone': 'z'})]
        [row] = mixfilter.hosts([node()], [], aggregates, opts)
        self.assertEqual(mix.band({'x'}, {'0.7', '0.8'}, 0.1, 0.9),
                         row.band)
        self.assertEqual('[0.100, 0.700] from aggregate a1, a2; '
                         'vsmtio:min_io_fraction of its aggregates is not '
                         'a fraction in [0, 1]: the option is used',
                         cells(row)['band'])

    def test_a_crossed_band_is_said(self):
        opts = mixfilter.options(None)
        aggregate = mixfilter.Aggregate('x', (HOST,), {
            'vsmtio:min_io_fraction': '0.9', 'vsmtio:max_io_fraction': '0.1'})
        [row] = mixfilter.hosts([node()], [], [aggregate], opts)
        self.assertIn('its aggregates give [0.900, 0.100], min above max: '
                      'the options are used', cells(row)['band'])

    def test_a_full_host(self):
        opts = mixfilter.options({'filter_min_classified_vcpus': 1})
        [row] = mixfilter.hosts([node(vcpus=2, used=2)],
                                [server('io'), server('cpu')], [], opts)
        shown = cells(row)
        self.assertEqual('0 of 2 (2 vCPUs × allocation ratio 1)',
                         shown['free'])
        self.assertEqual('passes (no whole vCPU left: nova\'s other filters '
                         'refuse it)', shown['cpu'])
        # held to the band itself: one more I/O vCPU ends at 2/3 < 0.9
        self.assertEqual(shown['cpu'], shown['io'])
        [row] = mixfilter.hosts([node(vcpus=2, used=2)],
                                [server('io', 9), server('cpu')], [], opts)
        # the room after placing, as the filter's log line gives it
        self.assertEqual('refused from 1 vCPU: I/O share 0.900 -> 0.909 '
                         'outside [0.100, 0.900], -1 vCPUs free',
                         cells(row)['io'])

    def test_no_allocation_ratio_is_said(self):
        [row] = mixfilter.hosts([node(ratio=None)], [], [],
                                mixfilter.options(None))
        self.assertEqual('1 of 2 (2 vCPUs; placement gave no allocation '
                         'ratio: 1.0 assumed)', cells(row)['free'])


class BisectionTest(unittest.TestCase):
    def test_the_smallest_refused_size_is_the_filters(self):
        # every size up to the room asked of the filter's rule, one by one
        band = mix.Band(0.25, 0.75)
        for io, cpu, vcpus, used, cls in itertools.product(
                range(0, 7, 2), range(0, 7, 3), (4, 8, 12), (0, 5, 11),
                (IO, CPU)):
            n = node(vcpus=vcpus, used=used)
            current = mix.Mix(io, cpu)
            got = mixfilter.verdict(current, cls, band, 2, n)
            want = next((v for v in range(1, got.room + 1) if mix.violates(
                current, cls, v, band.low, band.high, 2,
                mix.free_vcpus(vcpus, 1.0, used, v))), None)
            self.assertEqual(want, got.refused_from,
                             (io, cpu, vcpus, used, cls))
