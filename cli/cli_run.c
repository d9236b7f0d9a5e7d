/* unicorn run: generate a reply on a running cluster (coordinator.ipc). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/template.h"
#include "cli/cli.h"
#include "cli/cli_image.h"
#include "cli/run_model.h"
#include "coordinator/intake.h"
#include "tokenizer/tokenizer.h"
#include "common/err.h"
#include "common/utf8.h"
#include "common/readfile.h"
#include "constrain/constrain.h"
#include "ipc/rundir.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: unicorn run [--name N] [--max-tokens N] [--temp T] [--top-k K] [--top-p P]\n"
		"                   [--min-p P] [--repeat-penalty R] [--presence-penalty X]\n"
		"                   [--frequency-penalty X] [--seed S] [--timeout S] [--chat|--raw]\n"
		"                   [--json-schema FILE] [--json] [--verbose] [--image FILE]...\n"
		"                   [MODEL] PROMPT...|-\n"
		"       unicorn run [options] MODEL     (no prompt: an interactive chat)\n\n"
		"Stream a continuation of PROMPT (its words joined by spaces; standard input\n"
		"with '-') from the cluster N (default 'default', started by unicorn-up).\n"
		"MODEL (a .gguf file, a Hugging Face checkpoint directory, or ORG/NAME[:QUANT]\n"
		"from the model store, pulled when missing) runs it as `ollama run` does: a\n"
		"running cluster that serves it is used, else one is started in the background\n"
		"(unicorn-up --model MODEL -d, named after the model or --name; stop it with\n"
		"unicorn down --name NAME; unicorn ps lists them). With MODEL the prompt is\n"
		"wrapped in the chat template unless --raw; without MODEL it is a plain\n"
		"completion unless --chat (scripts rely on that), and --raw is the default.\n"
		"A prompt that looks like ORG/NAME is a model: give such a prompt on stdin ('-').\n"
		"--temp [0, 2] (as the HTTP API; 0, the default, is greedy).\n"
		"--min-p [0, 1] (0 = off); --repeat-penalty (0, 100] (1 = off, > 1 discourages\n"
		"tokens already in the prompt or reply); --presence-penalty and\n"
		"--frequency-penalty [-2, 2] (0 = off): as in the HTTP API (docs/http.md).\n"
		"--timeout S stops the generation after S seconds (capped by the cluster's\n"
		"--request-timeout); it then exits 1 after the text so far.\n"
		"--json-schema FILE: the reply is one JSON value valid against the JSON schema\n"
		"in FILE (structured output, as the HTTP API's response_format; docs/http.md).\n"
		"--chat wraps the prompt in the Gemma 3 chat template. --json prints\n"
		"{\"prompt_ids\", \"ids\", \"text\", \"reason\"} at the end instead of streaming.\n"
		"--image FILE (PNG, JPEG or WebP; up to 16) puts the image before the prompt, in\n"
		"the chat template (a model with a vision projector: docs/vision.md).\n"
		"--verbose prints the token counts, the time to first token and the speed\n"
		"to stderr after the reply.\n");
}

static void print_piece(void *arg, const char *piece, size_t len)
{
	(void)arg;
	fwrite(piece, 1, len, stdout);
	fflush(stdout);
}

/* --verbose: when the first token came and how many did */
struct timing {
	int64_t t0, t_first;
	uint32_t n;
};

static void count_token(void *arg, const struct msg_gen_token *t)
{
	(void)t;
	struct timing *tm = arg;
	if (!tm->n++)
		tm->t_first = intake_now_ns();
}

static char *read_stdin(size_t *len)
{
	size_t cap = 4096, n = 0;
	char *p = malloc(cap);
	while (p) {
		size_t got = fread(p + n, 1, cap - n, stdin);
		n += got;
		if (got == 0)
			break;
		if (n == cap) {
			char *q = cap > MSG_MAX_PROMPT_ALL ? NULL : realloc(p, cap * 2);
			if (!q) {
				free(p);
				return NULL;
			}
			p = q;
			cap *= 2;
		}
	}
	*len = n;
	return p;
}

/* The prompt ids as the coordinator computes them (same tokenizer, same
 * template); the model path is in DIR/ready. */
/* --image prompts: the ids sent (image rows are ids >= 2^31) */
static json_t *u32_array(const uint32_t *v, uint32_t n)
{
	json_t *a = json_array();
	for (uint32_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_integer(v[i]));
	return a;
}

static json_t *prompt_ids(const char *rundir, const char *prompt, size_t len, bool chat)
{
	char ready[RUNDIR_PATH_MAX], path[4096];
	if (rundir_path(rundir, "ready", ready, sizeof ready))
		return json_null();
	FILE *f = fopen(ready, "r");
	if (!f)
		return json_null();
	char *ok = fgets(path, sizeof path, f);
	fclose(f);
	if (!ok)
		return json_null();
	path[strcspn(path, "\n")] = 0;
	struct tok *t;
	if (tok_load(path, &t))
		return json_null();
	struct tok_ids ids = { 0 };
	int rc;
	if (chat) {
		char *text = strndup(prompt, len);
		struct chat_msg m = { "user", text };
		rc = text ? chat_encode(t, &m, 1, true, &ids) : ERR_NOMEM;
		free(text);
	} else {
		rc = chat_encode_plain(t, prompt, len, &ids);
	}
	json_t *a = rc ? json_null() : json_array();
	for (size_t i = 0; !rc && i < ids.n; i++)
		json_array_append_new(a, json_integer(ids.ids[i]));
	tok_ids_free(&ids);
	tok_free(t);
	return a;
}

int cli_run(int argc, char **argv)
{
	const char *name = NULL;
	struct intake_gen_opts o = { .max_tokens = 128,
				     .sp = { .top_p = 1.0f, .repetition_penalty = 1.0f },
				     .deadline_ms = 60000 };
	bool json = false, verbose = false;
	int chat = -1; /* --chat 1, --raw 0, default -1 */
	double timeout_s = 0;
	const char *images[MSG_MAX_IMAGES];
	uint32_t n_images = 0;
	static const struct option opts[] = {
		{ "name", required_argument, 0, 'n' },
		{ "max-tokens", required_argument, 0, 'm' },
		INTAKE_SAMPLER_OPTIONS,
		{ "timeout", required_argument, 0, 'T' },
		{ "chat", no_argument, 0, 'c' },
		{ "raw", no_argument, 0, 'r' },
		{ "verbose", no_argument, 0, 'v' },
		{ "json", no_argument, 0, 'j' },
		{ "json-schema", required_argument, 0, 'S' },
		{ "image", required_argument, 0, 'I' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	optind = 1;
	int ch, li = -1;
	char *end;
	while ((li = -1, ch = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		int sv = intake_gen_opt(ch, optarg, &o);
		if (sv < 0)
			goto bad;
		if (sv)
			continue;
		switch (ch) {
		case 'n': name = optarg; break;
		case 'm': {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v < 1 || v > MSG_MAX_GEN) {
				fprintf(stderr, "unicorn run: --max-tokens: 1..%d\n", MSG_MAX_GEN);
				return 2;
			}
			o.max_tokens = (uint32_t)v;
			break;
		}
		case 'T':
			timeout_s = strtod(optarg, &end);
			/* GEN_REQ carries u32 milliseconds */
			if (*end || !(timeout_s > 0 && timeout_s <= UINT32_MAX / 1000.0)) {
				fprintf(stderr, "unicorn run: --timeout '%s': seconds, > 0 and <= %u\n",
					optarg, UINT32_MAX / 1000);
				return 2;
			}
			o.timeout_ms = (uint32_t)(timeout_s * 1000.0);
			if (!o.timeout_ms)
				o.timeout_ms = 1;
			break;
		case 'I':
			if (n_images >= MSG_MAX_IMAGES) {
				fprintf(stderr, "unicorn run: at most %d --image\n", MSG_MAX_IMAGES);
				return 2;
			}
			images[n_images++] = optarg;
			break;
		case 'c': chat = 1; break;
		case 'r': chat = 0; break;
		case 'v': verbose = true; break;
		case 'j': json = true; break;
		case 'S': {
			/* checked here (an unsupported keyword names itself) and sent compact */
			char *txt = NULL;
			size_t tl = 0;
			struct cs_schema *cs = NULL;
			if (readfile(optarg, 1 << 20, &txt, &tl)) {
				fprintf(stderr, "unicorn run: --json-schema: %s\n", err_msg());
				return 2;
			}
			json_t *sj = json_loadb(txt, tl, 0, NULL);
			free(txt);
			char *compact = json_is_object(sj) ? json_dumps(sj, JSON_COMPACT) : NULL;
			json_decref(sj);
			if (!compact) {
				fprintf(stderr, "unicorn run: --json-schema %s: not a JSON object\n", optarg);
				return 2;
			}
			if (cs_schema_compile(compact, strlen(compact), &cs)) {
				fprintf(stderr, "unicorn run: --json-schema %s: %s\n", optarg, err_msg());
				free(compact);
				return 2;
			}
			cs_schema_free(cs);
			free((char *)o.schema);
			o.schema = compact;
			o.n_schema = (uint32_t)strlen(compact);
			o.flags |= MSG_GEN_JSON;
			break;
		}
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "unicorn run: no prompt (give it as arguments, or '-' for standard input)\n");
		usage(stderr);
		return 2;
	}
	if (intake_gen_opts_check(&o)) {
		fprintf(stderr, "unicorn run: %s\n", err_msg());
		return 2;
	}
	/* unicorn run MODEL [PROMPT]: the cluster that serves MODEL */
	char rundir[RUNDIR_PATH_MAX];
	bool have_cluster = false;
	if (run_model_arg(argv[optind])) {
		const char *model = argv[optind++];
		if (run_model_cluster(model, name, rundir, sizeof rundir)) {
			fprintf(stderr, "unicorn run: %s\n", err_msg());
			return 1;
		}
		have_cluster = true;
		if (chat < 0)
			chat = 1;
		if (optind >= argc) {
			if (json) {
				fprintf(stderr, "unicorn run: --json needs a prompt\n");
				return 2;
			}
			return cli_chat_session(rundir, NULL, &o);
		}
	}
	if (n_images && chat == 0) {
		fprintf(stderr, "unicorn run: --image needs the chat template (not --raw)\n");
		return 2;
	}
	if (n_images)
		chat = 1;
	if (chat == 1)
		o.flags |= MSG_GEN_CHAT;
	size_t len;
	char *prompt;
	if (optind == argc - 1 && !strcmp(argv[optind], "-")) {
		prompt = read_stdin(&len);
	} else {
		/* unicorn run Hello world: the words joined by spaces */
		size_t n = 0;
		for (int i = optind; i < argc; i++)
			n += strlen(argv[i]) + 1;
		prompt = malloc(n);
		len = 0;
		for (int i = optind; prompt && i < argc; i++) {
			size_t k = strlen(argv[i]);
			if (i > optind)
				prompt[len++] = ' ';
			memcpy(prompt + len, argv[i], k);
			len += k;
		}
		if (prompt)
			prompt[len] = 0;
	}
	if (!prompt || len == 0) {
		fprintf(stderr, "unicorn run: empty prompt\n");
		free(prompt);
		return 2;
	}
	if (!have_cluster && intake_client_find(name, rundir, sizeof rundir)) {
		fprintf(stderr, "unicorn run: %s\n", err_msg());
		free(prompt);
		return 1;
	}
	/* --image: the prompt goes as ids, the images before the text */
	struct cli_images ci = { 0 };
	uint32_t *ids = NULL;
	if (n_images) {
		int irc = cli_images_open(rundir, &ci);
		for (uint32_t i = 0; !irc && i < n_images; i++)
			irc = cli_images_add(&ci, rundir, images[i]);
		char *content = NULL;
		if (!irc) {
			size_t ml = strlen(CHAT_IMAGE_MARK);
			content = malloc(n_images * ml + len + 1);
			if (!content)
				irc = err_set(ERR_NOMEM, "out of memory");
			for (uint32_t i = 0; content && i < n_images; i++)
				memcpy(content + i * ml, CHAT_IMAGE_MARK, ml);
			if (content) {
				memcpy(content + n_images * ml, prompt, len);
				content[n_images * ml + len] = 0;
			}
		}
		struct chat_msg cm = { "user", content };
		if (!irc)
			irc = cli_images_encode(&ci, &cm, 1, &ids, &o.n_prompt_ids);
		free(content);
		if (irc) {
			fprintf(stderr, "unicorn run: --image: %s\n", err_msg());
			cli_images_close(&ci);
			free(prompt);
			return irc == ERR_NOMEM || irc == ERR_IO || irc == ERR_STATE ? 1 : 2;
		}
		o.prompt_ids = ids;
		o.images = (const uint8_t(*)[MSG_DIGEST])ci.digest;
		o.n_images = ci.n;
	}
	if (!json)
		o.on_piece = print_piece;
	struct timing tm = { 0 };
	if (verbose) {
		o.on_token = count_token;
		o.arg = &tm;
	}
	struct intake_gen_result res;
	int64_t t0 = intake_now_ns();
	tm.t0 = t0;
	int rc = intake_client_generate(rundir, prompt, len, &o, &res);
	int64_t t_end = intake_now_ns();
	double took = (double)(t_end - t0) / 1e9;
	if (rc) {
		if (!json && res.n_ids)
			printf("\n");
		fprintf(stderr, "unicorn run: %s\n", err_msg());
		intake_gen_result_free(&res);
		free(prompt);
		free(ids);
		cli_images_close(&ci);
		return 1;
	}
	if (json) {
		json_t *j = json_object();
		json_object_set_new(j, "prompt_ids", ids ? u32_array(ids, o.n_prompt_ids)
							  : prompt_ids(rundir, prompt, len, o.flags & MSG_GEN_CHAT));
		json_t *ids = json_array();
		for (uint32_t i = 0; i < res.n_ids; i++)
			json_array_append_new(ids, json_integer(res.ids[i]));
		json_object_set_new(j, "ids", ids);
		/* the pieces are valid UTF-8; anything else gets U+FFFD, never a
		 * missing "text" */
		char *valid = NULL;
		size_t vlen = 0;
		if (utf8_sanitize(res.text ? res.text : "", res.text ? res.text_len : 0, &valid, &vlen) == 0)
			json_object_set_new(j, "text", json_stringn(valid, vlen));
		free(valid);
		json_object_set_new(j, "reason", json_string(intake_reason_name(res.reason)));
		if (res.resubmits)
			json_object_set_new(j, "resubmits", json_integer(res.resubmits));
		char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
		if (s)
			printf("%s\n", s);
		free(s);
		json_decref(j);
	} else {
		printf("\n");
	}
	if (verbose) {
		json_t *pids = ids ? u32_array(ids, o.n_prompt_ids) : prompt_ids(rundir, prompt, len, o.flags & MSG_GEN_CHAT);
		char pn[32] = "?";
		if (json_is_array(pids))
			snprintf(pn, sizeof pn, "%zu", json_array_size(pids));
		json_decref(pids);
		double ttft = tm.n ? (double)(tm.t_first - t0) / 1e6 : 0;
		double gen_s = tm.n > 1 ? (double)(t_end - tm.t_first) / 1e9 : 0;
		fprintf(stderr, "prompt tokens:   %s\n"
			"reply tokens:    %u (%s)\n"
			"time to first:   %.1f ms\n"
			"generation:      %.2f tok/s (%u tokens after the first in %.3f s)\n"
			"total:           %.3f s\n",
			pn, res.n_ids, intake_reason_name(res.reason), ttft,
			gen_s > 0 ? (tm.n - 1) / gen_s : 0.0, tm.n > 1 ? tm.n - 1 : 0, gen_s, took);
	}
	rc = res.reason == MSG_END_ERROR || res.reason == MSG_END_TIMEOUT || res.reason == MSG_END_IMAGE ? 1 : 0;
	if (res.reason == MSG_END_IMAGE)
		fprintf(stderr, "unicorn run: an image could not be encoded when the request ran (its pixels were "
			"evicted from the cluster's image store by 64 newer images, or could not be read); "
			"run it again\n");
	if (res.reason == MSG_END_ERROR) {
		char hint[RUNDIR_PATH_MAX + 128];
		rundir_log_hint(rundir, hint, sizeof hint);
		fprintf(stderr, "unicorn run: generation ended with an error (see %s)\n", hint);
	}
	if (res.reason == MSG_END_TIMEOUT) {
		char lim[64] = "";
		if (timeout_s > 0)
			snprintf(lim, sizeof lim, "--timeout %g s or ", timeout_s);
		fprintf(stderr, "unicorn run: timed out after %.1f s (limit: %sthe cluster's "
			"--request-timeout); %u tokens generated\n", took, lim, res.n_ids);
	}
	intake_gen_result_free(&res);
	free(prompt);
	free(ids);
	cli_images_close(&ci);
	return rc;
bad:
	fprintf(stderr, "unicorn run: --%s: bad number '%s'\n", li >= 0 ? opts[li].name : "?", optarg);
	return 2;
}
