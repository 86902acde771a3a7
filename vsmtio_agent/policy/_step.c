/*
 * The policy step's per-vCPU loops in C: vsmtio_agent.policy.engine's
 * step over 200 vCPUs spent 205 of its 221 us (warm) in four loops of
 * Python over every vCPU (doc/benchmarks/agent_tick.rst): following the
 * host's scheduler off the split, grouping by core, RASS's classification
 * of each core and the placements. These are those loops without the
 * interpreter (the step: 113 us).
 *
 * The Python is the reference: engine._follow_host, engine._group,
 * rass.classify and engine._place. Each function here computes exactly
 * what its reference computes, or declines:
 *   - follow_host, group and place only look up and store, as the
 *     Python does, in the same order (so the dicts they return have the
 *     same keys in the same order);
 *   - classify computes with the same double operations in the same order
 *     as rass.classify's, and declines (NotImplemented) where its
 *     arguments are not what it can compute exactly: a rate or use that is
 *     not a float or None, a weight that is not an int below 2**53 (so
 *     every share's int product and total are exact doubles, whose quotient
 *     is Python's correctly rounded int division), a candidate rate that
 *     is NaN (rass.classify then ranks every vCPU), ``held`` that is not a
 *     dict. The engine then calls rass.classify.
 * A function that raises leaves the engine to run the Python, whose
 * answer (or error) is the reference's.
 *
 * follow_host(assignment, stats, split, cores) -> {ref: core}
 * group(assignment, stats) -> {core: {ref: stats}}
 * classify(stats, min_retention_rate, threads, held, io, cpu)
 *     -> {ref: role} or NotImplemented
 * place(order, assignment, roles, table) -> {ref: placement}
 *     table: {core: {role: placement}}
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_dicts.h"     /* NEXT, GET, SET, NEW_DICT: by known hash */

#define EXACT (1LL << 53)   /* every int up to this is a double exactly */
#define MAX_THREADS (1 << 20)   /* a core's hyperthreads, far beyond any */

static PyObject *s_core_id, *s_retention_rate, *s_weight, *s_utilisation;

/* dict[key] as a new reference (key's hash ``hash``); KeyError as
 * ``dict[key]`` raises it */
static PyObject *
item_of(PyObject *dict, PyObject *key, Py_hash_t hash)
{
    PyObject *found = GET(dict, key, hash);

    if (found == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    Py_INCREF(found);
    return found;
}

/*
 * ``each(out, ref, core, hash, ctx)`` for each vCPU of ``assignment``
 * ({ref: core}), in its order, holding both: ``out`` (a new reference,
 * NULL: an error already raised), or NULL where ``each`` fails (< 0).
 */
static PyObject *
each_vcpu(PyObject *assignment, PyObject *out,
          int (*each)(PyObject *, PyObject *, PyObject *, Py_hash_t, void *),
          void *ctx)
{
    PyObject *ref, *core;
    Py_ssize_t pos = 0;
    Py_hash_t hash = -1;
    int rc;

    if (out == NULL)
        return NULL;
    while (NEXT(assignment, &pos, &ref, &core, &hash)) {
        Py_INCREF(ref);
        Py_INCREF(core);
        rc = each(out, ref, core, hash, ctx);
        Py_DECREF(ref);
        Py_DECREF(core);
        if (rc < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

struct follow {
    PyObject *stats, *split, *cores;
};

/* out[ref] = ``core if core in split or (now := stats[ref].core_id) not
 * in cores else now`` */
static int
follow_one(PyObject *out, PyObject *ref, PyObject *core, Py_hash_t hash,
           void *ctx)
{
    struct follow *f = ctx;
    PyObject *st, *now;
    int in, rc;

    in = PySet_Contains(f->split, core);
    if (in != 0)
        return in < 0 ? -1 : SET(out, ref, core, hash);
    st = item_of(f->stats, ref, hash);
    now = st == NULL ? NULL : PyObject_GetAttr(st, s_core_id);
    Py_XDECREF(st);
    if (now == NULL)
        return -1;
    in = PySet_Contains(f->cores, now);
    rc = in < 0 ? -1 : SET(out, ref, in ? now : core, hash);
    Py_DECREF(now);
    return rc;
}

/*
 * engine._follow_host: each vCPU off the split cores on the core the host
 * put it on (its stats' core_id, where that is in ``cores``).
 */
static PyObject *
follow_host(PyObject *self, PyObject *args)
{
    PyObject *assignment;
    struct follow f;

    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO", &assignment, &f.stats, &f.split,
                          &f.cores))
        return NULL;
    if (!PyDict_CheckExact(assignment) || !PyDict_CheckExact(f.stats)
            || !PyAnySet_Check(f.split) || !PyAnySet_Check(f.cores))
        Py_RETURN_NOTIMPLEMENTED;
    return each_vcpu(assignment, NEW_DICT(PyDict_GET_SIZE(assignment)),
                     follow_one, &f);
}

/* out[core][ref] = stats[ref], out[core] a new dict the first time */
static int
group_one(PyObject *out, PyObject *ref, PyObject *core, Py_hash_t hash,
          void *stats)
{
    PyObject *members, *st;
    int rc = -1;

    members = PyDict_GetItemWithError(out, core);
    if (members != NULL) {
        Py_INCREF(members);
    } else if (!PyErr_Occurred()) {
        members = PyDict_New();
        if (members != NULL && PyDict_SetItem(out, core, members) < 0)
            Py_CLEAR(members);
    }
    if (members == NULL)
        return -1;
    st = item_of(stats, ref, hash);
    if (st != NULL) {
        rc = SET(members, ref, st, hash);
        Py_DECREF(st);
    }
    Py_DECREF(members);
    return rc;
}

/* engine._group: {core: {ref: stats[ref]}} in assignment's order. */
static PyObject *
group(PyObject *self, PyObject *args)
{
    PyObject *assignment, *stats;

    (void)self;
    if (!PyArg_ParseTuple(args, "OO", &assignment, &stats))
        return NULL;
    if (!PyDict_CheckExact(assignment) || !PyDict_CheckExact(stats))
        Py_RETURN_NOTIMPLEMENTED;
    return each_vcpu(assignment, PyDict_New(), group_one, stats);
}

/* One vCPU of a core as classify reads it. */
struct vcpu {
    PyObject *ref;          /* a new reference */
    Py_hash_t hash;         /* its hash */
    double rate;            /* retention_rate (has_rate) */
    double used;            /* utilisation (has_used) */
    long long weight;
    int has_rate, has_used, over;
};

/*
 * A float or None into ``*value`` and ``*has``: 1, or 0 where it is
 * neither (classify declines), -1 on an error.
 */
static int
float_or_none(PyObject *st, PyObject *name, double *value, int *has)
{
    PyObject *v = PyObject_GetAttr(st, name);
    int ok = 1;

    if (v == NULL)
        return -1;
    if (v == Py_None)
        *has = 0;
    else if (PyFloat_CheckExact(v)) {
        *has = 1;
        *value = PyFloat_AS_DOUBLE(v);
    } else
        ok = 0;
    Py_DECREF(v);
    return ok;
}

/*
 * Each vCPU of ``stats``, into ``vcpus`` (room for ``room``): 1, 0 where
 * classify declines (a dict that grew while read among them), -1 on an
 * error.
 */
static int
read_vcpus(PyObject *stats, struct vcpu *vcpus, Py_ssize_t room,
           Py_ssize_t *n, long long *total)
{
    PyObject *ref, *st, *w;
    Py_ssize_t pos = 0;
    Py_hash_t hash = -1;
    int overflow, ok;

    *total = 0;
    while (NEXT(stats, &pos, &ref, &st, &hash)) {
        struct vcpu *v = &vcpus[*n];

        if (*n >= room)
            return 0;
        Py_INCREF(st);
        ok = float_or_none(st, s_retention_rate, &v->rate, &v->has_rate);
        if (ok == 1)
            ok = float_or_none(st, s_utilisation, &v->used, &v->has_used);
        if (ok == 1) {
            w = PyObject_GetAttr(st, s_weight);
            if (w == NULL)
                ok = -1;
            else {
                /* an int (not a bool) below 2**53, as is the total */
                if (!PyLong_CheckExact(w))
                    ok = 0;
                else {
                    v->weight = PyLong_AsLongLongAndOverflow(w, &overflow);
                    if (v->weight == -1 && PyErr_Occurred())
                        ok = -1;
                    else if (overflow || v->weight < 0
                             || v->weight >= EXACT - *total)
                        ok = 0;
                    else
                        *total += v->weight;
                }
                Py_DECREF(w);
            }
        }
        Py_DECREF(st);
        if (ok != 1)
            return ok;
        Py_INCREF(ref);
        v->ref = ref;
        v->hash = hash;
        (*n)++;
    }
    return 1;
}

/*
 * rass._over: whether each vCPU computed beyond its fair share of the
 * core's ``threads`` hyperthreads (none without threads or weight):
 * ``max(0.0, used - (rate or 0.0)) > threads * weight / total``. 1, or 0
 * where a share's product is past 2**53 (classify declines).
 */
static int
mark_over(struct vcpu *vcpus, Py_ssize_t n, long long threads,
          long long total)
{
    Py_ssize_t i;
    double d;

    for (i = 0; i < n; i++) {
        struct vcpu *v = &vcpus[i];

        v->over = 0;
        if (!threads || !total || !v->has_used)
            continue;
        if (v->weight > EXACT / threads)
            return 0;
        /* ``rate or 0.0``: None and zeros are 0.0 (NaN is true) */
        d = v->used - (v->has_rate && v->rate != 0.0 ? v->rate : 0.0);
        v->over = (d > 0.0 ? d : 0.0)
            > (double)(threads * v->weight) / (double)total;
    }
    return 1;
}

/* ``held``'s roles (``cpu`` for a new vCPU), ``cpu`` where over. */
static PyObject *
held_roles(struct vcpu *vcpus, Py_ssize_t n, PyObject *held, PyObject *cpu)
{
    PyObject *out = NEW_DICT(n), *role;
    Py_ssize_t i;

    if (out == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        role = cpu;
        if (!vcpus[i].over) {
            role = GET(held, vcpus[i].ref, vcpus[i].hash);
            if (role == NULL) {
                if (PyErr_Occurred())
                    goto error;
                role = cpu;
            }
        }
        if (SET(out, vcpus[i].ref, role, vcpus[i].hash) < 0)
            goto error;
    }
    return out;
error:
    Py_DECREF(out);
    return NULL;
}

/*
 * The I/O class, the prefix of the ranked candidates (by rate descending,
 * then ref: the same tuples rass.classify sorts, sorted by the same list
 * sort) whose weight is closest to half the core's; the rest CPU-bound.
 * NotImplemented where a candidate's rate is NaN.
 */
static PyObject *
ranked_roles(struct vcpu *vcpus, Py_ssize_t n, double min_rate,
             long long total, PyObject *io, PyObject *cpu)
{
    PyObject *candidates, *item, *out = NULL;
    Py_ssize_t i, k, best_k = 0;
    long long prefix = 0, gap, best_gap = total;

    candidates = PyList_New(0);
    if (candidates == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        struct vcpu *v = &vcpus[i];

        if (v->over || !v->has_rate
                || v->rate < min_rate || v->rate <= 0.0)
            continue;
        if (v->rate != v->rate) {
            Py_DECREF(candidates);
            Py_RETURN_NOTIMPLEMENTED;
        }
        item = Py_BuildValue("(dOL)", -v->rate, v->ref, v->weight);
        if (item == NULL || PyList_Append(candidates, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
    }
    if (PyList_Sort(candidates) < 0)
        goto done;
    for (k = 1; k <= PyList_GET_SIZE(candidates); k++) {
        prefix += PyLong_AsLongLong(
            PyTuple_GET_ITEM(PyList_GET_ITEM(candidates, k - 1), 2));
        gap = total - 2 * prefix;
        if (gap < 0)
            gap = -gap;
        if (gap < best_gap) {
            best_k = k;
            best_gap = gap;
        }
    }
    out = NEW_DICT(n);
    if (out == NULL)
        goto done;
    for (i = 0; i < n; i++)
        if (SET(out, vcpus[i].ref, cpu, vcpus[i].hash) < 0)
            goto error;
    for (k = 0; k < best_k; k++) {
        item = PyList_GET_ITEM(candidates, k);
        if (PyDict_SetItem(out, PyTuple_GET_ITEM(item, 1), io) < 0)
            goto error;
    }
    goto done;
error:
    Py_CLEAR(out);
done:
    Py_DECREF(candidates);
    return out;
}

/* rass.classify(stats, min_retention_rate, threads, held) of one core. */
static PyObject *
classify(PyObject *self, PyObject *args)
{
    PyObject *stats, *min_obj, *threads_obj, *held, *io, *cpu;
    PyObject *out = NULL;
    struct vcpu *vcpus;
    Py_ssize_t room, n = 0, i;
    long long threads = 0, total;
    double min_rate;
    int ok, overflow, retained = 0;

    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOO", &stats, &min_obj, &threads_obj,
                          &held, &io, &cpu))
        return NULL;
    if (!PyDict_CheckExact(stats) || !PyFloat_CheckExact(min_obj)
            || (held != Py_None && !PyDict_CheckExact(held)))
        Py_RETURN_NOTIMPLEMENTED;
    min_rate = PyFloat_AS_DOUBLE(min_obj);
    if (threads_obj != Py_None) {
        if (!PyLong_CheckExact(threads_obj))
            Py_RETURN_NOTIMPLEMENTED;
        threads = PyLong_AsLongLongAndOverflow(threads_obj, &overflow);
        if (threads == -1 && PyErr_Occurred())
            return NULL;
        if (overflow || threads < 0 || threads > MAX_THREADS)
            Py_RETURN_NOTIMPLEMENTED;
    }
    room = PyDict_GET_SIZE(stats);
    vcpus = PyMem_Calloc(room + 1, sizeof(*vcpus));
    if (vcpus == NULL)
        return PyErr_NoMemory();
    ok = read_vcpus(stats, vcpus, room, &n, &total);
    if (ok == 1)
        ok = mark_over(vcpus, n, threads, total);
    if (ok == 1) {
        for (i = 0; i < n; i++)     /* any(rates): NaN is true */
            if (vcpus[i].has_rate && vcpus[i].rate != 0.0)
                retained = 1;
        if (held != Py_None && !retained)
            out = held_roles(vcpus, n, held, cpu);
        else
            out = ranked_roles(vcpus, n, min_rate, total, io, cpu);
    } else if (ok == 0) {
        out = Py_NewRef(Py_NotImplemented);
    }
    for (i = 0; i < n; i++)
        Py_DECREF(vcpus[i].ref);
    PyMem_Free(vcpus);
    return out;
}

/* engine._place: {ref: table[assignment[ref]][roles[ref]]} in order. */
static PyObject *
place(PyObject *self, PyObject *args)
{
    PyObject *order, *assignment, *roles, *table, *out, *it, *ref;
    PyObject *core, *role, *placements, *found;
    Py_hash_t hash;
    int rc;

    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO", &order, &assignment, &roles,
                          &table))
        return NULL;
    if (!PyDict_CheckExact(assignment) || !PyDict_CheckExact(roles)
            || !PyDict_CheckExact(table))
        Py_RETURN_NOTIMPLEMENTED;
    it = PyObject_GetIter(order);
    if (it == NULL)
        return NULL;
    out = NEW_DICT(PyDict_GET_SIZE(roles));
    while (out != NULL && (ref = PyIter_Next(it)) != NULL) {
        rc = -1;
        hash = PyObject_Hash(ref);
        core = hash == -1 ? NULL : item_of(assignment, ref, hash);
        role = core == NULL ? NULL : item_of(roles, ref, hash);
        placements = role == NULL ? NULL : PyObject_GetItem(table, core);
        found = placements == NULL ? NULL : PyObject_GetItem(placements,
                                                             role);
        if (found != NULL) {
            rc = SET(out, ref, found, hash);
            Py_DECREF(found);
        }
        Py_XDECREF(placements);
        Py_XDECREF(role);
        Py_XDECREF(core);
        Py_DECREF(ref);
        if (rc < 0)
            Py_CLEAR(out);
    }
    Py_DECREF(it);
    if (out != NULL && PyErr_Occurred())
        Py_CLEAR(out);
    return out;
}

static PyMethodDef methods[] = {
    {"follow_host", follow_host, METH_VARARGS,
     "engine._follow_host's loop: {ref: core}."},
    {"group", group, METH_VARARGS,
     "engine._group's loop: {core: {ref: stats}}."},
    {"classify", classify, METH_VARARGS,
     "rass.classify of one core: {ref: role}, or NotImplemented."},
    {"place", place, METH_VARARGS,
     "engine._place's loop: {ref: placement}."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_step",
    "The policy step's per-vCPU loops in C (vsmtio_agent.policy.engine).",
    -1, methods, NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC
PyInit__step(void)
{
    s_core_id = PyUnicode_InternFromString("core_id");
    s_retention_rate = PyUnicode_InternFromString("retention_rate");
    s_weight = PyUnicode_InternFromString("weight");
    s_utilisation = PyUnicode_InternFromString("utilisation");
    if (!s_core_id || !s_retention_rate || !s_weight || !s_utilisation)
        return NULL;
    return PyModule_Create(&module);
}
