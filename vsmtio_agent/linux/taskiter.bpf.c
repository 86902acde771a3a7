// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The vCPU threads' scheduler counters in bulk: a BPF task iterator.
 *
 * Attached to one process (bpf_iter_link_info.task.pid, Linux >= 6.1), the
 * iterator visits that process's threads only; each read of an iterator
 * made from the link (bpf_iter_create) runs this program once per thread
 * and returns one fixed binary record per thread: the counters the agent
 * reads from procfs (vsmtio_agent/linux/procfs.py), from the same kernel
 * fields procfs prints them from (bpf_common.h's thread_counters() lists
 * them: kvmstats.bpf.c copies the same for each vCPU's thread).
 *
 * Why: procfs formats a text file per thread and file (a few microseconds
 * of kernel time each, 15 for status); this walks the threads once and
 * copies 48 bytes per thread (vsmtio_agent/linux/taskiter.py has the
 * numbers).
 *
 * CO-RE without a generated vmlinux.h: only the fields read are declared
 * (here and in bpf_common.h), in minimal local structs marked
 * preserve_access_index, so that clang records each access as a
 * relocation that libbpf resolves against the running kernel's BTF
 * (/sys/kernel/btf/vmlinux) at load. The build
 * needs clang and libbpf's headers, not bpftool nor a kernel's BTF, and
 * the object loads on any kernel whose layout differs (field offsets are
 * the kernel's, not these structs').
 *
 * Thread ids: the record carries the id in the namespace of the reading
 * process, as procfs shows it to the agent (thread_counters()), and a
 * thread not visible there is left out.
 */

#include "bpf_common.h"

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} PAI;

/* GPL-compatible, as the kernel requires of a program that calls the
 * helpers this one calls (bpf_get_current_task_btf, bpf_probe_read_kernel
 * behind bpf_core_read: offered to GPL programs only), and BSD too, so that
 * the object embedded in the project's Apache-2.0 extension carries a
 * permissive licence as well ("Dual BSD/GPL" is one the kernel accepts). */
char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("iter/task")
int vcpu_counters(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct record r = {};

	if (task && thread_record(task, &r) == 0)
		bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
