/* ctl: the control link thread every cluster process runs (see ipc/ctl.h).
 *
 * The thread owns its struct bus (bus is not thread-safe); the main loop only
 * touches atomics (heartbeat, shutdown flag), so no lock is needed. */
#include "ipc/ctl.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "ipc/bus.h"
#include "common/err.h"
#include "ipc/live.h"
#include "ipc/rundir.h"

#define CTL_SEND_MS 200      /* a supervisor that does not read is not waited for */

struct ctl {
	pthread_t thread;
	struct bus *bus;
	enum msg_role role;
	uint32_t pid;                /* cached: the row is filled every heartbeat */
	ctl_status_fn fill;
	void *arg;
	uint64_t stall_ns;
	uint64_t start_ns;
	atomic_uint_fast64_t heartbeat_ns;
	atomic_bool stop;
	atomic_bool shutdown;
	struct live_page *live;      /* written by the main loop only */
	int wake_fd;                 /* eventfd: readable once SHUTDOWN came */
	void (*_Atomic waker)(void *);
	void *_Atomic waker_arg;
	bool published_any;          /* the row below is on the page */
	struct msg_status published;
	char rundir[RUNDIR_PATH_MAX];
	struct msg in, out;  /* ~50 KiB each: on the heap, not the thread's stack */
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const char *ctl_file(enum msg_role role)
{
	switch (role) {
	case MSG_ROLE_LOADER: return "ctl-loader.ipc";
	case MSG_ROLE_NPU_WORKER: return "ctl-npu.ipc";
	case MSG_ROLE_GPU_WORKER: return "ctl-gpu.ipc";
	case MSG_ROLE_COORDINATOR: return "ctl-coordinator.ipc";
	case MSG_ROLE_API: return "ctl-api.ipc";
	default: return NULL;
	}
}

static void reply(struct ctl *c)
{
	c->out.seq = 0;
	/* A failed send (supervisor gone or not reading) is not an error of the
	 * process: the supervisor's watchdog judges us, we do not judge it. */
	(void)bus_send(c->bus, &c->out);
}

/* A stuck main loop must look dead to the watchdog: neither PING nor
 * STATUS_REQ (the supervisor's probe) is answered then. */
static bool main_loop_stalled(struct ctl *c)
{
	uint64_t hb = atomic_load(&c->heartbeat_ns);
	uint64_t now = now_ns();
	return now > hb && now - hb > c->stall_ns;
}

/* The STATUS row: what the callback fills, with role and pid fixed. */
static void fill_status(struct ctl *c, struct msg_status *st)
{
	memset(st, 0, sizeof *st);
	st->role = (uint32_t)c->role;
	st->pid = c->pid;
	msg_set_str(st->backend, sizeof st->backend, "-");
	msg_set_str(st->device, sizeof st->device, "-");
	st->uptime_ns = now_ns() - c->start_ns;
	if (c->fill)
		c->fill(c->arg, st);
	/* Keep what the callback cannot override sane for the wire. */
	st->role = (uint32_t)c->role;
	st->pid = c->pid;
	st->reserved = 0;
	st->backend[sizeof st->backend - 1] = 0;
	st->device[sizeof st->device - 1] = 0;
}

static void handle(struct ctl *c)
{
	struct msg *m = &c->in;
	switch (m->type) {
	case MSG_PING: {
		if (main_loop_stalled(c))
			return;
		msg_init(&c->out, MSG_PONG);
		c->out.u.ping.nonce = m->u.ping.nonce;
		reply(c);
		return;
	}
	case MSG_HELLO:
		msg_init(&c->out, MSG_WELCOME);
		c->out.u.hello.role = (uint32_t)c->role;
		c->out.u.hello.pid = (uint32_t)getpid();
		c->out.u.hello.version = MSG_VERSION;
		reply(c);
		return;
	case MSG_STATUS_REQ: {
		if (main_loop_stalled(c))
			return;
		msg_init(&c->out, MSG_STATUS);
		fill_status(c, &c->out.u.status);
		reply(c);
		return;
	}
	case MSG_SHUTDOWN: {
		atomic_store(&c->shutdown, true);
		/* a main loop asleep on an fd or a doorbell hears it now */
		uint64_t one = 1;
		if (write(c->wake_fd, &one, sizeof one) < 0) {
			/* the counter is full: it is readable anyway */
		}
		void *arg = atomic_load(&c->waker_arg);
		void (*fn)(void *) = atomic_load(&c->waker);
		if (fn)
			fn(arg);
		msg_init(&c->out, MSG_ACK);
		c->out.u.ack.ack_seq = m->seq;
		reply(c);
		return;
	}
	default:
		msg_init(&c->out, MSG_ERROR);
		c->out.u.error.code = ERR_INVAL;
		c->out.u.error.ref_seq = m->seq;
		msg_set_str(c->out.u.error.text, sizeof c->out.u.error.text,
			    "ctl: only PING, HELLO, STATUS_REQ and SHUTDOWN are served here");
		reply(c);
		return;
	}
}

static void *ctl_thread(void *arg)
{
	struct ctl *c = arg;
	while (!atomic_load(&c->stop)) {
		/* No timeout: the thread wakes only for a message; ctl_stop closes
		 * the socket, which ends the wait. */
		int rc = bus_recv(c->bus, BUS_FOREVER, &c->in);
		if (rc == 0) {
			handle(c);
		} else if (rc != ERR_INVAL && !atomic_load(&c->stop)) {
			/* ERR_INVAL: malformed, already dropped. Anything else is a
			 * socket that fails at once: retry, but never in a tight loop. */
			struct timespec ts = { 0, 100000000 };
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

int ctl_start(const char *rundir, enum msg_role role, ctl_status_fn fill, void *arg,
	      uint32_t stall_ms, struct ctl **out)
{
	*out = NULL;
	const char *file = ctl_file(role);
	if (!file)
		return err_set(ERR_INVAL, "ctl: role %d: no control link for this role", (int)role);
	if (!rundir)
		return err_set(ERR_INVAL, "ctl: rundir: missing");
	char url[BUS_URL_MAX + 1];
	int rc = rundir_url(rundir, file, url, sizeof url);
	if (rc)
		return err_prefix(rc, "ctl");
	struct ctl *c = calloc(1, sizeof *c);
	if (!c)
		return err_set(ERR_NOMEM, "ctl: out of memory");
	c->role = role;
	c->pid = (uint32_t)getpid();
	c->fill = fill;
	c->arg = arg;
	/* UNICORN_STALL_MS: another default stall limit (tests of the watchdog) */
	const char *senv = getenv("UNICORN_STALL_MS");
	if (!stall_ms && senv && atoi(senv) >= 100)
		stall_ms = (uint32_t)atoi(senv);
	c->stall_ns = (uint64_t)(stall_ms ? stall_ms : CTL_STALL_MS_DEFAULT) * 1000000u;
	c->start_ns = now_ns();
	atomic_init(&c->heartbeat_ns, c->start_ns);
	atomic_init(&c->stop, false);
	atomic_init(&c->shutdown, false);
	snprintf(c->rundir, sizeof c->rundir, "%s", rundir);
	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wake_fd < 0) {
		free(c);
		return err_set(ERR_IO, "ctl: eventfd: %s", strerror(errno));
	}
	rc = bus_listen(url, BUS_PAIR, &c->bus);
	if (rc) {
		close(c->wake_fd);
		free(c);
		return err_prefix(rc, "ctl");
	}
	if ((rc = bus_set_send_timeout(c->bus, CTL_SEND_MS))) {
		bus_close(c->bus);
		close(c->wake_fd);
		free(c);
		return err_prefix(rc, "ctl");
	}
	/* the page last: a supervisor that finds it can also reach the link */
	rc = live_create(rundir, role, (uint32_t)(c->stall_ns / 1000000u), &c->live);
	if (rc) {
		bus_close(c->bus);
		close(c->wake_fd);
		free(c);
		return err_prefix(rc, "ctl");
	}
	ctl_heartbeat(c);
	int prc = pthread_create(&c->thread, NULL, ctl_thread, c);
	if (prc) {
		bus_close(c->bus);
		live_close(c->live, rundir, role, true);
		close(c->wake_fd);
		free(c);
		return err_set(ERR_NOMEM, "ctl: cannot start the control thread (error %d)", prc);
	}
	*out = c;
	return 0;
}

void ctl_heartbeat(struct ctl *c)
{
	if (!c)
		return;
	uint64_t now = now_ns();
	atomic_store(&c->heartbeat_ns, now);
	live_beat(c->live, now);
	/* the row as it is now, published when it changed (the uptime alone
	 * does not count: readers compute it) */
	struct msg_status st;
	fill_status(c, &st);
	if (!c->published_any || live_row_differs(&st, &c->published)) {
		live_publish(c->live, &st);
		memcpy(&c->published, &st, sizeof st);
		c->published_any = true;
	}
}

void ctl_set_load(struct ctl *c, uint32_t running, uint32_t queued, uint32_t slots)
{
	if (c)
		live_set_load(c->live, running, queued, slots);
}

int ctl_wake_fd(const struct ctl *c)
{
	return c ? c->wake_fd : -1;
}

void ctl_set_waker(struct ctl *c, void (*fn)(void *arg), void *arg)
{
	if (!c)
		return;
	atomic_store(&c->waker_arg, arg);
	atomic_store(&c->waker, fn);
}

bool ctl_shutdown_requested(const struct ctl *c)
{
	/* atomic_load on a const object is fine in C17 but not C11: cast. */
	return c && (atomic_load(&((struct ctl *)c)->shutdown) || atomic_load(&((struct ctl *)c)->stop));
}

void ctl_stop(struct ctl *c)
{
	if (!c)
		return;
	atomic_store(&c->stop, true);
	bus_interrupt(c->bus);
	pthread_join(c->thread, NULL);
	bus_close(c->bus);
	live_close(c->live, c->rundir, c->role, true);
	close(c->wake_fd);
	free(c);
}
