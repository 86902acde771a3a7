"""Service users and catalogue entries, as each service of the cloud needs.

Idempotent, through openstacksdk: a user or service that exists is kept
(the cloud's ``up`` may run again over a cloud that is up).
"""

import layout


def service_user(conn, name, project):
    """User ``name`` of ``project``, with the admin and service roles."""
    idn = conn.identity
    user = idn.find_user(name, domain_id='default') or idn.create_user(
        name=name, password=layout.PASSWORD, domain_id='default',
        default_project_id=project.id)
    for role in ('admin', 'service'):
        conn.grant_role(role, user=user.id, project=project.id)
    return user


def service(conn, name, service_type, url):
    """Service ``name`` in the catalogue, ``url`` on every interface."""
    idn = conn.identity
    svc = idn.find_service(name) or idn.create_service(
        name=name, type=service_type, enabled=True)
    for interface in ('public', 'internal', 'admin'):
        idn.create_endpoint(service_id=svc.id, interface=interface,
                            url=url, region_id=layout.REGION)
    return svc
