// SPDX-License-Identifier: Apache-2.0
/*
 * The kernel bench's processes (vsmtio_bench/kernel_host.py), in C, for a
 * guest whose busybox initramfs has no Python: the same request server,
 * spinner and pipe ping-pong, so the bench's scheduling situations run on
 * a guest kernel the host does not run (Debian 12's 6.1, CFS).
 *
 *   sched_guest calibrate
 *       ns per iteration of the busy loop, the fastest of 30 trials.
 *   sched_guest bursts NSI US...
 *       each burst of US microseconds timed 2000 times: median, fastest
 *       and p99 in ns.
 *   sched_guest point NSI BURST_NS WAIT_NS SPIN_NS THREADS SPINNER
 *                     SECONDS WARMUP CGROUPS KEY
 *       THREADS server processes (0: none) and a spinner (SPINNER 1),
 *       each joining CGROUPS/server or CGROUPS/spinner ("-": none); the
 *       figures of the window after WARMUP, on one line.
 *   sched_guest switch ROUND_TRIPS
 *       a round trip of one byte between two processes through two pipes,
 *       and the four pipe operations alone, in ns.
 *
 * Every result is a line "VSMTIO <what>=<value>" on standard output, which
 * guest_image_elements/tools/kernel_guest.py reads from the console.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_NS 300000000LL	/* to fork and join the groups */
#define SPIN_CHUNK 2000
#define MAX_SERVERS 16
#define MAX_DELAYS 400000	/* per server: 2 s of 5 us requests */
#define BURST_SAMPLES 2000

struct server_out {
	long long requests, cpu_ns, window_ns, ndelays;
	long long delays[MAX_DELAYS];
};

struct spinner_out {
	long long cpu_ns, window_ns, chunks;
};

static long long clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long now(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static void spin(long n)
{
	for (long i = 0; i < n; i++)
		__asm__ volatile("" ::: "memory");
}

static long iterations(double burst_ns, double nsi)
{
	long n = (long)(burst_ns / nsi + 0.5);

	return n < 1 ? 1 : n;
}

static void sleep_until(long long t)
{
	struct timespec ts = { t / 1000000000LL, t % 1000000000LL };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)
	       == EINTR)
		;
}

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static void join(const char *cgroups, const char *group)
{
	char path[512];
	FILE *f;

	if (strcmp(cgroups, "-") == 0)
		return;
	snprintf(path, sizeof(path), "%s/%s/cgroup.procs", cgroups, group);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f) != 0)
		die(path);
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/* nearest rank, as vsmtio_bench.kernel_math.percentile */
static long long percentile(const long long *sorted, long n, double q)
{
	long rank = (long)(q * n / 100.0 - 1e-9);

	if (rank < q * n / 100.0 - 1e-9)
		rank++;
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return sorted[rank - 1];
}

/* the fastest of 30 trials of a loop long enough (2 ms) to time well */
static double calibrate(void)
{
	long long best = -1;
	long n = 100000;

	for (;;) {
		long long t0 = now();

		spin(n);
		if (now() - t0 >= 2000000)
			break;
		n *= 2;
	}
	for (int i = 0; i < 30; i++) {
		long long t0 = now(), dt;

		spin(n);
		dt = now() - t0;
		if (best < 0 || dt < best)
			best = dt;
	}
	return (double)best / n;
}

static void bursts(double nsi, int n_us, char **us)
{
	static long long d[BURST_SAMPLES];

	for (int b = 0; b < n_us; b++) {
		long n = iterations(atof(us[b]) * 1000.0, nsi);

		for (int i = 0; i < BURST_SAMPLES; i++) {
			long long t0 = now();

			spin(n);
			d[i] = now() - t0;
		}
		qsort(d, BURST_SAMPLES, sizeof(d[0]), cmp_ll);
		printf("VSMTIO burst_%s=%lld %lld %lld\n", us[b],
		       percentile(d, BURST_SAMPLES, 50), d[0],
		       percentile(d, BURST_SAMPLES, 99));
	}
}

/* One vCPU of the server: burst, device wait, again, until end. */
static void server(struct server_out *o, long n, long long wait_ns,
		   long long spin_ns, long long start, long long measure,
		   long long end)
{
	long long t, t0 = 0, cpu0 = -1;

	sleep_until(start);
	for (;;) {
		long long deadline, woke;

		spin(n);
		t = now();
		if (t >= end)
			break;
		deadline = t + wait_ns;
		if (spin_ns) {
			long long limit = spin_ns < wait_ns ? t + spin_ns
							    : deadline;
			while (now() < limit)
				;
		}
		if (spin_ns < wait_ns)
			sleep_until(deadline);
		woke = now();
		if (woke < measure)
			continue;
		if (cpu0 < 0) {
			cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
			t0 = woke;
		}
		if (o->ndelays < MAX_DELAYS)
			o->delays[o->ndelays++] = woke - deadline;
		o->requests++;
	}
	if (cpu0 >= 0) {
		o->cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
		o->window_ns = t - t0;
	}
}

/* The CPU-bound VM: spins until end; its CPU time in the window. */
static void spinner(struct spinner_out *o, long long start,
		    long long measure, long long end)
{
	long long t, t0 = 0, cpu0 = -1, c0 = 0, chunks = 0;

	sleep_until(start);
	for (;;) {
		spin(SPIN_CHUNK);
		chunks++;
		t = now();
		if (cpu0 < 0 && t >= measure) {
			cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
			t0 = t;
			c0 = chunks;
		}
		if (t >= end)
			break;
	}
	o->cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
	o->window_ns = t - t0;
	o->chunks = chunks - c0;
}

static void *shared(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

static pid_t child(const char *cgroups, const char *group)
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		join(cgroups, group);
		prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	}
	return pid;
}

static void print_point(const char *key, struct server_out *srv, int threads,
			struct spinner_out *sp)
{
	double rps = 0, cpu = 0;
	long total = 0;
	long long *all;

	printf("VSMTIO point=%s|", key);
	for (int i = 0; i < threads; i++) {
		if (!srv[i].window_ns)
			continue;
		rps += srv[i].requests * 1e9 / srv[i].window_ns;
		cpu += (double)srv[i].cpu_ns / srv[i].window_ns;
		total += srv[i].ndelays;
	}
	if (threads) {
		all = malloc(sizeof(*all) * (total ? total : 1));
		if (!all)
			die("malloc");
		total = 0;
		for (int i = 0; i < threads; i++) {
			memcpy(all + total, srv[i].delays,
			       sizeof(*all) * srv[i].ndelays);
			total += srv[i].ndelays;
		}
		qsort(all, total, sizeof(*all), cmp_ll);
		printf("requests_per_s=%.3f server_cpu=%.5f requests=%ld",
		       rps, cpu, total);
		if (total) {
			double sum = 0;

			for (long i = 0; i < total; i++)
				sum += all[i];
			printf(" wake_mean_us=%.3f wake_p99_us=%.3f"
			       " wake_p999_us=%.3f", sum / total / 1e3,
			       percentile(all, total, 99) / 1e3,
			       percentile(all, total, 99.9) / 1e3);
		}
		free(all);
	}
	if (sp)
		printf("%sspinner_cpu=%.5f spinner_iterations_per_s=%.0f",
		       threads ? " " : "", (double)sp->cpu_ns / sp->window_ns,
		       sp->chunks * (double)SPIN_CHUNK * 1e9 / sp->window_ns);
	printf("\n");
}

static int point(char **a)
{
	double nsi = atof(a[0]);
	long n = iterations(atof(a[1]), nsi);
	long long wait_ns = atoll(a[2]), spin_ns = atoll(a[3]);
	int threads = atoi(a[4]), with_spinner = atoi(a[5]);
	long long start = now() + START_NS;
	long long measure = start + (long long)(atof(a[7]) * 1e9);
	long long end = measure + (long long)(atof(a[6]) * 1e9);
	struct server_out *srv;
	struct spinner_out *sp = NULL;
	int status, failed = 0;

	if (threads < 0 || threads > MAX_SERVERS) {
		fprintf(stderr, "threads: 0 to %d\n", MAX_SERVERS);
		return 2;
	}
	srv = threads ? shared(sizeof(*srv) * threads) : NULL;
	for (int i = 0; i < threads; i++)
		if (child(a[8], "server") == 0) {
			server(&srv[i], n, wait_ns, spin_ns, start, measure,
			       end);
			_exit(0);
		}
	if (with_spinner) {
		sp = shared(sizeof(*sp));
		if (child(a[8], "spinner") == 0) {
			spinner(sp, start, measure, end);
			_exit(0);
		}
	}
	if (now() >= start) {
		fprintf(stderr, "the processes took too long to start\n");
		return 2;
	}
	while (wait(&status) > 0)
		failed |= !WIFEXITED(status) || WEXITSTATUS(status);
	if (failed)
		return 2;
	print_point(a[9], srv, threads, sp);
	return 0;
}

static double round_trips(int n, int with_child)
{
	int ab[2], ba[2];
	char c = 'x';
	long long t0, dt;
	pid_t pid = -1;

	if (pipe(ab) || pipe(ba))
		die("pipe");
	if (with_child) {
		pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			for (int i = 0; i < n + 100; i++)
				if (read(ab[0], &c, 1) != 1 ||
				    write(ba[1], &c, 1) != 1)
					_exit(2);
			_exit(0);
		}
		for (int i = 0; i < 100; i++)	/* both running */
			if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
				die("pipe");
	}
	t0 = now();
	for (int i = 0; i < n; i++) {
		if (with_child) {
			if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
				die("pipe");
			continue;
		}
		if (write(ab[1], &c, 1) != 1 || read(ab[0], &c, 1) != 1 ||
		    write(ba[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			die("pipe");
	}
	dt = now() - t0;
	if (with_child)
		waitpid(pid, NULL, 0);
	close(ab[0]);
	close(ab[1]);
	close(ba[0]);
	close(ba[1]);
	return (double)dt / n;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && strcmp(argv[1], "calibrate") == 0) {
		printf("VSMTIO ns_per_iteration=%.4f\n", calibrate());
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "bursts") == 0) {
		bursts(atof(argv[2]), argc - 3, argv + 3);
		return 0;
	}
	if (argc == 12 && strcmp(argv[1], "point") == 0)
		return point(argv + 2);
	if (argc == 3 && strcmp(argv[1], "switch") == 0) {
		int n = atoi(argv[2]);

		printf("VSMTIO switch=%.1f %.1f\n", round_trips(n, 0),
		       round_trips(n, 1));
		return 0;
	}
	fprintf(stderr, "usage: sched_guest calibrate | bursts NSI US... | point NSI"
		" BURST_NS WAIT_NS SPIN_NS THREADS SPINNER SECONDS WARMUP"
		" CGROUPS KEY | switch ROUND_TRIPS\n");
	return 2;
}
