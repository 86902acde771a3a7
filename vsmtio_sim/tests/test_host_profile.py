"""A host profile as the model's inputs: read, refused whole, applied."""

import copy
import io
import json
import os

import fixtures
import testtools
import yaml

from vsmtio_sim import cmd as sim_cmd
from vsmtio_sim import host_profile
from vsmtio_sim import runner
from vsmtio_sim import scenario
from vsmtio_sim.tests import helpers as h

HALT = {'governor': 'shallowest', 'per_core': True, 'states': [
    {'name': 'halt', 'exit_latency_us': 5, 'target_residency_us': 0}]}

# one request loop alone on a core, its wait long enough that the
# shipped menu governor picks C6 (133 us exit) every time
ALONE = {'name': 'alone', 'host': {'cores': 1}, 'duration_s': 1.5,
         'warmup_s': 0.3, 'placement': 'explicit',
         'workloads': {'io': h.io_wl(burst_us=20, wait_us=2000)},
         'vms': [{'name': 'io', 'workload': 'io', 'vcpus': 1,
                  'threads': [0]}]}


def profile_doc(**over):
    """A valid profile of a host without a cpuidle driver."""
    doc = {
        'kind': host_profile.KIND, 'version': host_profile.VERSION,
        'host': {'name': 'compute-7', 'measured_at': '2026-12-05T17:45:00Z',
                 'kernel_release': '6.18.44'},
        'measured': {'context_switch_ns': {'median': 1500, 'spread': 0.1}},
        'not_measured': [{'what': 'costs.vm_exit_ns', 'why': 'no KVM'}],
        'costs': {'context_switch_ns': 1500, 'ipi_ns': 4000,
                  'host_idle': copy.deepcopy(HALT)},
        'scheduler': {'policy': 'eevdf', 'tick_hz': 250},
        'sources': {'costs.context_switch_ns': 'measured',
                    'costs.ipi_ns': 'measured',
                    'costs.host_idle': 'no cpuidle driver',
                    'scheduler.policy': 'the release',
                    'scheduler.tick_hz': 'CONFIG_HZ'},
    }
    doc.update(over)
    return doc


class _Files(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def profile(self, doc=None, name='profile.json'):
        return self.write(name, json.dumps(
            profile_doc() if doc is None else doc))

    def scenario(self, doc=ALONE):
        return self.write('alone.yaml', yaml.safe_dump(doc))


class TestRead(_Files):

    def test_a_good_profile_keeps_each_input_s_source(self):
        p = host_profile.load(self.profile())
        self.assertEqual(1500, p.inputs['costs']['context_switch_ns'])
        self.assertEqual('eevdf', p.inputs['scheduler']['policy'])
        prov = p.provenance()
        self.assertEqual('compute-7', prov['host'])
        self.assertEqual('2026-12-05T17:45:00Z', prov['measured_at'])
        self.assertEqual(['costs.context_switch_ns', 'costs.host_idle',
                          'costs.ipi_ns', 'scheduler.policy',
                          'scheduler.tick_hz'], sorted(prov['inputs']))
        self.assertEqual('no KVM', prov['not_measured'][0]['why'])

    def refused(self, doc=None, text=None):
        path = (self.write('bad.json', text) if text is not None
                else self.profile(doc, 'bad.json'))
        e = self.assertRaises(host_profile.ProfileError, host_profile.load,
                              path)
        self.assertNotIn('\n', str(e))
        return str(e)

    def test_a_missing_file(self):
        e = self.assertRaises(host_profile.ProfileError, host_profile.load,
                              os.path.join(self.dir, 'none.json'))
        self.assertIn('cannot read host profile', str(e))
        self.assertIn('No such file', str(e))

    def test_not_json_or_another_document(self):
        self.assertIn('not a valid host profile', self.refused(text='{'))
        self.assertIn('not a vsmtio host profile',
                      self.refused(profile_doc(kind='scenario')))
        self.assertIn('a JSON object', self.refused(text='[1, 2]'))

    def test_another_version(self):
        for v in (2, 0, '1', None):
            e = self.refused(profile_doc(version=v))
            self.assertIn('host profile version %r' % (v,), e)
            self.assertIn('reads version 1', e)

    def test_non_finite_numbers_anywhere(self):
        good = json.dumps(profile_doc())
        for bad in (good.replace('"ipi_ns": 4000', '"ipi_ns": NaN'),
                    good.replace('"spread": 0.1', '"spread": Infinity'),
                    good.replace('"ipi_ns": 4000', '"ipi_ns": -Infinity')):
            self.assertIn('is not a finite number', self.refused(text=bad))

    def test_negative_and_out_of_range_values_name_their_field(self):
        doc = profile_doc()
        doc['costs']['ipi_ns'] = -1
        self.assertIn('costs.ipi_ns: -1 is less than the minimum of 0',
                      self.refused(doc))
        doc = profile_doc()
        doc['costs']['host_idle']['states'][0]['exit_latency_us'] = -2
        self.assertIn('costs.host_idle.states.0.exit_latency_us',
                      self.refused(doc))
        doc = profile_doc()
        doc['scheduler']['tick_hz'] = 5000
        self.assertIn('scheduler.tick_hz', self.refused(doc))
        doc = profile_doc()
        doc['costs']['host_idle']['governor'] = 'teo'
        self.assertIn('costs.host_idle.governor', self.refused(doc))

    def test_unknown_keys(self):
        self.assertIn("'colour' was unexpected",
                      self.refused(profile_doc(colour=1)))
        doc = profile_doc()
        doc['costs']['colour'] = 1
        doc['sources']['costs.colour'] = 'made up'
        self.assertIn("('colour' is not an input)", self.refused(doc))
        doc = profile_doc()
        doc['costs']['host_idle']['states'][0]['colour'] = 1
        self.assertIn('costs.host_idle.states.0', self.refused(doc))
        doc = profile_doc()
        doc['costs']['cpu_ghz'] = 'fast'
        doc['sources']['costs.cpu_ghz'] = 'made up'
        self.assertIn('costs.cpu_ghz', self.refused(doc))

    def test_every_input_has_a_source_and_every_source_an_input(self):
        doc = profile_doc()
        del doc['sources']['costs.ipi_ns']
        self.assertIn('costs.ipi_ns has no source', self.refused(doc))
        doc = profile_doc()
        doc['sources']['costs.vm_exit_ns'] = 'measured'
        self.assertIn('costs.vm_exit_ns names no input', self.refused(doc))
        doc = profile_doc()
        doc['host'] = {'name': 'compute-7'}
        self.assertIn('measured_at', self.refused(doc))


class TestApply(_Files):

    def test_the_profile_lands_over_the_scenario_s_own(self):
        sc_doc = dict(ALONE, costs={'context_switch_ns': 9000,
                                    'vm_exit_ns': 100},
                      scheduler={'policy': 'cfs'})
        sc = host_profile.load_scenario(self.scenario(sc_doc),
                                        self.profile())
        self.assertEqual(1500, sc.costs['context_switch_ns'])
        self.assertEqual(100, sc.costs['vm_exit_ns'])   # not in the profile
        self.assertEqual(HALT, sc.costs['host_idle'])
        self.assertEqual('eevdf', sc.scheduler['policy'])
        self.assertIn('with profile.json', sc.source)
        plain = host_profile.load_scenario(self.scenario(sc_doc))
        self.assertEqual(9000, plain.costs['context_switch_ns'])
        self.assertEqual('cfs', plain.scheduler['policy'])

    def test_inputs_from_elsewhere_get_a_scenario_s_checks(self):
        scenario.check_inputs({'costs': {'ipi_ns': 1}}, 'x')
        e = self.assertRaises(scenario.ScenarioError, scenario.check_inputs,
                              {'workloads': {}}, 'x')
        self.assertIn("'workloads' is not a group of inputs", str(e))

    def test_a_cheaper_idle_exit_serves_more_requests(self):
        # the shipped C6 exit (133 us) on every 2 ms wait, against the
        # host's one 5 us state: the same loop, fewer us per request
        path = self.scenario()
        shipped = runner.run(path, 'vanilla')
        host = runner.run(path, 'vanilla', overrides={
            runner.PROFILE: self.profile()})
        self.assertNotIn('profile', shipped)
        self.assertEqual('compute-7', host['profile']['host'])
        gain = host['io_throughput'] / shipped['io_throughput']
        # (20 + 2000 + 133 + 5) / (20 + 2000 + 5 + 1.5 + 4): about 6%
        self.assertGreater(gain, 1.04)
        self.assertLess(gain, 1.08)

    def test_the_command_refuses_a_bad_profile_in_one_line(self):
        doc = profile_doc(version=3)
        err = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        rc = sim_cmd.main(['run', '--scenario', self.scenario(), '--kernel',
                           'vanilla', '--profile', self.profile(doc)])
        self.assertEqual(2, rc)
        lines = err.getvalue().splitlines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn('host profile version 3', lines[0])

    def test_the_command_says_whose_costs_it_ran(self):
        out = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', io.StringIO()))
        rc = sim_cmd.main(['run', '--scenario', self.scenario(), '--kernel',
                           'vanilla', '--duration', '0.5', '--profile',
                           self.profile()])
        self.assertEqual(0, rc)
        self.assertIn('inputs from host profile', out.getvalue())
        self.assertIn('measured on compute-7 at 2026-12-05T17:45:00Z',
                      out.getvalue())

    def test_the_command_says_which_scheduler_ran(self):
        # the scenario's, the profile's over it, --scheduler over both
        pinned = self.write('pinned.yaml', yaml.safe_dump(
            dict(ALONE, scheduler={'policy': 'cfs'})))
        for extra, want in (([], 'cfs'),
                            (['--profile', self.profile()], 'eevdf'),
                            (['--profile', self.profile(), '--scheduler',
                              'cfs'], 'cfs'),
                            (['--scheduler', 'eevdf'], 'eevdf')):
            out = io.StringIO()
            self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
            self.useFixture(fixtures.MonkeyPatch('sys.stderr', io.StringIO()))
            rc = sim_cmd.main(['run', '--scenario', pinned,
                               '--kernel', 'vanilla', '--duration', '0.3']
                              + extra)
            self.assertEqual(0, rc)
            self.assertIn('host scheduler: %s\n' % want, out.getvalue())

    def test_an_unknown_scheduler_is_one_line(self):
        err = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        rc = sim_cmd.main(['run', '--scenario', self.scenario(), '--kernel',
                           'vanilla', '--scheduler', 'bfs'])
        self.assertEqual(2, rc)
        lines = err.getvalue().splitlines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn('--scheduler', lines[0])
