/*
 * The records the BPF programs write, and their decoding into Python
 * tuples (_records.c): a thread's (taskiter.bpf.c, threads.bpf.c) and a
 * KVM vCPU's (bpf_kvm.h: kvmstats.bpf.c, threads.bpf.c). _taskiter.c and
 * _threads.c load the programs and read the records; these turn them into
 * what the agent reads each period, without a Python call per thread or
 * vCPU.
 */
#ifndef VSMTIO_RECORDS_H
#define VSMTIO_RECORDS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

/* A thread's scheduler counters (bpf_common.h's struct thread_counters). */
struct thread_counters {
    uint32_t tid;
    uint32_t cpu;
    uint64_t run_ns;
    uint64_t delay_ns;
    uint64_t voluntary;
    uint64_t involuntary;
};

/* One thread's record, as taskiter.bpf.c and threads.bpf.c write it. */
struct record {
    struct thread_counters thread;
    uint32_t flags;
    uint32_t pad;
};

#define NO_DELAY 1

/* One KVM vCPU's record, as bpf_kvm.h fills it (kvmstats.bpf.c's
 * iterator and threads.bpf.c's run): KVM's statistics, then the counters
 * of the thread that runs the vCPU. */
struct kvm_record {
    uint32_t index;
    uint32_t flags;
    uint64_t attempted_polls;
    uint64_t successful_polls;
    uint64_t poll_success_ns;
    uint64_t poll_fail_ns;
    uint64_t halt_exits;
    uint64_t retentions;
    uint64_t retention_ns;
    uint64_t retention_timeouts;
    struct thread_counters thread;
};

/* kvm_record's flags (bpf_kvm.h's, and kvmstats.py's) */
#define KVM_NO_HALT_EXITS           1
#define KVM_NO_RETENTIONS           2
#define KVM_NO_RETENTION_NS         4
#define KVM_NO_RETENTION_TIMEOUTS   8
#define KVM_NO_THREAD               16
#define KVM_NO_DELAY                32

/* A thread's five counters (run_ns, runqueue_delay_ns, voluntary,
 * involuntary, cpu) go to places place[0..4] of a tuple of type ``type``
 * whose other items are template's (a tuple of the type's length). */
struct shape {
    PyTypeObject *type;
    PyObject *template;     /* NULL: six items, every other one None */
    Py_ssize_t place[5];
};

/* The shape read's arguments ask for; 0, or -1 with an exception. */
int shape_of(struct shape *shape, PyObject *type, PyObject *template,
             PyObject *places);

/* A thread's counters in that shape (NULL with an exception). */
PyObject *new_counters(const struct shape *shape, const struct record *r);

/* The counters of the threads ``seq`` (a PySequence_Fast of thread ids)
 * among ``count`` records, in seq's order: a list, None for a thread not
 * among them (NULL with an exception). Sorts the records by tid in place
 * if they are not. */
PyObject *threads_in(struct record *records, Py_ssize_t count, PyObject *seq,
                     const struct shape *shape);

/* _taskiter.vcpus(raw, counters, patched): see _records.c. */
PyObject *decode_vcpus(PyObject *module, PyObject *args);

#endif
