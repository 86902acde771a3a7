/*
 * The agent's hot procfs reader in C: the counters of one vCPU thread from
 * its held schedstat, status and stat files, in one call.
 *
 * It does what vsmtio_agent.linux.procfs._read_thread does in Python, with
 * the same results (the unit tests compare both on this machine's real
 * threads and on malformed files): see that function for the contract.
 * The kernel's cost of generating the files is the same either way; what
 * C removes is the Python around them (decoding, splitting, searching and
 * int() of three files per vCPU per period), which was half of sampling.
 *
 * read_thread(fds, last, bad, due=True) -> (run_ns, delay_ns, pcount,
 *                                           voluntary, involuntary, cpu, bad)
 * read_threads([(fds, last, bad), ...], every=1, offset=0)
 *     -> [tuple or None, ...]
 *   the same for each thread of a domain in one call; None for a thread
 *   that exited; item i is due when (offset + i) % every == 0
 * read_held(helds, every, offset, now_ns, counters) -> (list, reports)
 *   read_threads on ThreadReader's held threads, updating each as
 *   ThreadReader.read_many does (see read_held below)
 *   fds   (schedstat_fd, status_fd, stat_fd); -1 where the caller could
 *         not open the file (its counters are None; without schedstat
 *         there is no gate: status and stat are always read)
 *   last  the tuple this returned for the same thread last time, or None
 *   bad   bits: BAD_* (malformed) and DENIED_* (EACCES/EPERM) per file;
 *         the argument is what the caller found opening the files
 * A counter that cannot be had is None. Any other read error raises
 * OSError (ProcessLookupError for an exited thread). If the thread was
 * not switched in or out since ``last`` (same run time and run count in
 * schedstat), status and stat are not read and ``last`` itself is
 * returned.
 *   due   whether status and stat are read this time if the thread was
 *         switched: when not, their values are carried from ``last`` and
 *         the STALE bit (64) says so; a STALE ``last`` does not gate a due
 *         reading (its values are older than its schedstat)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define BUF 4096
#define BAD_SCHEDSTAT 1
#define BAD_STATUS 2
#define BAD_STAT 4
#define DENIED_SCHEDSTAT 8
#define DENIED_STATUS 16
#define DENIED_STAT 32
#define STALE 64            /* status and stat values carried, not read */
#define STAT_CPU_FIELD 36   /* "processor", counted after the comm's ')' */

/* pread at offset 0: 0 and the length, 1 if denied, -1 with errno set. */
static int
read_file(int fd, char *buf, Py_ssize_t *len)
{
    ssize_t n;

    Py_BEGIN_ALLOW_THREADS
    n = pread(fd, buf, BUF, 0);
    Py_END_ALLOW_THREADS
    if (n < 0)
        return (errno == EACCES || errno == EPERM) ? 1 : -1;
    *len = n;
    return 0;
}

/* Digits [s, e) as a Python int; NULL (no error set) if not all digits. */
static PyObject *
digits(const char *s, const char *e)
{
    unsigned long long v = 0;
    const char *p;
    char *tmp;
    PyObject *out;

    if (s >= e)
        return NULL;
    for (p = s; p < e; p++)
        if (*p < '0' || *p > '9')
            return NULL;
    if (e - s <= 18) {
        for (p = s; p < e; p++)
            v = v * 10 + (unsigned long long)(*p - '0');
        return PyLong_FromUnsignedLongLong(v);
    }
    tmp = PyMem_Malloc(e - s + 1);      /* as long as Python's int() */
    if (tmp == NULL)
        return PyErr_NoMemory();
    memcpy(tmp, s, e - s);
    tmp[e - s] = '\0';
    out = PyLong_FromString(tmp, NULL, 10);
    PyMem_Free(tmp);
    return out;
}

/* What str.split() splits ASCII text on. */
static int
is_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/* "run_ns wait_ns timeslices": out[0..2]; 0 ok (pcount may be NULL). */
static int
parse_schedstat(const char *s, Py_ssize_t len, PyObject **out)
{
    const char *p = s, *e = s + len, *start;
    int i;

    for (i = 0; i < 3; i++) {
        while (p < e && is_space(*p))
            p++;
        start = p;
        while (p < e && !is_space(*p))
            p++;
        out[i] = digits(start, p);
        if (out[i] == NULL) {
            if (PyErr_Occurred() || i < 2)
                return -1;
            return 0;   /* no run count: no gate, the times stand */
        }
    }
    return 0;
}

/* The value of the last line "key" (at the start or after a newline). */
static PyObject *
switch_count(const char *s, Py_ssize_t len, const char *key)
{
    size_t klen = strlen(key);
    const char *p, *end, *e = s + len;

    if ((size_t)len < klen)
        return NULL;
    for (p = e - klen; p >= s; p--) {
        if (memcmp(p, key, klen) == 0 && (p == s || p[-1] == '\n'))
            break;
    }
    if (p < s)
        return NULL;
    p += klen;
    end = memchr(p, '\n', e - p);
    if (end == NULL)
        end = e;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    return digits(p, end);
}

/* The processor field of stat: out or NULL (malformed). */
static PyObject *
parse_stat_cpu(const char *s, Py_ssize_t len)
{
    const char *p = NULL, *e = s + len, *start;
    Py_ssize_t i;
    int field = 0;

    for (i = len - 1; i >= 0; i--) {
        if (s[i] == ')') {
            p = s + i + 1;
            break;
        }
    }
    if (p == NULL)
        return NULL;
    for (;;) {
        while (p < e && is_space(*p))
            p++;
        if (p >= e)
            return NULL;
        start = p;
        while (p < e && !is_space(*p))
            p++;
        if (field++ == STAT_CPU_FIELD)
            break;
    }
    if (*start == '-') {
        PyObject *v = digits(start + 1, p), *neg;
        if (v == NULL)
            return NULL;
        neg = PyNumber_Negative(v);
        Py_DECREF(v);
        return neg;
    }
    return digits(start, p);
}

/* 1 if last[i] == v for a Python int or None, else 0; -1 on error. */
static int
same(PyObject *last, Py_ssize_t i, PyObject *v)
{
    PyObject *old = PyTuple_GET_ITEM(last, i);
    if (v == NULL || old == Py_None)
        return 0;
    return PyObject_RichCompareBool(old, v, Py_EQ);
}

/* One thread's reading (a new reference), or NULL with an error set. */
static PyObject *
read_one(const int *fds, PyObject *last, long bad, int due)
{
    PyObject *v[7] = {NULL}, *result = NULL;
    char buf[BUF];
    Py_ssize_t len;
    long before = 0;
    int rc, i;

    if (last != Py_None && (!PyTuple_Check(last) || PyTuple_GET_SIZE(last)
                            != 7)) {
        PyErr_SetString(PyExc_TypeError, "last must be None or a 7-tuple");
        return NULL;
    }
    if (fds[0] >= 0) {
        rc = read_file(fds[0], buf, &len);
        if (rc < 0)
            goto oserror;
        if (rc > 0)
            bad |= DENIED_SCHEDSTAT;
        else if (parse_schedstat(buf, len, v) < 0) {
            if (PyErr_Occurred())
                goto done;
            Py_CLEAR(v[0]);
            Py_CLEAR(v[1]);
            bad |= BAD_SCHEDSTAT;
        }
    }
    if (last != Py_None) {
        before = PyLong_AsLong(PyTuple_GET_ITEM(last, 6));
        if (before == -1 && PyErr_Occurred())
            goto done;
    }
    /* The gate holds only for a last reading of status and stat that is
     * exact (not STALE), or when they are not due anyway. */
    if (last != Py_None && v[2] != NULL && (!due || !(before & STALE))) {
        int a = same(last, 0, v[0]), b = same(last, 2, v[2]);
        if (a < 0 || b < 0)
            goto done;
        if (a && b) {
            /* Not switched in or out since: status and stat hold. */
            int c = same(last, 1, v[1]);
            if (c < 0)
                goto done;
            if (c) {
                Py_INCREF(last);
                result = last;
                goto done;
            }
            goto carry;
        }
    }
    if (!due && last != Py_None) {
        /* Switched since, but not its turn: carry, marked STALE. */
        bad |= STALE;
        goto carry;
    }
    rc = fds[1] < 0 ? 2 : read_file(fds[1], buf, &len);
    if (rc < 0)
        goto oserror;
    if (rc == 1)
        bad |= DENIED_STATUS;
    else if (rc == 0) {
        v[3] = switch_count(buf, len, "voluntary_ctxt_switches:");
        if (v[3] != NULL)
            v[4] = switch_count(buf, len, "nonvoluntary_ctxt_switches:");
        if (v[4] == NULL) {
            if (PyErr_Occurred())
                goto done;
            Py_CLEAR(v[3]);
            bad |= BAD_STATUS;
        }
    }
    rc = fds[2] < 0 ? 2 : read_file(fds[2], buf, &len);
    if (rc < 0)
        goto oserror;
    if (rc == 1)
        bad |= DENIED_STAT;
    else if (rc == 0) {
        v[5] = parse_stat_cpu(buf, len);
        if (v[5] == NULL) {
            if (PyErr_Occurred())
                goto done;
            bad |= BAD_STAT;
        }
    }
    goto build;
carry:
    for (i = 3; i < 6; i++) {
        v[i] = PyTuple_GET_ITEM(last, i);
        Py_INCREF(v[i]);
    }
    bad |= before & ~(BAD_SCHEDSTAT | DENIED_SCHEDSTAT);
build:
    v[6] = PyLong_FromLong(bad);
    if (v[6] == NULL)
        goto done;
    result = PyTuple_New(7);
    if (result == NULL)
        goto done;
    for (i = 0; i < 7; i++) {
        if (v[i] == NULL) {
            v[i] = Py_None;
            Py_INCREF(Py_None);
        }
        PyTuple_SET_ITEM(result, i, v[i]);  /* steals */
        v[i] = NULL;
    }
    goto done;
oserror:
    PyErr_SetFromErrno(PyExc_OSError);
done:
    for (i = 0; i < 7; i++)
        Py_XDECREF(v[i]);
    return result;
}

static PyObject *
read_thread(PyObject *self, PyObject *args)
{
    int fds[3], due = 1;
    PyObject *last;
    long bad = 0;

    (void)self;
    if (!PyArg_ParseTuple(args, "(iii)Ol|p", &fds[0], &fds[1], &fds[2],
                          &last, &bad, &due))
        return NULL;
    return read_one(fds, last, bad, due);
}

/*
 * read_threads(items, every=1, offset=0) -> list: read_thread(*item, due)
 * for each (fds, last, bad) item, due when (offset + i) % every == 0, None
 * in the place of a thread that exited (ProcessLookupError or
 * FileNotFoundError). One call per domain instead of one per vCPU.
 */
static PyObject *
read_threads(PyObject *self, PyObject *args)
{
    PyObject *items, *seq, *out, *item, *r;
    Py_ssize_t n, i, every = 1, offset = 0;
    int fds[3];
    PyObject *last;
    long bad;

    (void)self;
    if (!PyArg_ParseTuple(args, "O|nn", &items, &every, &offset))
        return NULL;
    if (every < 1 || offset < 0) {
        PyErr_SetString(PyExc_ValueError,
                        "read_threads needs every >= 1 and offset >= 0");
        return NULL;
    }
    seq = PySequence_Fast(items, "read_threads needs a sequence");
    if (seq == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    out = PyList_New(n);
    if (out == NULL)
        goto fail;
    for (i = 0; i < n; i++) {
        item = PySequence_Fast_GET_ITEM(seq, i);
        bad = 0;
        if (!PyArg_ParseTuple(item, "(iii)Ol;read_threads items are "
                              "(fds, last, bad)", &fds[0], &fds[1], &fds[2],
                              &last, &bad))
            goto fail;
        r = read_one(fds, last, bad, (offset + i) % every == 0);
        if (r == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_ProcessLookupError)
                    && !PyErr_ExceptionMatches(PyExc_FileNotFoundError))
                goto fail;
            PyErr_Clear();
            Py_INCREF(Py_None);
            r = Py_None;
        }
        PyList_SET_ITEM(out, i, r);     /* steals */
    }
    Py_DECREF(seq);
    return out;
fail:
    Py_XDECREF(out);
    Py_DECREF(seq);
    return NULL;
}

/*
 * read_held(helds, every, offset, now_ns, counters) -> (list, reports)
 * ThreadReader.read_many's loop, in C: each item of helds is a procfs._Held
 * (fds, bad, last, counters, fresh_ns), read as read_threads reads its
 * (fds, last, bad) and then updated as _Held.update does: a new reading
 * becomes its last, with new counters (a ``counters`` instance, the
 * ThreadCounters named tuple: switches_ns is the held fresh_ns if the
 * reading is STALE, else None, and fresh_ns becomes now_ns); a reading
 * that is its last only refreshes fresh_ns when not STALE. list[i] is
 * helds[i].counters, None for a thread that exited (whose held is left
 * as it was); reports lists (i, bits) for each new reading with bits
 * other than STALE, for the caller to log. The Python loop this replaces
 * built a tuple per thread to call read_threads and a named tuple per
 * thread after it: most of the reader's cost outside the kernel.
 */
static PyObject *s_fds, *s_bad, *s_last, *s_counters, *s_fresh_ns;

static PyObject *
new_counters(PyTypeObject *type, PyObject *raw, PyObject *switches_ns)
{
    static const int from[5] = {0, 1, 3, 4, 5};
    PyObject *out = type->tp_alloc(type, 6);
    int i;

    if (out == NULL)
        return NULL;
    for (i = 0; i < 5; i++) {
        PyObject *v = PyTuple_GET_ITEM(raw, from[i]);
        Py_INCREF(v);
        PyTuple_SET_ITEM(out, i, v);
    }
    Py_INCREF(switches_ns);
    PyTuple_SET_ITEM(out, 5, switches_ns);
    return out;
}

/* One held thread: its counters (new reference), Py_None if it exited. */
static PyObject *
update_held(PyObject *held, int due, PyObject *now_ns, PyTypeObject *type,
            PyObject *reports, Py_ssize_t index)
{
    PyObject *fds_obj = NULL, *bad_obj = NULL, *last = NULL, *raw = NULL;
    PyObject *counters = NULL, *fresh = NULL, *out = NULL;
    int fds[3];
    long bad, bits;

    fds_obj = PyObject_GetAttr(held, s_fds);
    bad_obj = fds_obj ? PyObject_GetAttr(held, s_bad) : NULL;
    last = bad_obj ? PyObject_GetAttr(held, s_last) : NULL;
    if (last == NULL)
        goto done;
    if (!PyArg_ParseTuple(fds_obj, "iii;_Held.fds is three descriptors",
                          &fds[0], &fds[1], &fds[2]))
        goto done;
    bad = PyLong_AsLong(bad_obj);
    if (bad == -1 && PyErr_Occurred())
        goto done;
    raw = read_one(fds, last, bad, due);
    if (raw == NULL) {
        if (PyErr_ExceptionMatches(PyExc_ProcessLookupError)
                || PyErr_ExceptionMatches(PyExc_FileNotFoundError)) {
            PyErr_Clear();
            Py_INCREF(Py_None);
            out = Py_None;
        }
        goto done;
    }
    bits = PyLong_AsLong(PyTuple_GET_ITEM(raw, 6));
    if (bits == -1 && PyErr_Occurred())
        goto done;
    if (raw == last) {
        if (!(bits & STALE) && PyObject_SetAttr(held, s_fresh_ns, now_ns))
            goto done;
        out = PyObject_GetAttr(held, s_counters);
        goto done;
    }
    if (bits & (STALE - 1)) {     /* all but STALE: faults to log */
        PyObject *report = Py_BuildValue("(nl)", index, bits);
        int rc = report ? PyList_Append(reports, report) : -1;
        Py_XDECREF(report);
        if (rc < 0)
            goto done;
    }
    if (PyObject_SetAttr(held, s_last, raw))
        goto done;
    if (bits & STALE) {
        fresh = PyObject_GetAttr(held, s_fresh_ns);
        if (fresh == NULL)
            goto done;
        counters = new_counters(type, raw, fresh);
    } else {
        if (PyObject_SetAttr(held, s_fresh_ns, now_ns))
            goto done;
        counters = new_counters(type, raw, Py_None);
    }
    if (counters == NULL || PyObject_SetAttr(held, s_counters, counters))
        goto done;
    out = counters;
    counters = NULL;
done:
    Py_XDECREF(fds_obj);
    Py_XDECREF(bad_obj);
    Py_XDECREF(last);
    Py_XDECREF(raw);
    Py_XDECREF(counters);
    Py_XDECREF(fresh);
    return out;
}

static PyObject *
read_held(PyObject *self, PyObject *args)
{
    PyObject *helds, *seq, *out = NULL, *reports = NULL, *now_ns, *type;
    Py_ssize_t n, i, every, offset;

    (void)self;
    if (!PyArg_ParseTuple(args, "OnnOO", &helds, &every, &offset, &now_ns,
                          &type))
        return NULL;
    if (every < 1 || offset < 0) {
        PyErr_SetString(PyExc_ValueError,
                        "read_held needs every >= 1 and offset >= 0");
        return NULL;
    }
    if (!PyType_Check(type)
            || !PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError,
                        "read_held needs a tuple type for the counters");
        return NULL;
    }
    seq = PySequence_Fast(helds, "read_held needs a sequence");
    if (seq == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    out = PyList_New(n);
    reports = out ? PyList_New(0) : NULL;
    if (reports == NULL)
        goto fail;
    for (i = 0; i < n; i++) {
        PyObject *c = update_held(PySequence_Fast_GET_ITEM(seq, i),
                                  (offset + i) % every == 0, now_ns,
                                  (PyTypeObject *)type, reports, i);
        if (c == NULL)
            goto fail;
        PyList_SET_ITEM(out, i, c);     /* steals */
    }
    Py_DECREF(seq);
    return Py_BuildValue("(NN)", out, reports);
fail:
    Py_XDECREF(out);
    Py_XDECREF(reports);
    Py_DECREF(seq);
    return NULL;
}

static PyMethodDef methods[] = {
    {"read_thread", read_thread, METH_VARARGS,
     "read_thread((schedstat_fd, status_fd, stat_fd), last, bad, due=True)"
     " -> tuple\n\n"
     "The counters of one thread from its held procfs files; see\n"
     "vsmtio_agent.linux.procfs._read_thread for the contract."},
    {"read_threads", read_threads, METH_VARARGS,
     "read_threads([(fds, last, bad), ...], every=1, offset=0) -> list\n\n"
     "read_thread for each item (item i due if (offset + i) % every is\n"
     "0), None for a thread that exited; see\n"
     "vsmtio_agent.linux.procfs._read_threads."},
    {"read_held", read_held, METH_VARARGS,
     "read_held(helds, every, offset, now_ns, counters) -> (list, reports)"
     "\n\n"
     "ThreadReader.read_many's loop over its held threads; see\n"
     "vsmtio_agent.linux.procfs.ThreadReader.read_many."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_procread",
    "The agent's hot procfs reader in C (see procfs.py).", -1, methods,
    NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC
PyInit__procread(void)
{
    s_fds = PyUnicode_InternFromString("fds");
    s_bad = PyUnicode_InternFromString("bad");
    s_last = PyUnicode_InternFromString("last");
    s_counters = PyUnicode_InternFromString("counters");
    s_fresh_ns = PyUnicode_InternFromString("fresh_ns");
    if (!s_fds || !s_bad || !s_last || !s_counters || !s_fresh_ns)
        return NULL;
    return PyModule_Create(&module);
}
