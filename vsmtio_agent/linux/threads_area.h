/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The memory the threads program (threads.bpf.c) shares with the agent
 * (_threads.c): its .bss, which the agent maps. Included by both, after
 * the definitions of struct record and struct kvm_record (bpf_common.h
 * and bpf_kvm.h in the program, _records.h in the extension) and of the
 * kernel's fixed-width types.
 */
#ifndef VSMTIO_THREADS_AREA_H
#define VSMTIO_THREADS_AREA_H

/* What to read of a process */
#define READ_THREADS 1
#define READ_VCPUS 2

/* How many processes, threads and vCPUs one run holds. A host with more:
 * the rest are read with the iterators. */
#define MAX_PROCS 512
#define MAX_THREADS 8192
#define MAX_VCPUS 2048
#define NOT_READ 0xffffffffu	/* not asked, not found, or no room left */

struct threads_area {
	__s32 pids[MAX_PROCS];		/* in: the processes, in order */
	__u32 want[MAX_PROCS];		/* in: READ_* of each */
	__u32 count;			/* in: how many */
	__u32 threads_used;		/* out: thread records written */
	__u32 vcpus_used;		/* out: vCPU records written */
	__u32 pad;
	__u32 threads[MAX_PROCS];	/* out: each one's, or NOT_READ */
	__u32 vcpus[MAX_PROCS];		/* out: each one's, or NOT_READ */
	struct record records[MAX_THREADS];	/* process by process */
	struct kvm_record vcpu_records[MAX_VCPUS];	/* likewise */
};

#endif
