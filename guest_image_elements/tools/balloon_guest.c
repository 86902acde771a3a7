// SPDX-License-Identifier: Apache-2.0
/*
 * The two tasks of the balloon's test and benchmark guest, in one static
 * binary for a busybox initramfs:
 *
 *   balloon_guest echo DEVICE   I/O-bound: echo every byte that arrives on
 *                               the serial port DEVICE (raw, 115200 baud)
 *                               back at once; the host times the round
 *                               trip.
 *   balloon_guest hog SECONDS   CPU-bound: spin for SECONDS of wall time,
 *                               then print "VSMTIO hog_loops_per_s=N".
 *
 * Built by guest_image_elements/tools/balloon_boot.py with "cc -static".
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int echo(const char *dev)
{
	struct termios tio;
	char buf[64];
	ssize_t n;
	int fd = open(dev, O_RDWR | O_NOCTTY);

	if (fd < 0 || tcgetattr(fd, &tio)) {
		perror(dev);
		return 1;
	}
	cfmakeraw(&tio);
	cfsetispeed(&tio, B115200);
	cfsetospeed(&tio, B115200);
	tio.c_cc[VMIN] = 1;
	tio.c_cc[VTIME] = 0;
	if (tcsetattr(fd, TCSANOW, &tio)) {
		perror("tcsetattr");
		return 1;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (write(fd, buf, n) != n)
			return 1;
	perror("read");
	return 1;
}

static int hog(double seconds)
{
	double start = now(), end = start + seconds;
	volatile unsigned long x = 0;
	unsigned long loops = 0;

	while (now() < end) {
		for (int i = 0; i < 100000; i++)
			x += i;
		loops++;
	}
	printf("VSMTIO hog_loops_per_s=%.1f\n", loops / (now() - start));
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "echo"))
		return echo(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "hog"))
		return hog(atof(argv[2]));
	fprintf(stderr, "usage: %s echo DEVICE | hog SECONDS\n", argv[0]);
	return 2;
}
