"""Headless Chromium signed into the cloud's Horizon, through Selenium.

Debian's chromium and chromium-driver (the cloud's package step installs
both; Selenium is told where they are, so it downloads no browser).
"""

import contextlib
import os
import shutil
import tempfile
import time

import layout
import procs

CHROMIUM = '/usr/bin/chromium'
CHROMEDRIVER = '/usr/bin/chromedriver'
FLAGS = ('--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
         '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync',
         '--window-size=1280,1000')


@contextlib.contextmanager
def signed_in(username='admin', password=layout.PASSWORD):
    """A WebDriver signed into Horizon; quit and its profile removed after."""
    os.environ.setdefault('SE_OFFLINE', 'true')
    from selenium import webdriver
    from selenium.webdriver.chrome import service
    from selenium.webdriver.common.by import By

    for path, package in ((CHROMIUM, 'chromium'),
                          (CHROMEDRIVER, 'chromium-driver')):
        if not os.path.exists(path):
            raise procs.CloudError('%s is missing: install the Debian '
                                   'package %s' % (path, package))
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix='vsmtio-chromium-')
    for flag in FLAGS + ('--user-data-dir=' + profile,):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options,
                              service=service.Service(CHROMEDRIVER))
    try:
        driver.get(layout.url('horizon') + '/auth/login/')
        driver.find_element(By.ID, 'id_username').send_keys(username)
        driver.find_element(By.ID, 'id_password').send_keys(password)
        driver.find_element(By.ID, 'loginBtn').click()
        deadline = time.monotonic() + 60
        while '/auth/login' in driver.current_url:
            if time.monotonic() > deadline:
                raise procs.CloudError('Horizon login failed')
            time.sleep(0.5)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def open_page(driver, path, ready_css):
    """Load a Horizon page and wait until ``ready_css`` is on it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support import ui

    driver.get(layout.url('horizon') + path)
    ui.WebDriverWait(driver, 60).until(
        expected_conditions.presence_of_element_located(
            (By.CSS_SELECTOR, ready_css)))


FULL_HEIGHT_JS = """
return Math.max(...[...document.querySelectorAll('*')]
    .map(e => e.getBoundingClientRect().bottom + window.scrollY));
"""


def full_page_png(driver, out):
    """Save the whole page: the viewport set to the content's height.

    Horizon's layout does not grow ``body`` with its content, so the
    height is the lowest bottom edge of any element; Chromium's device
    metrics set the viewport exactly (a window size includes chrome that
    varies by page).
    """
    height = int(driver.execute_script(FULL_HEIGHT_JS)) + 20
    driver.execute_cdp_cmd('Emulation.setDeviceMetricsOverride', {
        'width': 1280, 'height': max(600, min(height, 4000)),
        'deviceScaleFactor': 1, 'mobile': False})
    try:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        driver.save_screenshot(out)
    finally:
        driver.execute_cdp_cmd('Emulation.clearDeviceMetricsOverride', {})
    return out
