// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The vCPU threads' scheduler counters in bulk: a BPF task iterator.
 *
 * Attached to one process (bpf_iter_link_info.task.pid, Linux >= 6.1), the
 * iterator visits that process's threads only; each read of an iterator
 * made from the link (bpf_iter_create) runs this program once per thread
 * and returns one fixed binary record per thread: the counters the agent
 * reads from procfs (vsmtio_agent/linux/procfs.py), from the same kernel
 * fields procfs prints them from:
 *
 *   run_ns       se.sum_exec_runtime      (schedstat field 1)
 *   delay_ns     sched_info.run_delay     (schedstat field 2)
 *   voluntary    nvcsw                    (status voluntary_ctxt_switches)
 *   involuntary  nivcsw                   (status nonvoluntary_ctxt_...)
 *   cpu          thread_info.cpu or cpu   (stat field 39, task_cpu())
 *
 * Why: procfs formats a text file per thread and file (a few microseconds
 * of kernel time each, 15 for status); this walks the threads once and
 * copies 48 bytes per thread (vsmtio_agent/linux/taskiter.py has the
 * numbers).
 *
 * CO-RE without a generated vmlinux.h: only the fields read here are
 * declared, in minimal local structs marked preserve_access_index, so that
 * clang records each access as a relocation that libbpf resolves against
 * the running kernel's BTF (/sys/kernel/btf/vmlinux) at load. The build
 * needs clang and libbpf's headers, not bpftool nor a kernel's BTF, and
 * the object loads on any kernel whose layout differs (field offsets are
 * the kernel's, not these structs').
 *
 * Thread ids: the kernel's task->pid is the id in the initial pid
 * namespace; procfs, and the agent, see ids in the agent's own namespace.
 * The record carries the id in the namespace of the reading process (the
 * iterator runs in its context), as pid_nr_ns() would, and a thread not
 * visible there is left out.
 */

#include "bpf_common.h"

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
} PAI;

struct pid_namespace;

struct upid {
	int nr;
	struct pid_namespace *ns;
} PAI;

struct pid {
	unsigned int level;
	struct upid numbers[1];
} PAI;

struct thread_info {
	__u32 cpu;
} PAI;

struct sched_entity {
	__u64 sum_exec_runtime;
} PAI;

struct sched_info {
	unsigned long long run_delay;
} PAI;

struct task_struct {
	struct thread_info thread_info;
	int pid;
	unsigned int cpu;
	struct sched_entity se;
	struct sched_info sched_info;
	unsigned long nvcsw;
	unsigned long nivcsw;
	struct pid *thread_pid;
} PAI;

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} PAI;

/* One thread; _taskiter.c reads the same layout. */
struct record {
	__u32 tid;
	__u32 cpu;
	__u64 run_ns;
	__u64 delay_ns;
	__u64 voluntary;
	__u64 involuntary;
	__u32 flags;
	__u32 pad;
};

#define NO_DELAY 1	/* a kernel without CONFIG_SCHED_INFO */

/* The deepest pid namespace level (MAX_PID_NS_LEVEL). */
#define MAX_LEVEL 32

/* GPL-compatible, as the kernel requires of a program that calls the
 * helpers this one calls (bpf_get_current_task_btf, bpf_probe_read_kernel
 * behind bpf_core_read: offered to GPL programs only), and BSD too, so that
 * the object embedded in the project's Apache-2.0 extension carries a
 * permissive licence as well ("Dual BSD/GPL" is one the kernel accepts). */
char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* upid numbers[level] of pid p, read as scalars (the index varies). */
static __always_inline int upid_at(struct pid *p, unsigned int level,
				   struct upid *out)
{
	if (level > MAX_LEVEL)
		return -1;
	return bpf_core_read(out, sizeof(*out), &p->numbers[level]);
}

SEC("iter/task")
int vcpu_counters(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct task_struct *me;
	struct record r = {};
	struct upid mine, theirs;
	struct pid *pid;
	unsigned int level;

	if (!task)
		return 0;
	/* The reader's namespace: its level (direct loads of the trusted
	 * current task: cheap), then, below the initial namespace only, its
	 * struct pid_namespace and the task's id there (read with
	 * bpf_core_read: the array index varies). */
	me = bpf_get_current_task_btf();
	level = me->thread_pid->level;
	if (level == 0) {
		r.tid = task->pid;	/* every task is visible there */
	} else {
		pid = BPF_CORE_READ(me, thread_pid);
		if (upid_at(pid, level, &mine))
			return 0;
		pid = BPF_CORE_READ(task, thread_pid);
		if (!pid || BPF_CORE_READ(pid, level) < level ||
		    upid_at(pid, level, &theirs) || theirs.ns != mine.ns)
			return 0;	/* not visible from the reader's */
		r.tid = theirs.nr;
	}
	/* The task's own fields: direct loads of a trusted pointer. */
	if (bpf_core_field_exists(task->cpu))
		r.cpu = task->cpu;
	else
		r.cpu = task->thread_info.cpu;
	r.run_ns = task->se.sum_exec_runtime;
	if (bpf_core_field_exists(task->sched_info))
		r.delay_ns = task->sched_info.run_delay;
	else
		r.flags |= NO_DELAY;
	r.voluntary = task->nvcsw;
	r.involuntary = task->nivcsw;
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
