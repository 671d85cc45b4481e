// A stand-in C server for the --latency-uprobe tests. handle_request
// takes 1 ms, and every 50th call 30 ms, for as many seconds as argv[1].
// With a file as argv[2] (- for none), each iteration of the loop first
// reads 8 MiB of it, outside handle_request: in a small memory cgroup
// that read reclaims, and the stall falls between requests, where the
// timed function cannot see it. With "fast" as argv[3], handle_request
// returns at once: as many requests as the probes allow (make bench).
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int fast;

__attribute__((noinline)) int handle_request(int i)
{
	struct timespec d = {0, (i % 50 == 49 ? 30 : 1) * 1000000L};

	if (!fast)
		nanosleep(&d, NULL);
	return i;
}

static char buf[1 << 20];

/* read_next reads the next 8 MiB of fd, wrapping at its end. */
static void read_next(int fd)
{
	for (int i = 0; i < 8; i++) {
		if (read(fd, buf, sizeof(buf)) <= 0)
			lseek(fd, 0, SEEK_SET);
	}
}

int main(int argc, char **argv)
{
	int seconds = argc > 1 ? atoi(argv[1]) : 5;
	int fd = argc > 2 && argv[2][0] != '-' ? open(argv[2], O_RDONLY) : -1;
	fast = argc > 3 && argv[3][0] == 'f';
	time_t end = time(NULL) + seconds;
	int sum = 0;
	for (int i = 0; time(NULL) < end; i++) {
		if (fd >= 0)
			read_next(fd);
		sum += handle_request(i);
	}
	return sum == -1;
}
