/* A program for the symbolizer's tests: main calls read_the_file,
 * read_locked and read_spilled, which call leaf_read, leaf_read_locked
 * and leaf_read_spilled (leaf.c): functions that make a system call
 * without setting up a frame, as libc's wrappers do. */
long leaf_read(int fd, void *buf, long n);
long leaf_read_locked(int fd, void *buf, long n);
long leaf_read_spilled(int fd, void *buf, long n);

static char buf[4096];

__attribute__((noinline)) long read_the_file(int fd)
{
	long n = leaf_read(fd, buf, sizeof(buf));
	return n + 1;
}

__attribute__((noinline)) long read_locked(int fd)
{
	long n = leaf_read_locked(fd, buf, sizeof(buf));
	return n + 2;
}

__attribute__((noinline)) long read_spilled(int fd)
{
	long n = leaf_read_spilled(fd, buf, sizeof(buf));
	return n + 3;
}

int main(void)
{
	return (int)(read_the_file(0) + read_locked(0) + read_spilled(0)) & 1;
}
