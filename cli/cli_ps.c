/* unicorn ps: the clusters running for this user (cli/clusters.h): name,
 * model, URL, uptime and memory from each RUNDIR/status.json. */
#include "cli/cli.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/clusters.h"
#include "common/err.h"
#include "common/progress.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: unicorn ps\n\n"
		"List the running clusters (started by unicorn-up or unicorn run MODEL): name,\n"
		"model, OpenAI-compatible URL (- without HTTP), uptime, and memory (weights\n"
		"plus KV cache and scratch of every process). `unicorn status --name N`\n"
		"shows one in detail.\n");
}

int cli_ps(int argc, char **argv)
{
	static const struct option lo[] = { { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "unicorn ps: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	struct cluster_info *cl;
	size_t n;
	if (clusters_list(&cl, &n)) {
		fprintf(stderr, "unicorn ps: %s\n", err_msg());
		return 1;
	}
	if (!n) {
		char base[RUNDIR_PATH_MAX] = "?";
		clusters_base(base, sizeof base);
		printf("no cluster is running (none in %s); start one: unicorn-up -d, or unicorn run MODEL\n",
		       base);
		free(cl);
		return 0;
	}
	printf("%-20s %-36s %-28s %8s %10s\n", "NAME", "MODEL", "URL", "UPTIME", "MEMORY");
	for (size_t i = 0; i < n; i++) {
		char path[RUNDIR_PATH_MAX], url[512] = "-", up[32] = "-", mem[32] = "-";
		const char *model = *cl[i].model ? cl[i].model : "(starting)";
		const char *slash = strrchr(model, '/');
		if (slash && slash[1])
			model = slash + 1;
		struct stat sb;
		if (rundir_path(cl[i].dir, RUNDIR_PIDFILE, path, sizeof path) == 0 && stat(path, &sb) == 0)
			progress_fmt_time(up, sizeof up, difftime(time(NULL), sb.st_mtime));
		json_t *root = rundir_path(cl[i].dir, RUNDIR_STATUS, path, sizeof path) == 0
				       ? json_load_file(path, 0, NULL) : NULL;
		if (json_is_object(root)) {
			const char *u = json_string_value(json_object_get(root, "url"));
			if (u)
				snprintf(url, sizeof url, "%s/v1", u);
			double w = 0, rest = 0;
			size_t k;
			json_t *p;
			json_array_foreach(json_object_get(root, "processes"), k, p) {
				double pw = (double)json_integer_value(json_object_get(p, "weights_bytes"));
				if (pw > w)
					w = pw; /* the shared regions, counted once */
				rest += (double)json_integer_value(json_object_get(p, "kv_bytes")) +
					(double)json_integer_value(json_object_get(p, "scratch_bytes"));
			}
			if (w + rest > 0)
				progress_fmt_bytes(mem, sizeof mem, w + rest);
		}
		json_decref(root);
		printf("%-20s %-36s %-28s %8s %10s\n", cl[i].name, model, url, up, mem);
	}
	free(cl);
	return 0;
}
