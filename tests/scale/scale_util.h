/* scale_util: what the drain and load-balancer tests share: a cluster that
 * can be stopped and started again under the same name and port, a raw
 * HTTP GET, and a streamed completion run by curl and read back. */
#ifndef UNICORN_TESTS_SCALE_UTIL_H
#define UNICORN_TESTS_SCALE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* One cluster under XDG_RUNTIME_DIR=tmp (the caller's): name, port, pid of
 * its unicorn-up (a child of the test: it dies with it), its log. */
struct su_cluster {
	char name[32], dir[256], log[256];
	int port;
	pid_t sup;
};

/* Spawn unicorn-up on the tiny golden q4_0 model (--name, --port, and extra,
 * NULL-terminated, at most 6); log to tmp/NAME-N.log. Does not wait. */
void su_start(struct su_cluster *c, const char *tmp, const char *name, int port, const char *const *extra);
/* Whether it is ready (ready and api-ready files); asserts it did not exit. */
bool su_ready(struct su_cluster *c);
/* su_start + wait (90 s) for ready. */
void su_start_wait(struct su_cluster *c, const char *tmp, const char *name, int port, const char *const *extra);

/* GET path on 127.0.0.1:port (HTTP/1.0, 2 s): the status (-1: no answer);
 * the body into body[cap] when body. */
int su_get(int port, const char *path, char *body, size_t cap);

/* A streamed /v1/completions request run by curl (greedy). */
struct su_req {
	pid_t pid;
	int prompt;
	double t0, t1;            /* started, ended (monotonic s) */
	char out[256], hdr[256];
};
/* Start it against 127.0.0.1:port with header "X-Conversation-Id: conv" (NULL: none). */
void su_req_start(struct su_req *r, const char *tmp, int slot, int port, const char *prompt, int max_tokens,
		  const char *conv, int max_time_s);
/* What came back: the text of its chunks, whether it ended with [DONE] and
 * a finish_reason, the last HTTP status, and X-Unicorn-Replica ("" if none). */
struct su_answer {
	bool done;
	int status;
	char replica[16];
	char text[4096];
	char error[256];          /* an SSE error event's message, or the error body */
};
void su_req_read(const struct su_req *r, struct su_answer *a);

#endif
