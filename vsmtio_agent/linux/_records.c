/*
 * Decoding the BPF iterators' records (_records.h says what they are).
 *
 * A thread's record becomes a tuple in a caller's shape (struct shape:
 * procfs.ThreadCounters, or a vCPU's counters with the thread's at their
 * places: taskiter.Shape). A KVM vCPU's record becomes the sampler's
 * model.VcpuCounters directly (decode_vcpus): KVM's statistics through the
 * retention rule of sampling._retention, and its thread's counters; the
 * Python path (kvmstats._decode, then sampling._with_kvm) is the reference
 * and the fallback, and test_kvmstats_decode holds them equal.
 */
#include "_records.h"

#include <stdlib.h>
#include <string.h>

PyObject *
new_counters(const struct shape *shape, const struct record *r)
{
    Py_ssize_t size = shape->template
        ? PyTuple_GET_SIZE(shape->template) : 6;
    PyObject *out = shape->type->tp_alloc(shape->type, size);
    PyObject *v[5];
    Py_ssize_t i;

    if (out == NULL)
        return NULL;
    v[0] = PyLong_FromUnsignedLongLong(r->thread.run_ns);
    if (r->flags & NO_DELAY) {
        Py_INCREF(Py_None);
        v[1] = Py_None;
    } else {
        v[1] = PyLong_FromUnsignedLongLong(r->thread.delay_ns);
    }
    v[2] = PyLong_FromUnsignedLongLong(r->thread.voluntary);
    v[3] = PyLong_FromUnsignedLongLong(r->thread.involuntary);
    v[4] = PyLong_FromUnsignedLong(r->thread.cpu);
    for (i = 0; i < 5; i++) {
        if (v[i] == NULL) {
            int j;

            for (j = 0; j < 5; j++)
                Py_XDECREF(v[j]);
            Py_DECREF(out);
            return NULL;
        }
    }
    for (i = 0; i < size; i++) {
        PyObject *item = shape->template
            ? PyTuple_GET_ITEM(shape->template, i) : Py_None;

        Py_INCREF(item);
        PyTuple_SET_ITEM(out, i, item);
    }
    for (i = 0; i < 5; i++) {
        Py_DECREF(PyTuple_GET_ITEM(out, shape->place[i]));
        PyTuple_SET_ITEM(out, shape->place[i], v[i]);
    }
    return out;
}

/* The shape read's arguments ask for; 0, or -1 with an exception. */
int
shape_of(struct shape *shape, PyObject *type, PyObject *template,
         PyObject *places)
{
    Py_ssize_t i;

    if (!PyType_Check(type)
            || !PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError,
                        "read needs a tuple type for the counters");
        return -1;
    }
    shape->type = (PyTypeObject *)type;
    shape->template = NULL;
    for (i = 0; i < 5; i++)
        shape->place[i] = i;
    if (template == NULL || template == Py_None)
        return 0;
    if (!PyTuple_Check(template) || !PyTuple_Check(places)
            || PyTuple_GET_SIZE(places) != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "read needs a template tuple and five places");
        return -1;
    }
    for (i = 0; i < 5; i++) {
        Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(places, i));

        if (at == -1 && PyErr_Occurred())
            return -1;
        if (at < 0 || at >= PyTuple_GET_SIZE(template)) {
            PyErr_Format(PyExc_ValueError,
                         "place %zd is outside the template", at);
            return -1;
        }
        shape->place[i] = at;
    }
    shape->template = template;
    return 0;
}

static int
by_tid(const void *a, const void *b)
{
    uint32_t x = ((const struct record *)a)->thread.tid;
    uint32_t y = ((const struct record *)b)->thread.tid;

    return (x > y) - (x < y);
}

PyObject *
threads_in(struct record *records, Py_ssize_t count, PyObject *seq,
           const struct shape *shape)
{
    PyObject *out;
    Py_ssize_t n, i;

    /* Threads come in list order, nearly always by increasing tid. */
    for (i = 1; i < count
            && records[i - 1].thread.tid < records[i].thread.tid; i++)
        ;
    if (i < count)
        qsort(records, (size_t)count, sizeof(struct record), by_tid);
    n = PySequence_Fast_GET_SIZE(seq);
    out = PyList_New(n);
    for (i = 0; out && i < n; i++) {
        struct record key, *found;
        PyObject *item;
        long tid = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));

        if (tid == -1 && PyErr_Occurred()) {
            Py_CLEAR(out);
            break;
        }
        key.thread.tid = (uint32_t)tid;
        found = tid > 0 && tid <= (long)UINT32_MAX && count
            ? bsearch(&key, records, (size_t)count, sizeof(struct record),
                      by_tid)
            : NULL;
        if (found == NULL) {
            Py_INCREF(Py_None);
            item = Py_None;
        } else {
            item = new_counters(shape, found);
            if (item == NULL) {
                Py_CLEAR(out);
                break;
            }
        }
        PyList_SET_ITEM(out, i, item);
    }
    return out;
}

/* model.VcpuCounters' fields, in their order (sampling.py asserts them) */
enum {
    C_WEIGHT, C_CPU, C_RUN_NS, C_RETENTION_NS, C_RETENTIONS,
    C_RETENTION_TIMEOUTS, C_INSTRUCTIONS, C_CYCLES, C_BASE_CYCLES,
    C_MISS_CYCLES, C_VOLUNTARY, C_INVOLUNTARY, C_DELAY_NS, C_HALTS,
    C_SWITCHES_NS, N_COUNTERS
};

/* More vCPUs than any KVM makes (KVM_MAX_VCPUS is at most 4096): an index
 * beyond is not a record of theirs. */
#define MAX_VCPU_INDEX 65536

/* sampling._with_kvm's weight, CFS's default (made at first use) */
static PyObject *weight;

static PyObject *
u64_or_none(int missing, uint64_t value)
{
    if (missing)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(value);
}

/*
 * sampling._with_kvm(thread, kvm, patched) of one record: the thread's
 * counters, KVM's halt exits, and the retention counters by
 * sampling._retention's rule: the patched kernel's own where ``patched``,
 * else halt polling (the time polled, successful and failed; the polls;
 * those that ended without a wake-up, attempted less successful), in
 * Python's integers as that rule computes them.
 */
static PyObject *
vcpu_counters(PyTypeObject *type, const struct kvm_record *r, int patched)
{
    PyObject *v[N_COUNTERS] = {NULL};
    PyObject *out = NULL;
    int i;

    /* one object for every vCPU's weight (an int past the small ones
     * Python shares): what a period makes is freed the period after */
    if (weight == NULL)
        weight = PyLong_FromLong(1024);
    v[C_WEIGHT] = Py_XNewRef(weight);
    v[C_CPU] = PyLong_FromUnsignedLong(r->thread.cpu);
    v[C_RUN_NS] = PyLong_FromUnsignedLongLong(r->thread.run_ns);
    if (patched) {
        v[C_RETENTION_NS] = u64_or_none(r->flags & KVM_NO_RETENTION_NS,
                                        r->retention_ns);
        v[C_RETENTIONS] = u64_or_none(r->flags & KVM_NO_RETENTIONS,
                                      r->retentions);
        v[C_RETENTION_TIMEOUTS] = u64_or_none(
            r->flags & KVM_NO_RETENTION_TIMEOUTS, r->retention_timeouts);
    } else {
        PyObject *ok = PyLong_FromUnsignedLongLong(r->poll_success_ns);
        PyObject *failed = PyLong_FromUnsignedLongLong(r->poll_fail_ns);
        PyObject *hits = PyLong_FromUnsignedLongLong(r->successful_polls);

        v[C_RETENTIONS] = PyLong_FromUnsignedLongLong(r->attempted_polls);
        if (ok && failed)
            v[C_RETENTION_NS] = PyNumber_Add(ok, failed);
        if (v[C_RETENTIONS] && hits)
            v[C_RETENTION_TIMEOUTS] = PyNumber_Subtract(v[C_RETENTIONS],
                                                        hits);
        Py_XDECREF(ok);
        Py_XDECREF(failed);
        Py_XDECREF(hits);
    }
    for (i = C_INSTRUCTIONS; i <= C_MISS_CYCLES; i++) {
        Py_INCREF(Py_None);         /* no perf counters */
        v[i] = Py_None;
    }
    v[C_VOLUNTARY] = PyLong_FromUnsignedLongLong(r->thread.voluntary);
    v[C_INVOLUNTARY] = PyLong_FromUnsignedLongLong(r->thread.involuntary);
    v[C_DELAY_NS] = u64_or_none(r->flags & KVM_NO_DELAY, r->thread.delay_ns);
    v[C_HALTS] = u64_or_none(r->flags & KVM_NO_HALT_EXITS, r->halt_exits);
    Py_INCREF(Py_None);             /* every counter read now */
    v[C_SWITCHES_NS] = Py_None;
    for (i = 0; i < N_COUNTERS; i++)
        if (v[i] == NULL)
            goto fail;
    out = type->tp_alloc(type, N_COUNTERS);
    if (out == NULL)
        goto fail;
    for (i = 0; i < N_COUNTERS; i++)
        PyTuple_SET_ITEM(out, i, v[i]);
    return out;
fail:
    for (i = 0; i < N_COUNTERS; i++)
        Py_XDECREF(v[i]);
    return NULL;
}

/* ``tid`` as an int: ``known[index]`` where that is the same one. */
static PyObject *
known_tid(PyObject *known, Py_ssize_t index, uint32_t tid)
{
    PyObject *k;
    int overflow;

    if (known != NULL && index < PyList_GET_SIZE(known)) {
        k = PyList_GET_ITEM(known, index);
        if (PyLong_CheckExact(k)
                && PyLong_AsLongLongAndOverflow(k, &overflow) == tid
                && !overflow)
            return Py_NewRef(k);
        if (PyErr_Occurred())
            return NULL;
    }
    return PyLong_FromUnsignedLong(tid);
}

/* list[index] = item (stolen), the list grown with None up to index. */
static int
put(PyObject *list, Py_ssize_t index, PyObject *item)
{
    while (PyList_GET_SIZE(list) <= index)
        if (PyList_Append(list, Py_None) < 0) {
            Py_DECREF(item);
            return -1;
        }
    return PyList_SetItem(list, index, item);
}

/*
 * vcpus(raw, counters, patched[, known]) -> (tids, vcpus)
 *
 * One iteration's KVM vCPU records (kvmstats.bpf.c's, ``raw`` as
 * Program.read_raw gives them), as lists by vCPU index up to the highest
 * read: the id of the thread that runs each vCPU, and its counters as a
 * ``counters`` (a tuple type with model.VcpuCounters' fields) that
 * sampling._with_kvm would build; None in both for a vCPU without a
 * record or whose record has no thread (it never ran, or is not seen).
 * ``known``, a list by vCPU index of the thread ids the caller found last
 * (the sampler's; anything else, None included, is no list), lends its
 * int where a record's tid is the same: the same list, without an int
 * made (and freed a period later) per vCPU.
 */
PyObject *
decode_vcpus(PyObject *module, PyObject *args)
{
    Py_buffer raw;
    PyObject *type, *known = NULL, *tids = NULL, *vcpus = NULL, *out = NULL;
    Py_ssize_t n, i;
    int patched;

    (void)module;
    if (!PyArg_ParseTuple(args, "y*Op|O:vcpus", &raw, &type, &patched,
                          &known))
        return NULL;
    if (known != NULL && !PyList_CheckExact(known))
        known = NULL;
    if (!PyType_Check(type)
            || !PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError,
                        "vcpus needs a tuple type for the counters");
        goto done;
    }
    if (raw.len % (Py_ssize_t)sizeof(struct kvm_record)) {
        PyErr_SetString(PyExc_ValueError, "a partial KVM vCPU record");
        goto done;
    }
    n = raw.len / (Py_ssize_t)sizeof(struct kvm_record);
    tids = PyList_New(0);
    vcpus = PyList_New(0);
    if (tids == NULL || vcpus == NULL)
        goto done;
    for (i = 0; i < n; i++) {
        struct kvm_record r;
        PyObject *tid, *counters;

        /* copied: a bytes object's data need not be aligned for it */
        memcpy(&r, (const char *)raw.buf + i * sizeof(r), sizeof(r));
        if (r.index >= MAX_VCPU_INDEX) {
            PyErr_Format(PyExc_ValueError,
                         "a KVM vCPU record of index %u", r.index);
            goto done;
        }
        if (r.flags & KVM_NO_THREAD) {
            Py_INCREF(Py_None);
            Py_INCREF(Py_None);
            tid = counters = Py_None;
        } else {
            tid = known_tid(known, r.index, r.thread.tid);
            if (tid == NULL)
                goto done;
            counters = vcpu_counters((PyTypeObject *)type, &r, patched);
            if (counters == NULL) {
                Py_DECREF(tid);
                goto done;
            }
        }
        if (put(tids, r.index, tid) < 0) {
            Py_DECREF(counters);
            goto done;
        }
        if (put(vcpus, r.index, counters) < 0)
            goto done;
    }
    out = PyTuple_Pack(2, tids, vcpus);
done:
    PyBuffer_Release(&raw);
    Py_XDECREF(tids);
    Py_XDECREF(vcpus);
    return out;
}
