/* spin: see spin.h. */
#include "common/spin.h"

#include <stdlib.h>
#include <time.h>

uint32_t spin_us(bool cpu_device)
{
	const char *e = getenv("UNICORN_SPIN_US");
	if (e && *e) {
		char *end;
		unsigned long v = strtoul(e, &end, 10);
		if (!*end)
			return v > SPIN_US_MAX ? SPIN_US_MAX : (uint32_t)v;
	}
	return cpu_device ? 0 : SPIN_US_DEFAULT;
}

void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

int64_t spin_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
