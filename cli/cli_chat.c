/* unicorn chat: interactive chat; the whole conversation is rendered with the
 * Gemma 3 chat template and resubmitted each turn. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/chat.h"
#include "cli/cli.h"
#include "coordinator/intake.h"
#include "common/err.h"
#include "ipc/rundir.h"

#define CHAT_MAX_TURNS 512

static void usage(FILE *f)
{
	fprintf(f, "usage: unicorn chat [--name N] [--system TEXT] [--max-tokens N] [--temp T]\n"
		"                    [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]\n"
		"                    [--presence-penalty X] [--frequency-penalty X] [--seed S]\n\n"
		"Read one message per line from standard input, print the model's reply.\n"
		"/exit (or end of input) quits. Sampling options as in `unicorn run --help`.\n");
}

static void print_piece(void *arg, const char *piece, size_t len)
{
	(void)arg;
	fwrite(piece, 1, len, stdout);
	fflush(stdout);
}

int cli_chat(int argc, char **argv)
{
	const char *name = NULL, *system = NULL;
	struct intake_gen_opts o = { .max_tokens = 512,
				     .sp = { .top_p = 1.0f, .repetition_penalty = 1.0f },
				     .deadline_ms = 60000 };
	static const struct option opts[] = {
		{ "name", required_argument, 0, 'n' },
		{ "system", required_argument, 0, 'y' },
		{ "max-tokens", required_argument, 0, 'm' },
		INTAKE_SAMPLER_OPTIONS,
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	optind = 1;
	int ch, li = -1;
	while ((li = -1, ch = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		int sv = intake_gen_opt(ch, optarg, &o);
		if (sv < 0)
			goto bad;
		if (sv)
			continue;
		switch (ch) {
		case 'n': name = optarg; break;
		case 'y': system = optarg; break;
		case 'm': o.max_tokens = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (intake_gen_opts_check(&o)) {
		fprintf(stderr, "unicorn chat: %s\n", err_msg());
		return 2;
	}
	char rundir[RUNDIR_PATH_MAX];
	if (intake_client_find(name, rundir, sizeof rundir)) {
		fprintf(stderr, "unicorn chat: %s\n", err_msg());
		return 1;
	}
	o.on_piece = print_piece;
	struct chat_msg *conv = calloc(CHAT_MAX_TURNS + 1, sizeof *conv);
	char **owned = calloc(CHAT_MAX_TURNS + 1, sizeof *owned);
	size_t n = 0;
	int rc = 0;
	if (!conv || !owned) {
		fprintf(stderr, "unicorn chat: out of memory\n");
		free(conv);
		free(owned);
		return 1;
	}
	if (system)
		conv[n++] = (struct chat_msg){ "system", system };
	char *line = NULL;
	size_t cap = 0;
	ssize_t got;
	for (;;) {
		got = getline(&line, &cap, stdin);
		if (got < 0)
			break;
		while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
			line[--got] = 0;
		if (!strcmp(line, "/exit") || !strcmp(line, "/quit"))
			break;
		if (got == 0)
			continue;
		if (n + 2 > CHAT_MAX_TURNS) {
			fprintf(stderr, "unicorn chat: conversation too long\n");
			rc = 1;
			break;
		}
		owned[n] = strdup(line);
		conv[n] = (struct chat_msg){ "user", owned[n] };
		n++;
		char *text;
		size_t len;
		if (chat_render(conv, n, true, &text, &len)) {
			fprintf(stderr, "unicorn chat: %s\n", err_msg());
			rc = 1;
			break;
		}
		struct intake_gen_result res;
		int r = intake_client_generate(rundir, text, len, &o, &res);
		free(text);
		printf("\n");
		fflush(stdout);
		if (r) {
			fprintf(stderr, "unicorn chat: %s\n", err_msg());
			intake_gen_result_free(&res);
			rc = 1;
			break;
		}
		if (res.reason == MSG_END_TIMEOUT)
			fprintf(stderr, "unicorn chat: the reply timed out (the cluster's "
				"--request-timeout) after %u tokens\n", res.n_ids);
		owned[n] = res.text; /* keep the reply as the model's turn */
		res.text = NULL;
		conv[n] = (struct chat_msg){ "model", owned[n] };
		n++;
		intake_gen_result_free(&res);
	}
	free(line);
	for (size_t i = 0; i < n; i++)
		free(owned[i]);
	free(owned);
	free(conv);
	return rc;
bad:
	fprintf(stderr, "unicorn chat: --%s: bad number '%s'\n", li >= 0 ? opts[li].name : "?", optarg);
	return 2;
}
