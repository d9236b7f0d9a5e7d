/* ctl: the control link every cluster process serves to the supervisor. The
 * test plays the supervisor over a real pair1 link in a temporary directory. */
#include <criterion/criterion.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipc/bus.h"
#include "ipc/ctl.h"
#include "common/err.h"
#include "ipc/rundir.h"
#include "tests/proc.h"

static char dir[64];
static struct msg req, rep;  /* large: static */

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/unicorn-ctl-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char p[128];
	snprintf(p, sizeof p, "%s/ctl-gpu.ipc", dir);
	unlink(p);
	rmdir(dir);
}

static struct bus *dial(void)
{
	char url[200];
	cr_assert_eq(rundir_url(dir, ctl_file(MSG_ROLE_GPU_WORKER), url, sizeof url), 0);
	struct bus *b;
	cr_assert_eq(bus_dial(url, BUS_PAIR, &b), 0, "%s", err_msg());
	cr_assert_eq(bus_set_send_timeout(b, 50), 0);
	return b;
}

/* Send req (re-sending every 100 ms: the dial may not have connected yet)
 * until a reply of type want comes (PONG: with the same nonce). */
static int ask(struct bus *b, uint16_t want, double timeout_s)
{
	double end = proc_now_s() + timeout_s;
	while (proc_now_s() < end) {
		req.seq = 0;
		bus_send(b, &req);
		double t = proc_now_s() + 0.1;
		while (proc_now_s() < t) {
			if (bus_recv(b, 20, &rep) != 0)
				continue;
			if (rep.type != want)
				continue;
			if (want == MSG_PONG && rep.u.ping.nonce != req.u.ping.nonce)
				continue;
			return 0;
		}
	}
	return ERR_TIMEOUT;
}

static int ping(struct bus *b, uint64_t nonce, double timeout_s)
{
	msg_init(&req, MSG_PING);
	req.u.ping.nonce = nonce;
	return ask(b, MSG_PONG, timeout_s);
}

TestSuite(ctl, .init = setup, .fini = teardown, .timeout = 30);

Test(ctl, file_names)
{
	cr_assert_str_eq(ctl_file(MSG_ROLE_LOADER), "ctl-loader.ipc");
	cr_assert_str_eq(ctl_file(MSG_ROLE_NPU_WORKER), "ctl-npu.ipc");
	cr_assert_str_eq(ctl_file(MSG_ROLE_GPU_WORKER), "ctl-gpu.ipc");
	cr_assert_str_eq(ctl_file(MSG_ROLE_COORDINATOR), "ctl-coordinator.ipc");
	cr_assert_str_eq(ctl_file(MSG_ROLE_API), "ctl-api.ipc");
	cr_assert_null(ctl_file(MSG_ROLE_CLI));
	struct ctl *c = (struct ctl *)1;
	cr_assert_eq(ctl_start(dir, MSG_ROLE_CLI, NULL, NULL, 0, &c), ERR_INVAL);
	cr_assert_null(c);
}

Test(ctl, ping_pong)
{
	struct ctl *c;
	cr_assert_eq(ctl_start(dir, MSG_ROLE_GPU_WORKER, NULL, NULL, 0, &c), 0, "%s", err_msg());
	struct bus *b = dial();
	cr_assert_eq(ping(b, 42, 5), 0, "no PONG");
	cr_assert_eq(rep.u.ping.nonce, 42);
	cr_assert_eq(ping(b, 0xdeadbeefcafeull, 2), 0, "no second PONG");
	cr_assert_eq(rep.u.ping.nonce, 0xdeadbeefcafeull);
	/* HELLO names the process. */
	msg_init(&req, MSG_HELLO);
	req.u.hello.role = MSG_ROLE_SUPERVISOR;
	req.u.hello.pid = (uint32_t)getpid();
	req.u.hello.version = MSG_VERSION;
	cr_assert_eq(ask(b, MSG_WELCOME, 2), 0);
	cr_assert_eq(rep.u.hello.role, MSG_ROLE_GPU_WORKER);
	cr_assert_eq(rep.u.hello.pid, (uint32_t)getpid());
	cr_assert_not(ctl_shutdown_requested(c));
	bus_close(b);
	ctl_stop(c);
}

Test(ctl, stall_detection)
{
	struct ctl *c;
	cr_assert_eq(ctl_start(dir, MSG_ROLE_GPU_WORKER, NULL, NULL, 300, &c), 0, "%s", err_msg());
	struct bus *b = dial();
	ctl_heartbeat(c);
	cr_assert_eq(ping(b, 1, 5), 0, "fresh heartbeat must be answered");
	usleep(500 * 1000); /* main loop silent longer than 300 ms */
	cr_assert_eq(ping(b, 2, 0.6), ERR_TIMEOUT, "a stalled main loop must not answer PING");
	ctl_heartbeat(c);
	cr_assert_eq(ping(b, 3, 2), 0, "answers again after a heartbeat");
	bus_close(b);
	ctl_stop(c);
}

static void fill(void *arg, struct msg_status *st)
{
	atomic_int *calls = arg;
	atomic_fetch_add(calls, 1);
	msg_set_str(st->backend, sizeof st->backend, "vulkan");
	msg_set_str(st->device, sizeof st->device, "llvmpipe");
	st->weights_bytes = 123456;
	st->kv_bytes = 789;
	st->share_path = MSG_SHARE_MEMFD;
	st->import_mode = MSG_IMPORT_UPLOAD;
	st->pid = 1; /* the link overrides role and pid */
}

Test(ctl, status_callback)
{
	atomic_int calls = 0;
	struct ctl *c;
	cr_assert_eq(ctl_start(dir, MSG_ROLE_GPU_WORKER, fill, &calls, 0, &c), 0, "%s", err_msg());
	struct bus *b = dial();
	usleep(50 * 1000);
	msg_init(&req, MSG_STATUS_REQ);
	cr_assert_eq(ask(b, MSG_STATUS, 5), 0, "no STATUS");
	cr_assert_geq(atomic_load(&calls), 1);
	cr_assert_eq(rep.u.status.role, MSG_ROLE_GPU_WORKER);
	cr_assert_eq(rep.u.status.pid, (uint32_t)getpid());
	cr_assert_str_eq(rep.u.status.backend, "vulkan");
	cr_assert_str_eq(rep.u.status.device, "llvmpipe");
	cr_assert_eq(rep.u.status.weights_bytes, 123456);
	cr_assert_eq(rep.u.status.kv_bytes, 789);
	cr_assert_eq(rep.u.status.share_path, MSG_SHARE_MEMFD);
	cr_assert_eq(rep.u.status.import_mode, MSG_IMPORT_UPLOAD);
	cr_assert_gt(rep.u.status.uptime_ns, 40 * 1000000ull);
	bus_close(b);
	ctl_stop(c);
}

Test(ctl, shutdown_flag)
{
	struct ctl *c;
	cr_assert_eq(ctl_start(dir, MSG_ROLE_GPU_WORKER, NULL, NULL, 0, &c), 0, "%s", err_msg());
	struct bus *b = dial();
	cr_assert_not(ctl_shutdown_requested(c));
	msg_init(&req, MSG_SHUTDOWN);
	req.u.shutdown.grace_ms = 1000;
	cr_assert_eq(ask(b, MSG_ACK, 5), 0, "SHUTDOWN not acknowledged");
	double end = proc_now_s() + 2;
	while (!ctl_shutdown_requested(c) && proc_now_s() < end)
		usleep(10 * 1000);
	cr_assert(ctl_shutdown_requested(c));
	bus_close(b);
	double t0 = proc_now_s();
	ctl_stop(c);
	cr_assert_lt(proc_now_s() - t0, 1.0, "ctl_stop must join promptly");
}
