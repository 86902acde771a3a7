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
 * from the reader's pid namespace has KVM_NO_THREAD set: the agent reads its
 * threads with the task iterator then.
 *
 * CO-RE as taskiter.bpf.c: minimal local structs marked
 * preserve_access_index (bpf_kvm.h, which threads.bpf.c shares), relocated
 * by libbpf against the running kernel's BTF, that of the kvm module
 * included where KVM is a module.
 */

#include "bpf_kvm.h"

struct bpf_iter__task_file {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
	__u32 fd;
	struct file *file;
} PAI;

/* GPL-compatible, as the kernel requires of a program that calls the
 * helpers this one calls (bpf_probe_read_kernel behind bpf_core_read,
 * bpf_probe_read_kernel_str, bpf_get_current_task_btf: offered to GPL
 * programs only), and BSD too, as taskiter.bpf.c: the object is embedded
 * in the project's Apache-2.0 extension ("Dual BSD/GPL" is one the kernel
 * accepts). */
char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("iter/task_file")
int kvm_vcpus(struct bpf_iter__task_file *ctx)
{
	struct file *file = ctx->file;
	struct kvm_record r = {};

	if (file && kvm_vcpu_record(file, &r, NULL))
		bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
