"""Instant PromQL queries through Aetos, as the signed-in user.

Aetos (OpenStack's keystone-aware proxy in front of Prometheus) answers
``GET <endpoint>/api/v1/query`` only; it has no range endpoint, so a series
over time is asked for as a subquery (``expr[30m:15s]``), which Prometheus
answers from the same endpoint with a matrix. The endpoint is the catalogue's
``metric-storage`` service (the type Aetos registers and
python-observabilityclient looks up) unless ``VSMTIO_METRICS_ENDPOINT`` names
one. The user's own token goes with every query: Aetos's policy, not this
panel, decides what an account may read.
"""

import collections
import math

from django.conf import settings
from django.utils.translation import gettext_lazy as _
from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from openstack_dashboard.api import base

SERVICE_TYPE = 'metric-storage'
TIMEOUT = 10

#: One series of an instant vector: its labels and value.
Sample = collections.namedtuple('Sample', 'labels value')
#: One series of a range vector: its labels and ``[(unix time, value)]``.
Series = collections.namedtuple('Series', 'labels points')


class MetricsUnavailable(Exception):
    """Prometheus (or Aetos) could not answer; the text says why."""


def endpoint(request):
    configured = getattr(settings, 'VSMTIO_METRICS_ENDPOINT', None)
    if configured:
        return configured.rstrip('/')
    try:
        return base.url_for(request, SERVICE_TYPE).rstrip('/')
    except Exception as exc:  # horizon raises ServiceCatalogException
        raise MetricsUnavailable(
            _('No metric-storage (Aetos) endpoint in the service '
              'catalogue: %s') % exc)


def _verify():
    if getattr(settings, 'OPENSTACK_SSL_NO_VERIFY', False):
        return False
    return getattr(settings, 'OPENSTACK_SSL_CACERT', None) or True


def query(request, promql):
    """Run one instant query; a list of :class:`Sample` or :class:`Series`."""
    url = endpoint(request)
    session = ks_session.Session(
        auth=token_endpoint.Token(url, request.user.token.id),
        verify=_verify(), timeout=TIMEOUT)
    try:
        resp = session.get(url + '/api/v1/query', params={'query': promql},
                           raise_exc=False,
                           headers={'Accept': 'application/json'})
    except ks_exceptions.ClientException as exc:
        raise MetricsUnavailable(_('Metrics endpoint %(url)s: %(err)s')
                                 % {'url': url, 'err': exc})
    try:
        payload = resp.json()
    except ValueError:
        payload = None
    if resp.status_code != 200:
        why = (payload or {}).get('error') if isinstance(payload, dict) \
            else None
        raise MetricsUnavailable(
            _('Metrics endpoint %(url)s answered %(status)s: %(why)s')
            % {'url': url, 'status': resp.status_code,
               'why': why or resp.text[:200]})
    return parse(payload)


def _number(text):
    value = float(text)
    return value if math.isfinite(value) else None


def parse(payload):
    """The samples or series of a Prometheus query API answer.

    Non-finite values (``NaN``, ``+Inf``: a ratio over an idle period)
    become ``None`` so that the views can say "not reported" instead of
    printing them.
    """
    if not isinstance(payload, dict) or payload.get('status') != 'success':
        why = payload.get('error') if isinstance(payload, dict) else payload
        raise MetricsUnavailable(_('Prometheus query failed: %s') % why)
    data = payload['data']
    kind, result = data['resultType'], data['result']
    if kind == 'vector':
        return [Sample(r['metric'], _number(r['value'][1])) for r in result]
    if kind == 'matrix':
        return [Series(r['metric'], [(float(t), _number(v))
                                     for t, v in r['values']])
                for r in result]
    if kind == 'scalar':
        return [Sample({}, _number(result[1]))]
    raise MetricsUnavailable(_('Unexpected Prometheus result type %s')
                             % kind)
