/* unicorn trace: record a Chrome/Perfetto trace of a running cluster's
 * per-layer step spans (docs/observability.md).
 *
 * Asks the coordinator over HTTP (GET /trace?seconds=N: it waits N seconds,
 * then answers the spans recorded meanwhile) and writes the JSON to a file
 * that chrome://tracing or ui.perfetto.dev opens. */
#include "cli/cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/dashboard.h"
#include "common/err.h"
#include "ipc/rundir.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: unicorn trace [--name N] [--seconds S] -o FILE\n"
		   "Record S seconds (default 2, at most %d) of cluster N's step spans (one per\n"
		   "EMBED/STAGE/HEAD/RUN message: worker, layer, stage, slot) and write them as a\n"
		   "Chrome/Perfetto trace (open FILE in ui.perfetto.dev or chrome://tracing).\n"
		   "With an API key, set UNICORN_API_KEY.\n", DASHBOARD_TRACE_MAX_S);
}

int cli_trace(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "name", required_argument, 0, 'n' },   { "seconds", required_argument, 0, 's' },
		{ "output", required_argument, 0, 'o' }, { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *name = RUNDIR_DEFAULT_NAME, *out = NULL;
	double secs = 2;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n': name = optarg; break;
		case 'o': out = optarg; break;
		case 's': {
			char *end;
			secs = strtod(optarg, &end);
			if (end == optarg || *end || !(secs > 0 && secs <= DASHBOARD_TRACE_MAX_S)) {
				fprintf(stderr, "unicorn trace: --seconds '%s': must be a number in "
					"(0, %d]\n", optarg, DASHBOARD_TRACE_MAX_S);
				return 2;
			}
			break;
		}
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || !out) {
		if (optind < argc)
			fprintf(stderr, "unicorn trace: unexpected argument '%s'\n", argv[optind]);
		else
			fprintf(stderr, "unicorn trace: -o FILE is required\n");
		usage(stderr);
		return 2;
	}
	char path[64];
	snprintf(path, sizeof path, "/trace?seconds=%g", secs);
	char *body = NULL;
	size_t len = 0;
	int st = 0;
	fprintf(stderr, "unicorn trace: recording %g s of cluster '%s'...\n", secs, name);
	if (dashboard_fetch(name, path, (int)secs + 30, &body, &len, &st)) {
		fprintf(stderr, "unicorn trace: %s\n", err_msg());
		return 1;
	}
	if (st != 200) {
		fprintf(stderr, "unicorn trace: the coordinator answered HTTP %d%s: %.300s\n", st,
			st == 401 ? " (it needs an API key: set UNICORN_API_KEY)" : "", body);
		free(body);
		return 1;
	}
	json_error_t e;
	json_t *j = json_loadb(body, len, 0, &e);
	json_t *ev = json_object_get(j, "traceEvents");
	if (!json_is_array(ev)) {
		fprintf(stderr, "unicorn trace: the answer is not a trace (%s)\n",
			j ? "no traceEvents" : e.text);
		json_decref(j);
		free(body);
		return 1;
	}
	size_t n_x = 0, i;
	json_t *x;
	json_array_foreach(ev, i, x) {
		const char *ph = json_string_value(json_object_get(x, "ph"));
		n_x += ph && !strcmp(ph, "X");
	}
	json_decref(j);
	FILE *f = !strcmp(out, "-") ? stdout : fopen(out, "w");
	if (!f) {
		fprintf(stderr, "unicorn trace: %s: cannot write\n", out);
		free(body);
		return 1;
	}
	int bad = fwrite(body, 1, len, f) != len;
	bad |= f == stdout ? fflush(f) != 0 : fclose(f) != 0;
	free(body);
	if (bad) {
		fprintf(stderr, "unicorn trace: %s: write failed\n", out);
		return 1;
	}
	fprintf(stderr, "unicorn trace: %zu spans written to %s%s\n", n_x, out,
		n_x ? "" : " (the cluster was idle: run a generation while tracing)");
	return 0;
}
