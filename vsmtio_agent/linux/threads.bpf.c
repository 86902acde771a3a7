// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The threads of every QEMU in one program run: a BPF syscall program.
 *
 * taskiter.bpf.c's task iterator reads one process per read, and each read
 * is three system calls and a seq_file of its own (bpf_iter_create, read,
 * close): a cost per QEMU that, cold in the agent's period, outweighs the
 * copying (vsmtio_agent/linux/taskiter.py has the numbers). This program
 * is run once per period (BPF_PROG_TEST_RUN, one system call) and walks
 * the threads of every process the agent names, with the open-coded task
 * iterator, into one array that the agent maps into its memory: the agent
 * writes the processes' ids in `shared', runs the program, and reads the
 * records where they were written, without a copy.
 *
 * The same record per thread as taskiter.bpf.c's, from the same kernel
 * fields (bpf_common.h's thread_counters()), so that _taskiter.c decodes
 * both alike. Processes are named by their ids in the agent's pid
 * namespace (bpf_task_from_vpid), as procfs shows them to it.
 *
 * Needs Linux >= 6.13 (bpf_task_from_vpid; the task iterator kfuncs are
 * 6.7's): where it does not load, the agent reads each process with the
 * task iterator (taskiter.py).
 */

#include "bpf_common.h"

/* The kernel's open-coded iterators (kfuncs; their state is opaque) */
struct bpf_iter_num {
	__u64 __opaque[1];
} __attribute__((aligned(8)));

struct bpf_iter_task {
	__u64 __opaque[3];
} __attribute__((aligned(8)));

extern int bpf_iter_num_new(struct bpf_iter_num *it, int start,
			    int end) __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __ksym;
extern int bpf_iter_task_new(struct bpf_iter_task *it,
			     struct task_struct *task,
			     unsigned int flags) __ksym;
extern struct task_struct *bpf_iter_task_next(struct bpf_iter_task *it) __ksym;
extern void bpf_iter_task_destroy(struct bpf_iter_task *it) __ksym;
extern struct task_struct *bpf_task_from_vpid(__s32 vpid) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;
extern void bpf_rcu_read_lock(void) __ksym;
extern void bpf_rcu_read_unlock(void) __ksym;

#define BPF_TASK_ITER_PROC_THREADS 2	/* enum bpf_iter_task_type */

/* One thread: taskiter.bpf.c's record (_records.h reads both). */
struct record {
	struct thread_counters thread;
	__u32 flags;
	__u32 pad;
};

#define NO_DELAY 1

/* How many processes and threads one run holds; _records.h's THREADS_*.
 * A host with more: the rest are read with the task iterator. */
#define MAX_PROCS 512
#define MAX_THREADS 8192
#define NOT_READ 0xffffffffu	/* not found, or no room left */

/* The agent's mapping of this program's .bss: _records.h's threads_area */
struct {
	__s32 pids[MAX_PROCS];		/* in: the processes, in order */
	__u32 count;			/* in: how many */
	__u32 used;			/* out: records written */
	__u32 threads[MAX_PROCS];	/* out: each process's, or NOT_READ */
	struct record records[MAX_THREADS];	/* out: process by process */
} shared;

/* GPL-compatible, as the kernel requires of a program that calls these
 * kfuncs and helpers, and BSD too (taskiter.bpf.c says why). */
char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("syscall")
int read_threads(void *ctx)
{
	struct bpf_iter_num each;
	__u32 count = shared.count;
	int *at;

	shared.used = 0;
	if (count > MAX_PROCS)
		count = MAX_PROCS;
	bpf_iter_num_new(&each, 0, count);
	while ((at = bpf_iter_num_next(&each))) {
		__u32 i = *at, start = shared.used, full = 0;
		struct bpf_iter_task threads;
		struct task_struct *proc, *task;

		if (i >= MAX_PROCS)
			break;
		proc = bpf_task_from_vpid(shared.pids[i]);
		if (!proc) {
			shared.threads[i] = NOT_READ;
			continue;
		}
		bpf_rcu_read_lock();
		bpf_iter_task_new(&threads, proc, BPF_TASK_ITER_PROC_THREADS);
		while ((task = bpf_iter_task_next(&threads))) {
			/* the cursor in memory, not a register: a verifier
			 * that tracked it exactly would walk every value */
			__u32 k = shared.used;
			struct record *r;
			int got;

			if (k >= MAX_THREADS) {
				full = 1;
				break;
			}
			r = &shared.records[k];
			got = thread_counters(task, &r->thread);
			if (got == THREAD_NOT_VISIBLE)
				continue;
			r->flags = got == THREAD_NO_DELAY ? NO_DELAY : 0;
			r->pad = 0;
			shared.used = k + 1;
		}
		bpf_iter_task_destroy(&threads);
		bpf_rcu_read_unlock();
		bpf_task_release(proc);
		if (full) {		/* this one and the rest: not read */
			shared.used = start;
			shared.threads[i] = NOT_READ;
			break;
		}
		shared.threads[i] = shared.used - start;
	}
	bpf_iter_num_destroy(&each);
	return 0;
}
