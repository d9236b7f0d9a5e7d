/* unicorn logs: print a detached cluster's log, RUNDIR/unicorn.log
 * (unicorn-up -d writes it; a foreground cluster logs to its terminal). */
#include "cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "ipc/rundir.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: unicorn logs [--name N] [--follow]\n\n"
		"Print the log of cluster N (default \"default\"): RUNDIR/unicorn.log, which\n"
		"unicorn-up -d (and unicorn run MODEL) write; kept after unicorn down.\n"
		"-f, --follow keeps printing what is appended until Ctrl-C or the cluster stops.\n"
		"A cluster started in the foreground has no log file: its output is in the\n"
		"terminal that runs unicorn-up.\n");
}

static int copy(FILE *f)
{
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		if (fwrite(buf, 1, n, stdout) != n)
			return -1;
	fflush(stdout);
	return ferror(f) ? -1 : 0;
}

int cli_logs(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "name", required_argument, 0, 'n' }, { "follow", no_argument, 0, 'f' },
		{ "help", no_argument, 0, 'h' },       { 0, 0, 0, 0 },
	};
	const char *name = RUNDIR_DEFAULT_NAME;
	int follow = 0, c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "hfn:", lo, NULL)) != -1) {
		switch (c) {
		case 'n': name = optarg; break;
		case 'f': follow = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "unicorn logs: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	char dir[RUNDIR_PATH_MAX], path[RUNDIR_PATH_MAX];
	if (rundir_resolve(name, dir, sizeof dir) || rundir_path(dir, RUNDIR_LOG, path, sizeof path)) {
		fprintf(stderr, "unicorn logs: %s\n", err_msg());
		return 2;
	}
	pid_t pid = 0;
	bool alive = rundir_pid_read(dir, &pid) == 0 && pid > 0;
	FILE *f = fopen(path, "r");
	if (!f) {
		if (errno != ENOENT) {
			fprintf(stderr, "unicorn logs: %s: %s\n", path, strerror(errno));
			return 1;
		}
		if (alive)
			fprintf(stderr, "unicorn logs: cluster '%s' runs in the foreground (pid %d): it has no "
				"log file, its output is in the terminal of unicorn-up (start it with -d "
				"for %s)\n", name, (int)pid, path);
		else
			fprintf(stderr, "unicorn logs: no log of a cluster named '%s' (no %s; unicorn ps "
				"lists the running clusters)\n", name, path);
		return 1;
	}
	int rc = copy(f);
	while (!rc && follow) {
		clearerr(f);
		usleep(200 * 1000);
		rc = copy(f);
		if (rundir_pid_read(dir, &pid) || pid <= 0 || kill(pid, 0)) {
			rc = copy(f);
			break;
		}
	}
	fclose(f);
	if (rc) {
		fprintf(stderr, "unicorn logs: %s: %s\n", path, strerror(errno));
		return 1;
	}
	return 0;
}
