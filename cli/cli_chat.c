/* unicorn chat: interactive chat; the whole conversation is rendered with the
 * Gemma 3 chat template and resubmitted each turn.
 *
 * Lines that start with '/' are chat commands, handled here and never sent to
 * the model (/help lists them). Ctrl-C during a reply cancels that generation
 * (GEN_CANCEL) and returns to the prompt; Ctrl-C at the prompt or end of
 * input leaves. When the conversation no longer fits the model's context (or
 * a GEN_REQ), the oldest turns are dropped, the system prompt kept. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/template.h"
#include "cli/cli.h"
#include "cli/cli_image.h"
#include "coordinator/intake.h"
#include "common/err.h"
#include "ipc/rundir.h"

#define CHAT_MAX_TURNS 512
#define CHAT_MAX_LINE (MSG_MAX_PROMPT_ALL) /* a longer message cannot be sent anyway */
#define CHAT_PROMPT ">>> "

static void usage(FILE *f)
{
	fprintf(f, "usage: unicorn chat [--name N] [--system TEXT] [--max-tokens N] [--temp T]\n"
		"                    [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]\n"
		"                    [--presence-penalty X] [--frequency-penalty X] [--seed S]\n\n"
		"Read one message per line from standard input, print the model's reply.\n"
		"On a terminal the prompt is '" CHAT_PROMPT "'. Lines starting with '/' are chat\n"
		"commands, never sent to the model: /help lists them, /bye (or /exit) leaves,\n"
		"/clear forgets the conversation, /set temp 0.7 changes a setting. Ctrl-C\n"
		"during a reply stops it; Ctrl-C at the prompt or end of input (Ctrl-D)\n"
		"leaves. When the conversation outgrows the model's context the oldest turns\n"
		"are dropped (the --system prompt stays). Sampling options as in\n"
		"`unicorn run --help`.\n");
}

static void chat_help(void)
{
	printf("Chat commands (never sent to the model):\n"
	       "  /help, /?              this text\n"
	       "  /bye, /exit            leave the chat (also Ctrl-D, or Ctrl-C at the prompt)\n"
	       "  /clear                 forget the conversation (the system prompt stays)\n"
	       "  /set                   show the settings\n"
	       "  /set max-tokens N      reply length limit (1..%d)\n"
	       "  /set temp T            temperature [0, 2] (0 = greedy)\n"
	       "  /set top-k K, top-p P, min-p P, repeat-penalty R, presence-penalty X,\n"
	       "       frequency-penalty X, seed S   as the options of `unicorn run --help`\n"
	       "  /set system TEXT       the system prompt (/set system with no text removes it)\n"
	       "  /image FILE            attach an image (PNG, JPEG, WebP) to your next message\n"
	       "Ctrl-C during a reply stops the reply and returns to the prompt.\n",
	       MSG_MAX_GEN);
	fflush(stdout);
}

static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	g_interrupted = 1;
}

static bool stop_requested(void *arg)
{
	(void)arg;
	return g_interrupted != 0;
}

static void print_piece(void *arg, const char *piece, size_t len)
{
	(void)arg;
	fwrite(piece, 1, len, stdout);
	fflush(stdout);
}

/* Standard input line by line through poll(), so that Ctrl-C is seen whatever
 * thread the signal lands on (nng's threads may take it). */
struct line_reader {
	char *buf;
	size_t n, cap;
	bool eof;
};

/* 1: a line in *line (NUL-terminated, no newline; valid until the next call),
 * 0: end of input, -1: interrupted (Ctrl-C), -2: read error, -3: a line over
 * CHAT_MAX_LINE (skipped). */
static int read_line(struct line_reader *r, char **line)
{
	static char *out;
	static size_t out_cap;
	bool skipping = false;
	*line = NULL;
	for (;;) {
		char *nl = r->n ? memchr(r->buf, '\n', r->n) : NULL;
		if (nl || (r->eof && r->n)) {
			size_t k = nl ? (size_t)(nl - r->buf) : r->n;
			if (k + 1 > out_cap) {
				char *p = realloc(out, k + 1);
				if (!p)
					return -2;
				out = p;
				out_cap = k + 1;
			}
			memcpy(out, r->buf, k);
			out[k] = 0;
			size_t used = nl ? k + 1 : k;
			memmove(r->buf, r->buf + used, r->n - used);
			r->n -= used;
			while (k > 0 && out[k - 1] == '\r')
				out[--k] = 0;
			if (skipping)
				return -3;
			*line = out;
			return 1;
		}
		if (r->eof)
			return 0;
		if (g_interrupted)
			return -1;
		if (r->n == r->cap) {
			if (r->cap >= CHAT_MAX_LINE) {
				/* drop what we have and skip to the end of the line */
				skipping = true;
				r->n = 0;
			} else {
				size_t cap = r->cap ? r->cap * 2 : 4096;
				char *p = realloc(r->buf, cap);
				if (!p)
					return -2;
				r->buf = p;
				r->cap = cap;
			}
		}
		struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
		int pr = poll(&pfd, 1, 200);
		if (pr < 0 && errno != EINTR)
			return -2;
		if (pr <= 0)
			continue;
		ssize_t got = read(STDIN_FILENO, r->buf + r->n, r->cap - r->n);
		if (got < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -2;
		}
		if (got == 0)
			r->eof = true;
		r->n += (size_t)got;
	}
}

struct chat {
	const char *rundir;
	struct intake_gen_opts o;
	char *system;                /* owned; NULL = none */
	char *turns[CHAT_MAX_TURNS]; /* owned: user, model, user, ... */
	size_t n;
	/* /image: the images of the conversation in order (each leaves
	 * CHAT_IMAGE_MARK in its user turn), pending: attached to the next one */
	struct cli_images ci;
	bool ci_on;
	uint32_t pending;
};

/* Images (CHAT_IMAGE_MARK) in a turn. */
static uint32_t marks_in(const char *t)
{
	uint32_t k = 0;
	for (const char *p = t; (p = strstr(p, CHAT_IMAGE_MARK)); p += strlen(CHAT_IMAGE_MARK))
		k++;
	return k;
}

static void drop_oldest(struct chat *c, size_t k)
{
	if (k > c->n)
		k = c->n;
	uint32_t im = 0;
	for (size_t i = 0; i < k; i++) {
		im += marks_in(c->turns[i]);
		free(c->turns[i]);
	}
	memmove(c->turns, c->turns + k, (c->n - k) * sizeof c->turns[0]);
	c->n -= k;
	/* their images go with them */
	if (im > c->ci.n)
		im = c->ci.n;
	memmove(c->ci.digest, c->ci.digest + im, (c->ci.n - im) * sizeof c->ci.digest[0]);
	c->ci.n -= im;
}

/* Forget the last turn (and its images). */
static void drop_last(struct chat *c)
{
	uint32_t im = marks_in(c->turns[--c->n]);
	c->ci.n -= im < c->ci.n ? im : c->ci.n;
	free(c->turns[c->n]);
}

static void clear_turns(struct chat *c)
{
	drop_oldest(c, c->n);
}

static int render(const struct chat *c, char **text, size_t *len)
{
	struct chat_msg msgs[CHAT_MAX_TURNS + 1];
	size_t m = 0;
	if (c->system && *c->system)
		msgs[m++] = (struct chat_msg){ "system", c->system };
	for (size_t i = 0; i < c->n; i++)
		msgs[m++] = (struct chat_msg){ i % 2 ? "model" : "user", c->turns[i] };
	return chat_render(msgs, m, true, text, len);
}

static void show_settings(const struct chat *c)
{
	const struct sampler_params *p = &c->o.sp;
	printf("max-tokens %u, temp %g, top-k %u, top-p %g, min-p %g, repeat-penalty %g,\n"
	       "presence-penalty %g, frequency-penalty %g, seed %llu\n",
	       c->o.max_tokens, (double)p->temperature, p->top_k, (double)p->top_p,
	       (double)p->min_p, (double)p->repetition_penalty, (double)p->presence_penalty,
	       (double)p->frequency_penalty, (unsigned long long)p->seed);
	printf("system prompt: %s\n", c->system && *c->system ? c->system : "(none)");
	printf("conversation: %zu turns\n", c->n);
	fflush(stdout);
}

static const struct {
	const char *name;
	int ch;
} set_keys[] = {
	{ "temp", 't' }, { "top-k", 'k' }, { "top-p", 'p' }, { "seed", 's' },
	{ "min-p", 'M' }, { "repeat-penalty", 'R' }, { "presence-penalty", 'E' },
	{ "frequency-penalty", 'F' }, { "max-tokens", 'm' },
};

/* /set KEY VALUE: validated as the command-line options are. */
static void cmd_set(struct chat *c, char *args)
{
	args += strspn(args, " \t");
	if (!*args) {
		show_settings(c);
		return;
	}
	size_t kl = strcspn(args, " \t");
	char *val = args + kl;
	val += strspn(val, " \t");
	if (kl == 6 && !strncmp(args, "system", 6)) {
		char *s = *val ? strdup(val) : NULL;
		if (*val && !s) {
			fprintf(stderr, "unicorn chat: out of memory\n");
			return;
		}
		free(c->system);
		c->system = s;
		printf(s ? "(system prompt set)\n" : "(system prompt removed)\n");
		fflush(stdout);
		return;
	}
	int ch = 0;
	for (size_t i = 0; i < sizeof set_keys / sizeof set_keys[0]; i++)
		if (strlen(set_keys[i].name) == kl && !strncmp(args, set_keys[i].name, kl))
			ch = set_keys[i].ch;
	if (!ch) {
		fprintf(stderr, "unicorn chat: /set: unknown setting '%.*s' (/help lists them)\n",
			(int)(kl > 64 ? 64 : kl), args);
		return;
	}
	/* one value, nothing after it */
	size_t vl = strcspn(val, " \t");
	if (!vl || val[vl + strspn(val + vl, " \t")]) {
		fprintf(stderr, "unicorn chat: /set %.*s: give one value\n", (int)kl, args);
		return;
	}
	val[vl] = 0;
	struct intake_gen_opts o = c->o;
	if (ch == 'm') {
		char *end;
		errno = 0;
		unsigned long v = strtoul(val, &end, 10);
		if (*end || end == val || errno || val[0] == '-' || v > UINT32_MAX) {
			fprintf(stderr, "unicorn chat: /set max-tokens: bad number '%s'\n", val);
			return;
		}
		o.max_tokens = (uint32_t)v;
	} else if (intake_gen_opt(ch, val, &o) < 0) {
		fprintf(stderr, "unicorn chat: /set %.*s: bad number '%s'\n", (int)kl, args, val);
		return;
	}
	if (intake_gen_opts_check(&o)) {
		const char *m = err_msg();
		fprintf(stderr, "unicorn chat: /set %s\n", strncmp(m, "--", 2) ? m : m + 2);
		return;
	}
	c->o = o;
	printf("(%.*s = %s)\n", (int)kl, args, val);
	fflush(stdout);
}

/* Whether the generation failed because the conversation is too long (the
 * coordinator's "do not fit the context", or a prompt over MSG_MAX_PROMPT_ALL). */
static bool too_long(void)
{
	const char *m = err_msg();
	return strstr(m, "do not fit the context") != NULL || !strncmp(m, "prompt: ", 8);
}

/* Send the conversation (ending with the user's turn), stream the reply and
 * append it. 0 ok (also a stopped reply), 1 a failure that ends the chat. */
static int reply(struct chat *c)
{
	size_t dropped = 0;
	for (;;) {
		char *text;
		size_t len;
		if (render(c, &text, &len)) {
			fprintf(stderr, "unicorn chat: %s\n", err_msg());
			return 1;
		}
		struct intake_gen_result res = { 0 };
		int r;
		uint32_t *ids = NULL;
		if (c->ci.n) {
			/* images: the conversation goes as ids (cli_image.h) */
			struct chat_msg msgs[CHAT_MAX_TURNS + 1];
			size_t m = 0;
			if (c->system && *c->system)
				msgs[m++] = (struct chat_msg){ "system", c->system };
			for (size_t i = 0; i < c->n; i++)
				msgs[m++] = (struct chat_msg){ i % 2 ? "model" : "user", c->turns[i] };
			struct intake_gen_opts o = c->o;
			r = cli_images_encode(&c->ci, msgs, m, &ids, &o.n_prompt_ids);
			o.prompt_ids = ids;
			o.images = (const uint8_t(*)[MSG_DIGEST])c->ci.digest;
			o.n_images = c->ci.n;
			if (r)
				len = MSG_MAX_PROMPT_ALL + 1; /* too long: handled as such below */
			else
				r = intake_client_generate(c->rundir, NULL, 0, &o, &res);
		} else if (len > MSG_MAX_PROMPT_ALL)
			r = err_set(ERR_RANGE, "prompt: %zu bytes", len);
		else
			r = intake_client_generate(c->rundir, text, len, &c->o, &res);
		free(ids);
		free(text);
		if (r && too_long() && (len > MSG_MAX_PROMPT_ALL || res.n_ids == 0)) {
			if (len <= MSG_MAX_PROMPT_ALL)
				intake_gen_result_free(&res);
			if (c->n <= 1) {
				fprintf(stderr, "unicorn chat: this message does not fit the model's "
					"context on its own (%s); send a shorter one\n", err_msg());
				clear_turns(c);
				return 0;
			}
			drop_oldest(c, 2); /* the oldest user turn and its reply */
			dropped += 2;
			continue;
		}
		if (dropped) {
			/* said before the reply, which is already on its way */
			fprintf(stderr, "(the conversation outgrew the context: dropped the oldest %zu "
				"turn%s%s)\n", dropped, dropped == 1 ? "" : "s",
				c->system && *c->system ? ", kept the system prompt" : "");
			fflush(stderr);
		}
		printf("\n");
		fflush(stdout);
		if (r) {
			bool stopped = g_interrupted;
			intake_gen_result_free(&res);
			if (stopped) {
				/* cancelled before the coordinator answered */
				fprintf(stderr, "(stopped)\n");
				drop_last(c); /* the unanswered user turn */
				return 0;
			}
			fprintf(stderr, "unicorn chat: %s\n", err_msg());
			return 1;
		}
		if (res.reason == MSG_END_CANCELLED)
			fprintf(stderr, "(stopped)\n");
		if (res.reason == MSG_END_TIMEOUT)
			fprintf(stderr, "unicorn chat: the reply timed out (the cluster's "
				"--request-timeout) after %u tokens\n", res.n_ids);
		if (res.reason == MSG_END_IMAGE)
			fprintf(stderr, "unicorn chat: an image could not be encoded when the reply ran (its pixels "
				"were evicted from the cluster's image store by 64 newer images, or could not be "
				"read); send it again\n");
		if (res.reason == MSG_END_ERROR) {
			char hint[RUNDIR_PATH_MAX + 128];
			rundir_log_hint(c->rundir, hint, sizeof hint);
			fprintf(stderr, "unicorn chat: the reply ended with an error (see %s)\n", hint);
		}
		/* keep the reply (even a stopped one) as the model's turn */
		c->turns[c->n++] = res.text;
		res.text = NULL;
		intake_gen_result_free(&res);
		return 0;
	}
}

/* The name of the model the cluster serves (the first line of DIR/ready). */
static void model_name(const char *rundir, char *out, size_t cap)
{
	char ready[RUNDIR_PATH_MAX];
	out[0] = 0;
	if (rundir_path(rundir, "ready", ready, sizeof ready))
		return;
	FILE *f = fopen(ready, "r");
	if (!f)
		return;
	if (!fgets(out, (int)cap, f))
		out[0] = 0;
	fclose(f);
	out[strcspn(out, "\n")] = 0;
	char *slash = strrchr(out, '/');
	if (slash && slash[1])
		memmove(out, slash + 1, strlen(slash + 1) + 1);
}

int cli_chat_session(const char *rundir, const char *system, const struct intake_gen_opts *o)
{
	struct chat *c = calloc(1, sizeof *c);
	if (!c) {
		fprintf(stderr, "unicorn chat: out of memory\n");
		return 1;
	}
	c->rundir = rundir;
	c->o = *o;
	c->o.on_piece = print_piece;
	c->o.stop = stop_requested;
	if (system && !(c->system = strdup(system))) {
		free(c);
		fprintf(stderr, "unicorn chat: out of memory\n");
		return 1;
	}
	bool tty = isatty(STDIN_FILENO);
	struct sigaction sa = { .sa_handler = on_sigint }, old;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old);
	g_interrupted = 0;
	if (tty) {
		char model[512];
		model_name(rundir, model, sizeof model);
		printf("Chatting with %s. /help lists the commands, /bye leaves.\n",
		       *model ? model : "the cluster");
	}
	struct line_reader lr = { 0 };
	int rc = 0;
	for (;;) {
		if (tty) {
			fputs(CHAT_PROMPT, stdout);
		}
		fflush(stdout);
		char *line;
		int got = read_line(&lr, &line);
		if (got == 0 || got == -1) {
			if (tty)
				printf("\n");
			break;
		}
		if (got == -3) {
			fprintf(stderr, "unicorn chat: a message over %u bytes was skipped\n",
				CHAT_MAX_LINE);
			continue;
		}
		if (got == -2) {
			fprintf(stderr, "unicorn chat: reading standard input: %s\n", strerror(errno));
			rc = 1;
			break;
		}
		const char *s = line + strspn(line, " \t");
		if (!*s)
			continue;
		if (*s == '/') {
			size_t cl = strcspn(s, " \t");
			if ((cl == 4 && !strncmp(s, "/bye", 4)) || (cl == 5 && !strncmp(s, "/exit", 5)) ||
			    (cl == 5 && !strncmp(s, "/quit", 5)))
				break;
			if ((cl == 5 && !strncmp(s, "/help", 5)) || (cl == 2 && !strncmp(s, "/?", 2))) {
				chat_help();
			} else if (cl == 6 && !strncmp(s, "/clear", 6)) {
				clear_turns(c);
				c->pending = 0;
				printf("(conversation cleared)\n");
			} else if (cl == 6 && !strncmp(s, "/image", 6)) {
				const char *f = s + 6 + strspn(s + 6, " \t");
				int irc = 0;
				if (!*f)
					irc = err_set(ERR_INVAL, "/image FILE");
				if (!irc && !c->ci_on && !(irc = cli_images_open(c->rundir, &c->ci)))
					c->ci_on = true;
				if (!irc && c->ci.n + c->pending >= MSG_MAX_IMAGES)
					irc = err_set(ERR_RANGE, "at most %d images in a conversation", MSG_MAX_IMAGES);
				if (!irc) {
					/* added now (checked, in the run directory), sent with the next message */
					uint32_t had = c->ci.n;
					c->ci.n += c->pending;
					irc = cli_images_add(&c->ci, c->rundir, f);
					c->ci.n = had;
					if (!irc)
						c->pending++;
				}
				if (irc)
					fprintf(stderr, "unicorn chat: %s\n", err_msg());
				else
					printf("(image %s goes with your next message)\n", f);
			} else if (cl == 4 && !strncmp(s, "/set", 4)) {
				cmd_set(c, line + (s - line) + 4);
			} else {
				fprintf(stderr, "unicorn chat: unknown command '%.*s' (/help lists them)\n",
					(int)(cl > 64 ? 64 : cl), s);
			}
			continue;
		}
		if (c->n + 2 > CHAT_MAX_TURNS) {
			drop_oldest(c, 2);
			fprintf(stderr, "(over %d turns: dropped the oldest 2)\n", CHAT_MAX_TURNS);
		}
		size_t ml = strlen(CHAT_IMAGE_MARK), ll = strlen(line);
		if (!(c->turns[c->n] = malloc(c->pending * ml + ll + 1))) {
			fprintf(stderr, "unicorn chat: out of memory\n");
			rc = 1;
			break;
		}
		/* the pending images before the text */
		for (uint32_t i = 0; i < c->pending; i++)
			memcpy(c->turns[c->n] + i * ml, CHAT_IMAGE_MARK, ml);
		memcpy(c->turns[c->n] + c->pending * ml, line, ll + 1);
		c->ci.n += c->pending;
		c->pending = 0;
		c->n++;
		g_interrupted = 0;
		if (reply(c)) {
			rc = 1;
			break;
		}
		g_interrupted = 0;
	}
	sigaction(SIGINT, &old, NULL);
	free(lr.buf);
	clear_turns(c);
	cli_images_close(&c->ci);
	free(c->system);
	free(c);
	return rc;
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
	char *end;
	while ((li = -1, ch = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		int sv = intake_gen_opt(ch, optarg, &o);
		if (sv < 0)
			goto bad;
		if (sv)
			continue;
		switch (ch) {
		case 'n': name = optarg; break;
		case 'y': system = optarg; break;
		case 'm': {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || end == optarg || v < 1 || v > MSG_MAX_GEN) {
				fprintf(stderr, "unicorn chat: --max-tokens: 1..%d\n", MSG_MAX_GEN);
				return 2;
			}
			o.max_tokens = (uint32_t)v;
			break;
		}
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
	return cli_chat_session(rundir, system, &o);
bad:
	fprintf(stderr, "unicorn chat: --%s: bad number '%s'\n", li >= 0 ? opts[li].name : "?", optarg);
	return 2;
}
