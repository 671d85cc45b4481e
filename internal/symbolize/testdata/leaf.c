/* Built without frame pointers, as distribution libraries are. */

/* A leaf that makes a system call without touching the stack, as glibc's
 * read() does in a single-threaded process. */
long leaf_read(int fd, void *buf, long n)
{
	long ret;

	__asm__ volatile("syscall" : "=a"(ret) : "0"(0L), "D"((long)fd), "S"(buf), "d"(n) : "rcx", "r11", "memory");
	return ret;
}

static volatile int cancel_state;

__attribute__((noinline)) int leaf_cancel_enable(void) { return cancel_state++; }
__attribute__((noinline)) void leaf_cancel_restore(int old) { cancel_state = old; }

/* One that calls around the system call and keeps its arguments in
 * callee-saved registers, rbp among them, which it saves first: its
 * return address is past them, and rbp is no longer its caller's. */
long leaf_read_locked(int fd, void *buf, long n)
{
	int old = leaf_cancel_enable();
	long ret;

	__asm__ volatile("syscall" : "=a"(ret) : "0"(0L), "D"((long)fd), "S"(buf), "d"(n) : "rcx", "r11", "memory");
	leaf_cancel_restore(old);
	return ret + fd + n + (long)buf;
}

/* One that keeps its arguments in locals on the stack, and leaves rbp
 * alone, as glibc's read() does in a multi-threaded process. */
long leaf_read_spilled(int fd, void *buf, long n)
{
	volatile long keep[3] = { fd, (long)buf, n };
	int old = leaf_cancel_enable();
	long ret;

	__asm__ volatile("syscall" : "=a"(ret) : "0"(0L), "D"(keep[0]), "S"(keep[1]), "d"(keep[2]) : "rcx", "r11", "memory");
	leaf_cancel_restore(old);
	return ret;
}
