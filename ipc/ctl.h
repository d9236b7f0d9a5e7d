/* ctl: every cluster process's control link to the supervisor (watchdog).
 *
 * A process calls ctl_start() once. It creates the process's liveness page
 * (ipc/live.h), which the main loop keeps current through ctl_heartbeat():
 * the heartbeat's time and, whenever it changed, the STATUS row the process's
 * callback fills (so the callback must be cheap: it runs every heartbeat). The supervisor reads the page on its watchdog
 * tick; an idle process is never woken to prove it is alive. A thread listens
 * on the pair1 socket `ctl-<role>.ipc` in the runtime dir for what must be
 * asked: SHUTDOWN (sets a flag the main loop polls), and PING / STATUS_REQ /
 * HELLO for tools and tests. The main loop calls ctl_heartbeat() every
 * iteration (and between long pieces of work); when the last heartbeat is
 * older than the stall limit the supervisor replaces the process (alive but
 * stuck), and PINGs and STATUS_REQs go unanswered. The thread sleeps until a
 * message comes: an idle main loop need only wake well within the stall
 * limit. */
#ifndef UNICORN_CTL_H
#define UNICORN_CTL_H

#include <stdbool.h>
#include <stdint.h>

#include "ipc/msg.h"

#define CTL_STALL_MS_DEFAULT 30000   /* main loop silent this long = stuck */

struct ctl;

/* Fill st (role and pid are preset; the callback fills the rest). Runs on the
 * main loop's thread (every ctl_heartbeat) and on the ctl thread (STATUS_REQ):
 * read only what is safe to read concurrently, and keep it cheap. */
typedef void (*ctl_status_fn)(void *arg, struct msg_status *st);

/* Listen on rundir/ctl-<role name>.ipc. stall_ms 0 = CTL_STALL_MS_DEFAULT. */
int ctl_start(const char *rundir, enum msg_role role, ctl_status_fn fill, void *arg,
	      uint32_t stall_ms, struct ctl **out);
void ctl_heartbeat(struct ctl *c);
/* Publish the work the process holds on its liveness page (ipc/live.h
 * struct live_load): any thread, cheap (three atomic stores). */
void ctl_set_load(struct ctl *c, uint32_t running, uint32_t queued, uint32_t slots);
/* An eventfd that becomes readable when SHUTDOWN comes, for a main loop
 * that sleeps in poll (never read it: it stays readable). */
int ctl_wake_fd(const struct ctl *c);
/* fn(arg) is called on the ctl thread when SHUTDOWN comes, for a main loop
 * that sleeps elsewhere (a doorbell); NULL clears it. */
void ctl_set_waker(struct ctl *c, void (*fn)(void *arg), void *arg);
/* True once the supervisor sent SHUTDOWN (or ctl_stop was called). */
bool ctl_shutdown_requested(const struct ctl *c);
void ctl_stop(struct ctl *c);

/* "ctl-loader.ipc", "ctl-npu.ipc", "ctl-gpu.ipc", "ctl-coordinator.ipc". */
const char *ctl_file(enum msg_role role);

#endif
