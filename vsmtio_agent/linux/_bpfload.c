/*
 * Loading the embedded BPF objects, and libbpf's errors as Python
 * exceptions (_bpfload.h).
 */
#include "_bpfload.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* libbpf's first warning since the call began, for the error it explains:
 * the cause comes first (e.g. "prog 'vcpu_counters': BPF program load
 * failed: Operation not permitted"), its consequences after. libbpf's
 * printer is process-global; the GIL serializes the calls that log. */
static char last_warning[512];

static int
keep_warning(enum libbpf_print_level level, const char *format, va_list ap)
{
    char line[sizeof(last_warning)];
    size_t n;

    if (level != LIBBPF_WARN || last_warning[0])
        return 0;
    vsnprintf(line, sizeof(line), format, ap);
    n = strlen(line);
    while (n && line[n - 1] == '\n')
        line[--n] = '\0';
    if (n)
        memcpy(last_warning, line, n + 1);
    return 0;
}

void
keep_libbpf_warnings(void)
{
    libbpf_set_print(keep_warning);
}

void
forget_warning(void)
{
    last_warning[0] = '\0';
}

PyObject *
os_error(int err, const char *what)
{
    PyObject *exc, *msg;

    if (err < 0)
        err = -err;
    if (err == 0)
        err = EINVAL;
    msg = last_warning[0]
        ? PyUnicode_FromFormat("%s: %s (libbpf: %s)", what, strerror(err),
                               last_warning)
        : PyUnicode_FromFormat("%s: %s", what, strerror(err));
    if (msg == NULL)
        return NULL;
    /* OSError(errno, ...) builds the matching subclass (PermissionError) */
    exc = PyObject_CallFunction(PyExc_OSError, "iO", err, msg);
    Py_DECREF(msg);
    last_warning[0] = '\0';
    if (exc == NULL)
        return NULL;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return NULL;
}

int
load_object(const unsigned char *object, size_t size, const char *program,
            const char *open_error, const char *load_error,
            struct bpf_object **obj, struct bpf_program **prog)
{
    LIBBPF_OPTS(bpf_object_open_opts, opts);
    int err;

    opts.object_name = program;
    forget_warning();
    *prog = NULL;
    *obj = bpf_object__open_mem(object, size, &opts);
    if (*obj == NULL) {
        os_error(errno, open_error);
        return -1;
    }
    *prog = bpf_object__find_program_by_name(*obj, program);
    if (*prog == NULL) {
        bpf_object__close(*obj);
        *obj = NULL;
        os_error(ENOENT, "no such program in the BPF object");
        return -1;
    }
    err = bpf_object__load(*obj);
    if (err) {
        bpf_object__close(*obj);
        *obj = NULL;
        *prog = NULL;
        os_error(err, load_error);
        return -1;
    }
    return 0;
}
