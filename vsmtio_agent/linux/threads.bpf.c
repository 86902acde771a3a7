// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Every QEMU's threads and KVM vCPUs in one program run: a BPF syscall
 * program.
 *
 * The iterators read one process per read: taskiter.bpf.c its threads,
 * kvmstats.bpf.c its vCPU files, each read three system calls and a
 * seq_file of its own (bpf_iter_create, read, close), and the task_file
 * iterator takes and drops a reference to each of the QEMU's files: a cost
 * per QEMU that, cold in the agent's period, outweighs the copying
 * (doc/benchmarks/agent_tick.rst has the numbers). This program is run
 * once per period (BPF_PROG_TEST_RUN, one system call) and reads, for each
 * process the agent names, what it asks of it: its threads (the kernel's
 * open-coded task iterator) and its KVM vCPU files (its open file table),
 * into one array that the agent maps into its memory: the agent writes
 * the processes in `shared', runs the program, and reads the records where
 * they were written, without a copy.
 *
 * The same records as the iterators', from the same kernel fields, the
 * same way (bpf_common.h's thread_record(), bpf_kvm.h's
 * kvm_vcpu_record()), so that _records.c decodes them alike. Processes are
 * named by their ids in the agent's pid namespace (bpf_task_from_vpid), as
 * procfs shows them to it.
 *
 * A vCPU file is read under RCU without a reference of its own (the
 * task_file iterator takes one): the memory is the kernel's to keep (files
 * are freed after a grace period) and every load is a checked one, so a
 * QEMU closing a vCPU file during the run gives at worst a record of a file
 * that is closing; the agent checks each record's thread against the
 * thread it found for that vCPU.
 *
 * Needs Linux >= 6.13 (bpf_task_from_vpid; the task iterator's kfuncs are
 * 6.7's): where it does not load, the agent reads each process with the
 * iterators (taskiter.py, kvmstats.py).
 */

#define KVM_THREAD_CAST	/* bpf_kvm.h: bpf_rdonly_cast, Linux >= 6.2 */
#include "bpf_kvm.h"

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

/* A process's open files (include/linux/fdtable.h) */
struct fdtable {
	unsigned int max_fds;
	struct file **fd;
	unsigned long *open_fds;
} PAI;

struct files_struct {
	struct fdtable *fdt;
} PAI;

#include "threads_area.h"

#define MAX_FD_WORDS 16384	/* file descriptors below 2^20 */

/* What the agent maps (threads_area.h) */
struct threads_area shared;

/* GPL-compatible, as the kernel requires of a program that calls these
 * kfuncs and helpers, and BSD too (taskiter.bpf.c says why). */
char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The threads of proc into the records: their count, or NOT_READ (none
 * written) if they do not all fit. */
static __always_inline __u32 read_threads(struct task_struct *proc)
{
	__u32 start = shared.threads_used, full = 0;
	struct bpf_iter_task threads;
	struct task_struct *task;

	bpf_rcu_read_lock();
	bpf_iter_task_new(&threads, proc, BPF_TASK_ITER_PROC_THREADS);
	while ((task = bpf_iter_task_next(&threads))) {
		/* the cursor in memory, not a register: a verifier that
		 * tracked it exactly would walk every value */
		__u32 k = shared.threads_used;

		if (k >= MAX_THREADS) {
			full = 1;
			break;
		}
		if (thread_record(task, &shared.records[k]) == 0)
			shared.threads_used = k + 1;
	}
	bpf_iter_task_destroy(&threads);
	bpf_rcu_read_unlock();
	if (full) {
		shared.threads_used = start;
		return NOT_READ;
	}
	return shared.threads_used - start;
}

/* The KVM vCPU files among proc's open files into the vCPU records (the
 * open-fd bitmap's words, then their set bits): their count, or NOT_READ
 * (none written) if they do not all fit. */
static __always_inline __u32 read_vcpus(struct task_struct *proc,
					 const void **vcpu_fops)
{
	__u32 start = shared.vcpus_used, words, full = 0;
	struct bpf_iter_num each;
	unsigned long *open;
	struct fdtable *fdt;
	struct file **fds;
	int *at;

	/* no KVM, or no BTF of it (a module not loaded): nothing read here,
	 * and the threads still are (libbpf leaves the code below, whose
	 * relocations it cannot make, out of the program the kernel checks) */
	if (!bpf_core_type_exists(struct kvm_vcpu))
		return NOT_READ;
	bpf_rcu_read_lock();
	fdt = BPF_CORE_READ(proc, files, fdt);
	if (!fdt) {		/* an exiting process: no files */
		bpf_rcu_read_unlock();
		return 0;
	}
	words = (BPF_CORE_READ(fdt, max_fds) + 63) / 64;
	open = BPF_CORE_READ(fdt, open_fds);
	fds = BPF_CORE_READ(fdt, fd);
	bpf_iter_num_new(&each, 0,
			 words < MAX_FD_WORDS ? words : MAX_FD_WORDS);
	while (!full && (at = bpf_iter_num_next(&each))) {
		__u32 word = *at;
		struct bpf_iter_num bits;
		unsigned long set;
		int *bit;

		if (bpf_core_read(&set, sizeof(set), &open[word]) || !set)
			continue;
		bpf_iter_num_new(&bits, 0, 64);
		while ((bit = bpf_iter_num_next(&bits))) {
			__u32 b = *bit & 63, k = shared.vcpus_used;
			struct file *file;

			if (!(set >> b))
				break;
			if (!((set >> b) & 1))
				continue;
			if (bpf_core_read(&file, sizeof(file),
					  &fds[word * 64 + b]) || !file)
				continue;
			file = bpf_rdonly_cast(file, bpf_core_type_id_kernel(
						       struct file));
			if (k >= MAX_VCPUS) {
				full = 1;
				break;
			}
			if (kvm_vcpu_record(file, &shared.vcpu_records[k],
					    vcpu_fops))
				shared.vcpus_used = k + 1;
		}
		bpf_iter_num_destroy(&bits);
	}
	bpf_iter_num_destroy(&each);
	bpf_rcu_read_unlock();
	if (full) {
		shared.vcpus_used = start;
		return NOT_READ;
	}
	return shared.vcpus_used - start;
}

SEC("syscall")
int read_all(void *ctx)
{
	struct bpf_iter_num each;
	__u32 count = shared.count;
	/* KVM's vCPU file operations, once a vCPU file is found by name */
	const void *vcpu_fops = NULL;
	int *at;

	shared.threads_used = 0;
	shared.vcpus_used = 0;
	if (count > MAX_PROCS)
		count = MAX_PROCS;
	bpf_iter_num_new(&each, 0, count);
	while ((at = bpf_iter_num_next(&each))) {
		__u32 i = *at, want;
		struct task_struct *proc;

		if (i >= MAX_PROCS)
			break;
		shared.threads[i] = NOT_READ;
		shared.vcpus[i] = NOT_READ;
		want = shared.want[i];
		if (!want)
			continue;
		proc = bpf_task_from_vpid(shared.pids[i]);
		if (!proc)
			continue;
		if (want & READ_THREADS)
			shared.threads[i] = read_threads(proc);
		if (want & READ_VCPUS)
			shared.vcpus[i] = read_vcpus(proc, &vcpu_fops);
		bpf_task_release(proc);
	}
	bpf_iter_num_destroy(&each);
	return 0;
}
