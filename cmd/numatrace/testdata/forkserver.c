// A stand-in for a pre-forking server (PostgreSQL, Apache's prefork,
// gunicorn): the parent only accepts, and forks one child process per
// connection, which does the work. For the --children tests.
//
// forkserver FILE listens on 127.0.0.1, prints "port N", and serves each
// connection in a forked child, one command a line:
//   read         the child reads FILE whole          -> "read PID TID"
//   thread-read  a new thread of the child reads it  -> "read PID TID"
//   spawn        the child forks a grandchild now    -> "spawned PID"
//   gread        the grandchild reads FILE           -> "read PID TID"
// PID and TID are the reader's. The child (and its grandchild) exit when
// the connection closes. In a small memory cgroup each read reclaims.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *file;
static char buf[1 << 20];

/* read_file reads file from start to end. */
static void read_file(void)
{
	int fd = open(file, O_RDONLY);

	if (fd < 0) {
		perror(file);
		exit(1);
	}
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
}

static void reply_read(FILE *out)
{
	fprintf(out, "read %d %ld\n", getpid(), (long)syscall(SYS_gettid));
	fflush(out);
}

static void *reader(void *arg)
{
	read_file();
	reply_read(arg);
	return NULL;
}

/* grandchild: reads file on each byte from cmd, answering on out, until EOF. */
static void grandchild(int cmd, FILE *out)
{
	char c;

	while (read(cmd, &c, 1) == 1) {
		read_file();
		reply_read(out);
	}
	exit(0);
}

static void serve(int conn)
{
	FILE *in = fdopen(conn, "r"), *out = fdopen(dup(conn), "w");
	char line[64];
	int gcmd = -1;

	while (fgets(line, sizeof(line), in)) {
		if (!strcmp(line, "read\n")) {
			read_file();
			reply_read(out);
		} else if (!strcmp(line, "thread-read\n")) {
			pthread_t th;

			pthread_create(&th, NULL, reader, out);
			pthread_join(th, NULL);
		} else if (!strcmp(line, "spawn\n") && gcmd < 0) {
			int p[2];

			if (pipe(p))
				exit(1);
			pid_t pid = fork();
			if (pid == 0) {
				close(p[1]);
				grandchild(p[0], out);
			}
			close(p[0]);
			gcmd = p[1];
			fprintf(out, "spawned %d\n", pid);
			fflush(out);
		} else if (!strcmp(line, "gread\n") && gcmd >= 0) {
			if (write(gcmd, "r", 1) != 1)
				exit(1);
		} else {
			fprintf(out, "error %s", line);
			fflush(out);
		}
	}
	exit(0); /* the grandchild sees EOF on its pipe and exits too */
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: forkserver FILE\n");
		return 2;
	}
	file = argv[1];
	/* Children are never waited for: none is left a zombie. */
	struct sigaction sa = { .sa_handler = SIG_IGN, .sa_flags = SA_NOCLDWAIT };
	sigaction(SIGCHLD, &sa, NULL);
	int ln = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);

	if (ln < 0 || bind(ln, (void *)&addr, sizeof(addr)) || listen(ln, 64) ||
	    getsockname(ln, (void *)&addr, &len)) {
		perror("listen");
		return 1;
	}
	printf("port %d\n", ntohs(addr.sin_port));
	fflush(stdout);
	for (;;) {
		int conn = accept(ln, NULL, NULL);

		if (conn < 0)
			continue;
		if (fork() == 0) {
			close(ln);
			serve(conn);
		}
		close(conn);
	}
}
