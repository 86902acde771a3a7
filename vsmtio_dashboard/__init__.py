"""vsmtio's Horizon plugin: what each host's agent measured and decided.

An admin panel (Admin > vSMT-IO > Hosts) reads the agents' metrics from
Prometheus through Aetos with the signed-in user's keystone token, so the
operator sees the same figures Watcher and Grafana read, and tenants see
none of them. Enable it by copying the files of :mod:`vsmtio_dashboard.enabled`
into Horizon's ``openstack_dashboard/local/enabled/``.
"""
