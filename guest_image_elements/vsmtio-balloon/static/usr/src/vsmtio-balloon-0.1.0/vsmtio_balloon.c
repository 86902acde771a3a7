// SPDX-License-Identifier: GPL-2.0-only
/*
 * vsmtio_balloon: a CPU balloon for guests whose vCPUs are capped or shared.
 *
 * xBalloon (Suo et al., "Preserving I/O prioritization in virtualized
 * OSes"): when the host caps a vCPU (nova's quota:cpu_quota/cpu_period, a
 * cgroup CPU quota on the vCPU thread), a guest that is work conserving
 * lets its compute-bound tasks spend the whole quota early in each period;
 * the vCPU is then throttled, and an I/O request that arrives meanwhile
 * waits for the next period however high the guest ranks the task that
 * serves it.  The balloon reserves the budget for future I/O instead: for
 * a share of every quantum it halts the vCPU (HLT: the host does not run
 * it, so the quota is not spent), in proportion to what the cap makes
 * unavailable, so that compute-bound tasks get the cap and no more.  It is
 * semi-work-conserving: an I/O event (a device interrupt, or a wake-up IPI
 * from another vCPU) ends the halt at once and the balloon sleeps until
 * its next quantum, so the woken task runs immediately.
 *
 * The mechanism, and why:
 *  - one kernel thread per vCPU at SCHED_FIFO priority 1 (the lowest RT
 *    priority).  At the start of its quantum it preempts any CFS task (the
 *    compute hog) with certainty; only real-time tasks outrank it.  A CFS
 *    balloon (even at nice -20) would preempt the hog, but whether a waking
 *    I/O task preempts it depends on vruntime and wake-up granularity, and
 *    a SCHED_IDLE balloon never beats the hog at all;
 *  - the thread halts with safe_halt() (STI;HLT) in a loop, so every
 *    interrupt returns control to it: a device interrupt or wake-up IPI
 *    counted on this CPU ends the balloon's share (the tick and its own
 *    hrtimer, local APIC interrupts, do not).  The kernel's idle injection
 *    cannot do that: play_idle_precise() ends its forced idle only on its
 *    timer, so an I/O wake-up would wait it out (and the idle_inject
 *    framework is not built in Debian's 6.1);
 *  - the size: what the cap makes unavailable (1 - cap), when the host
 *    passes the cap (an SMBIOS type 11 OEM string
 *    "vsmtio:cpu_cap=<quota_us>/<period_us>", added by the vsmtio nova
 *    compute driver) or the cap_pct parameter gives it; plus "extra" while
 *    the vCPU still loses time, as the guest sees it through its second
 *    clock: steal time (KVM reports a vCPU thread's run-queue wait, and a
 *    cgroup-throttled thread waits there) or the balloon thread's own
 *    lateness (a FIFO thread is woken late only when the vCPU was not
 *    running; the measure that works where the host gives no steal time,
 *    as under TCG).  Without a cap the extra alone sizes it, from steal
 *    time.  Never more than max_pct of a quantum; uncapped and losing no
 *    time, it is off and its threads sleep.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/dmi.h>
#include <linux/hrtimer.h>
#include <linux/irqflags.h>
#include <linux/kernel.h>
#include <linux/kernel_stat.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <asm/hardirq.h>

#define VB_OEM_PREFIX		"vsmtio:cpu_cap="
#define VB_INTERVAL_MS		100U	/* how often the size is recomputed */
#define VB_STEAL_ON_PERMILLE	20U	/* steal below 2% is noise */
#define VB_MIN_PERMILLE		20U	/* a smaller balloon switches off */
#define VB_QUANTUM_US_MIN	500U
#define VB_QUANTUM_US_MAX	100000U
#define VB_MAX_PCT_MAX		95U
/*
 * Lateness below this is jitter, not lost time: under TCG a FIFO thread is
 * routinely woken a few ms late with no cap at all (measured: about a
 * third of the time lost at a 1 ms threshold, uncapped); a quota
 * throttle of a 100 ms period lasts tens of ms.
 */
#define VB_LATE_NOISE_NS	(10 * NSEC_PER_MSEC)

static bool enabled = true;
static unsigned int cap_pct;		/* 0: from the host, else steal */
static unsigned int quantum_us = 4000;
static unsigned int max_pct = 90;

static int vb_set_bounded(const char *val, const struct kernel_param *kp,
			  unsigned int lo, unsigned int hi)
{
	unsigned int v;
	int ret = kstrtouint(val, 0, &v);

	if (ret)
		return ret;
	if (v < lo || v > hi) {
		pr_err("%s=%u is out of range [%u, %u]\n", kp->name, v, lo, hi);
		return -EINVAL;
	}
	WRITE_ONCE(*(unsigned int *)kp->arg, v);
	return 0;
}

static int vb_set_cap(const char *val, const struct kernel_param *kp)
{
	return vb_set_bounded(val, kp, 0, 100);
}

static int vb_set_quantum(const char *val, const struct kernel_param *kp)
{
	return vb_set_bounded(val, kp, VB_QUANTUM_US_MIN, VB_QUANTUM_US_MAX);
}

static int vb_set_max(const char *val, const struct kernel_param *kp)
{
	return vb_set_bounded(val, kp, 0, VB_MAX_PCT_MAX);
}

static const struct kernel_param_ops vb_cap_ops = {
	.set = vb_set_cap, .get = param_get_uint,
};
static const struct kernel_param_ops vb_quantum_ops = {
	.set = vb_set_quantum, .get = param_get_uint,
};
static const struct kernel_param_ops vb_max_ops = {
	.set = vb_set_max, .get = param_get_uint,
};

module_param(enabled, bool, 0644);
MODULE_PARM_DESC(enabled, "Run the balloon when it is sized above zero (Y) "
		 "or never (N).");
module_param_cb(cap_pct, &vb_cap_ops, &cap_pct, 0644);
MODULE_PARM_DESC(cap_pct,
	"Each vCPU's CPU cap in percent of one CPU (1-100; 100: not capped). "
	"0 (default): the cap the host passes (SMBIOS OEM string "
	VB_OEM_PREFIX "<quota>/<period>), else sized from steal time.");
module_param_cb(quantum_us, &vb_quantum_ops, &quantum_us, 0644);
MODULE_PARM_DESC(quantum_us,
	"Balloon quantum in microseconds (500-100000, default 4000): each "
	"quantum the vCPU halts for the balloon's share; keep it well under "
	"the host's quota period.");
module_param_cb(max_pct, &vb_max_ops, &max_pct, 0644);
MODULE_PARM_DESC(max_pct,
	"Largest balloon when sized from steal time, in percent (0-95, "
	"default 90).");

/* The cap the host passed at boot, permille of one CPU; 0: none. */
static unsigned int host_cap_permille;
/* Current size (permille of each quantum the vCPU halts) and why. */
static unsigned int size_permille;
static unsigned int steal_permille;
static unsigned int lost_permille;
static unsigned int extra_permille;
static const char *size_source = "off";

struct vb_cpu {
	struct task_struct *thread;
	struct hrtimer timer;
	u64 last_steal;
	u64 last_lost;
	u64 quanta;
	u64 halted_ns;
	u64 io_yields;
	u64 deferrals;	/* halts postponed: I/O while the tasks ran */
	u64 lost_ns;	/* the thread woke this late: the vCPU did not run */
};

static DEFINE_PER_CPU(struct vb_cpu, vb_cpu);
static DECLARE_WAIT_QUEUE_HEAD(vb_wait);
static enum cpuhp_state vb_hp_state;
static u64 vb_last_resize_ns;

/* ---- the balloon thread of one vCPU */

/*
 * I/O events on this CPU: device interrupts (the generic IRQ layer counts
 * each in kstat) and the IPIs another vCPU sends to wake a task here.  The
 * local APIC timer (the tick, our own hrtimer) is counted elsewhere.
 */
static u64 vb_io_events(void)
{
	return this_cpu_read(kstat.irqs_sum) +
	       this_cpu_read(irq_stat.irq_resched_count) +
	       this_cpu_read(irq_stat.irq_call_count);
}

static enum hrtimer_restart vb_timer_fn(struct hrtimer *timer)
{
	return HRTIMER_NORESTART;	/* its interrupt ends the HLT */
}

/* Halt this vCPU until @end or an I/O event; returns the time halted. */
static u64 vb_halt(struct vb_cpu *vc, ktime_t end)
{
	u64 start = ktime_get_ns(), events = vb_io_events(), halted;
	bool io = false;

	hrtimer_start(&vc->timer, end, HRTIMER_MODE_ABS_PINNED_HARD);
	for (;;) {
		/* Checked with interrupts off: STI;HLT then cannot miss one. */
		local_irq_disable();
		if (vb_io_events() != events) {
			io = true;
			break;
		}
		if (ktime_compare(ktime_get(), end) >= 0 || need_resched() ||
		    kthread_should_stop())
			break;
		safe_halt();
	}
	local_irq_enable();
	hrtimer_cancel(&vc->timer);
	halted = ktime_get_ns() - start;
	WRITE_ONCE(vc->halted_ns, vc->halted_ns + halted);
	if (io)
		WRITE_ONCE(vc->io_yields, vc->io_yields + 1);
	return halted;
}

static bool vb_active(void)
{
	return READ_ONCE(enabled) && READ_ONCE(size_permille);
}

/*
 * Each quantum: halt for the balloon's share, then sleep for the rest,
 * belonging to the guest's tasks.  Semi-work-conserving both ways: an I/O
 * event during the halt ends it (vb_halt()); an I/O event while the tasks
 * ran postpones the next halt by one run slot, since the task it woke may
 * still be at work and a FIFO balloon would preempt it.  Share given up
 * either way is owed and halted in later quanta (never more than max_pct
 * of one, and never more than one quantum owed), so a steady stream of
 * I/O does not hand the compute tasks the budget the balloon keeps.
 * Waking far later than asked means the vCPU was not running (throttled
 * or preempted by the host; an RT-priority thread is otherwise woken at
 * once): that lateness is the guest's own measure of lost time where the
 * host gives no steal time (TCG).
 */
static int vb_thread(void *data)
{
	struct vb_cpu *vc = data;
	u64 owed = 0, run_events = 0;

	sched_set_fifo_low(current);
	while (!kthread_should_stop()) {
		u64 quantum, share, limit, repay, halted;
		ktime_t start, next;
		s64 late;

		if (!vb_active()) {
			wait_event_idle(vb_wait,
					vb_active() || kthread_should_stop());
			owed = 0;
			run_events = vb_io_events();
			continue;
		}
		start = ktime_get();
		quantum = (u64)READ_ONCE(quantum_us) * NSEC_PER_USEC;
		limit = quantum * READ_ONCE(max_pct) / 100;
		share = min(quantum * READ_ONCE(size_permille) / 1000, limit);
		if (vb_io_events() != run_events && owed + share <= quantum) {
			owed += share;
			WRITE_ONCE(vc->deferrals, vc->deferrals + 1);
			next = ktime_add_ns(start, quantum - share);
		} else {
			repay = min(owed, limit - share);
			halted = vb_halt(vc, ktime_add_ns(start, share + repay));
			owed = min(owed - repay + share + repay -
				   min(share + repay, halted), quantum);
			WRITE_ONCE(vc->quanta, vc->quanta + 1);
			/*
			 * The guest's tasks always get their part of the
			 * quantum, even when the halt ended late (the vCPU
			 * was throttled meanwhile): a FIFO thread that went
			 * straight on halting would starve them.
			 */
			next = ktime_add_ns(start, quantum);
			next = max_t(ktime_t, next,
				     ktime_add_ns(ktime_get(),
						  quantum - (share + repay)));
		}
		run_events = vb_io_events();
		set_current_state(TASK_IDLE);
		if (!kthread_should_stop())
			schedule_hrtimeout_range(&next, 20 * NSEC_PER_USEC,
						 HRTIMER_MODE_ABS);
		__set_current_state(TASK_RUNNING);
		late = ktime_to_ns(ktime_sub(ktime_get(), next));
		if (late > VB_LATE_NOISE_NS)
			WRITE_ONCE(vc->lost_ns, vc->lost_ns + late);
	}
	return 0;
}

/* ---- sizing: the host's cap, the operator's, or steal time */

static void vb_resize(struct work_struct *work);
static DECLARE_DELAYED_WORK(vb_resize_work, vb_resize);

/*
 * Over the last interval, in permille of the vCPUs' wall time: steal time
 * (the host's account, KVM), and the lateness of the balloon threads (the
 * guest's own account, valid also where the host gives no steal).
 */
static void vb_lost_time(unsigned int *steal, unsigned int *lost)
{
	u64 now = ktime_get_ns(), st = 0, lo = 0, wall;
	unsigned int n = 0;
	int cpu;

	for_each_online_cpu(cpu) {
		struct vb_cpu *vc = per_cpu_ptr(&vb_cpu, cpu);
		u64 s = kcpustat_cpu(cpu).cpustat[CPUTIME_STEAL];
		u64 l = READ_ONCE(vc->lost_ns);

		st += s - min(s, vc->last_steal);
		lo += l - min(l, vc->last_lost);
		vc->last_steal = s;
		vc->last_lost = l;
		n++;
	}
	wall = (now - vb_last_resize_ns) * max(n, 1U);
	vb_last_resize_ns = now;
	*steal = wall ? min_t(u64, 1000, div64_u64(st * 1000, wall)) : 0;
	*lost = wall ? min_t(u64, 1000, div64_u64(lo * 1000, wall)) : 0;
}

/*
 * The size: with a known cap, what the cap makes unavailable (1 - cap);
 * on top of that (or alone, without a cap), "extra" that grows by half of
 * the time still lost while the vCPU keeps losing time, and decays by an
 * eighth per interval when it does not: the balloon is as large as it
 * must be for the vCPU not to be throttled, bounded by max_pct.
 */
static void vb_resize(struct work_struct *work)
{
	unsigned int cap = READ_ONCE(cap_pct) * 10, floor = 0, size, signal;
	unsigned int limit = READ_ONCE(max_pct) * 10;
	const char *source;

	vb_lost_time(&steal_permille, &lost_permille);
	signal = max(steal_permille, lost_permille);
	if (cap) {
		source = "param";
	} else {
		cap = host_cap_permille;
		source = cap ? "host" : "steal";
	}
	if (cap >= 1000) {
		extra_permille = 0;
		source = "uncapped";
	} else {
		if (cap)
			floor = 1000 - cap;
		if (signal >= VB_STEAL_ON_PERMILLE && vb_active())
			extra_permille = min(extra_permille + signal / 2,
					     limit);
		else if (signal >= VB_STEAL_ON_PERMILLE)
			extra_permille = max(signal, VB_MIN_PERMILLE);
		else
			extra_permille -= DIV_ROUND_UP(extra_permille, 8);
	}
	size = cap >= 1000 ? 0 : min(floor + extra_permille, limit);
	if (size < VB_MIN_PERMILLE) {
		size = 0;
		if (!cap)
			source = "off";
	}
	WRITE_ONCE(size_source, source);
	WRITE_ONCE(size_permille, size);
	if (vb_active())
		wake_up_all(&vb_wait);
	schedule_delayed_work(&vb_resize_work,
			      msecs_to_jiffies(VB_INTERVAL_MS));
}

/* ---- the host's cap: SMBIOS type 11 (OEM strings) */

static void vb_dmi_oem(const struct dmi_header *dh, void *unused)
{
	const char *s = (const char *)dh + dh->length;
	unsigned int quota, period, i, count;

	if (dh->type != DMI_ENTRY_OEMSTRINGS || dh->length < 5)
		return;
	count = ((const u8 *)dh)[4];
	for (i = 0; i < count && *s; i++, s += strlen(s) + 1) {
		if (strncmp(s, VB_OEM_PREFIX, strlen(VB_OEM_PREFIX)))
			continue;
		if (sscanf(s + strlen(VB_OEM_PREFIX), "%u/%u", &quota,
			   &period) != 2 || !quota || !period) {
			pr_warn("ignoring malformed OEM string \"%s\"\n", s);
			continue;
		}
		host_cap_permille = max(1ULL, min_t(u64, 1000,
					div_u64((u64)quota * 1000, period)));
		pr_info("host caps each vCPU at %u us per %u us\n", quota,
			period);
	}
}

/* ---- counters: /sys/module/vsmtio_balloon/stats/ */

#define VB_SUM(field)							\
static ssize_t field##_show(struct module_attribute *a,		\
			    struct module_kobject *k, char *buf)	\
{									\
	u64 sum = 0;							\
	int cpu;							\
									\
	for_each_possible_cpu(cpu)					\
		sum += READ_ONCE(per_cpu_ptr(&vb_cpu, cpu)->field);	\
	return sysfs_emit(buf, "%llu\n", sum);				\
}									\
static struct module_attribute vb_attr_##field = __ATTR_RO(field)

#define VB_VALUE(name, fmt, expr)					\
static ssize_t name##_show(struct module_attribute *a,			\
			   struct module_kobject *k, char *buf)		\
{									\
	return sysfs_emit(buf, fmt "\n", expr);				\
}									\
static struct module_attribute vb_attr_##name = __ATTR_RO(name)

VB_SUM(quanta);
VB_SUM(halted_ns);
VB_SUM(io_yields);
VB_SUM(deferrals);
VB_VALUE(size_permille, "%u", READ_ONCE(size_permille));
VB_VALUE(steal_permille, "%u", READ_ONCE(steal_permille));
VB_VALUE(lost_permille, "%u", READ_ONCE(lost_permille));
VB_VALUE(extra_permille, "%u", READ_ONCE(extra_permille));
VB_SUM(lost_ns);
VB_VALUE(host_cap_permille, "%u", host_cap_permille);
VB_VALUE(source, "%s", READ_ONCE(size_source));
VB_VALUE(active, "%d", vb_active());

static struct attribute *vb_attrs[] = {
	&vb_attr_quanta.attr,
	&vb_attr_halted_ns.attr,
	&vb_attr_io_yields.attr,
	&vb_attr_deferrals.attr,
	&vb_attr_size_permille.attr,
	&vb_attr_steal_permille.attr,
	&vb_attr_lost_permille.attr,
	&vb_attr_extra_permille.attr,
	&vb_attr_lost_ns.attr,
	&vb_attr_host_cap_permille.attr,
	&vb_attr_source.attr,
	&vb_attr_active.attr,
	NULL,
};

static const struct attribute_group vb_stats_group = {
	.name = "stats",
	.attrs = vb_attrs,
};

/* ---- vCPUs coming and going, load and unload */

static int vb_cpu_online(unsigned int cpu)
{
	struct vb_cpu *vc = per_cpu_ptr(&vb_cpu, cpu);
	struct task_struct *t;

	vc->last_steal = kcpustat_cpu(cpu).cpustat[CPUTIME_STEAL];
	vc->last_lost = READ_ONCE(vc->lost_ns);
	t = kthread_create_on_cpu(vb_thread, vc, cpu, "vsmtio_balloon/%u");
	if (IS_ERR(t))
		return PTR_ERR(t);
	vc->thread = t;
	wake_up_process(t);
	return 0;
}

static int vb_cpu_offline(unsigned int cpu)
{
	struct vb_cpu *vc = per_cpu_ptr(&vb_cpu, cpu);

	if (vc->thread) {
		kthread_stop(vc->thread);
		vc->thread = NULL;
	}
	return 0;
}

static int __init vb_init(void)
{
	int cpu, ret;

	for_each_possible_cpu(cpu) {
		struct vb_cpu *vc = per_cpu_ptr(&vb_cpu, cpu);

		hrtimer_init(&vc->timer, CLOCK_MONOTONIC,
			     HRTIMER_MODE_ABS_PINNED_HARD);
		vc->timer.function = vb_timer_fn;
	}
	dmi_walk(vb_dmi_oem, NULL);
	vb_last_resize_ns = ktime_get_ns();

	ret = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "vsmtio_balloon:online",
				vb_cpu_online, vb_cpu_offline);
	if (ret < 0) {
		pr_err("not loaded: cannot start the balloon threads (%d)\n",
		       ret);
		return ret;
	}
	vb_hp_state = ret;
	ret = sysfs_create_group(&THIS_MODULE->mkobj.kobj, &vb_stats_group);
	if (ret) {
		cpuhp_remove_state(vb_hp_state);
		return ret;
	}
	vb_resize(NULL);
	pr_info("loaded: %s, balloon %u permille\n", size_source,
		size_permille);
	return 0;
}

static void __exit vb_exit(void)
{
	cancel_delayed_work_sync(&vb_resize_work);
	sysfs_remove_group(&THIS_MODULE->mkobj.kobj, &vb_stats_group);
	cpuhp_remove_state(vb_hp_state);
}

module_init(vb_init);
module_exit(vb_exit);

MODULE_DESCRIPTION("vsmtio CPU balloon (xBalloon): reserve a capped vCPU's "
		   "budget for I/O");
MODULE_AUTHOR("The vsmtio developers");
MODULE_LICENSE("GPL");
MODULE_VERSION("0.1.0");
