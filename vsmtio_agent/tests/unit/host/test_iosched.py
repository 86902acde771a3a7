"""The I/O scheduler under a domain's images, from a fake sysfs tree.

The real tree cannot be given a device-mapper volume or BFQ in a unit
test: the tree is a temp dir laid out as the kernel lays out sysfs, and
the files looked up are real ones, whose device numbers the tree names.
"""

import os

import fixtures
import testtools

from vsmtio_agent.linux import iosched
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures


class TestSchedulers(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.image = os.path.abspath(__file__)
        dev = os.stat(self.image).st_dev
        self.node = os.path.join(self.root, 'dev/block/%d:%d'
                                 % (os.major(dev), os.minor(dev)))
        os.makedirs(os.path.dirname(self.node))

    def disk(self, name, scheduler):
        path = os.path.join(self.root, 'devices/pci0000:00/block', name)
        host_fixtures.write(os.path.join(path, 'queue/scheduler'),
                            scheduler)
        return path

    def test_a_partition_is_scheduled_on_its_disk(self):
        disk = self.disk('sda', 'mq-deadline kyber [bfq] none\n')
        os.makedirs(os.path.join(disk, 'sda2'))
        os.symlink(os.path.join(disk, 'sda2'), self.node)
        self.assertEqual({'sda': 'bfq'},
                         iosched.schedulers(self.root, [self.image]))

    def test_a_stacked_volume_on_every_disk_under_it(self):
        dm = os.path.join(self.root, 'devices/virtual/block/md0')
        host_fixtures.write(os.path.join(dm, 'queue/scheduler'), 'none\n')
        for name, text in (('nvme0n1', '[none] mq-deadline\n'),
                           ('nvme1n1', 'none [mq-deadline]\n')):
            os.makedirs(os.path.join(dm, 'slaves'), exist_ok=True)
            os.symlink(self.disk(name, text),
                       os.path.join(dm, 'slaves', name))
        os.symlink(dm, self.node)
        self.assertEqual({'nvme0n1': 'none', 'nvme1n1': 'mq-deadline'},
                         iosched.schedulers(self.root, [self.image]))

    def test_what_cannot_be_established_is_left_out(self):
        # a path that is not there; a device sysfs does not show
        self.assertEqual({}, iosched.schedulers(
            self.root, ['/nonexistent/disk.img', self.image]))
