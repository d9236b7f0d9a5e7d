/* live: a cluster process's liveness page, shared with the supervisor.
 *
 * Each process with a control link (ipc/ctl.h) keeps one small file in the
 * runtime dir, `ctl-<role>.live`, mapped shared: its pid, its main loop's last
 * heartbeat (CLOCK_MONOTONIC, comparable across processes), its stall limit
 * and its latest STATUS row. The process writes it from its own main loop; the
 * supervisor reads it on its watchdog tick. So an idle cluster needs no
 * message at all to know that every process is alive and what it reports:
 * nobody is woken to answer a probe (docs/cluster.md "Watchdog").
 *
 * The STATUS row is published under a sequence lock (one writer: the
 * process's main thread). A reader never trusts the file: magic, version, size
 * and pid are checked, and a torn or foreign page is just "not heard from". */
#ifndef UNICORN_LIVE_H
#define UNICORN_LIVE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipc/msg.h"

#define LIVE_MAGIC 0x45564c55u /* "ULVE" */
#define LIVE_VERSION 1

/* The page's layout (shared between processes: fixed-size fields only). */
struct live_page {
	uint32_t magic, version;
	uint32_t pid;
	uint32_t stall_ms;          /* main loop silent this long = stuck */
	uint64_t beat_ns;           /* atomic: the main loop's last heartbeat */
	uint32_t seq;               /* atomic: odd while the row is being written */
	uint32_t reserved;
	struct msg_status status;   /* the latest STATUS row */
	struct live_load {          /* atomics: the work the process holds now (docs/scale.md) */
		uint32_t running;   /* coordinator: requests in a slot; api: HTTP requests in flight */
		uint32_t queued;    /* coordinator: requests waiting for a slot */
		uint32_t slots;     /* coordinator: its sequence slots */
		uint32_t set;       /* 1 once the process published a load (0 on older pages) */
	} load;
};

/* "ctl-<role>.live" for a role with a control link, else NULL. */
const char *live_file(enum msg_role role);

/* Writer: create rundir/ctl-<role>.live afresh (a new file, renamed into
 * place, so a reader never sees a previous incarnation's page under the new
 * pid) and map it. */
int live_create(const char *rundir, enum msg_role role, uint32_t stall_ms, struct live_page **out);
void live_beat(struct live_page *p, uint64_t now_ns);
void live_publish(struct live_page *p, const struct msg_status *st);
/* The load (any thread; each field is atomic on its own, the set of them is
 * not: a reader may see one field of the previous load). */
void live_set_load(struct live_page *p, uint32_t running, uint32_t queued, uint32_t slots);
/* Unmap; with unlink_path, the file goes too (a clean exit). */
void live_close(struct live_page *p, const char *rundir, enum msg_role role, bool unlink_path);

/* Whether two STATUS rows differ in more than the uptime (which readers
 * compute; a row is republished, and a table rewritten, only for the rest). */
bool live_row_differs(const struct msg_status *a, const struct msg_status *b);

/* Reader: map rundir/ctl-<role>.live if it is pid's page. ERR_AGAIN while
 * the file is missing, foreign or of another pid. */
int live_open(const char *rundir, enum msg_role role, pid_t pid, const struct live_page **out);
/* The heartbeat, the stall limit and a consistent copy of the row; false if
 * no consistent copy could be taken (a writer mid-update every try). */
bool live_read(const struct live_page *p, uint64_t *beat_ns, uint32_t *stall_ms, struct msg_status *st);
/* The load the process published; false if it never did. */
bool live_read_load(const struct live_page *p, struct live_load *out);
void live_unmap(const struct live_page *p);

#endif
