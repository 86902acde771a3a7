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

#endif
