/* ctl: the control link thread every cluster process runs (see ipc/ctl.h).
 *
 * The thread owns its struct bus (bus is not thread-safe); the main loop only
 * touches atomics (heartbeat, shutdown flag), so no lock is needed. */
#include "ipc/ctl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipc/bus.h"
#include "common/err.h"
#include "ipc/rundir.h"

#define CTL_POLL_MS 1000     /* receive wait; ctl_stop interrupts it (an idle process must sleep) */
#define CTL_SEND_MS 200      /* a supervisor that does not read is not waited for */

struct ctl {
	pthread_t thread;
	struct bus *bus;
	enum msg_role role;
	ctl_status_fn fill;
	void *arg;
	uint64_t stall_ns;
	uint64_t start_ns;
	atomic_uint_fast64_t heartbeat_ns;
	atomic_bool stop;
	atomic_bool shutdown;
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

static void handle(struct ctl *c)
{
	struct msg *m = &c->in;
	switch (m->type) {
	case MSG_PING: {
		uint64_t hb = atomic_load(&c->heartbeat_ns);
		uint64_t now = now_ns();
		/* A stuck main loop must look dead to the watchdog. */
		if (now > hb && now - hb > c->stall_ns)
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
		msg_init(&c->out, MSG_STATUS);
		struct msg_status *st = &c->out.u.status;
		st->role = (uint32_t)c->role;
		st->pid = (uint32_t)getpid();
		msg_set_str(st->backend, sizeof st->backend, "-");
		msg_set_str(st->device, sizeof st->device, "-");
		st->uptime_ns = now_ns() - c->start_ns;
		if (c->fill)
			c->fill(c->arg, st);
		/* Keep what the callback cannot override sane for the wire. */
		st->role = (uint32_t)c->role;
		st->pid = (uint32_t)getpid();
		st->reserved = 0;
		st->backend[sizeof st->backend - 1] = 0;
		st->device[sizeof st->device - 1] = 0;
		reply(c);
		return;
	}
	case MSG_SHUTDOWN:
		atomic_store(&c->shutdown, true);
		msg_init(&c->out, MSG_ACK);
		c->out.u.ack.ack_seq = m->seq;
		reply(c);
		return;
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
		int rc = bus_recv(c->bus, CTL_POLL_MS, &c->in);
		if (rc == 0)
			handle(c);
		/* ERR_TIMEOUT: nothing came; ERR_INVAL: malformed, already dropped.
		 * Anything else (socket closing) is retried until stop is set. */
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
	c->fill = fill;
	c->arg = arg;
	c->stall_ns = (uint64_t)(stall_ms ? stall_ms : CTL_STALL_MS_DEFAULT) * 1000000u;
	c->start_ns = now_ns();
	atomic_init(&c->heartbeat_ns, c->start_ns);
	atomic_init(&c->stop, false);
	atomic_init(&c->shutdown, false);
	rc = bus_listen(url, BUS_PAIR, &c->bus);
	if (rc) {
		free(c);
		return err_prefix(rc, "ctl");
	}
	if ((rc = bus_set_send_timeout(c->bus, CTL_SEND_MS))) {
		bus_close(c->bus);
		free(c);
		return err_prefix(rc, "ctl");
	}
	int prc = pthread_create(&c->thread, NULL, ctl_thread, c);
	if (prc) {
		bus_close(c->bus);
		free(c);
		return err_set(ERR_NOMEM, "ctl: cannot start the control thread (error %d)", prc);
	}
	*out = c;
	return 0;
}

void ctl_heartbeat(struct ctl *c)
{
	if (c)
		atomic_store(&c->heartbeat_ns, now_ns());
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
	free(c);
}
