/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A KVM vCPU file's record: what the programs that read KVM's vCPUs
 * (kvmstats.bpf.c's task_file iterator, threads.bpf.c's run over every
 * QEMU) copy of each, from the same fields, the same way (kvmstats.bpf.c
 * says which and why).
 */
#ifndef VSMTIO_BPF_KVM_H
#define VSMTIO_BPF_KVM_H

#include "bpf_common.h"

/*
 * How the vCPU's thread is read, from a task pointer the program computed
 * (vcpu_thread()): KVM_THREAD_CAST (threads.bpf.c, Linux >= 6.13) casts
 * it to a task with bpf_rdonly_cast (Linux >= 6.2), then loads its fields
 * directly (each a checked load, not a helper call: a fifth of the run's
 * cost, measured); the iterator, which loads on Linux 6.1, reads each
 * field with bpf_core_read.
 */
#ifdef KVM_THREAD_CAST
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;
#define THREAD_OF(task, out)						\
	thread_counters(bpf_rdonly_cast(				\
		task, bpf_core_type_id_kernel(struct task_struct)), out)
#else
#define THREAD_OF(task, out) thread_counters_probed(task, out)
#endif

struct qstr {
	const unsigned char *name;
} PAI;

struct dentry {
	struct qstr d_name;
} PAI;

struct path {
	struct dentry *dentry;
} PAI;

struct super_block {
	unsigned long s_magic;
} PAI;

struct inode {
	struct super_block *i_sb;
} PAI;

struct file {
	struct path f_path;
	struct inode *f_inode;
	const void *f_op;
	void *private_data;
} PAI;

struct kvm_vcpu_stat_generic {
	__u64 halt_successful_poll;
	__u64 halt_attempted_poll;
	__u64 halt_poll_success_ns;
	__u64 halt_poll_fail_ns;
} PAI;

struct kvm_vcpu_stat {
	struct kvm_vcpu_stat_generic generic;
	__u64 halt_exits;
	__u64 retentions;
	__u64 retention_ns;
	__u64 retention_timeouts;
} PAI;

struct kvm_vcpu {
	int vcpu_id;
	int vcpu_idx;
	struct pid *pid;
	struct kvm_vcpu_stat stat;
} PAI;

/* One vCPU; _records.h and kvmstats.py read the same layout. */
struct kvm_record {
	__u32 index;
	__u32 flags;
	__u64 attempted_polls;
	__u64 successful_polls;
	__u64 poll_success_ns;
	__u64 poll_fail_ns;
	__u64 halt_exits;
	__u64 retentions;
	__u64 retention_ns;
	__u64 retention_timeouts;
	struct thread_counters thread;
};

/* flags: the fields this kernel does not have */
#define KVM_NO_HALT_EXITS		1	/* not x86 */
#define KVM_NO_RETENTIONS		2	/* a stock kernel */
#define KVM_NO_RETENTION_NS		4
#define KVM_NO_RETENTION_TIMEOUTS	8
#define KVM_NO_THREAD		16	/* never ran, or its thread not seen */
#define KVM_NO_DELAY		32	/* a kernel without CONFIG_SCHED_INFO */

/* Anonymous inodes' file system (include/uapi/linux/magic.h): where KVM
 * makes its vCPU files, so that a file named like one elsewhere (on disk)
 * is never taken for one. */
#define ANON_INODE_FS_MAGIC 0x09041934


/*
 * The counters of the thread that runs vcpu: KVM_NO_THREAD if none (it never
 * ran: pid NULL; its thread exited: no task in the pid's list; or not
 * visible from the reader's pid namespace), KVM_NO_DELAY if no run delay.
 *
 * vcpu->pid is the struct pid of the thread of its last KVM_RUN (kvm_main.c
 * replaces it when another thread runs the vCPU), the thread QEMU names
 * "CPU N/KVM"; its task is the first of pid->tasks[PIDTYPE_PID] (as
 * pid_task() finds it), whose node is that task's pid_links[PIDTYPE_PID].
 * Read with bpf_core_read (thread_counters_probed): what a vCPU file's
 * private_data points at is not a pointer the verifier lets a program
 * load through. The agent checks the tid against the vCPU thread it found
 * in procfs.
 */
static __always_inline __u32 vcpu_thread(struct kvm_vcpu *vcpu,
					 struct thread_counters *out)
{
	struct hlist_node *node;
	struct task_struct *task;
	struct pid *pid;
	int got;

	pid = BPF_CORE_READ(vcpu, pid);
	if (!pid)
		return KVM_NO_THREAD;
	node = BPF_CORE_READ(pid, tasks[PIDTYPE_PID].first);
	if (!node)
		return KVM_NO_THREAD;
	task = (void *)node - bpf_core_field_offset(struct task_struct,
						    pid_links);
	got = THREAD_OF(task, out);
	if (got == THREAD_NOT_VISIBLE) {
		__builtin_memset(out, 0, sizeof(*out));
		return KVM_NO_THREAD;
	}
	return got == THREAD_NO_DELAY ? KVM_NO_DELAY : 0;
}

/*
 * Fill r from file if it is a KVM vCPU file (KVM_CREATE_VCPU's anonymous
 * file, named "kvm-vcpu:N"): 1, else 0 (r then partly written). file is a
 * pointer the verifier lets the program load through (the task_file
 * iterator's, or one cast with bpf_rdonly_cast): its fields are direct
 * loads; the vCPU's are bpf_core_read (KVM's types may be a module's).
 *
 * vcpu_fops (NULL: none) remembers the file operations of the first vCPU
 * file found by its name: every vCPU file has KVM's (kvm_vcpu_fops, which
 * only KVM_CREATE_VCPU gives a file), so a file is one if and only if its
 * f_op is the same, and the file's name (its dentry, two cache lines and a
 * helper call) is read only until the first is found. The caller keeps it
 * for one program run (KVM can be unloaded between runs).
 */
static __always_inline int kvm_vcpu_record(struct file *file,
					   struct kvm_record *r,
					   const void **vcpu_fops)
{
	static const char prefix[] = "kvm-vcpu:";
	struct kvm_vcpu *vcpu;
	char name[sizeof(prefix)];
	int i;

	if (vcpu_fops && *vcpu_fops) {
		if (file->f_op != *vcpu_fops)
			return 0;
	} else {
		if (file->f_inode->i_sb->s_magic != ANON_INODE_FS_MAGIC)
			return 0;
		if (bpf_probe_read_kernel_str(
			    name, sizeof(name),
			    file->f_path.dentry->d_name.name) < 0)
			return 0;
		/* a loop: __builtin_memcmp does not load */
		for (i = 0; i < sizeof(prefix) - 1; i++)
			if (name[i] != prefix[i])
				return 0;
		if (vcpu_fops)
			*vcpu_fops = file->f_op;
	}
	vcpu = file->private_data;
	if (!vcpu)
		return 0;
	r->flags = 0;
	if (bpf_core_field_exists(vcpu->vcpu_idx))
		r->index = BPF_CORE_READ(vcpu, vcpu_idx);
	else
		r->index = BPF_CORE_READ(vcpu, vcpu_id);
	r->attempted_polls = BPF_CORE_READ(vcpu,
					   stat.generic.halt_attempted_poll);
	r->successful_polls = BPF_CORE_READ(vcpu,
					    stat.generic.halt_successful_poll);
	r->poll_success_ns = BPF_CORE_READ(vcpu,
					   stat.generic.halt_poll_success_ns);
	r->poll_fail_ns = BPF_CORE_READ(vcpu, stat.generic.halt_poll_fail_ns);
	r->halt_exits = r->retentions = r->retention_ns = 0;
	r->retention_timeouts = 0;
	if (bpf_core_field_exists(vcpu->stat.halt_exits))
		r->halt_exits = BPF_CORE_READ(vcpu, stat.halt_exits);
	else
		r->flags |= KVM_NO_HALT_EXITS;
	if (bpf_core_field_exists(vcpu->stat.retentions))
		r->retentions = BPF_CORE_READ(vcpu, stat.retentions);
	else
		r->flags |= KVM_NO_RETENTIONS;
	if (bpf_core_field_exists(vcpu->stat.retention_ns))
		r->retention_ns = BPF_CORE_READ(vcpu, stat.retention_ns);
	else
		r->flags |= KVM_NO_RETENTION_NS;
	if (bpf_core_field_exists(vcpu->stat.retention_timeouts))
		r->retention_timeouts = BPF_CORE_READ(vcpu,
						      stat.retention_timeouts);
	else
		r->flags |= KVM_NO_RETENTION_TIMEOUTS;
	r->flags |= vcpu_thread(vcpu, &r->thread);
	return 1;
}

#endif
