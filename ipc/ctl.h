/* ctl: every cluster process's control link to the supervisor (watchdog).
 *
 * A process calls ctl_start() once; a thread listens on the pair1 socket
 * `ctl-<role>.ipc` in the runtime dir and answers the supervisor's PING with
 * PONG, STATUS_REQ with STATUS (filled by the process's callback) and SHUTDOWN
 * by setting a flag the main loop polls. The main loop calls ctl_heartbeat()
 * every iteration (and between long pieces of work); when the last heartbeat is
 * older than the stall limit, PINGs go unanswered so the supervisor's watchdog
 * replaces a process that is alive but stuck. A SIGSTOPped process answers
 * nothing at all. */
#ifndef UNICORN_CTL_H
#define UNICORN_CTL_H

#include <stdbool.h>
#include <stdint.h>

#include "ipc/msg.h"

#define CTL_STALL_MS_DEFAULT 30000   /* main loop silent this long = stuck */

struct ctl;

/* Fill st (role and pid are preset; the callback fills the rest). Runs on the
 * ctl thread: read only what is safe to read concurrently. */
typedef void (*ctl_status_fn)(void *arg, struct msg_status *st);

/* Listen on rundir/ctl-<role name>.ipc. stall_ms 0 = CTL_STALL_MS_DEFAULT. */
int ctl_start(const char *rundir, enum msg_role role, ctl_status_fn fill, void *arg,
	      uint32_t stall_ms, struct ctl **out);
void ctl_heartbeat(struct ctl *c);
/* True once the supervisor sent SHUTDOWN (or ctl_stop was called). */
bool ctl_shutdown_requested(const struct ctl *c);
void ctl_stop(struct ctl *c);

/* "ctl-loader.ipc", "ctl-npu.ipc", "ctl-gpu.ipc", "ctl-coordinator.ipc". */
const char *ctl_file(enum msg_role role);

#endif
