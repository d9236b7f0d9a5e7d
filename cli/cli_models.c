/* unicorn pull / list / rm: the local model store (hub/, docs/models.md). */
#include "cli/cli.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "common/err.h"
#include "common/progress.h"
#include "hub/hub.h"
#include "hub/store.h"

static void pull_usage(FILE *f)
{
	fprintf(f,
		"usage: unicorn pull [--quiet] [--retries N] REPO[:QUANT]\n"
		"Download a model from Hugging Face into the model store.\n"
		"\n"
		"  REPO      a Hugging Face repo, ORG/NAME (hf.co/ORG/NAME works too)\n"
		"  QUANT     GGUF repos: the file whose name contains QUANT (case-insensitive);\n"
		"            without it Q4_K_M, then Q4_0, then the repo's only GGUF. A repo\n"
		"            without GGUF (config.json + safetensors + tokenizer) is pulled whole.\n"
		"  --retries N   retry a broken transfer N times, resuming it (default 5)\n"
		"  -q, --quiet   no progress bar\n"
		"\n"
		"An interrupted download is kept as FILE.part and resumed by the next pull;\n"
		"the file's sha256 (stated by the Hub) is checked before it enters the store.\n"
		"Environment: HF_TOKEN (sent as a Bearer token: gated and private repos),\n"
		"HF_ENDPOINT (default %s), UNICORN_MODELS (the store;\n"
		"default ~/.cache/unicorn/models).\n"
		"Then: unicorn-up --model REPO[:QUANT] (or with no --model: the latest pull).\n",
		HUB_DEFAULT_ENDPOINT);
}

int cli_pull(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "quiet", no_argument, 0, 'q' }, { "retries", required_argument, 0, 'r' },
		{ "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	struct hub_opts o;
	hub_opts_default(&o);
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "qh", lo, NULL)) != -1) {
		switch (c) {
		case 'q': o.quiet = true; break;
		case 'r': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v < 0 || v > 100) {
				fprintf(stderr, "unicorn pull: --retries '%s': expected 0..100\n", optarg);
				return 2;
			}
			o.retries = (int)v;
			break;
		}
		case 'h': pull_usage(stdout); return 0;
		default: pull_usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "unicorn pull: expected one REPO[:QUANT] (try --help)\n");
		return 2;
	}
	struct hub_ref r;
	if (hub_ref_parse(argv[optind], &r)) {
		fprintf(stderr, "unicorn pull: %s\n", err_msg());
		return 2;
	}
	char path[PATH_MAX];
	if (hub_pull(&o, &r, path, sizeof path)) {
		fprintf(stderr, "unicorn pull: %s\n", err_msg());
		return 1;
	}
	char ref[HUB_REPO_MAX + HUB_QUANT_MAX + 2];
	hub_ref_format(&r, ref, sizeof ref);
	printf("unicorn: %s is in %s\n  start it: unicorn-up --model %s\n", ref, path, ref);
	return 0;
}

static void list_usage(FILE *f)
{
	fprintf(f, "usage: unicorn list [--json]\n"
		   "List the models in the store ($UNICORN_MODELS, default ~/.cache/unicorn/models):\n"
		   "name, quant, size, path. The most recent pull is marked with '*' (unicorn-up\n"
		   "serves it when no --model is given).\n");
}

int cli_list(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, 0, 'j' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	bool json = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'h': list_usage(stdout); return 0;
		default: list_usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "unicorn list: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	char store[PATH_MAX];
	struct store_entry *v;
	size_t n;
	if (store_dir(store, sizeof store) || store_list(store, &v, &n)) {
		fprintf(stderr, "unicorn list: %s\n", err_msg());
		return 1;
	}
	size_t latest = 0;
	for (size_t i = 1; i < n; i++)
		if (v[i].mtime > v[latest].mtime)
			latest = i;
	if (json) {
		json_t *a = json_array();
		for (size_t i = 0; a && i < n; i++)
			json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:I, s:s, s:b, s:b}", "name", v[i].name,
							   "repo", v[i].repo, "quant", v[i].quant, "size",
							   (json_int_t)v[i].size, "path", v[i].path,
							   "checkpoint", v[i].is_dir, "latest", i == latest));
		json_t *root = json_pack("{s:s, s:o}", "store", store, "models", a ? a : json_array());
		char *s = root ? json_dumps(root, JSON_INDENT(1)) : NULL;
		if (s)
			printf("%s\n", s);
		free(s);
		json_decref(root);
		free(v);
		return s ? 0 : 1;
	}
	if (n == 0) {
		printf("no models in %s; pull one: unicorn pull ORG/NAME[:QUANT]\n", store);
		free(v);
		return 0;
	}
	int w = 4;
	for (size_t i = 0; i < n; i++)
		if ((int)strlen(v[i].name) > w)
			w = (int)strlen(v[i].name);
	printf("  %-*s  %-8s %10s  %s\n", w, "NAME", "QUANT", "SIZE", "PATH");
	for (size_t i = 0; i < n; i++) {
		char sz[32];
		progress_fmt_bytes(sz, sizeof sz, (double)v[i].size);
		printf("%c %-*s  %-8s %10s  %s\n", i == latest ? '*' : ' ', w, v[i].name, v[i].quant, sz,
		       v[i].path);
	}
	free(v);
	return 0;
}

static void rm_usage(FILE *f)
{
	fprintf(f, "usage: unicorn rm NAME...\n"
		   "Remove models from the store. NAME as `unicorn list` shows it (ORG/NAME:QUANT,\n"
		   "or ORG/NAME when the repo has one model in the store).\n");
}

int cli_rm(int argc, char **argv)
{
	static const struct option lo[] = { { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'h': rm_usage(stdout); return 0;
		default: rm_usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "unicorn rm: which model? (see unicorn list)\n");
		return 2;
	}
	char store[PATH_MAX];
	if (store_dir(store, sizeof store)) {
		fprintf(stderr, "unicorn rm: %s\n", err_msg());
		return 1;
	}
	int status = 0;
	for (int i = optind; i < argc; i++) {
		char removed[PATH_MAX];
		if (store_remove(store, argv[i], removed, sizeof removed)) {
			fprintf(stderr, "unicorn rm: %s\n", err_msg());
			status = 1;
		} else {
			printf("unicorn: removed %s (%s)\n", argv[i], removed);
		}
	}
	return status;
}
