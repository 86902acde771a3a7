/*
 * Loading the BPF objects _taskiter embeds, and libbpf's errors as Python
 * exceptions (_bpfload.c): what the iterators (_taskiter.c) and the
 * threads program (_threads.c) share.
 */
#ifndef VSMTIO_BPFLOAD_H
#define VSMTIO_BPFLOAD_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>

#include <bpf/libbpf.h>

/* Forget libbpf's last warning: call before the libbpf call it may explain */
void forget_warning(void);

/* Raise OSError(err, what: strerror[: libbpf's last warning]); NULL. */
PyObject *os_error(int err, const char *what);

/* Open and load an embedded object and find its program: 0, or -1 with
 * OSError (open_error or load_error: what failed) and nothing held. */
int load_object(const unsigned char *object, size_t size,
                const char *program, const char *open_error,
                const char *load_error, struct bpf_object **obj,
                struct bpf_program **prog);

/* Route libbpf's messages to os_error's (once, at the module's import). */
void keep_libbpf_warnings(void);

/* Add _threads.c's Threads type to the module: 0, or -1 with an exception */
int add_threads_type(PyObject *module);

#endif
