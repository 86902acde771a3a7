"""Horizon's instance overview of a real server, from headless Chromium.

Logs into the cloud's Horizon as admin with Debian's chromium and
chromedriver (Selenium drives them; no browser is downloaded), opens the
overview page of a server (``--server``, default: the first whose
metadata has a ``vsmtio:`` key) and saves a PNG.
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import layout  # noqa: E402
import resources  # noqa: E402

CHROMIUM = '/usr/bin/chromium'
CHROMEDRIVER = '/usr/bin/chromedriver'
FLAGS = ('--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
         '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync',
         '--window-size=1280,1000')


def pick_server(conn):
    for server in conn.compute.servers(all_projects=True):
        if any(k.startswith('vsmtio:') for k in server.metadata or {}):
            return server.id
    raise SystemExit('no server with vsmtio metadata')


def shoot(server_id, out):
    from selenium import webdriver
    from selenium.webdriver.chrome import service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix='vsmtio-chromium-')
    for flag in FLAGS + ('--user-data-dir=' + profile,):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options,
                              service=service.Service(CHROMEDRIVER))
    try:
        base = layout.url('horizon')
        driver.get(base + '/auth/login/')
        driver.find_element(By.ID, 'id_username').send_keys('admin')
        driver.find_element(By.ID, 'id_password').send_keys(layout.PASSWORD)
        driver.find_element(By.ID, 'loginBtn').click()
        deadline = time.monotonic() + 60
        while '/auth/login' in driver.current_url:
            if time.monotonic() > deadline:
                raise SystemExit('Horizon login failed')
            time.sleep(0.5)
        driver.get('%s/project/instances/%s/' % (base, server_id))
        driver.find_element(By.CSS_SELECTOR, 'dl')  # the overview rendered
        height = driver.execute_script(
            'return document.body.scrollHeight')
        driver.set_window_size(1280, max(1000, min(height + 40, 2400)))
        driver.save_screenshot(out)
    finally:
        driver.quit()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--server')
    parser.add_argument('--out', default=os.path.join(
        layout.REPO, 'doc', 'source', 'images', 'horizon-measured-state.png'))
    args = parser.parse_args()
    os.environ.setdefault('SE_OFFLINE', 'true')
    server = args.server or pick_server(resources.connect())
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    print(shoot(server, args.out))


if __name__ == '__main__':
    main()
