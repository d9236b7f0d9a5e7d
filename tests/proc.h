/* proc: starting and waiting for the project's binaries from tests. */
#ifndef UNICORN_TESTS_PROC_H
#define UNICORN_TESTS_PROC_H

#include <stdbool.h>
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
/* Whether a line of the log at path contains what (false if it cannot be read). */
bool proc_log_has(const char *path, const char *what);
/* sh -c "cmd 2>&1": its output into out[cap] (NUL-terminated, cut to fit);
 * the exit status, or -1 if it did not exit. */
int proc_sh(const char *cmd, char *out, size_t cap);
/* The live (not zombie) children of process sup: up to cap pids into out;
 * returns how many. */
int proc_children(pid_t sup, pid_t *out, int cap);
/* The live child of sup whose argv[0]'s base name is exe, or 0. */
pid_t proc_child_of(pid_t sup, const char *exe);
/* A TCP port on 127.0.0.1 that was free a moment ago. */
int proc_free_port(void);

/* A cluster a test starts: its temp runtime dir (XDG_RUNTIME_DIR), name,
 * HTTP port, unicorn-up's pid and log, and the cluster lock it holds. */
struct proc_cluster {
	char tmp[64], name[32], dir[200], log[128];
	pid_t sup;
	int port, lock_fd;
};
/* Take the cluster lock, make /tmp/unicorn-PREFIX-XXXXXX as the runtime dir,
 * pick a free port and run bin/unicorn-up on the tiny golden q4_0 model with
 * --name, --port and extra (NULL-terminated, at most 8); wait (90 s) for
 * ready. unicorn-up dies with the test process. */
void proc_cluster_start(struct proc_cluster *c, const char *prefix, const char *const *extra);
/* unicorn down, unicorn-up gone, temp dir removed, lock released. */
void proc_cluster_stop(struct proc_cluster *c);

#endif
