"""Builders for policy-engine tests."""

from vsmtio_agent import model
from vsmtio_agent.policy import engine
from vsmtio_agent.policy import ltcr

US = 1000


def stats(retention_rate=0.0, weight=1024, ipc=None, retention_frequency=None,
          core_id=None, period_ns=10 ** 8, utilisation=None,
          instruction_rate=None, halt_rate=None, runqueue_delay_ratio=None):
    return model.VcpuStats(
        period_ns=period_ns, weight=weight, core_id=core_id,
        utilisation=utilisation, retention_rate=retention_rate,
        retention_frequency=retention_frequency, retention_timeouts=None,
        ipc=ipc, cpi_stack=None, voluntary_switches=None,
        involuntary_switches=None, i_cpu=None,
        runqueue_delay_ratio=runqueue_delay_ratio,
        instruction_rate=instruction_rate, halt_rate=halt_rate)


def ref(i, domain='vm'):
    return model.VcpuRef(domain, i)


def params(**kw):
    """Engine parameters with LTCR's bounds in the paper's range."""
    bounds = ltcr.Bounds(initial_ns=200 * US, min_ns=10 * US,
                         max_ns=5000 * US, reschedule_cost_ns=50 * US)
    return engine.Params(bounds=bounds, **kw)
