/*
 * Re-reads a file's 4 KiB pages for argv[2] seconds, on CPU 0, pass after
 * pass in one random order (the same in every run): its working set is
 * the whole file, so in a memory cgroup smaller than the file each read
 * of a pass refaults a page the pass before used and lost (thrashing).
 * Prints how many reads it made.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	/* One CPU: PSI weighs each CPU's stall by how busy it was, and a
	 * thread that hops between two splits its stall between them. */
	if (sched_setaffinity(0, sizeof(one), &one))
		return 3;
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0)
		return 4;
	double secs = atof(argv[2]);
	long pages = lseek(fd, 0, SEEK_END) / 4096;
	long *order = malloc(pages * sizeof(*order));
	char buf[4096];
	struct timespec t0, t;
	unsigned long n = 0, seed = 12345;

	if (pages <= 0 || !order)
		return 4;
	for (long i = 0; i < pages; i++)
		order[i] = i;
	for (long i = pages - 1; i > 0; i--) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		long j = (seed >> 17) % (i + 1), k = order[i];

		order[i] = order[j];
		order[j] = k;
	}

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (pread(fd, buf, sizeof(buf), (off_t)order[n % pages] * 4096) < 0)
			return 5;
		if (++n % 64 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) / 1e9 > secs)
				break;
		}
	}
	printf("%lu reads\n", n);
	return 0;
}
