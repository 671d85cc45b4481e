/* A program for the symbolizer's tests: main calls read_the_file, which
 * calls leaf_read (leaf.c), a leaf that makes a system call without
 * setting up a frame, as libc's wrappers do. */
long leaf_read(int fd, void *buf, long n);

static char buf[4096];

__attribute__((noinline)) long read_the_file(int fd)
{
	long n = leaf_read(fd, buf, sizeof(buf));
	return n + 1;
}

int main(void)
{
	return (int)read_the_file(0) & 1;
}
