"""Horizon's instance overview of a real server, from headless Chromium.

Logs into the cloud's Horizon as admin (:mod:`browser`), opens the
overview page of a server (``--server``, default: the first whose
metadata has a ``vsmtio:`` key) and saves a PNG. By default it writes
under the cloud's directory, never over an image the repository tracks:
pass ``--out`` to choose, e.g. to refresh a documentation image on
purpose.
"""

import argparse
import os

import browser
import resources

DEFAULT_OUT = os.path.join(os.environ.get('VSMTIO_SCREENSHOTS',
                                          '/var/tmp/vsmtio-screenshots'),
                           'horizon-measured-state.png')


def pick_server(conn):
    for server in conn.compute.servers(all_projects=True):
        if any(k.startswith('vsmtio:') for k in server.metadata or {}):
            return server.id
    raise SystemExit('no server with vsmtio metadata')


def shoot(server_id, out):
    with browser.signed_in() as driver:
        browser.open_page(driver, '/project/instances/%s/' % server_id,
                          'dl')
        return browser.full_page_png(driver, out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--server')
    parser.add_argument('--out', default=DEFAULT_OUT,
                        help='PNG to write (default: %(default)s)')
    args = parser.parse_args()
    server = args.server or pick_server(resources.connect())
    print(shoot(server, args.out))


if __name__ == '__main__':
    main()
