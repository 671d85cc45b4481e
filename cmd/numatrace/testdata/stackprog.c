/*
 * The stacks tests' C workload: reads files from read_the_file and
 * touches fresh anonymous memory from touch_the_heap, so that memcg
 * reclaim stalls it in both. Built with and without frame pointers.
 * A second thread waits all along, as a server's do: libc's read() then
 * takes its multi-threaded path, which keeps locals on the stack.
 *
 *   stackprog FILE...   read each file
 *   stackprog heap      touch 48 MiB of fresh anonymous memory
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char buf[1 << 20];

__attribute__((noinline)) long read_the_file(const char *path)
{
	long total = 0;
	int fd = open(path, O_RDONLY);

	if (fd < 0) {
		perror(path);
		exit(1);
	}
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n <= 0)
			break;
		total += n;
	}
	close(fd);
	return total;
}

__attribute__((noinline)) long touch_the_heap(size_t mib)
{
	char *p = mmap(NULL, mib << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long sum = 0;

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	for (size_t i = 0; i < (mib << 20); i += 4096) {
		p[i] = 1;
		sum += p[i];
	}
	munmap(p, mib << 20);
	return sum;
}

static void *wait_forever(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	long total = 0;
	pthread_t waiter;

	if (pthread_create(&waiter, NULL, wait_forever, NULL) != 0) {
		perror("pthread_create");
		return 1;
	}

	for (int i = 1; i < argc; i++)
		total += strcmp(argv[i], "heap") == 0 ? touch_the_heap(48) : read_the_file(argv[i]);
	printf("%ld\n", total);
	return 0;
}
