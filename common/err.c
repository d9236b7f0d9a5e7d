#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char err_buf[1024];

int err_set(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err_buf, sizeof err_buf, fmt, ap);
	va_end(ap);
	return code;
}

int err_prefix(int code, const char *fmt, ...)
{
	char ctx[512], old[sizeof err_buf];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof ctx, fmt, ap);
	va_end(ap);
	memcpy(old, err_buf, sizeof old);
	size_t n = strlen(ctx);
	if (n > sizeof err_buf - 3)
		n = sizeof err_buf - 3;
	memcpy(err_buf, ctx, n);
	memcpy(err_buf + n, ": ", 2);
	/* keep as much of the old message as fits */
	size_t room = sizeof err_buf - n - 3;
	size_t m = strnlen(old, room);
	memcpy(err_buf + n + 2, old, m);
	err_buf[n + 2 + m] = 0;
	return code;
}

const char *err_msg(void)
{
	return err_buf[0] ? err_buf : "no error message recorded";
}

const char *err_name(int code)
{
	switch (code) {
	case ERR_OK: return "ok";
	case ERR_INVAL: return "invalid input";
	case ERR_IO: return "I/O error";
	case ERR_NOMEM: return "out of memory";
	case ERR_RANGE: return "out of range";
	case ERR_NOTFOUND: return "not found";
	case ERR_UNSUP: return "unsupported";
	case ERR_DEVICE: return "device error";
	case ERR_TIMEOUT: return "timeout";
	case ERR_STATE: return "invalid state";
	case ERR_AGAIN: return "try again";
	}
	return "unknown error";
}

void err_clear(void)
{
	err_buf[0] = 0;
}
