// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * KVM's per-vCPU halt and retention statistics of one QEMU, in one read: a
 * BPF task_file iterator.
 *
 * Attached to one process (bpf_iter_link_info.task.pid, Linux >= 6.1), the
 * iterator visits that process's open files once (threads sharing its file
 * table are not visited again); each read of an iterator made from the
 * link runs this program once per file and returns one fixed binary record
 * per KVM vCPU file (KVM_CREATE_VCPU's anonymous file, named
 * "kvm-vcpu:N"), from the struct kvm_vcpu behind it (file->private_data):
 *
 *   index                 vcpu_idx (creation order: QEMU's vCPU index)
 *   halt_attempted_poll   stat.generic (every architecture)
 *   halt_successful_poll  stat.generic
 *   halt_poll_success_ns  stat.generic
 *   halt_poll_fail_ns     stat.generic
 *   halt_exits            stat (x86)
 *   retentions, retention_ns, retention_timeouts
 *                         stat (the vsmtio host kernel patches, ABI.rst)
 *   thread                the scheduler counters of the thread that runs
 *                         the vCPU (pid: set at its first KVM_RUN), those
 *                         taskiter.bpf.c copies (thread_counters())
 *
 * the same fields KVM's binary statistics (KVM_GET_STATS_FD), and libvirt's
 * vcpu.N.<name>.sum after QEMU's query-stats, copy. A field this kernel
 * does not have sets its bit in flags (bpf_core_field_exists).
 *
 * Why: libvirt gives them only with its vCPU group, for which libvirtd
 * reads three procfs files per vCPU thread and asks every QEMU over QMP,
 * every call (vsmtio_agent/linux/kvmstats.py has the numbers). The vCPU
 * thread's counters too, so that on a kvm host one read per QEMU gives the
 * agent all it reads of each vCPU, and the task iterator's read of the same
 * QEMU (its own fixed cost) is not made
 * (vsmtio_agent/drivers/libvirt/sampling.py; doc/benchmarks/agent_tick.rst
 * has what it saves).
 * A vCPU that never ran (pid NULL) or whose thread is gone or not visible
 * from the reader's pid namespace has NO_THREAD set: the agent reads its
 * threads with the task iterator then.
 *
 * CO-RE as taskiter.bpf.c: minimal local structs marked
 * preserve_access_index, relocated by libbpf against the running kernel's
 * BTF, that of the kvm module included where KVM is a module.
 */

#include "bpf_common.h"

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

struct bpf_iter__task_file {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
	__u32 fd;
	struct file *file;
} PAI;

/* One vCPU; _taskiter.c and kvmstats.py read the same layout. */
struct record {
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
#define NO_HALT_EXITS		1	/* not x86 */
#define NO_RETENTIONS		2	/* a stock kernel */
#define NO_RETENTION_NS		4
#define NO_RETENTION_TIMEOUTS	8
#define NO_THREAD		16	/* never ran, or its thread not seen */
#define NO_DELAY		32	/* a kernel without CONFIG_SCHED_INFO */

/* Anonymous inodes' file system (include/uapi/linux/magic.h): where KVM
 * makes its vCPU files, so that a file named like one elsewhere (on disk)
 * is never taken for one. */
#define ANON_INODE_FS_MAGIC 0x09041934

/* GPL-compatible, as the kernel requires of a program that calls the
 * helpers this one calls (bpf_probe_read_kernel behind bpf_core_read,
 * bpf_probe_read_kernel_str, bpf_get_current_task_btf: offered to GPL
 * programs only), and BSD too, as taskiter.bpf.c: the object is embedded
 * in the project's Apache-2.0 extension ("Dual BSD/GPL" is one the kernel
 * accepts). */
char LICENSE[] SEC("license") = "Dual BSD/GPL";

/*
 * The counters of the thread that runs vcpu: NO_THREAD if none (it never
 * ran: pid NULL; its thread exited: no task in the pid's list; or not
 * visible from the reader's pid namespace), NO_DELAY if no run delay.
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
		return NO_THREAD;
	node = BPF_CORE_READ(pid, tasks[PIDTYPE_PID].first);
	if (!node)
		return NO_THREAD;
	task = (void *)node - bpf_core_field_offset(struct task_struct,
						    pid_links);
	got = thread_counters_probed(task, out);
	if (got == THREAD_NOT_VISIBLE) {
		__builtin_memset(out, 0, sizeof(*out));
		return NO_THREAD;
	}
	return got == THREAD_NO_DELAY ? NO_DELAY : 0;
}

SEC("iter/task_file")
int kvm_vcpus(struct bpf_iter__task_file *ctx)
{
	static const char prefix[] = "kvm-vcpu:";
	struct file *file = ctx->file;
	struct record r = {};
	struct kvm_vcpu *vcpu;
	char name[sizeof(prefix)];
	int i;

	if (!file)
		return 0;
	if (BPF_CORE_READ(file, f_inode, i_sb, s_magic) != ANON_INODE_FS_MAGIC)
		return 0;
	if (bpf_probe_read_kernel_str(name, sizeof(name),
				      BPF_CORE_READ(file, f_path.dentry,
						    d_name.name)) < 0)
		return 0;
	/* a loop: __builtin_memcmp does not load */
	for (i = 0; i < sizeof(prefix) - 1; i++)
		if (name[i] != prefix[i])
			return 0;
	vcpu = BPF_CORE_READ(file, private_data);
	if (!vcpu)
		return 0;
	if (bpf_core_field_exists(vcpu->vcpu_idx))
		r.index = BPF_CORE_READ(vcpu, vcpu_idx);
	else
		r.index = BPF_CORE_READ(vcpu, vcpu_id);
	r.attempted_polls = BPF_CORE_READ(vcpu, stat.generic.halt_attempted_poll);
	r.successful_polls = BPF_CORE_READ(vcpu,
					   stat.generic.halt_successful_poll);
	r.poll_success_ns = BPF_CORE_READ(vcpu,
					  stat.generic.halt_poll_success_ns);
	r.poll_fail_ns = BPF_CORE_READ(vcpu, stat.generic.halt_poll_fail_ns);
	if (bpf_core_field_exists(vcpu->stat.halt_exits))
		r.halt_exits = BPF_CORE_READ(vcpu, stat.halt_exits);
	else
		r.flags |= NO_HALT_EXITS;
	if (bpf_core_field_exists(vcpu->stat.retentions))
		r.retentions = BPF_CORE_READ(vcpu, stat.retentions);
	else
		r.flags |= NO_RETENTIONS;
	if (bpf_core_field_exists(vcpu->stat.retention_ns))
		r.retention_ns = BPF_CORE_READ(vcpu, stat.retention_ns);
	else
		r.flags |= NO_RETENTION_NS;
	if (bpf_core_field_exists(vcpu->stat.retention_timeouts))
		r.retention_timeouts = BPF_CORE_READ(vcpu,
						     stat.retention_timeouts);
	else
		r.flags |= NO_RETENTION_TIMEOUTS;
	r.flags |= vcpu_thread(vcpu, &r.thread);
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
