// Takes the CPU it runs on for argv[1] ms of every argv[2] ms (less than
// a second apart), until killed. Run real-time (chrt -f) and pinned
// (taskset), it is a job the scheduler hands that CPU to at once and
// lets hold it: whatever else runs there waits for it, on any host.
#include <stdlib.h>
#include <time.h>

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
	long burst = argc > 2 ? atol(argv[1]) : 30, period = argc > 2 ? atol(argv[2]) : 200;
	struct timespec gap = {0, (period - burst) * 1000000L};

	for (;;) {
		for (long long end = now_ns() + burst * 1000000LL; now_ns() < end;)
			;
		nanosleep(&gap, NULL);
	}
}
