/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The guest side of the vsmtio paravirtual retention protocol, ABI version 1.
 * The contract is host_kernel_patches/ABI.rst ("Paravirtual retention
 * protocol"); the names and numbers below are copied from it.
 */
#ifndef VSMTIO_RETENTION_PV_H
#define VSMTIO_RETENTION_PV_H

#include <linux/build_bug.h>
#include <linux/stddef.h>
#include <linux/types.h>

#define VSMTIO_KVM_SIGNATURE		"KVMKVMKVM\0\0\0"
/* CPUID.(KVM base + 1):EAX, the KVM PV features leaf. */
#define VSMTIO_KVM_CPUID_FEATURES	1
#define KVM_FEATURE_CTX_RETENTION	18
#define MSR_KVM_CTX_RETENTION		0x4b564d09
#define KVM_CTX_RETENTION_ENABLED	BIT_ULL(0)

/* 64 bytes, 64-byte aligned, little-endian. */
struct kvm_ctx_retention {
	u64 seq;		/* guest: odd while retaining */
	u64 since;		/* guest: TSC when this retention began */
	u64 retained_tsc;	/* guest: TSC cycles in ended retentions */
	u64 stop;		/* host: == seq ends the retention */
	u64 timeout_ns;		/* host: timeout in force, 0 = use HLT */
	u64 timeouts;		/* host: retentions the host ended */
	u8 reserved[16];
};

static_assert(sizeof(struct kvm_ctx_retention) == 64);
static_assert(offsetof(struct kvm_ctx_retention, stop) == 0x18);
static_assert(offsetof(struct kvm_ctx_retention, timeout_ns) == 0x20);
static_assert(offsetof(struct kvm_ctx_retention, timeouts) == 0x28);

#endif
