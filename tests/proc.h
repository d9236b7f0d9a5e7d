/* proc: starting and waiting for the project's binaries from tests. */
#ifndef UNICORN_TESTS_PROC_H
#define UNICORN_TESTS_PROC_H

#include <sys/types.h>

/* Where the binaries are: $UNICORN_BIN (set by `make test`) or "bin". */
const char *proc_bin_dir(void);
/* fork+exec argv (never fork-only: nng must not run in a fork-only child) with
 * stderr to errfile; the child dies with the test process, so nothing leaks
 * when an assertion ends a test early. */
pid_t proc_spawn(char *const argv[], const char *errfile);
/* Wait up to ms for pid: its wait status, or -1 on timeout. */
int proc_wait_ms(pid_t pid, int ms);
/* Like proc_bin_dir, but skips the test when UNICORN_BIN is unset (tests that
 * need the real binaries run through `make test`). */
const char *proc_bin_dir_or_skip(void);
/* Monotonic seconds. */
double proc_now_s(void);
/* Take the lock that keeps cluster tests from running at the same time (they
 * share ports, CPU and the GPU); returns the fd to close when done. */
int proc_cluster_lock(void);
/* Print the last lines of a log to stderr (for a failing test's context). */
void proc_tail(const char *path, int lines);
/* A TCP port on 127.0.0.1 that was free a moment ago. */
int proc_free_port(void);

#endif
