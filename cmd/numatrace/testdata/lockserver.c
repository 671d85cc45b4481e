// A stand-in for a service whose request handlers wait on a lock that a
// slow thread holds, for the budget's lock test: an HTTP/1.1 server on
// 127.0.0.1 (it prints its port) with a thread per connection, blocking
// I/O. Each request takes the one pthread mutex, counts itself and lets
// it go, then answers. A background thread holds that mutex for argv[1]
// ms (sleeping, as a thread doing a slow call under its lock does), lets
// it go for argv[2] ms, and again, until the server is killed. A request
// that comes while the lock is held waits off a CPU, in the mutex's
// futex, in the thread that serves it: its time is the lock's by
// construction, whatever the speed of the host.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long served;
static long hold_ms, free_ms;

static void sleep_ms(long ms)
{
	struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&d, &d) != 0)
		;
}

static void *holder(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&mu);
		sleep_ms(hold_ms);
		pthread_mutex_unlock(&mu);
		sleep_ms(free_ms);
	}
	return NULL;
}

/* serve answers one connection's requests, one at a time, until it closes. */
static void *serve(void *arg)
{
	int fd = (int)(long)arg;
	char buf[4096];
	size_t n = 0;
	static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";

	for (;;) {
		ssize_t m = read(fd, buf + n, sizeof(buf) - 1 - n);

		if (m <= 0)
			break;
		n += m;
		buf[n] = 0;
		char *end;

		while ((end = strstr(buf, "\r\n\r\n")) != NULL) {
			pthread_mutex_lock(&mu);
			served++;
			pthread_mutex_unlock(&mu);
			if (write(fd, reply, sizeof(reply) - 1) != sizeof(reply) - 1)
				goto out;
			end += 4;
			n -= end - buf;
			memmove(buf, end, n + 1);
		}
		if (n == sizeof(buf) - 1)
			break; /* no request is that long */
	}
out:
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: lockserver HOLD_MS FREE_MS\n");
		return 2;
	}
	hold_ms = atol(argv[1]);
	free_ms = atol(argv[2]);
	int ln = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);

	if (ln < 0 || bind(ln, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ln, 128) < 0 ||
	    getsockname(ln, (struct sockaddr *)&a, &alen) < 0) {
		perror("listen");
		return 1;
	}
	printf("%d\n", ntohs(a.sin_port));
	fflush(stdout);
	pthread_t t;

	pthread_create(&t, NULL, holder, NULL);
	for (;;) {
		int fd = accept(ln, NULL, NULL);
		int one = 1;

		if (fd < 0)
			continue;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_create(&t, NULL, serve, (void *)(long)fd);
		pthread_detach(t);
	}
}
