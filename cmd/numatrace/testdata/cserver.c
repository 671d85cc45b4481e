// A stand-in C server for the --latency-uprobe test: handle_request
// takes 1 ms, and every 50th call 30 ms, for as many seconds as argv[1].
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) int handle_request(int i)
{
	struct timespec d = {0, (i % 50 == 49 ? 30 : 1) * 1000000L};
	nanosleep(&d, NULL);
	return i;
}

int main(int argc, char **argv)
{
	int seconds = argc > 1 ? atoi(argv[1]) : 5;
	time_t end = time(NULL) + seconds;
	int sum = 0;
	for (int i = 0; time(NULL) < end; i++)
		sum += handle_request(i);
	return sum == -1;
}
