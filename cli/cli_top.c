/* unicorn top: live terminal dashboard of a running cluster
 * (docs/observability.md).
 *
 * Every second it reads the coordinator's metrics (GET /metrics.json on the
 * URL in RUNDIR/http) and the supervisor's status.json (restarts, memory),
 * and draws per-worker utilisation bars with a short history, tokens/s,
 * latency percentiles, KV usage, active and queued requests and restarts.
 * The frame is built as plain lines: ncurses draws them, --once prints one
 * frame (for scripts) and exits. */
#include "cli/cli.h"

#include <curses.h>
#include <getopt.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "api/dashboard.h"
#include "common/err.h"
#include "common/progress.h"
#include "ipc/rundir.h"

#define TOP_LINES 40
#define TOP_COLS 160
#define HIST 40                 /* utilisation samples kept per worker (seconds) */
#define MAX_W 4

struct frame {
	char line[TOP_LINES][TOP_COLS];
	int n;
};

struct hist {
	char name[16];
	double v[HIST];
	int n;
};

struct top {
	const char *name;
	struct hist w[MAX_W];
	int n_w;
};

static volatile sig_atomic_t g_quit;
static void on_sig(int s)
{
	(void)s;
	g_quit = 1;
}

static void add(struct frame *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct frame *f, const char *fmt, ...)
{
	if (f->n >= TOP_LINES)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->line[f->n++], TOP_COLS, fmt, ap);
	va_end(ap);
}

static json_t *series(json_t *snap, const char *metric)
{
	return json_object_get(json_object_get(json_object_get(snap, "metrics"), metric), "series");
}

static double num(json_t *snap, const char *metric, const char *label, const char *field)
{
	json_t *v = json_object_get(json_object_get(series(snap, metric), label ? label : ""), field);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

static void bar(char *out, size_t width, double ratio)
{
	if (!(ratio >= 0))
		ratio = 0;
	if (ratio > 1)
		ratio = 1;
	size_t k = (size_t)(ratio * (double)width + 0.5);
	out[0] = '[';
	for (size_t i = 0; i < width; i++)
		out[1 + i] = i < k ? '#' : '.';
	out[width + 1] = ']';
	out[width + 2] = 0;
}

/* ASCII sparkline of a history (oldest first), 10 levels. */
static void spark(char *out, const struct hist *h)
{
	static const char lv[] = " .:-=+*#%@";
	int i = 0;
	for (; i < HIST - h->n; i++)
		out[i] = ' ';
	for (int k = 0; k < h->n; k++) {
		double v = h->v[k];
		int l = !(v > 0) ? 0 : v >= 1 ? 9 : 1 + (int)(v * 8.999);
		out[i++] = lv[l];
	}
	out[i] = 0;
}

static struct hist *hist_of(struct top *t, const char *name)
{
	for (int i = 0; i < t->n_w; i++)
		if (!strcmp(t->w[i].name, name))
			return &t->w[i];
	if (t->n_w >= MAX_W)
		return NULL;
	struct hist *h = &t->w[t->n_w++];
	memset(h, 0, sizeof *h);
	snprintf(h->name, sizeof h->name, "%s", name);
	return h;
}

static void push(struct hist *h, double v)
{
	if (h->n == HIST) {
		memmove(h->v, h->v + 1, (HIST - 1) * sizeof h->v[0]);
		h->n--;
	}
	h->v[h->n++] = v;
}

static void ms_str(char *out, size_t n, double s)
{
	if (!isfinite(s))
		snprintf(out, n, "-");
	else if (s < 0.01)
		snprintf(out, n, "%.2f ms", s * 1e3);
	else
		snprintf(out, n, "%.0f ms", s * 1e3);
}

static void build(struct top *t, json_t *snap, json_t *status, const char *err, struct frame *f)
{
	f->n = 0;
	char up[32] = "-";
	double ut = status ? json_number_value(json_object_get(status, "uptime_s")) : 0;
	if (ut > 0)
		progress_fmt_time(up, sizeof up, ut);
	const char *url = status ? json_string_value(json_object_get(status, "url")) : NULL;
	const char *model = status ? json_string_value(json_object_get(status, "model")) : NULL;
	const char *base = model ? strrchr(model, '/') : NULL;
	add(f, "unicorn top - cluster %s  %s  up %s  placement %s  model %s", t->name,
	    url ? url : "(no HTTP)", up,
	    status && json_string_value(json_object_get(status, "placement")) ?
		    json_string_value(json_object_get(status, "placement")) : "-",
	    base ? base + 1 : model ? model : "-");
	if (!snap) {
		add(f, "%s", "");
		add(f, "no metrics: %s", err ? err : "the coordinator does not answer");
	} else {
		double tok = num(snap, "unicorn_generated_tokens_total", NULL, "value");
		double tps = num(snap, "unicorn_generated_tokens_total", NULL, "rate");
		double act = num(snap, "unicorn_active_requests", NULL, "value");
		double q = num(snap, "unicorn_queue_depth", NULL, "value");
		double steps = num(snap, "unicorn_steps_total", NULL, "value");
		double done = 0;
		json_t *rq = series(snap, "unicorn_requests_total"), *v;
		const char *k;
		json_object_foreach(rq, k, v)
			done += json_number_value(json_object_get(v, "value"));
		add(f, "%s", "");
		add(f, "tokens %-10.0f %8.1f tok/s   steps %-10.0f requests: active %.0f  queued %.0f  "
		    "done %.0f", isfinite(tok) ? tok : 0, isfinite(tps) ? tps : 0,
		    isfinite(steps) ? steps : 0, isfinite(act) ? act : 0, isfinite(q) ? q : 0, done);
		char a[24], b[24], c[24], d[24], e[24], g[24];
		ms_str(a, sizeof a, num(snap, "unicorn_time_to_first_token_seconds", NULL, "p50"));
		ms_str(b, sizeof b, num(snap, "unicorn_time_to_first_token_seconds", NULL, "p90"));
		ms_str(c, sizeof c, num(snap, "unicorn_time_to_first_token_seconds", NULL, "p99"));
		ms_str(d, sizeof d, num(snap, "unicorn_inter_token_latency_seconds", NULL, "p50"));
		ms_str(e, sizeof e, num(snap, "unicorn_inter_token_latency_seconds", NULL, "p90"));
		ms_str(g, sizeof g, num(snap, "unicorn_inter_token_latency_seconds", NULL, "p99"));
		add(f, "TTFT p50 %s  p90 %s  p99 %s     ITL p50 %s  p90 %s  p99 %s", a, b, c, d, e, g);
		double kr = num(snap, "unicorn_kv_usage_ratio", NULL, "value");
		char kb[40];
		bar(kb, 30, kr);
		add(f, "KV   %s %5.1f%%  (%.0f of %.0f tokens)", kb, isfinite(kr) ? 100 * kr : 0,
		    num(snap, "unicorn_kv_used_tokens", NULL, "value"),
		    num(snap, "unicorn_kv_capacity_tokens", NULL, "value"));
		add(f, "%s", "");
		add(f, "%-6s %-32s %6s  %-*s %9s %12s %10s", "WORKER", "UTILIZATION", "", HIST,
		    "HISTORY (1 char = 1 s)", "STEPS", "HANDOFF p50", "KV");
		json_t *util = series(snap, "unicorn_worker_utilization_ratio");
		json_object_foreach(util, k, v) {
			double u = json_number_value(json_object_get(v, "value"));
			struct hist *h = hist_of(t, k);
			if (!h)
				continue;
			char ub[40], sp[HIST + 1], hs[24], kvb[24];
			bar(ub, 30, u);
			spark(sp, h);
			ms_str(hs, sizeof hs, num(snap, "unicorn_handoff_latency_seconds", k, "p50"));
			double kvv = num(snap, "unicorn_worker_kv_bytes", k, "value");
			if (isfinite(kvv))
				progress_fmt_bytes(kvb, sizeof kvb, kvv);
			else
				snprintf(kvb, sizeof kvb, "-");
			add(f, "%-6s %-32s %5.1f%%  %-*s %9.0f %12s %10s", k, ub, 100 * u, HIST, sp,
			    num(snap, "unicorn_worker_steps_total", k, "value"), hs, kvb);
		}
	}
	add(f, "%s", "");
	add(f, "%-12s %8s %8s %9s", "PROCESS", "PID", "RESTARTS", "BUSY");
	json_t *procs = status ? json_object_get(status, "processes") : NULL;
	size_t i;
	json_t *p;
	json_array_foreach(procs, i, p) {
		json_t *bs = json_object_get(p, "busy_s");
		char busy[24] = "-";
		if (json_is_number(bs))
			snprintf(busy, sizeof busy, "%.2f s", json_number_value(bs));
		json_int_t pid = json_integer_value(json_object_get(p, "pid"));
		char pb[16];
		snprintf(pb, sizeof pb, pid ? "%lld" : "down", (long long)pid);
		add(f, "%-12s %8s %8lld %9s", json_string_value(json_object_get(p, "name")) ?
		    json_string_value(json_object_get(p, "name")) : "?", pb,
		    (long long)json_integer_value(json_object_get(p, "restarts")), busy);
	}
}

/* One sample: the snapshot (NULL + *err on failure) and status.json. */
static void sample(struct top *t, json_t **snap, json_t **status, char *err, size_t n_err)
{
	*snap = *status = NULL;
	err[0] = 0;
	char dir[RUNDIR_PATH_MAX], path[RUNDIR_PATH_MAX];
	if (!rundir_resolve(t->name, dir, sizeof dir) &&
	    !rundir_path(dir, RUNDIR_STATUS, path, sizeof path))
		*status = json_load_file(path, 0, NULL);
	char *body = NULL;
	size_t len = 0;
	int st = 0;
	if (dashboard_fetch(t->name, "/metrics.json", 5, &body, &len, &st)) {
		snprintf(err, n_err, "%s", err_msg());
	} else if (st != 200) {
		snprintf(err, n_err, "HTTP %d from the coordinator%s", st,
			 st == 401 ? " (it needs an API key: set UNICORN_API_KEY)" : "");
	} else {
		*snap = json_loadb(body, len, 0, NULL);
		if (!*snap)
			snprintf(err, n_err, "bad JSON from /metrics.json");
	}
	free(body);
	/* the utilisation history advances once per sample */
	json_t *util = *snap ? series(*snap, "unicorn_worker_utilization_ratio") : NULL;
	const char *k;
	json_t *v;
	json_object_foreach(util, k, v) {
		struct hist *h = hist_of(t, k);
		if (h)
			push(h, json_number_value(json_object_get(v, "value")));
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: unicorn top [--name N] [--once]\n"
		   "Live view of cluster N (default \"default\"): per-worker utilization with a\n"
		   "short history, tokens/s, TTFT/ITL percentiles, KV usage, active and queued\n"
		   "requests, restarts. q quits. --once prints one plain-text frame and exits.\n"
		   "With an API key, set UNICORN_API_KEY.\n");
}

int cli_top(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "name", required_argument, 0, 'n' }, { "once", no_argument, 0, '1' },
		{ "help", no_argument, 0, 'h' },       { 0, 0, 0, 0 },
	};
	static struct top t;
	memset(&t, 0, sizeof t);
	t.name = RUNDIR_DEFAULT_NAME;
	int once = 0, c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'n': t.name = optarg; break;
		case '1': once = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "unicorn top: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!rundir_name_valid(t.name)) {
		fprintf(stderr, "unicorn top: --name '%s': must be 1-32 characters of A-Z a-z 0-9 _ -\n",
			t.name);
		return 2;
	}
	static struct frame f;
	char err[300];
	json_t *snap, *status;
	if (once) {
		sample(&t, &snap, &status, err, sizeof err);
		if (!snap && !status) {
			fprintf(stderr, "unicorn top: no cluster named '%s' is running (%s)\n", t.name,
				err);
			return 1;
		}
		build(&t, snap, status, err, &f);
		for (int i = 0; i < f.n; i++)
			printf("%s\n", f.line[i]);
		json_decref(snap);
		json_decref(status);
		return snap ? 0 : 1;
	}
	setlocale(LC_ALL, "");
	struct sigaction sa = { .sa_handler = on_sig };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (!initscr()) {
		fprintf(stderr, "unicorn top: cannot start the terminal UI (try --once)\n");
		return 1;
	}
	cbreak();
	noecho();
	curs_set(0);
	timeout(200);
	struct timespec ts;
	double next = 0;
	while (!g_quit) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		double now = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
		if (now >= next) {
			next = now + 1.0;
			sample(&t, &snap, &status, err, sizeof err);
			build(&t, snap, status, err, &f);
			json_decref(snap);
			json_decref(status);
			erase();
			for (int i = 0; i < f.n && i < LINES; i++)
				mvaddnstr(i, 0, f.line[i], COLS);
			if (f.n + 1 < LINES)
				mvaddstr(LINES - 1, 0, "q quits");
			refresh();
		}
		int ch = getch();
		if (ch == 'q' || ch == 'Q')
			break;
	}
	endwin();
	return 0;
}
