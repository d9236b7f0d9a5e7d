/* gate: the check of a request's head (request line and header fields)
 * before libmicrohttpd sees it (docs/http.md "Connections and limits").
 *
 * api/http.c accepts connections itself and peeks (MSG_PEEK) at what a
 * client sent until its head is complete; only then is the socket handed to
 * libmicrohttpd. A head the library would drop without an answer gets its
 * status here: a request line that is not METHOD SP TARGET SP HTTP/1.x is a
 * 400, a target longer than GATE_MAX_URI or with more than GATE_MAX_ARGS
 * query arguments a 414, a header line longer than GATE_MAX_LINE, more than
 * GATE_MAX_FIELDS fields or a head longer than GATE_MAX_HEAD a 431, another
 * HTTP version a 505. Pure (no I/O): the fuzz target tests/fuzz/fuzz_http.c
 * runs it on arbitrary bytes. */
#ifndef UNICORN_GATE_H
#define UNICORN_GATE_H

#include <stdbool.h>
#include <stddef.h>

#define GATE_MAX_HEAD 16384   /* request line + fields + the empty line */
#define GATE_MAX_URI 8192
#define GATE_MAX_ARGS 128     /* '&'/';'-separated query arguments */
#define GATE_MAX_LINE 8192    /* one header field line */
#define GATE_MAX_FIELDS 100

enum gate_verdict {
	GATE_MORE = 0,   /* the head is not complete yet (and nothing is wrong so far) */
	GATE_OK,         /* complete: head_len bytes, to libmicrohttpd */
	GATE_BAD,        /* 400 */
	GATE_URI_LONG,   /* 414 */
	GATE_HEAD_LARGE, /* 431 */
	GATE_VERSION,    /* 505 */
};

struct gate_head {
	int verdict;           /* enum gate_verdict */
	size_t head_len;       /* GATE_OK: bytes up to and including the empty line */
	bool health, metrics;  /* GATE_OK: the path is /health or /metrics */
	const char *why;       /* a sentence for the error answer (static) */
};

/* Check buf[n], the first n bytes the client sent. eof: the client will
 * send nothing more (an incomplete head is then a 400). */
int gate_check(const char *buf, size_t n, bool eof, struct gate_head *out);

/* The HTTP status of a verdict (0 for MORE/OK) and its reason phrase. */
int gate_status(int verdict, const char **reason);

#endif
