/* err: error codes and a per-thread error message.
 *
 * Library code returns 0 or a negative ERR_* code and never exits. The function
 * that detects a problem records a human-readable message naming the file and
 * field (err_set); callers may add context in front (err_prefix). main() prints
 * err_msg(). */
#ifndef UNICORN_ERR_H
#define UNICORN_ERR_H

enum err_code {
	ERR_OK = 0,
	ERR_INVAL = -1,    /* malformed input: bad file, bad message, bad argument */
	ERR_IO = -2,       /* open/read/write/mmap failed */
	ERR_NOMEM = -3,    /* allocation failed */
	ERR_RANGE = -4,    /* size, count or offset overflows or lies out of bounds */
	ERR_NOTFOUND = -5, /* a required key, tensor or file is missing */
	ERR_UNSUP = -6,    /* valid but not supported (type, architecture, feature) */
	ERR_DEVICE = -7,   /* no usable device (Vulkan, NPU) or device failure */
	ERR_TIMEOUT = -8,
	ERR_STATE = -9,    /* call not valid in the current state */
	ERR_AGAIN = -10,   /* nothing to do now (a ring empty or full): try again later */
};

/* Record a message (printf-style) for this thread and return code, so that
 * library code can write `return err_set(ERR_INVAL, "%s: bad magic", path);` */
int err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Put "context: " in front of the current message; returns code. */
int err_prefix(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *err_msg(void);
const char *err_name(int code);
void err_clear(void);

#endif
