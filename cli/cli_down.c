/* unicorn down: stop a running cluster cleanly (SHUTDOWN over control.ipc),
 * then wait until its supervisor is gone. */
#include "cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipc/bus.h"
#include "common/err.h"
#include "ipc/rundir.h"

#define DOWN_WAIT_S 20   /* the supervisor's own grace is 5 s per stage */

static void usage(FILE *f)
{
	fprintf(f, "usage: unicorn down [--name N]\n"
		   "Stop the cluster N (default \"default\") and wait until every process is gone.\n");
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
		{ "name", required_argument, 0, 'n' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	const char *name = RUNDIR_DEFAULT_NAME;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'n': name = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "unicorn down: unexpected argument '%s'\n", argv[optind]);
		return 2;
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
		req.u.shutdown.grace_ms = 5000;
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
		fprintf(stderr, "unicorn down: the supervisor (pid %d) does not answer on %s; sending SIGTERM\n",
			pid, url);
		if (kill(pid, SIGTERM) && errno != ESRCH) {
			fprintf(stderr, "unicorn down: kill %d: %s\n", pid, strerror(errno));
			return 1;
		}
	}
	double end = now_s() + DOWN_WAIT_S;
	while (supervisor_pid(dir) && now_s() < end)
		usleep(50 * 1000);
	if (supervisor_pid(dir)) {
		fprintf(stderr, "unicorn down: cluster '%s' still running after %d s (supervisor pid %d)\n",
			name, DOWN_WAIT_S, pid);
		return 1;
	}
	printf("unicorn: cluster '%s' stopped\n", name);
	return 0;
}
