/*
 * The Workload Monitor's per-vCPU loop in C: vsmtio_agent.policy.monitor's
 * derive() over 200 vCPUs costs the agent about 0.6 ms of its period in
 * Python (5 us a vCPU: twelve deltas, nine rates, the switch window, one
 * VcpuStats); this does the same loop without the interpreter.
 *
 * monitor._derive is the reference: this computes exactly what it
 * computes, or declines. The floats are the same operations in the same
 * order on the same doubles, so they are bit-identical:
 *   - int / int is Python's true division, which is correctly rounded;
 *     so is the division of two doubles, and both ints are exact doubles
 *     here (every delta this divides is checked to be at most 2**53);
 *   - int / float converts the int to the nearest double (ties to even)
 *     as PyLong_AsDouble does, then divides;
 *   - the idle threshold is compared as a double, which is Python's exact
 *     float-int comparison when the threshold is an int of at most 2**53.
 * Whatever it cannot do that way it leaves to Python: a vCPU whose
 * counters are not ints of 64 bits (floats, bools, ints past 2**63), whose
 * deltas exceed 2**53, or whose tuples are not 15 fields goes back in the
 * ``todo`` list for monitor._derive to compute; arguments it cannot take
 * (snapshots whose vCPUs are not in a dict, a float time) make it return
 * NotImplemented and the whole call is Python's.
 *
 * derive(prev_vcpus, cur_vcpus, prev_ns, cur_ns, period_ns, period_s,
 *        idle_switch_threshold, core_ids, last, VcpuStats, CpiStack)
 *     -> (stats, todo) or NotImplemented
 *   prev_vcpus, cur_vcpus  the two snapshots' {ref: VcpuCounters}
 *   period_ns, period_s    cur_ns - prev_ns (> 0), and over 1e9
 *   core_ids               Topology.core_ids or None
 *   last                   the previous period's stats (a non-empty
 *                          mapping: ``last.get`` is called where it is
 *                          not a dict) or None
 *   stats                  {ref: VcpuStats} in cur_vcpus' order, None for
 *                          the refs in ``todo`` (a list, or None if empty)
 * VcpuStats and CpiStack are built as monitor builds VcpuStats:
 * object.__new__ and the fields set in their order (build(): through
 * object.__setattr__, which keeps them in the instance's own values until
 * a __dict__ is asked for, not through a dict as monitor's Python does;
 * the same fields, order, equality and repr, the dict 10-25% of the
 * call's cost: tools/bench_derive.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

#include "_dicts.h"     /* NEXT, GET, SET, NEW_DICT: by known hash */

#define N_FIELDS 15         /* VcpuCounters */
#define EXACT (1LL << 53)   /* every int up to this is a double exactly */
#define NS_PER_S 1e9        /* monitor.NS_PER_S */

/* VcpuStats' fields, in their order (monitor asserts they are these) */
static const char *STATS_NAMES[] = {
    "period_ns", "weight", "core_id", "utilisation", "retention_rate",
    "retention_frequency", "retention_timeouts", "ipc", "cpi_stack",
    "voluntary_switches", "involuntary_switches", "i_cpu",
    "runqueue_delay_ratio", "instruction_rate", "halt_rate",
    "switch_window_ns"};
#define N_STATS 16
static const char *CPI_NAMES[] = {"base", "miss", "waiting"};
#define N_CPI 3
static PyObject *stats_keys[N_STATS], *cpi_keys[N_CPI];
static PyObject *held_vol, *held_invol, *held_icpu, *held_window,
                *held_period, *get_name;
static PyObject *empty_tuple;
static PyObject *zero;          /* new_float(0.0) */

/* A counter's delta: has = 0 where Python's is None. */
typedef struct {
    int has;
    long long v;
} delta_t;

/* An exact int that fits 64 bits: 1 and *out, else 0 (never an error). */
static int
int64_of(PyObject *o, long long *out)
{
    int overflow;

    if (!PyLong_CheckExact(o))
        return 0;
    *out = PyLong_AsLongLongAndOverflow(o, &overflow);
    return !overflow;
}

/*
 * ``None if a0 is None or a1 is None or a1 < a0 else a1 - a0``: 0 and *d,
 * or 1 where C cannot compute it exactly (the vCPU is Python's).
 */
static int
delta(PyObject *a0, PyObject *a1, delta_t *d)
{
    long long x0, x1;

    d->has = 0;
    if (a0 == Py_None || a1 == Py_None)
        return 0;
    if (!int64_of(a0, &x0) || !int64_of(a1, &x1))
        return 1;
    if (x1 < x0)
        return 0;
    if (__builtin_sub_overflow(x1, x0, &d->v) || d->v > EXACT)
        return 1;
    d->has = 1;
    return 0;
}

/*
 * A float of value ``x``: one shared object for +0.0. An idle vCPU's
 * rates are zero (no retention, no halts, no involuntary switches), and
 * every object a period makes is made, read and freed again the period
 * after, each a cache line or so that the agent's period pays for cold
 * (doc/benchmarks/agent_tick.rst); a zero is the same float whichever
 * object holds it.
 */
static PyObject *
new_float(double x)
{
    if (x == 0.0 && !signbit(x))
        return Py_NewRef(zero);
    return PyFloat_FromDouble(x);
}

/* d / den as a float, None where d is None (Python's int / int). */
static PyObject *
ratio_ii(delta_t d, long long den)
{
    if (!d.has)
        Py_RETURN_NONE;
    return new_float((double)d.v / (double)den);
}

/* d / den as a float, None where d is None (Python's int / float). */
static PyObject *
ratio_if(delta_t d, double den)
{
    if (!d.has)
        Py_RETURN_NONE;
    return new_float((double)d.v / den);
}

static PyObject *
int_or_none(delta_t d)
{
    if (!d.has)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(d.v);
}

/*
 * monitor.interference_ratio(vol, invol, period_s, threshold) for two
 * present deltas: None below the idle threshold, else invol / max(vol, 1).
 */
static PyObject *
i_cpu_of(delta_t vol, delta_t invol, double period_s, double threshold)
{
    if (!vol.has || !invol.has || period_s <= 0)
        Py_RETURN_NONE;
    if ((double)(vol.v + invol.v) / period_s < threshold)
        Py_RETURN_NONE;
    return new_float((double)invol.v / (double)(vol.v > 1 ? vol.v : 1));
}

/*
 * object.__new__(cls) with ``n`` fields set in order, as monitor does
 * (object.__setattr__, as a frozen dataclass's __init__: the instance's
 * own values, its __dict__ made only if asked for, in the same order);
 * steals the references in ``values`` (NULL: an error, which is returned
 * once they are released).
 */
static PyObject *
build(PyObject *cls, PyObject **keys, PyObject **values, int n)
{
    PyObject *obj = NULL;
    int i;

    for (i = 0; i < n; i++)
        if (values[i] == NULL)
            goto done;
    obj = PyBaseObject_Type.tp_new((PyTypeObject *)cls, empty_tuple, NULL);
    if (obj == NULL)
        goto done;
    for (i = 0; i < n; i++)
        if (PyObject_GenericSetAttr(obj, keys[i], values[i]) < 0) {
            Py_CLEAR(obj);
            break;
        }
done:
    for (i = 0; i < n; i++)
        Py_XDECREF(values[i]);
    return obj;
}

/* monitor.cpi_stack(ins, cycles, base, miss) for ins present. */
static PyObject *
cpi_stack(PyObject *cls, delta_t ins, delta_t cycles, delta_t base,
          delta_t miss)
{
    double b, m, w;
    PyObject *values[N_CPI];

    if (ins.v == 0 || !cycles.has || !base.has || !miss.has)
        Py_RETURN_NONE;
    b = (double)base.v / (double)ins.v;
    m = (double)miss.v / (double)ins.v;
    w = (double)cycles.v / (double)ins.v - b - m;
    values[0] = new_float(b);
    values[1] = new_float(m);
    values[2] = new_float(w > 0.0 ? w : 0.0);     /* max(0.0, w) */
    return build(cls, cpi_keys, values, N_CPI);
}

/* What the call needs of every vCPU. */
typedef struct {
    PyObject *prev_vcpus, *core_ids, *last, *last_get, *period_obj,
             *stats_cls, *cpi_cls;
    long long prev_ns, cur_ns, period_ns;
    double period_s, threshold;
} call_t;

/* Where derive_one leaves a vCPU: built, Python's, or an error. */
#define DONE 0
#define TODO 1
#define ERROR (-1)

/*
 * The switch window and I_cpu where the counts were read on their own
 * cadence: window > 0 counts them over it; otherwise the last period's
 * stats (``held``) give them, or nothing does. Sets the four new
 * references; TODO or ERROR leave them unset.
 */
static int
switch_window(const call_t *c, PyObject *ref, PyObject *t0, PyObject *t1,
              delta_t vol, delta_t invol, PyObject **vol_o,
              PyObject **invol_o, PyObject **i_cpu, PyObject **window_o)
{
    long long a = c->cur_ns, b = c->prev_ns, window;
    PyObject *held, *w, *eq;
    int is_period;

    if ((t1 != Py_None && !int64_of(t1, &a))
            || (t0 != Py_None && !int64_of(t0, &b))
            || __builtin_sub_overflow(a, b, &window))
        return TODO;
    if (window > 0) {
        *i_cpu = i_cpu_of(vol, invol, (double)window / NS_PER_S,
                          c->threshold);
        *vol_o = int_or_none(vol);
        *invol_o = int_or_none(invol);
        if (window == c->period_ns) {
            Py_INCREF(Py_None);
            *window_o = Py_None;
        } else
            *window_o = PyLong_FromLongLong(window);
        if (*i_cpu && *vol_o && *invol_o && *window_o)
            return DONE;
        goto fail;
    }
    /* last.get(ref) */
    if (c->last_get != NULL) {
        held = PyObject_CallOneArg(c->last_get, ref);
        if (held == NULL)
            return ERROR;
    } else if (c->last != Py_None) {
        held = PyDict_GetItemWithError(c->last, ref);
        if (held == NULL && PyErr_Occurred())
            return ERROR;
        Py_XINCREF(held);
    } else
        held = NULL;
    if (held == NULL || held == Py_None) {
        Py_XDECREF(held);
        *vol_o = Py_NewRef(Py_None);
        *invol_o = Py_NewRef(Py_None);
        *i_cpu = Py_NewRef(Py_None);
        *window_o = Py_NewRef(Py_None);
        return DONE;
    }
    *vol_o = PyObject_GetAttr(held, held_vol);
    *invol_o = *vol_o ? PyObject_GetAttr(held, held_invol) : NULL;
    *i_cpu = *invol_o ? PyObject_GetAttr(held, held_icpu) : NULL;
    *window_o = NULL;
    /* held.switch_window_ns or held.period_ns */
    w = *i_cpu ? PyObject_GetAttr(held, held_window) : NULL;
    if (w != NULL) {
        int true_ = PyObject_IsTrue(w);
        if (true_ < 0)
            Py_CLEAR(w);
        else if (!true_) {
            Py_DECREF(w);
            w = PyObject_GetAttr(held, held_period);
        }
    }
    Py_DECREF(held);
    if (w == NULL)
        goto fail;
    /* if window == period_ns: window = None */
    eq = PyObject_RichCompare(w, c->period_obj, Py_EQ);
    is_period = eq ? PyObject_IsTrue(eq) : -1;
    Py_XDECREF(eq);
    if (is_period < 0) {
        Py_DECREF(w);
        goto fail;
    }
    if (is_period) {
        Py_DECREF(w);
        w = Py_NewRef(Py_None);
    }
    *window_o = w;
    return DONE;
fail:
    Py_CLEAR(*vol_o);
    Py_CLEAR(*invol_o);
    Py_CLEAR(*i_cpu);
    Py_CLEAR(*window_o);
    return ERROR;
}

/*
 * One vCPU of monitor._derive's loop: *out is its VcpuStats (DONE), or
 * TODO (Python computes it), or ERROR.
 */
static int
derive_one(const call_t *c, PyObject *ref, PyObject *before, PyObject *now,
           PyObject **out)
{
    PyObject **b, **n, *cpu, *core, *values[N_STATS];
    PyObject *vol_o, *invol_o, *i_cpu, *window_o;
    delta_t d[12];
    delta_t run, ret_ns, rets, timeouts, ins, cycles, base, miss, vol,
            invol, delay, halts;
    int i, rc;

    /* both unpack as Python unpacks a tuple of 15 */
    if (!PyTuple_Check(before) || !PyTuple_Check(now)
            || Py_TYPE(before)->tp_iter != PyTuple_Type.tp_iter
            || Py_TYPE(now)->tp_iter != PyTuple_Type.tp_iter
            || PyTuple_GET_SIZE(before) != N_FIELDS
            || PyTuple_GET_SIZE(now) != N_FIELDS)
        return TODO;
    b = &PyTuple_GET_ITEM(before, 0);
    n = &PyTuple_GET_ITEM(now, 0);
    /* fields 2 to 13: run_ns ... halts */
    for (i = 0; i < 12; i++)
        if (delta(b[i + 2], n[i + 2], &d[i]))
            return TODO;
    run = d[0]; ret_ns = d[1]; rets = d[2]; timeouts = d[3]; ins = d[4];
    cycles = d[5]; base = d[6]; miss = d[7]; vol = d[8]; invol = d[9];
    delay = d[10]; halts = d[11];
    cpu = n[1];
    if (c->core_ids != Py_None && cpu != Py_None && !PyLong_CheckExact(cpu))
        return TODO;
    if (b[14] == Py_None && n[14] == Py_None) {  /* both at their snapshot */
        i_cpu = i_cpu_of(vol, invol, c->period_s, c->threshold);
        vol_o = int_or_none(vol);
        invol_o = int_or_none(invol);
        window_o = Py_NewRef(Py_None);
    } else {
        rc = switch_window(c, ref, b[14], n[14], vol, invol, &vol_o,
                           &invol_o, &i_cpu, &window_o);
        if (rc != DONE)
            return rc;
    }
    /* core_id_of(cpu): an int's look-up runs no Python code */
    core = Py_None;
    if (c->core_ids != Py_None && cpu != Py_None) {
        core = PyDict_GetItemWithError(c->core_ids, cpu);
        if (core == NULL) {
            if (PyErr_Occurred()) {
                Py_XDECREF(vol_o);
                Py_XDECREF(invol_o);
                Py_XDECREF(i_cpu);
                Py_XDECREF(window_o);
                return ERROR;
            }
            core = Py_None;
        }
    }
    values[0] = Py_NewRef(c->period_obj);
    values[1] = Py_NewRef(n[0]);        /* weight */
    values[2] = Py_NewRef(core);
    values[3] = ratio_ii(run, c->period_ns);
    values[4] = ratio_ii(ret_ns, c->period_ns);
    values[5] = ratio_if(rets, c->period_s);
    values[6] = int_or_none(timeouts);
    if (ins.has && cycles.has && cycles.v > 0)     /* _ratio */
        values[7] = new_float((double)ins.v / (double)cycles.v);
    else
        values[7] = Py_NewRef(Py_None);
    if (ins.has)
        values[8] = cpi_stack(c->cpi_cls, ins, cycles, base, miss);
    else
        values[8] = Py_NewRef(Py_None);
    values[9] = vol_o;
    values[10] = invol_o;
    values[11] = i_cpu;
    values[12] = ratio_ii(delay, c->period_ns);
    values[13] = ratio_if(ins, c->period_s);
    values[14] = ratio_if(halts, c->period_s);
    values[15] = window_o;
    *out = build(c->stats_cls, stats_keys, values, N_STATS);
    return *out ? DONE : ERROR;
}

static PyObject *
derive(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    call_t c;
    PyObject *cur_vcpus, *threshold, *stats, *todo = NULL, *ref, *now,
             *before, *st;
    long long t;
    Py_ssize_t pos = 0, prev_pos = 0;
    Py_hash_t hash = -1, prev_hash = -1;
    PyObject *prev_ref;
    int rc;

    (void)self;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "derive() takes 11 arguments");
        return NULL;
    }
    c.prev_vcpus = args[0];
    cur_vcpus = args[1];
    c.period_obj = args[4];
    threshold = args[6];
    c.core_ids = args[7];
    c.last = args[8];
    c.stats_cls = args[9];
    c.cpi_cls = args[10];
    /* what only Python can do with exactly Python's results */
    if (!PyDict_CheckExact(c.prev_vcpus) || !PyDict_CheckExact(cur_vcpus)
            || !int64_of(args[2], &c.prev_ns)
            || !int64_of(args[3], &c.cur_ns)
            || !int64_of(c.period_obj, &c.period_ns)
            || c.period_ns <= 0 || c.period_ns > EXACT
            || !PyFloat_CheckExact(args[5])
            || (c.core_ids != Py_None && !PyDict_CheckExact(c.core_ids))
            || !PyType_Check(c.stats_cls) || !PyType_Check(c.cpi_cls))
        Py_RETURN_NOTIMPLEMENTED;
    c.period_s = PyFloat_AS_DOUBLE(args[5]);
    if (PyFloat_CheckExact(threshold))
        c.threshold = PyFloat_AS_DOUBLE(threshold);
    else if (int64_of(threshold, &t) && t <= EXACT && t >= -EXACT)
        c.threshold = (double)t;
    else
        Py_RETURN_NOTIMPLEMENTED;

    /* last.get, once, as Python takes it (the agent's records hold their
     * stats in a read-only mappingproxy) */
    c.last_get = NULL;
    if (c.last != Py_None && !PyDict_CheckExact(c.last)) {
        c.last_get = PyObject_GetAttr(c.last, get_name);
        if (c.last_get == NULL)
            return NULL;
    }
    stats = NEW_DICT(PyDict_GET_SIZE(cur_vcpus));
    if (stats == NULL) {
        Py_XDECREF(c.last_get);
        return NULL;
    }
    /* Each ref is hashed once: cur_vcpus gives its hash, with which it
     * is looked up and stored (in the stats dict, sized once, in
     * cur_vcpus' order). The snapshot before is walked alongside: where
     * it holds the same domains as this one, in the same order, with the
     * same ref objects (the driver keeps them), its next entry is this
     * ref's and no look-up is made. */
    while (NEXT(cur_vcpus, &pos, &ref, &now, &hash)) {
        if (NEXT(c.prev_vcpus, &prev_pos, &prev_ref, &before, &prev_hash)
                && prev_ref == ref)
            ;
        else
            before = GET(c.prev_vcpus, ref, hash);
        if (before == NULL) {
            if (PyErr_Occurred())
                goto error;
            continue;
        }
        if (before == Py_None)
            continue;
        /* held while Python code (a held VcpuStats' attributes) runs */
        Py_INCREF(ref);
        Py_INCREF(now);
        Py_INCREF(before);
        st = NULL;
        rc = derive_one(&c, ref, before, now, &st);
        if (rc == TODO) {
            if (todo == NULL && (todo = PyList_New(0)) == NULL)
                rc = ERROR;
            else if (PyList_Append(todo, ref) < 0)
                rc = ERROR;
            else
                st = Py_NewRef(Py_None);    /* keeps the ref's place */
        }
        if (rc != ERROR && SET(stats, ref, st, hash) < 0)
            rc = ERROR;
        Py_XDECREF(st);
        Py_DECREF(before);
        Py_DECREF(now);
        Py_DECREF(ref);
        if (rc == ERROR)
            goto error;
    }
    if (todo == NULL)
        todo = Py_NewRef(Py_None);
    if ((st = PyTuple_New(2)) == NULL)
        goto error;
    PyTuple_SET_ITEM(st, 0, stats);
    PyTuple_SET_ITEM(st, 1, todo);
    Py_XDECREF(c.last_get);
    return st;
error:
    Py_DECREF(stats);
    Py_XDECREF(todo);
    Py_XDECREF(c.last_get);
    return NULL;
}

static PyMethodDef methods[] = {
    {"derive", (PyCFunction)(void (*)(void))derive, METH_FASTCALL,
     "Per-vCPU VcpuStats between two snapshots' counters (see the module "
     "comment of _monitor.c; monitor.derive is the interface)."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_monitor",
    "The Workload Monitor's per-vCPU loop in C (monitor._derive's).",
    -1, methods, NULL, NULL, NULL, NULL
};

static PyObject *
intern(const char *s)
{
    return PyUnicode_InternFromString(s);
}

PyMODINIT_FUNC
PyInit__monitor(void)
{
    int i;

    for (i = 0; i < N_STATS; i++)
        if ((stats_keys[i] = intern(STATS_NAMES[i])) == NULL)
            return NULL;
    for (i = 0; i < N_CPI; i++)
        if ((cpi_keys[i] = intern(CPI_NAMES[i])) == NULL)
            return NULL;
    held_vol = intern("voluntary_switches");
    held_invol = intern("involuntary_switches");
    held_icpu = intern("i_cpu");
    held_window = intern("switch_window_ns");
    held_period = intern("period_ns");
    get_name = intern("get");
    empty_tuple = PyTuple_New(0);
    zero = PyFloat_FromDouble(0.0);
    if (!zero || !held_vol || !held_invol || !held_icpu || !held_window
            || !held_period || !get_name || !empty_tuple)
        return NULL;
    return PyModule_Create(&module);
}
