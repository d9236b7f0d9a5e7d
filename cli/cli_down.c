/* unicorn down: stop a running cluster cleanly (SHUTDOWN over control.ipc),
 * then wait until its supervisor is gone. With --drain the supervisor first
 * lets running requests finish while refusing new ones (docs/scale.md). */
#include "cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipc/bus.h"
#include "common/err.h"
#include "ipc/rundir.h"

#define DOWN_WAIT_S 20   /* the supervisor's own grace is 5 s per stage */
#define DRAIN_DEFAULT_S 30
#define DRAIN_MAX_S 86400

static void usage(FILE *f)
{
	fprintf(f, "usage: unicorn down [--name N] [--drain [--timeout S]]\n"
		   "Stop the cluster N (default \"default\") and wait until every process is gone.\n"
		   "Running requests are cut unless --drain is given:\n"
		   "  --drain      /health turns 503 (\"draining\") at once and new requests get 503\n"
		   "               with Retry-After (a load balancer sends them to another replica);\n"
		   "               running requests finish, then the cluster stops (docs/scale.md)\n"
		   "  --timeout S  with --drain: cut what still runs after S seconds (default %d)\n",
		DRAIN_DEFAULT_S);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The supervisor removes its pid file as its very last step. */
static int supervisor_pid(const char *dir)
{
	pid_t pid = 0;
	return rundir_pid_read(dir, &pid) == 0 ? (int)pid : 0;
}

int cli_down(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "name", required_argument, 0, 'n' }, { "help", no_argument, 0, 'h' },
		{ "drain", no_argument, 0, 'D' },      { "timeout", required_argument, 0, 't' },
		{ 0, 0, 0, 0 },
	};
	const char *name = RUNDIR_DEFAULT_NAME, *timeout = NULL;
	bool drain = false;
	double drain_s = DRAIN_DEFAULT_S;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'n': name = optarg; break;
		case 'D': drain = true; break;
		case 't': timeout = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "unicorn down: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (timeout) {
		char *end;
		drain_s = strtod(timeout, &end);
		if (!drain) {
			fprintf(stderr, "unicorn down: --timeout applies to --drain only\n");
			return 2;
		}
		if (*end || end == timeout || !(drain_s >= 0 && drain_s <= DRAIN_MAX_S)) {
			fprintf(stderr, "unicorn down: --timeout '%s': seconds, 0..%d\n", timeout, DRAIN_MAX_S);
			return 2;
		}
	}
	char dir[RUNDIR_PATH_MAX], url[BUS_URL_MAX + 1];
	if (rundir_resolve(name, dir, sizeof dir) || rundir_url(dir, RUNDIR_CONTROL, url, sizeof url)) {
		fprintf(stderr, "unicorn down: %s\n", err_msg());
		return 2;
	}
	int pid = supervisor_pid(dir);
	if (!pid) {
		fprintf(stderr, "unicorn down: no cluster named '%s' is running (no live supervisor in %s)\n",
			name, dir);
		return 1;
	}
	static struct msg req, rep;
	struct bus *b = NULL;
	bool asked = false;
	if (rundir_check(dir) == 0 && bus_dial(url, BUS_REQ, &b) == 0) {
		msg_init(&req, MSG_SHUTDOWN);
		req.u.shutdown.grace_ms = drain ? (uint32_t)(drain_s * 1000) : 5000;
		req.u.shutdown.reason = drain ? MSG_SHUTDOWN_DRAIN : 0;
		/* The dial connects asynchronously: retry the (idempotent) request. */
		for (int i = 0; i < 10 && !asked; i++) {
			req.seq = 0;
			if (bus_call(b, &req, 500, &rep) == 0 && rep.type == MSG_ACK)
				asked = true;
			else
				usleep(100 * 1000);
		}
		bus_close(b);
	}
	if (!asked) {
		/* SIGTERM drains (with unicorn-up's own --drain-timeout), SIGINT stops */
		int sig = drain ? SIGTERM : SIGINT;
		fprintf(stderr, "unicorn down: the supervisor (pid %d) does not answer on %s; sending %s\n",
			pid, url, drain ? "SIGTERM" : "SIGINT");
		if (kill(pid, sig) && errno != ESRCH) {
			fprintf(stderr, "unicorn down: kill %d: %s\n", pid, strerror(errno));
			return 1;
		}
	}
	if (drain && asked)
		fprintf(stderr, "unicorn down: cluster '%s' is draining (running requests get up to %g s)\n",
			name, drain_s);
	double end = now_s() + DOWN_WAIT_S + (drain ? drain_s : 0);
	while (supervisor_pid(dir) && now_s() < end)
		usleep(50 * 1000);
	if (supervisor_pid(dir)) {
		fprintf(stderr, "unicorn down: cluster '%s' still running after %.0f s (supervisor pid %d)\n",
			name, DOWN_WAIT_S + (drain ? drain_s : 0), pid);
		return 1;
	}
	printf("unicorn: cluster '%s' stopped\n", name);
	return 0;
}
