/* streams: concurrent OpenAI chat completions against a test cluster
 * (tests/proc.h), read to the end with each stream's worst gap between two
 * chunks, and a process killed among them. Shared by the cluster tests that
 * compare answers (hotpath, pipeline). */
#ifndef UNICORN_TESTS_STREAMS_H
#define UNICORN_TESTS_STREAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tests/proc.h"

#define STREAMS_N 4

struct stream {
	int fd;
	char *body;
	size_t n, cap;
	double t_last, worst_gap, t_end;
	bool done;
};

/* Which process to SIGKILL (0: none left to kill fails the test). */
typedef pid_t (*streams_victim_fn)(const struct proc_cluster *c, const void *arg);

/* Start STREAMS_N chat completions ("Stream i: tell me a story", greedy) of
 * max_tokens, SSE streams or whole answers; when pick is set, SIGKILL the
 * process it names 300 ms in (*t_kill: when). Then read all to the end
 * (at most 60 s). */
void streams_run(const struct proc_cluster *c, struct stream *s, streams_victim_fn pick, const void *arg,
		 bool streamed, int max_tokens, double *t_kill);
/* pick for streams_run: the newest child of unicorn-up running executable
 * arg (a const char *). */
pid_t streams_child_of(const struct proc_cluster *c, const void *exe);
/* The streamed text: every "content":"..." value in order (escapes kept). */
char *stream_text(const struct stream *s);
/* The answer ended normally: an SSE stream's [DONE], a whole answer's finish. */
bool answer_complete(const struct stream *s, bool streamed);

#endif
