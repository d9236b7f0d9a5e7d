/* supervisor: spawns, reaps, restarts and watches the cluster's processes
 * (docs/cluster.md "Failure handling"). The library half of unicorn-up.
 *
 * Children are started with fork+exec only (nng must not run in a forked copy
 * of a process that used it). Each child's stdout and stderr go to one pipe;
 * the supervisor prefixes every line with "[name] " and writes it to log_fd.
 * A child that exits 1 (or 0 while the cluster runs) or dies of a signal is
 * restarted after a backoff (min doubling to max, back to min after reset_ms
 * of uptime). Exit 2 is fatal: sup_step reports SUP_FATAL and sup_fatal_msg()
 * says which child and its last log line. A child with a control link
 * (ipc/ctl.h) is watched through its liveness page (ipc/live.h), read every
 * ping_ms, every child in the same tick (an idle supervisor wakes once per
 * tick and wakes nobody else): once its page is up, a child stopped (SIGSTOP,
 * from /proc) for pong_ms, or whose main loop has not beaten within its stall
 * limit, is SIGKILLed and restarted. Until its page appears a new child is
 * looked for every SUP_PROBE_START_MS. The page's STATUS row is the table's;
 * sup_take_changes() says whether the table changed (a child started, exited,
 * or published a row that differs in more than its uptime), so a caller
 * rewrites its copy only then.
 *
 * Single-threaded: call everything from one thread (the one that forks, since
 * children get PR_SET_PDEATHSIG against that thread). No signal handlers are
 * installed; the main loop passes its signalfd/self-pipe as wake_fd. */
#ifndef UNICORN_SUPERVISOR_H
#define UNICORN_SUPERVISOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "ipc/live.h"
#include "ipc/msg.h"

#define SUP_MAX_CHILDREN 8
#define SUP_MAX_ARGS 24
#define SUP_NAME_MAX 24
#define SUP_PROBE_START_MS 100 /* a child whose page is not up yet is looked for this often */

struct sup_opts {
	const char *rundir;      /* ctl links live here; NULL = no watchdog at all */
	int log_fd;              /* prefixed child output goes here */
	int wake_fd;             /* -1 or an fd that makes sup_step return SUP_WAKE */
	bool has_wake_fd2;       /* wake_fd2 is set: a second such fd (e.g. the control */
	int wake_fd2;            /* socket's receive descriptor; the caller drains it) */
	uint32_t backoff_min_ms; /* 0 = 100 */
	uint32_t backoff_max_ms; /* 0 = 2000 */
	uint32_t reset_ms;       /* 0 = 10000 */
	uint32_t ping_ms;        /* 0 = 1000: the watchdog's tick */
	uint32_t pong_ms;        /* 0 = 1500: stopped this long = SIGKILL */
	uint32_t start_wait_ms;  /* 0 = 120000: longest wait for a child's ready_file at start */
};

struct sup_child_spec {
	char name[SUP_NAME_MAX];       /* log prefix: "loader", "gpu", ... */
	enum msg_role role;            /* ctl link role; 0 = no control link */
	const char *argv[SUP_MAX_ARGS]; /* argv[0] = path of the executable; NULL-terminated */
	const char *ready_file;        /* NULL, or a path whose existence means "up":
	                                * sup_start waits for it before starting the next child */
};

struct sup_child_info {
	char name[SUP_NAME_MAX];
	enum msg_role role;
	pid_t pid;                 /* 0 while not running */
	uint32_t restarts;
	uint32_t watchdog_kills;
	uint64_t uptime_ns;        /* of the current incarnation (0 if not running) */
	bool have_status;          /* status below is from the current incarnation */
	struct msg_status status;
	int last_exit;             /* last exit code, or -signal, or 0 */
};

enum sup_event {
	SUP_IDLE = 0,   /* timeout passed, nothing special */
	SUP_WAKE = 1,   /* wake_fd is readable (the caller reads it) */
	SUP_FATAL = 2,  /* a child exited 2: stop the cluster */
};

struct supervisor;

int sup_create(const struct sup_opts *o, struct supervisor **out);
/* Register a child (copied; argv strings are copied too). Order = start order. */
int sup_add(struct supervisor *s, const struct sup_child_spec *spec);
/* Start every child in order; waits for each ready_file (servicing logs and
 * exits meanwhile). Returns ERR_STATE with sup_fatal_msg() if a child failed
 * fatally, ERR_TIMEOUT if a ready_file did not appear. */
int sup_start(struct supervisor *s);
/* One main-loop iteration, at most timeout_ms: forward logs, reap, restart,
 * ping, pull status. Returns enum sup_event (>= 0) or a negative ERR_*. */
int sup_step(struct supervisor *s, int timeout_ms);
/* Graceful stop: SHUTDOWN over each control link (reverse order), SIGTERM
 * after grace_ms/5, SIGKILL after grace_ms; reaps everything. */
void sup_stop(struct supervisor *s, uint32_t grace_ms);
void sup_destroy(struct supervisor *s);

int sup_count(const struct supervisor *s);
int sup_info(const struct supervisor *s, int i, struct sup_child_info *out);
const char *sup_fatal_msg(const struct supervisor *s);
uint32_t sup_total_restarts(const struct supervisor *s);
/* Read every child's page now (someone asked for the table). */
void sup_refresh(struct supervisor *s);
/* The load the running child of role published on its liveness page
 * (ipc/live.h): false when no such child runs or it published none. */
bool sup_load(const struct supervisor *s, enum msg_role role, struct live_load *out);
/* Whether the process table changed since the last call (and reset that). */
bool sup_take_changes(struct supervisor *s);

/* The process table as a JSON array (caller json_decref's): per child name,
 * role, pid, restarts, watchdog_kills, uptime_s, last_exit and, once its
 * STATUS came, backend, device, weights/kv/scratch_bytes, share_path
 * ("memfd"/"udmabuf"/"-"), import ("zero-copy"/"upload"/"-"), steps, busy_s. */
json_t *sup_status_table(const struct supervisor *s);

#endif
