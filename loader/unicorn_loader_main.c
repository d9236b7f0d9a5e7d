/* unicorn-loader: open the model once, copy it into shared regions and hand
 * the region fds to every worker that asks on loader.sock, forever.
 * Exit 0 on SHUTDOWN/SIGTERM, 1 on a restartable failure, 2 on a bad model. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipc/ctl.h"
#include "common/err.h"
#include "ipc/fdpass.h"
#include "ipc/rundir.h"
#include "loader/loader_regions.h"

#define LOADER_POLL_MS 1000 /* accept wait: an idle loader sleeps; SIGTERM interrupts it */
#define LOADER_CLIENT_TIMEOUT_MS 2000

static volatile sig_atomic_t stop_flag;
static void on_term(int sig) { (void)sig; stop_flag = 1; }

static struct loader_regions regs;
static char model_path[4096];
static struct timespec t_start;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void fill_status(void *arg, struct msg_status *st)
{
	(void)arg;
	msg_set_str(st->backend, sizeof st->backend, "-");
	msg_set_str(st->device, sizeof st->device, model_path);
	st->weights_bytes = regs.weights_bytes;
	st->scratch_bytes = regs.act.size;
	st->share_path = regs.dmabuf ? MSG_SHARE_UDMABUF : MSG_SHARE_MEMFD;
	st->import_mode = MSG_IMPORT_NONE;
	st->uptime_ns = mono_ns() - ((uint64_t)t_start.tv_sec * 1000000000ull + (uint64_t)t_start.tv_nsec);
}

static void usage(void)
{
	fprintf(stderr, "usage: unicorn-loader --rundir DIR --model PATH [--quiet]\n");
}

int main(int argc, char **argv)
{
	clock_gettime(CLOCK_MONOTONIC, &t_start);
	const char *rundir = NULL, *model = NULL;
	bool quiet = false;
	static const struct option opts[] = {
		{ "rundir", required_argument, 0, 'r' },
		{ "model", required_argument, 0, 'm' },
		{ "quiet", no_argument, 0, 'q' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': rundir = optarg; break;
		case 'm': model = optarg; break;
		case 'q': quiet = true; break;
		case 'h': usage(); return 0;
		default: usage(); return 2;
		}
	}
	if (!rundir || !model || optind != argc) {
		usage();
		return 2;
	}
	snprintf(model_path, sizeof model_path, "%s", model);
	struct sigaction sa = { .sa_handler = on_term };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	int rc = rundir_check(rundir);
	if (rc) {
		fprintf(stderr, "unicorn-loader: %s\n", err_msg());
		return 2;
	}
	struct model *m = NULL;
	rc = model_open(model, &m);
	if (rc) {
		/* a bad model does not get better by restarting */
		fprintf(stderr, "unicorn-loader: cannot load model %s: %s\n", model, err_msg());
		return 2;
	}
	rc = loader_regions_build(m, quiet, &regs);
	model_close(m); /* from here on the regions are the only copy we use */
	if (rc) {
		fprintf(stderr, "unicorn-loader: %s: %s\n", model, err_msg());
		loader_regions_free(&regs);
		return rc == ERR_RANGE || rc == ERR_INVAL || rc == ERR_UNSUP ? 2 : 1;
	}
	struct ctl *ctl = NULL;
	rc = ctl_start(rundir, MSG_ROLE_LOADER, fill_status, NULL, 0, &ctl);
	if (rc) {
		fprintf(stderr, "unicorn-loader: control link: %s\n", err_msg());
		loader_regions_free(&regs);
		return 1;
	}
	char sock[RUNDIR_PATH_MAX];
	int lfd = -1;
	rc = rundir_path(rundir, RUNDIR_LOADER_SOCK, sock, sizeof sock);
	if (!rc)
		rc = fdpass_listen(sock, &lfd);
	if (rc) {
		fprintf(stderr, "unicorn-loader: %s\n", err_msg());
		ctl_stop(ctl);
		loader_regions_free(&regs);
		return 1;
	}
	fprintf(stderr, "unicorn-loader: %s: %u weight region(s), %llu bytes of tensors, shared by %s, region "
		"identity %016llx; serving %s\n", model, regs.n_weights, (unsigned long long)regs.weights_bytes,
		regs.dmabuf ? "udmabuf" : "memfd", (unsigned long long)regs.ident, sock);
	int code = 0;
	while (!stop_flag && !ctl_shutdown_requested(ctl)) {
		ctl_heartbeat(ctl);
		int cfd = -1;
		rc = fdpass_accept(lfd, LOADER_POLL_MS, &cfd);
		if (rc == ERR_TIMEOUT)
			continue;
		if (rc) {
			/* a refused peer (wrong uid) or a transient accept error: keep serving */
			fprintf(stderr, "unicorn-loader: %s\n", err_msg());
			continue;
		}
		fdpass_set_timeout(cfd, LOADER_CLIENT_TIMEOUT_MS);
		if (loader_regions_serve(&regs, cfd))
			fprintf(stderr, "unicorn-loader: client: %s\n", err_msg());
		close(cfd);
	}
	close(lfd);
	unlink(sock);
	ctl_stop(ctl);
	loader_regions_free(&regs);
	return code;
}
