/* bus: round trips between two processes over ipc:// in a temp dir, timeouts,
 * URL rules, req/rep with a deferred answer; prints the round-trip latency. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ipc/bus.h"
#include "common/err.h"

static char dir[64], url[200];

static void mkurl(const char *name)
{
	snprintf(dir, sizeof dir, "/tmp/unicorn-bus-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(url, sizeof url, "ipc://%s/%s", dir, name);
}

static void cleanup(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	(void)!system(cmd);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static struct msg m, r;

static void echo_child(void);
static void cli_child(void);

/* Criterion's runner itself uses nng, and nng panics in a child forked after
 * it started; so the peer process re-executes this binary and the
 * constructor below runs its role before Criterion's main. */
__attribute__((constructor)) static void bus_child_main(void)
{
	const char *role = getenv("UNICORN_BUS_CHILD"), *u = getenv("UNICORN_BUS_URL");
	if (!role || !u)
		return;
	snprintf(url, sizeof url, "%s", u);
	if (!strcmp(role, "echo"))
		echo_child();
	if (!strcmp(role, "cli"))
		cli_child();
	_exit(99);
}

static pid_t spawn(const char *role)
{
	pid_t pid = fork();
	if (pid == 0) {
		setenv("UNICORN_BUS_CHILD", role, 1);
		setenv("UNICORN_BUS_URL", url, 1);
		execl("/proc/self/exe", "bus-child", (char *)NULL);
		_exit(98);
	}
	return pid;
}

/* Child: echo PING as PONG until SHUTDOWN. */
static void echo_child(void)
{
	struct bus *b;
	static struct msg in, out;
	if (bus_dial(url, BUS_PAIR, &b))
		_exit(3);
	for (;;) {
		if (bus_recv(b, 5000, &in))
			_exit(4);
		if (in.type == MSG_SHUTDOWN)
			break;
		msg_init(&out, MSG_PONG);
		out.u.ping.nonce = in.u.ping.nonce;
		if (bus_send(b, &out))
			_exit(5);
	}
	bus_close(b);
	_exit(0);
}

Test(bus, pair_roundtrip_between_processes)
{
	mkurl("gpu.ipc");
	struct bus *b;
	pid_t pid = spawn("echo");
	cr_assert_eq(bus_listen(url, BUS_PAIR, &b), 0, "%s", err_msg());
	const int n = 2000;
	double t0 = 0;
	for (int i = 0; i < n + 50; i++) {
		if (i == 50)
			t0 = now_us(); /* first 50: warm-up (connect) */
		msg_init(&m, MSG_PING);
		m.u.ping.nonce = 1000 + (uint64_t)i;
		cr_assert_eq(bus_send(b, &m), 0, "%s", err_msg());
		cr_assert_eq(bus_recv(b, 5000, &r), 0, "%s", err_msg());
		cr_assert_eq(r.type, MSG_PONG);
		cr_assert_eq(r.u.ping.nonce, 1000 + (uint64_t)i);
	}
	double us = (now_us() - t0) / n;
	fprintf(stderr, "bus: ipc:// pair1 round trip (PING/PONG, 2 processes): %.1f us\n", us);
	msg_init(&m, MSG_SHUTDOWN);
	cr_assert_eq(bus_send(b, &m), 0);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
	bus_close(b);
	cleanup();
}

Test(bus, recv_timeout)
{
	mkurl("npu.ipc");
	struct bus *b;
	cr_assert_eq(bus_listen(url, BUS_PAIR, &b), 0, "%s", err_msg());
	double t0 = now_us();
	cr_assert_eq(bus_recv(b, 100, &r), ERR_TIMEOUT);
	double ms = (now_us() - t0) / 1000;
	cr_assert(ms >= 90 && ms < 1000, "waited %.0f ms", ms);
	/* send with no peer times out too */
	bus_set_send_timeout(b, 50);
	msg_init(&m, MSG_PING);
	cr_assert_eq(bus_send(b, &m), ERR_TIMEOUT);
	bus_close(b);
	cleanup();
}

Test(bus, url_rules)
{
	struct bus *b;
	cr_assert_eq(bus_listen("tcp://127.0.0.1:5555", BUS_PAIR, &b), ERR_INVAL);
	cr_assert_eq(bus_dial("inproc://x", BUS_PAIR, &b), ERR_INVAL);
	cr_assert_eq(bus_listen("ipc://relative/path", BUS_PAIR, &b), ERR_INVAL);
	cr_assert_eq(bus_listen("ipc:///tmp/x.ipc", BUS_REQ, &b), ERR_INVAL);
	cr_assert_null(b);
}

Test(bus, dial_before_listen_reconnects)
{
	mkurl("late.ipc");
	struct bus *d, *l;
	cr_assert_eq(bus_dial(url, BUS_PAIR, &d), 0, "%s", err_msg());
	usleep(150 * 1000);
	cr_assert_eq(bus_listen(url, BUS_PAIR, &l), 0, "%s", err_msg());
	msg_init(&m, MSG_HELLO);
	m.u.hello = (struct msg_hello){ MSG_ROLE_COORDINATOR, (uint32_t)getpid(), MSG_VERSION, 0 };
	bus_set_send_timeout(d, 3000);
	cr_assert_eq(bus_send(d, &m), 0, "%s", err_msg());
	cr_assert_eq(bus_recv(l, 3000, &r), 0, "%s", err_msg());
	cr_assert_eq(r.type, MSG_HELLO);
	cr_assert_eq(r.u.hello.pid, (uint32_t)getpid());
	cr_assert_neq(r.seq, 0);
	/* listener restarts: the dialer reconnects by itself */
	bus_close(l);
	cr_assert_eq(bus_listen(url, BUS_PAIR, &l), 0, "%s", err_msg());
	/* A message sent while the old pipe is dying may be lost (the protocol
	 * re-HELLOs after reconnect), so retry like a real dialer would. */
	int got = 0;
	for (int i = 0; i < 50 && !got; i++) { /* up to ~10 s: slow under ASan */
		msg_init(&m, MSG_PING);
		m.u.ping.nonce = 5;
		if (bus_send(d, &m) == 0 && bus_recv(l, 200, &r) == 0)
			got = 1;
	}
	cr_assert(got, "dialer did not reconnect: %s", err_msg());
	cr_assert_eq(r.u.ping.nonce, 5);
	bus_close(d);
	bus_close(l);
	cleanup();
}

/* Child CLI: GEN_POLL, expects a GEN_TOKEN answered late, then cancels. */
static void cli_child(void)
{
	struct bus *b;
	static struct msg q, a;
	if (bus_dial(url, BUS_REQ, &b))
		_exit(3);
	msg_init(&q, MSG_GEN_POLL);
	q.u.gen_poll = (struct msg_gen_poll){ 77, 0, 1000 };
	if (bus_call(b, &q, 5000, &a) || a.type != MSG_GEN_TOKEN || a.u.gen_token.token != 4242 ||
	    strcmp(a.u.gen_token.piece, " sky") || a.seq != q.seq)
		_exit(4);
	msg_init(&q, MSG_GEN_CANCEL);
	q.u.gen_cancel.request_id = 77;
	if (bus_call(b, &q, 5000, &a) || a.type != MSG_ACK || a.u.ack.code != 0)
		_exit(5);
	bus_close(b);
	_exit(0);
}

Test(bus, req_rep_deferred_reply)
{
	mkurl("coordinator.ipc");
	struct bus *b;
	pid_t pid = spawn("cli");
	cr_assert_eq(bus_listen(url, BUS_REP, &b), 0, "%s", err_msg());
	struct bus_pending *p;
	cr_assert_eq(bus_serve(b, 5000, &m, &p), 0, "%s", err_msg());
	cr_assert_eq(m.type, MSG_GEN_POLL);
	usleep(50 * 1000); /* the token arrives later: long-poll */
	msg_init(&r, MSG_GEN_TOKEN);
	r.u.gen_token.request_id = 77, r.u.gen_token.token = 4242, r.u.gen_token.n_piece = 4;
	memcpy(r.u.gen_token.piece, " sky", 4);
	cr_assert_eq(bus_reply(p, &r), 0, "%s", err_msg());
	cr_assert_eq(bus_serve(b, 5000, &m, &p), 0, "%s", err_msg());
	cr_assert_eq(m.type, MSG_GEN_CANCEL);
	msg_init(&r, MSG_ACK);
	r.u.ack.ack_seq = m.seq;
	cr_assert_eq(bus_reply(p, &r), 0, "%s", err_msg());
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
	cr_assert_eq(bus_serve(b, 50, &m, &p), ERR_TIMEOUT);
	bus_close(b);
	cleanup();
}
