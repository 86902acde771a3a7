/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What the agent's BPF iterators (taskiter.bpf.c, kvmstats.bpf.c) share.
 *
 * The kernel's fixed-width types, without <linux/types.h>: that one needs
 * the host's <asm/types.h>, which is not where a BPF target looks for it;
 * then libbpf's helpers, and PAI, which marks the minimal local structs
 * whose field accesses libbpf relocates against the running kernel's BTF
 * (CO-RE).
 */
#ifndef VSMTIO_BPF_COMMON_H
#define VSMTIO_BPF_COMMON_H

typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define PAI __attribute__((preserve_access_index))

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
} PAI;

/*
 * A thread's scheduler counters, as both iterators copy them: the task
 * iterator for each thread of a QEMU, the KVM iterator for the thread that
 * runs each vCPU (kvm_vcpu.pid), so that one read per QEMU gives both on a
 * kvm host. The counters the agent reads from procfs
 * (vsmtio_agent/linux/procfs.py), from the kernel fields procfs prints:
 *
 *   run_ns       se.sum_exec_runtime      (schedstat field 1)
 *   delay_ns     sched_info.run_delay     (schedstat field 2)
 *   voluntary    nvcsw                    (status voluntary_ctxt_switches)
 *   involuntary  nivcsw                   (status nonvoluntary_ctxt_...)
 *   cpu          thread_info.cpu or cpu   (stat field 39, task_cpu())
 *
 * Thread ids: the kernel's task->pid is the id in the initial pid
 * namespace; procfs, and the agent, see ids in the agent's own namespace.
 * tid is the id in the namespace of the reading process (the iterator
 * runs in its context), as pid_nr_ns() would.
 */

struct pid_namespace;
struct files_struct;

struct upid {
	int nr;
	struct pid_namespace *ns;
} PAI;

struct hlist_node {
	struct hlist_node *next;
} PAI;

struct hlist_head {
	struct hlist_node *first;
} PAI;

/* tasks[PIDTYPE_PID]: the task whose thread id this is */
struct pid {
	unsigned int level;
	struct hlist_head tasks[1];
	struct upid numbers[1];
} PAI;

#define PIDTYPE_PID 0

struct thread_info {
	__u32 cpu;
} PAI;

struct sched_entity {
	__u64 sum_exec_runtime;
} PAI;

struct sched_info {
	unsigned long long run_delay;
} PAI;

/* pid_links[PIDTYPE_PID]: its node in thread_pid->tasks[PIDTYPE_PID] */
struct task_struct {
	struct thread_info thread_info;
	int pid;
	unsigned int cpu;
	struct sched_entity se;
	struct sched_info sched_info;
	unsigned long nvcsw;
	unsigned long nivcsw;
	struct pid *thread_pid;
	struct hlist_node pid_links[1];
	struct files_struct *files;	/* threads.bpf.c's vCPU files */
} PAI;

/* One thread's counters, in both programs' records (40 bytes). */
struct thread_counters {
	__u32 tid;
	__u32 cpu;
	__u64 run_ns;
	__u64 delay_ns;
	__u64 voluntary;
	__u64 involuntary;
};

/* thread_counters()'s results */
#define THREAD_NO_DELAY		1	/* a kernel without CONFIG_SCHED_INFO */
#define THREAD_NOT_VISIBLE	-1	/* not in the reader's pid namespace */

/* The deepest pid namespace level (MAX_PID_NS_LEVEL). */
#define MAX_PID_LEVEL 32

/* upid numbers[level] of pid p, read as scalars (the index varies). */
static __always_inline int upid_at(struct pid *p, unsigned int level,
				   struct upid *out)
{
	if (level > MAX_PID_LEVEL)
		return -1;
	return bpf_core_read(out, sizeof(*out), &p->numbers[level]);
}

/*
 * How a thread's counters are copied: a function per way of loading the
 * task's fields, from one definition (DEFINE_THREAD_COUNTERS), so that
 * both records hold the same fields, read the same way.
 *
 * LOAD_DIRECT: plain loads, where the verifier trusts the task pointer
 * (the task iterator's ctx->task): no helper call per field. LOAD_PROBED:
 * bpf_core_read, for a task reached through pointers the verifier does not
 * let a program load through (the KVM iterator's, through kvm_vcpu's pid):
 * a helper call per field (a few tens of nanoseconds each, measured).
 *
 * barrier_var() after each load that has an alternative (the tid from the
 * task or from its pid; cpu or thread_info.cpu): without it clang merges
 * the two branches into one load at a variable offset from either pointer,
 * which the verifier refuses for a task pointer.
 */
#define LOAD_DIRECT(p, field) ((p)->field)
#define LOAD_PROBED(p, field) BPF_CORE_READ(p, field)

/*
 * name(task, out) copies task's counters into out: THREAD_NOT_VISIBLE (out
 * unset) for a task not visible from the reader's pid namespace, else 0 or
 * THREAD_NO_DELAY. The reader's namespace: its level (direct loads of the
 * trusted current task: cheap), then, below the initial namespace only,
 * its struct pid_namespace and the task's id there.
 */
#define DEFINE_THREAD_COUNTERS(name, LOAD)				\
static __always_inline int name(struct task_struct *task,		\
				struct thread_counters *out)		\
{									\
	struct task_struct *me = bpf_get_current_task_btf();		\
	struct upid mine, theirs;					\
	struct pid *pid;						\
	unsigned int level = me->thread_pid->level;			\
	int result = 0;							\
	__u32 value;							\
									\
	if (level == 0) {						\
		value = LOAD(task, pid);	/* all visible there */	\
		barrier_var(value);					\
		out->tid = value;					\
	} else {							\
		pid = BPF_CORE_READ(me, thread_pid);			\
		if (upid_at(pid, level, &mine))				\
			return THREAD_NOT_VISIBLE;			\
		pid = BPF_CORE_READ(task, thread_pid);			\
		if (!pid || BPF_CORE_READ(pid, level) < level ||	\
		    upid_at(pid, level, &theirs) || theirs.ns != mine.ns) \
			return THREAD_NOT_VISIBLE;			\
		out->tid = theirs.nr;					\
	}								\
	if (bpf_core_field_exists(task->cpu)) {				\
		value = LOAD(task, cpu);				\
		barrier_var(value);					\
	} else {							\
		value = LOAD(task, thread_info.cpu);			\
		barrier_var(value);					\
	}								\
	out->cpu = value;						\
	out->run_ns = LOAD(task, se.sum_exec_runtime);			\
	if (bpf_core_field_exists(task->sched_info))			\
		out->delay_ns = LOAD(task, sched_info.run_delay);	\
	else								\
		result = THREAD_NO_DELAY;				\
	out->voluntary = LOAD(task, nvcsw);				\
	out->involuntary = LOAD(task, nivcsw);				\
	return result;							\
}

/* thread_counters(): the task iterator's; thread_counters_probed(): the
 * KVM iterator's */
DEFINE_THREAD_COUNTERS(thread_counters, LOAD_DIRECT)
DEFINE_THREAD_COUNTERS(thread_counters_probed, LOAD_PROBED)

/* One thread's record, as the task iterator (taskiter.bpf.c) and the
 * threads program (threads.bpf.c) write it; _records.h reads it. */
struct record {
	struct thread_counters thread;
	__u32 flags;
	__u32 pad;
};

#define NO_DELAY 1	/* record flag: a kernel without CONFIG_SCHED_INFO */

/* Fill r with task's counters: 0, or THREAD_NOT_VISIBLE (r not to be
 * written: the thread is not in the reader's pid namespace). */
static __always_inline int thread_record(struct task_struct *task,
					 struct record *r)
{
	int got = thread_counters(task, &r->thread);

	if (got == THREAD_NOT_VISIBLE)
		return got;
	r->flags = got == THREAD_NO_DELAY ? NO_DELAY : 0;
	r->pad = 0;
	return 0;
}

#endif
