// SPDX-License-Identifier: GPL-2.0-only
/*
 * vsmtio_retention: a cpuidle driver whose deep state is context retention.
 *
 * vSMT-IO (USENIX ATC 2020): an idle vCPU that is about to be woken by I/O
 * should keep its context on its hyperthread instead of exiting to the host
 * with HLT, so that it resumes without a VM exit/entry and a reschedule.  The
 * retention state waits with MONITOR/MWAIT; with MWAIT exits disabled on the
 * host (QEMU -overcommit cpu-pm=on) the MWAIT runs on the hardware thread.
 * Retention is bounded, because a retaining vCPU holds its hyperthread: by
 * the host through the paravirtual retention protocol when the host offers
 * it, otherwise by a guest-side hrtimer.  When it ends by timeout the vCPU
 * falls back to HLT, and HLT exits to the host as before.
 *
 * Which line is monitored depends on who bounds the retention:
 *  - guest timer: the idle task's thread flags, with TIF_POLLING_NRFLAG set
 *    (as intel_idle does), so a wakeup from another vCPU is a plain memory
 *    write, no IPI; the timer's interrupt ends MWAIT.
 *  - host (PV protocol, host_kernel_patches/ABI.rst): the record's ``stop``
 *    word, as the ABI's handshake says, so the host's stop ends MWAIT even
 *    when it lands between our last check and MWAIT; wakeups then come as
 *    IPIs (polling is off).  We also arm our own timer at the host's
 *    timeout (the ABI allows it), so a retention ends on time even when
 *    the host's check is late.
 *
 * A live migration can leave the record unregistered (VMMs that do not know
 * the MSR, QEMU 7.2 among them, do not carry it): once a second an idle
 * entry reads the MSR back and registers the record again if the host no
 * longer holds it (vr_pv_check).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/cpuidle.h>
#include <linux/hrtimer.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/sched/clock.h>
#include <linux/sched/idle.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/version.h>
#include <linux/context_tracking.h>
#include <asm/cpufeature.h>
#include <asm/io.h>
#include <asm/msr.h>
#include <asm/mwait.h>
#include <asm/nospec-branch.h>
#include <asm/processor.h>

#include "vsmtio_retention_pv.h"

#define VR_TIMEOUT_US_MIN	1U
#define VR_TIMEOUT_US_MAX	100000U

/* Guest-side bound of one retention; 200 us is KVM's halt_poll_ns default. */
static unsigned int timeout_us = 200;
static bool enabled = true;
static bool use_pv = true;

static int vr_set_timeout(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int ret = kstrtouint(val, 0, &v);

	if (ret)
		return ret;
	if (v < VR_TIMEOUT_US_MIN || v > VR_TIMEOUT_US_MAX) {
		pr_err("timeout_us=%u is out of range [%u, %u]\n", v,
		       VR_TIMEOUT_US_MIN, VR_TIMEOUT_US_MAX);
		return -EINVAL;
	}
	WRITE_ONCE(timeout_us, v);
	return 0;
}

static const struct kernel_param_ops vr_timeout_ops = {
	.set = vr_set_timeout,
	.get = param_get_uint,
};
module_param_cb(timeout_us, &vr_timeout_ops, &timeout_us, 0644);
MODULE_PARM_DESC(timeout_us,
	"Longest context retention in microseconds when the host does not "
	"bound it (1-100000, default 200); then the vCPU halts.");
module_param(enabled, bool, 0644);
MODULE_PARM_DESC(enabled,
	"Retain context when idle (Y) or halt at once like the default idle "
	"loop (N).");
module_param_named(pv, use_pv, bool, 0444);
MODULE_PARM_DESC(pv,
	"Use the host's paravirtual retention protocol when it offers one "
	"(default Y); N always bounds retention with the guest-side timer.");

enum vr_end { VR_END_NONE, VR_END_WORK, VR_END_TIMEOUT, VR_END_HOST_STOP };

struct vr_cpu {
	struct hrtimer timer;
	struct kvm_ctx_retention *rec;	/* registered with the host, or NULL */
	unsigned long checked;		/* jiffies of the last MSR read-back */
	bool expired;
	u64 retentions;
	u64 retained_ns;
	u64 timeouts;
	u64 host_stops;
	u64 halts;
	u64 halted_ns;
	u64 reregistrations;
};

static DEFINE_PER_CPU(struct vr_cpu, vr_cpu);
static bool vr_pv_active;
static enum cpuhp_state vr_hp_state;

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
#define vr_rcu_idle_enter()	ct_cpuidle_enter()
#define vr_rcu_idle_exit()	ct_cpuidle_exit()
#else
#define vr_rcu_idle_enter()	ct_idle_enter()
#define vr_rcu_idle_exit()	ct_idle_exit()
#endif

/* ---- the paravirtual retention protocol (host_kernel_patches/ABI.rst) */

static bool vr_pv_offered(void)
{
	u32 base = hypervisor_cpuid_base(VSMTIO_KVM_SIGNATURE, 0);

	return base && (cpuid_eax(base | VSMTIO_KVM_CPUID_FEATURES) &
			BIT(KVM_FEATURE_CTX_RETENTION));
}

/* cpuhp callbacks of an AP state: they run on the vCPU they are about. */
static int vr_pv_cpu_online(unsigned int cpu)
{
	struct vr_cpu *vc = this_cpu_ptr(&vr_cpu);
	struct kvm_ctx_retention *rec;
	int ret;

	/* kmalloc of a power of two is naturally aligned: 64-byte aligned. */
	rec = kzalloc_node(sizeof(*rec), GFP_KERNEL, cpu_to_node(cpu));
	if (!rec)
		return -ENOMEM;
	if (!IS_ALIGNED(virt_to_phys(rec), sizeof(*rec))) {
		/* Slab debugging can offset objects; the ABI needs 64. */
		pr_err("cpu%u: record not 64-byte aligned\n", cpu);
		kfree(rec);
		return -EINVAL;
	}
	ret = wrmsrl_safe(MSR_KVM_CTX_RETENTION,
			  virt_to_phys(rec) | KVM_CTX_RETENTION_ENABLED);
	if (ret) {
		pr_err("cpu%u: the host refused the retention record\n", cpu);
		kfree(rec);
		return -EIO;
	}
	vc->checked = jiffies;
	WRITE_ONCE(vc->rec, rec);
	return 0;
}

/*
 * Register the record again if the host no longer holds it: after a live
 * migration by a VMM that does not carry the MSR the destination's KVM reads
 * it as 0, neither bounds our retentions nor writes timeout_ns.  One MSR
 * read (one exit) a second per vCPU finds that; until it does, our own timer
 * still bounds each retention at the timeout last written.  Zeroed first,
 * as at the first registration.  A host without the MSR (#GP) is left
 * alone: the guest timer bounds retention there.  Interrupts are off.
 */
static void vr_pv_check(struct vr_cpu *vc)
{
	u64 held, want = virt_to_phys(vc->rec) | KVM_CTX_RETENTION_ENABLED;

	if (time_before(jiffies, vc->checked + HZ))
		return;
	vc->checked = jiffies;
	if (rdmsrl_safe(MSR_KVM_CTX_RETENTION, &held) || held == want)
		return;
	memset(vc->rec, 0, sizeof(*vc->rec));
	if (!wrmsrl_safe(MSR_KVM_CTX_RETENTION, want))
		vc->reregistrations++;
}

static int vr_pv_cpu_offline(unsigned int cpu)
{
	struct vr_cpu *vc = this_cpu_ptr(&vr_cpu);

	if (vc->rec) {
		wrmsrl_safe(MSR_KVM_CTX_RETENTION, 0);
		kfree(vc->rec);
		WRITE_ONCE(vc->rec, NULL);
	}
	return 0;
}

/* ---- the retention state */

static enum hrtimer_restart vr_timer_fn(struct hrtimer *t)
{
	WRITE_ONCE(container_of(t, struct vr_cpu, timer)->expired, true);
	return HRTIMER_NORESTART;
}

static __always_inline enum vr_end vr_end_reason(struct vr_cpu *vc)
{
	if (need_resched())
		return VR_END_WORK;
	if (READ_ONCE(vc->expired))
		return VR_END_TIMEOUT;
	if (vc->rec && READ_ONCE(vc->rec->stop) == READ_ONCE(vc->rec->seq))
		return VR_END_HOST_STOP;
	return VR_END_NONE;
}

/*
 * MONITOR/MWAIT until there is work, the bound expires or the host asks us
 * to stop.  Called with interrupts off and RCU not watching; MWAIT runs with
 * interrupts on (sti shadow), so an interrupt both ends MWAIT and is served.
 * EAX=0 (C1 hint), ECX=0: hardware of every vendor and QEMU's TCG accept it.
 */
static enum vr_end vr_retain(struct vr_cpu *vc, const void *line)
{
	enum vr_end end;

	for (;;) {
		end = vr_end_reason(vc);
		if (end != VR_END_NONE)
			return end;
		if (static_cpu_has_bug(X86_BUG_CLFLUSH_MONITOR))
			clflush((void *)line);
		__monitor(line, 0, 0);
		end = vr_end_reason(vc);
		if (end != VR_END_NONE)
			return end;
		x86_idle_clear_cpu_buffers();
		__sti_mwait(0, 0);
		/*
		 * One instruction with interrupts on: an MWAIT that returns
		 * still in the STI shadow (QEMU TCG with several vCPUs runs
		 * MWAIT as PAUSE) must not hide the interrupt that ends it.
		 */
		asm volatile("nop");
		raw_local_irq_disable();
	}
}

/* HLT: the vCPU gives its hyperthread back to the host until an interrupt. */
static void vr_halt(struct vr_cpu *vc)
{
	u64 t0;

	if (current_clr_polling_and_test())
		return;
	t0 = local_clock();
	vr_rcu_idle_enter();
	x86_idle_clear_cpu_buffers();
	raw_safe_halt();
	raw_local_irq_disable();
	vr_rcu_idle_exit();
	vc->halts++;
	vc->halted_ns += local_clock() - t0;
}

static void vr_timer_arm(struct vr_cpu *vc, u64 ns)
{
	WRITE_ONCE(vc->expired, false);
	hrtimer_start(&vc->timer, ns_to_ktime(ns),
		      HRTIMER_MODE_REL_PINNED_HARD);
}

static int vr_enter_retain(struct cpuidle_device *dev,
			   struct cpuidle_driver *drv, int index)
{
	struct vr_cpu *vc = this_cpu_ptr(&vr_cpu);
	struct kvm_ctx_retention *rec = vc->rec;
	const void *line;
	enum vr_end end;
	u64 t0, seq = 0, timeout_ns;

	if (rec)
		vr_pv_check(vc);
	timeout_ns = rec ? READ_ONCE(rec->timeout_ns) :
			   (u64)READ_ONCE(timeout_us) * NSEC_PER_USEC;
	if (!READ_ONCE(enabled) || !timeout_ns) {
		vr_halt(vc);
		return index;
	}

	if (rec) {
		/* Wakeups must IPI us: we monitor the host's stop word. */
		if (current_clr_polling_and_test())
			return index;
		line = &rec->stop;
		seq = rec->seq;
		rec->since = rdtsc();
		barrier();	/* since before seq, x86 keeps store order */
		WRITE_ONCE(rec->seq, seq + 1);
	} else {
		if (current_set_polling_and_test()) {
			current_clr_polling();
			return index;
		}
		line = &current_thread_info()->flags;
	}
	vr_timer_arm(vc, timeout_ns);

	t0 = local_clock();
	vr_rcu_idle_enter();
	end = vr_retain(vc, line);
	vr_rcu_idle_exit();
	vc->retained_ns += local_clock() - t0;
	vc->retentions++;

	hrtimer_try_to_cancel(&vc->timer);
	if (rec) {
		rec->retained_tsc += rdtsc() - rec->since;
		barrier();
		WRITE_ONCE(rec->seq, seq + 2);
	} else {
		current_clr_polling();
	}

	if (end == VR_END_TIMEOUT)
		vc->timeouts++;
	else if (end == VR_END_HOST_STOP)
		vc->host_stops++;
	if (end != VR_END_WORK)
		vr_halt(vc);
	return index;
}

static struct cpuidle_driver vr_driver = {
	.name = "vsmtio_retention",
	/* No .owner: cpuidle would pin the module and rmmod could not work. */
	.states = {
		{ /* entry 0 is the poll state: cpuidle_poll_state_init() */ },
		{
			.name = "RETAIN",
			.desc = "MWAIT retention, then HLT",
			.exit_latency = 1,
			.target_residency = 1,
			.flags = CPUIDLE_FLAG_RCU_IDLE,
			.enter = vr_enter_retain,
		},
	},
	.safe_state_index = 0,
	.state_count = 2,
};

/* ---- counters: /sys/module/vsmtio_retention/stats/ */

#define VR_STAT(field)							\
static ssize_t field##_show(struct module_attribute *a,		\
			    struct module_kobject *k, char *buf)	\
{									\
	u64 sum = 0;							\
	int cpu;							\
									\
	for_each_possible_cpu(cpu)					\
		sum += READ_ONCE(per_cpu_ptr(&vr_cpu, cpu)->field);	\
	return sysfs_emit(buf, "%llu\n", sum);				\
}									\
static struct module_attribute vr_attr_##field = __ATTR_RO(field)

VR_STAT(retentions);
VR_STAT(retained_ns);
VR_STAT(timeouts);
VR_STAT(host_stops);
VR_STAT(halts);
VR_STAT(halted_ns);
VR_STAT(reregistrations);

/* "pv": the host bounds retention (PV protocol); "timer": our timer does. */
static ssize_t mode_show(struct module_attribute *a,
			 struct module_kobject *k, char *buf)
{
	return sysfs_emit(buf, "%s\n", vr_pv_active ? "pv" : "timer");
}
static struct module_attribute vr_attr_mode = __ATTR_RO(mode);

static struct attribute *vr_attrs[] = {
	&vr_attr_retentions.attr,
	&vr_attr_retained_ns.attr,
	&vr_attr_timeouts.attr,
	&vr_attr_host_stops.attr,
	&vr_attr_halts.attr,
	&vr_attr_halted_ns.attr,
	&vr_attr_reregistrations.attr,
	&vr_attr_mode.attr,
	NULL,
};

static const struct attribute_group vr_stats_group = {
	.name = "stats",
	.attrs = vr_attrs,
};

/* ---- load and unload */

static void vr_cleanup_cpus(void)
{
	int cpu;

	for_each_possible_cpu(cpu) {
		struct vr_cpu *vc = per_cpu_ptr(&vr_cpu, cpu);

		hrtimer_cancel(&vc->timer);
	}
}

static int vr_refuse(int err, const char *why)
{
	pr_err("not loaded: %s\n", why);
	return err;
}

static int __init vr_init(void)
{
	struct cpuidle_driver *other;
	int cpu, ret;

	if (!boot_cpu_has(X86_FEATURE_MWAIT))
		return vr_refuse(-ENODEV,
			"this CPU has no MONITOR/MWAIT (cpuid 1:ecx bit 3); "
			"start the guest with MWAIT exits disabled (QEMU "
			"-overcommit cpu-pm=on) or a CPU model with 'monitor'");
	if (boot_cpu_has_bug(X86_BUG_MONITOR))
		return vr_refuse(-ENODEV,
			"MONITOR is unreliable on this CPU (X86_BUG_MONITOR)");
	if (boot_option_idle_override == IDLE_POLL)
		return vr_refuse(-EINVAL,
			"idle=poll is set: the idle loop never calls cpuidle");
	other = cpuidle_get_driver();
	if (other) {
		pr_err("not loaded: cpuidle driver %s already owns idle; boot "
		       "with intel_idle.max_cstate=0 "
		       "initcall_blacklist=haltpoll_init\n", other->name);
		return -EBUSY;
	}

	for_each_possible_cpu(cpu) {
		struct vr_cpu *vc = per_cpu_ptr(&vr_cpu, cpu);

		hrtimer_init(&vc->timer, CLOCK_MONOTONIC,
			     HRTIMER_MODE_REL_PINNED_HARD);
		vc->timer.function = vr_timer_fn;
	}

	vr_pv_active = use_pv && vr_pv_offered();
	if (vr_pv_active) {
		ret = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN,
					"vsmtio_retention:online",
					vr_pv_cpu_online, vr_pv_cpu_offline);
		if (ret < 0) {
			/* cpuhp rolled back the vCPUs it had registered. */
			pr_warn("the host offers the PV retention protocol but "
				"registration failed (%d): using the guest "
				"timer\n", ret);
			vr_pv_active = false;
		} else {
			vr_hp_state = ret;
		}
	}

	cpuidle_poll_state_init(&vr_driver);
	ret = cpuidle_register(&vr_driver, NULL);
	if (ret) {
		pr_err("not loaded: cpuidle_register failed (%d)%s\n", ret,
		       ret == -ENODEV ? ": cpuidle is off (cpuidle.off=1?)" :
		       ret == -EBUSY ? ": another cpuidle driver won" : "");
		goto err_hp;
	}
	ret = sysfs_create_group(&THIS_MODULE->mkobj.kobj, &vr_stats_group);
	if (ret)
		goto err_idle;

	pr_info("registered: retention bounded by %s%s\n",
		vr_pv_active ? "the host (PV protocol)" : "a guest timer",
		READ_ONCE(enabled) ? "" : " (disabled: halting)");
	return 0;

err_idle:
	cpuidle_unregister(&vr_driver);
err_hp:
	if (vr_pv_active)
		cpuhp_remove_state(vr_hp_state);
	vr_cleanup_cpus();
	return ret;
}

static void __exit vr_exit(void)
{
	sysfs_remove_group(&THIS_MODULE->mkobj.kobj, &vr_stats_group);
	/* Waits until no CPU is inside vr_enter_retain any more. */
	cpuidle_unregister(&vr_driver);
	if (vr_pv_active)
		cpuhp_remove_state(vr_hp_state);
	vr_cleanup_cpus();
}

module_init(vr_init);
module_exit(vr_exit);

MODULE_DESCRIPTION("vSMT-IO context retention: MONITOR/MWAIT cpuidle state");
MODULE_AUTHOR("The vsmtio developers");
MODULE_LICENSE("GPL");
MODULE_VERSION("0.1.0");
