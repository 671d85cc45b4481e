/* Built without frame pointers, as distribution libraries are. */
long leaf_read(int fd, void *buf, long n)
{
	long ret;

	__asm__ volatile("syscall" : "=a"(ret) : "0"(0L), "D"((long)fd), "S"(buf), "d"(n) : "rcx", "r11", "memory");
	return ret;
}
