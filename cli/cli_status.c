/* unicorn status: the processes of a running cluster.
 *
 * The supervisor keeps RUNDIR/status.json current (rewritten when it changes:
 * each child's pid, restarts and the STATUS row of its liveness page). This
 * command first asks the supervisor itself (STATUS_REQ on control.ipc), which
 * rewrites the file before it answers (fresh uptimes), and so a stale file of
 * a dead cluster is never shown as live. */
#include "cli/cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "ipc/bus.h"
#include "common/err.h"
#include "common/progress.h"
#include "ipc/rundir.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: unicorn status [--name N] [--json]\n"
		   "Show the processes of cluster N (default \"default\"): pid, role, backend, device,\n"
		   "memory, uptime, restarts, how weights are shared and imported, and the endpoint.\n");
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "-";
}

static void bytes(json_t *o, const char *k, char *buf, size_t n)
{
	json_t *v = json_object_get(o, k);
	if (!json_is_integer(v))
		snprintf(buf, n, "-");
	else
		progress_fmt_bytes(buf, n, (double)json_integer_value(v));
}

int cli_status(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "name", required_argument, 0, 'n' }, { "json", no_argument, 0, 'j' },
		{ "help", no_argument, 0, 'h' },       { 0, 0, 0, 0 },
	};
	const char *name = RUNDIR_DEFAULT_NAME;
	int as_json = 0, c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'n': name = optarg; break;
		case 'j': as_json = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "unicorn status: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	char dir[RUNDIR_PATH_MAX], url[BUS_URL_MAX + 1], path[RUNDIR_PATH_MAX];
	if (rundir_resolve(name, dir, sizeof dir) || rundir_url(dir, RUNDIR_CONTROL, url, sizeof url) ||
	    rundir_path(dir, RUNDIR_STATUS, path, sizeof path)) {
		fprintf(stderr, "unicorn status: %s\n", err_msg());
		return 2;
	}
	pid_t pid = 0;
	if (rundir_pid_read(dir, &pid) || !pid) {
		fprintf(stderr, "unicorn status: no cluster named '%s' is running (no live supervisor in %s)\n",
			name, dir);
		return 1;
	}
	static struct msg req, rep;
	struct bus *b;
	int ok = 0;
	if (rundir_check(dir) == 0 && bus_dial(url, BUS_REQ, &b) == 0) {
		for (int i = 0; i < 10 && !ok; i++) {
			msg_init(&req, MSG_STATUS_REQ);
			ok = bus_call(b, &req, 500, &rep) == 0 && rep.type == MSG_STATUS;
		}
		bus_close(b);
	}
	if (!ok) {
		fprintf(stderr, "unicorn status: the supervisor (pid %d) does not answer on %s\n", (int)pid, url);
		return 1;
	}
	json_error_t je;
	json_t *root = json_load_file(path, 0, &je);
	if (!json_is_object(root)) {
		fprintf(stderr, "unicorn status: %s: %s\n", path, root ? "not an object" : je.text);
		json_decref(root);
		return 1;
	}
	json_object_set_new(root, "restarts", json_integer(rep.u.status.restarts));
	/* the OpenAI base URL as clients want it (url is the server's root) */
	if (json_is_string(json_object_get(root, "url"))) {
		char base[512];
		snprintf(base, sizeof base, "%s/v1", str(root, "url"));
		json_object_set_new(root, "api_base", json_string(base));
	}
	char lp[RUNDIR_PATH_MAX];
	if (rundir_path(dir, RUNDIR_LOG, lp, sizeof lp) == 0 && access(lp, R_OK) == 0)
		json_object_set_new(root, "log", json_string(lp));
	/* the KV cache's shape, as the coordinator planned it (its use: /metrics) */
	json_t *kv = rundir_path(dir, "kv.json", lp, sizeof lp) == 0 ? json_load_file(lp, 0, NULL) : NULL;
	if (json_is_object(kv))
		json_object_set_new(root, "kv", kv);
	else
		json_decref(kv);
	if (as_json) {
		json_dumpf(root, stdout, JSON_INDENT(2));
		printf("\n");
		json_decref(root);
		return 0;
	}
	char up[32];
	progress_fmt_time(up, sizeof up, rep.u.status.uptime_ns / 1e9);
	printf("cluster %s: supervisor pid %d, up %s, %s, %u restart%s\n", name, (int)pid, up,
	       json_is_true(json_object_get(root, "draining")) ? "draining (new requests get 503; unicorn down stops it now)"
	       : rep.u.status.steps ? "ready" : "starting",
	       rep.u.status.restarts,
	       rep.u.status.restarts == 1 ? "" : "s");
	printf("model %s, placement %s\n", str(root, "model"), str(root, "placement"));
	printf("endpoint %s\n", str(root, "endpoint"));
	if (json_is_string(json_object_get(root, "log")))
		printf("log %s\n", str(root, "log"));
	if (json_is_string(json_object_get(root, "url")))
		printf("url %s/v1 (OpenAI-compatible%s)\n\n", str(root, "url"),
		       json_is_true(json_object_get(root, "api_key_required")) ? ", API key required" : "");
	else
		printf("url - (no HTTP server: use `unicorn run --name %s`)\n\n", name);
	if (kv)
		printf("kv cache %s, %lld positions per sequence, %.1f MiB: %lld global + %lld local blocks of %lld "
		       "positions (use: unicorn_kv_used_tokens in /metrics)\n", str(kv, "type"),
		       (long long)json_integer_value(json_object_get(kv, "context")),
		       json_integer_value(json_object_get(kv, "bytes")) / 1048576.0,
		       (long long)json_integer_value(json_object_get(kv, "global_blocks")),
		       (long long)json_integer_value(json_object_get(kv, "local_blocks")),
		       (long long)json_integer_value(json_object_get(kv, "block")));
	json_t *procs = json_object_get(root, "processes");
	size_t i;
	json_t *p;
	/* the DEVICE column as wide as the longest name (never cut) */
	int dw = 6;
	json_array_foreach(procs, i, p) {
		size_t l = strlen(str(p, "device"));
		if ((int)l > dw)
			dw = l > 200 ? 200 : (int)l;
	}
	printf("%-12s %8s %8s %4s %5s  %-8s %-*s %10s %10s %10s  %-7s %-9s\n", "ROLE", "PID", "UPTIME",
	       "RST", "BUSY", "BACKEND", dw, "DEVICE", "WEIGHTS", "KV", "SCRATCH", "SHARING", "IMPORT");
	json_array_foreach(procs, i, p) {
		char w[32], kv[32], sc[32], t[32];
		bytes(p, "weights_bytes", w, sizeof w);
		bytes(p, "kv_bytes", kv, sizeof kv);
		bytes(p, "scratch_bytes", sc, sizeof sc);
		json_int_t ppid = json_integer_value(json_object_get(p, "pid"));
		progress_fmt_time(t, sizeof t, json_number_value(json_object_get(p, "uptime_s")));
		char pidbuf[16];
		snprintf(pidbuf, sizeof pidbuf, ppid ? "%lld" : "down", (long long)ppid);
		/* BUSY: the share of its uptime a process spent on steps (workers:
		 * their device's time; a pipeline's stages side by side) */
		char busy[16] = "-";
		double up_s = json_number_value(json_object_get(p, "uptime_s"));
		json_t *bj = json_object_get(p, "busy_s");
		if (ppid && json_is_number(bj) && up_s > 0 && json_number_value(bj) > 0)
			snprintf(busy, sizeof busy, "%.0f%%", 100.0 * json_number_value(bj) / up_s);
		printf("%-12s %8s %8s %4lld %5s  %-8.8s %-*.*s %10s %10s %10s  %-7s %-9s\n", str(p, "name"),
		       pidbuf, ppid ? t : "-", (long long)json_integer_value(json_object_get(p, "restarts")), busy,
		       str(p, "backend"), dw, dw, str(p, "device"), w, kv, sc, str(p, "share_path"),
		       str(p, "import"));
	}
	json_decref(root);
	return 0;
}
