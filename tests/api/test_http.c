/* http: the OpenAI-compatible API of a real cluster (bin/unicorn-up on the
 * tiny golden model, fused placement, with an API key): the official
 * `openai` npm client (tests/openai_client.mjs) checks chat/completions,
 * streaming, seeds, stop strings, greedy == `unicorn run --chat`, errors and
 * /health; raw sockets check 413, the SSE framing and that a client that
 * disconnects cancels its generation. Also: a non-loopback --host without a
 * key is refused.
 *
 * Needs UNICORN_BIN (set by `make test`) and node with node_modules/openai
 * (setup.sh: npm ci). Takes the cluster tests' file lock. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "api/openai.h"
#include "common/err.h"
#include "coordinator/intake.h"
#include "ipc/bus.h"
#include "ipc/msg.h"
#include "ipc/rundir.h"
#include "tests/golden.h"
#include "tests/proc.h"

#define PROMPT "Once upon a time"
#define N_TOKENS 12
#define KEY "test-key-123"

static int dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	struct timeval tv = { .tv_sec = 30 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s", strerror(errno));
	return fd;
}

static void send_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
		if (k <= 0)
			return; /* the server may close early (413) */
		s += k;
		n -= (size_t)k;
	}
}

/* Everything until the server closes (Connection: close). */
static char *recv_all(int fd, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *b = malloc(cap);
	cr_assert_not_null(b);
	for (;;) {
		if (n + 4096 > cap)
			b = realloc(b, cap *= 2);
		ssize_t k = recv(fd, b + n, cap - n - 1, 0);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	b[n] = 0;
	*len = n;
	return b;
}

/* Decode an HTTP/1.1 chunked body in place. */
static size_t unchunk(char *body)
{
	char *in = body, *out = body;
	for (;;) {
		char *end;
		unsigned long sz = strtoul(in, &end, 16);
		if (end == in || strncmp(end, "\r\n", 2))
			break;
		in = end + 2;
		if (!sz)
			break;
		memmove(out, in, sz);
		out += sz;
		in += sz + 2;
	}
	*out = 0;
	return (size_t)(out - body);
}

/* extra: one more unicorn-up option and its value (NULL = none). */
static void start_with(struct proc_cluster *c, const char *extra, const char *value)
{
	proc_cluster_start(c, "http", (const char *const[]){ "--placement", "fused", "--api-key", KEY, extra, value,
							      NULL });
}

static void start(struct proc_cluster *c)
{
	start_with(c, NULL, NULL);
}

static void stop(struct proc_cluster *c)
{
	proc_cluster_stop(c);
}

/* `unicorn run --chat --json` text of PROMPT (greedy). */
static char *cli_text(const struct proc_cluster *c)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --chat --json --max-tokens %d '" PROMPT
		 "'", proc_bin_dir_or_skip(), c->name, N_TOKENS);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	static char out[65536];
	size_t n = fread(out, 1, sizeof out - 1, f);
	out[n] = 0;
	cr_assert_eq(pclose(f), 0, "unicorn run: %s", out);
	json_t *j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "%s", out);
	char *t = strdup(json_string_value(json_object_get(j, "text")));
	json_decref(j);
	return t;
}

/* The body of a 200 answer r (dechunked in place). */
static char *sse_body(char *r)
{
	cr_assert(!strncmp(r, "HTTP/1.1 200", 12), "%.300s", r);
	char *b = strstr(r, "\r\n\r\n");
	cr_assert_not_null(b);
	b += 4;
	if (strcasestr(r, "transfer-encoding: chunked"))
		unchunk(b);
	return b;
}

static char *request(int port, const char *head, const char *body, size_t *len)
{
	int fd = dial(port);
	send_all(fd, head, strlen(head));
	if (body)
		send_all(fd, body, strlen(body));
	char *r = recv_all(fd, len);
	close(fd);
	return r;
}

static void check_413(const struct proc_cluster *c)
{
	char head[512];
	snprintf(head, sizeof head,
		 "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " KEY "\r\n"
		 "Content-Type: application/json\r\nContent-Length: %u\r\nConnection: close\r\n\r\n",
		 OAI_MAX_BODY + 1);
	size_t n;
	char *r = request(c->port, head, "{\"prompt\": \"", &n);
	cr_assert(!strncmp(r, "HTTP/1.1 413", 12), "413 expected: %.200s", r);
	cr_assert_not_null(strstr(r, "body_too_large"), "%s", r);
	free(r);
}

static void check_sse(const struct proc_cluster *c)
{
	const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"" PROMPT "\"}],"
			   "\"max_tokens\":6,\"temperature\":0,\"stream\":true}";
	char head[512];
	snprintf(head, sizeof head,
		 "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " KEY "\r\n"
		 "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		 strlen(body));
	size_t n;
	char *r = request(c->port, head, body, &n);
	char *b = sse_body(r);
	cr_assert_not_null(strcasestr(r, "content-type: text/event-stream"), "%.300s", r);
	/* data: {json}\n\n ... data: [DONE]\n\n and nothing else */
	int events = 0, finishes = 0;
	char *p = b;
	bool done = false;
	while (*p) {
		cr_assert(!done, "data after [DONE]: %s", p);
		cr_assert(!strncmp(p, "data: ", 6), "event %d does not start with 'data: ': %.80s",
			  events, p);
		char *e = strstr(p, "\n\n");
		cr_assert_not_null(e, "event %d not ended by a blank line", events);
		*e = 0;
		const char *payload = p + 6;
		if (!strcmp(payload, "[DONE]")) {
			done = true;
		} else {
			cr_assert_null(strchr(payload, '\n'), "a newline inside an event");
			json_t *j = json_loads(payload, 0, NULL);
			cr_assert_not_null(j, "bad chunk JSON: %s", payload);
			cr_assert_str_eq(json_string_value(json_object_get(j, "object")),
					 "chat.completion.chunk");
			json_t *fr = json_object_get(json_array_get(json_object_get(j, "choices"), 0),
						     "finish_reason");
			finishes += json_is_string(fr);
			json_decref(j);
		}
		events++;
		p = e + 2;
	}
	cr_assert(done, "no data: [DONE]");
	cr_assert_eq(finishes, 1, "exactly one chunk carries finish_reason");
	cr_assert_geq(events, 3);
	free(r);
}

/* A streaming client that hangs up: the coordinator logs the cancellation
 * and the slot frees (a following request still works). */
static void check_disconnect(const struct proc_cluster *c)
{
	const char *body = "{\"prompt\":\"" PROMPT "\",\"max_tokens\":4000,\"stream\":true,"
			   "\"temperature\":0}";
	char head[512];
	snprintf(head, sizeof head,
		 "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " KEY "\r\n"
		 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", strlen(body));
	int fd = dial(c->port);
	send_all(fd, head, strlen(head));
	send_all(fd, body, strlen(body));
	char buf[512];
	cr_assert_gt(recv(fd, buf, sizeof buf, 0), 0, "no stream started");
	close(fd);
	double end = proc_now_s() + 10;
	bool seen = false;
	while (!seen && proc_now_s() < end) {
		seen = proc_log_has(c->log, "http client went away");
		usleep(100 * 1000);
	}
	if (!seen)
		proc_tail(c->log, 40);
	cr_assert(seen, "the generation was not cancelled after the client disconnected");
}

/* One greedy chat request over coordinator.ipc with MSG_GEN_LOGPROBS (the
 * protocol the API process uses): resume[] = the first n_resume tokens of an
 * earlier run. Fills tok/lp/top (N_TOKENS entries max) and returns the count. */
#define LP_TOP 3
static uint32_t ipc_logprobs(const struct proc_cluster *c, uint64_t id, const uint32_t *resume,
			     uint32_t n_resume, uint32_t *tok, uint32_t *flags, float *lp,
			     float (*top)[LP_TOP], uint32_t (*top_ids)[LP_TOP])
{
	char url[BUS_URL_MAX];
	cr_assert_eq(rundir_url(c->dir, RUNDIR_COORDINATOR, url, sizeof url), 0, "%s", err_msg());
	struct bus *b;
	cr_assert_eq(bus_dial(url, BUS_REQ, &b), 0, "%s", err_msg());
	static struct msg m, a;
	msg_init(&m, MSG_GEN_REQ);
	struct msg_gen_req *g = &m.u.gen_req;
	g->request_id = id, g->max_tokens = N_TOKENS, g->top_p = 1, g->repetition_penalty = 1;
	g->flags = MSG_GEN_CHAT | MSG_GEN_LOGPROBS, g->top_logprobs = LP_TOP;
	g->n_resume = n_resume;
	memcpy(g->resume, resume, n_resume * sizeof *resume);
	g->n_prompt = (uint32_t)strlen(PROMPT);
	memcpy(g->prompt, PROMPT, g->n_prompt);
	cr_assert_eq(bus_call(b, &m, 10000, &a), 0, "GEN_REQ: %s", err_msg());
	cr_assert_eq(a.type, MSG_ACK, "GEN_REQ answered %s", msg_type_name(a.type));
	uint32_t n = 0;
	for (;;) {
		msg_init(&m, MSG_GEN_POLL);
		m.u.gen_poll = (struct msg_gen_poll){ id, n, 5000 };
		cr_assert_eq(bus_call(b, &m, 10000, &a), 0, "GEN_POLL: %s", err_msg());
		if (a.type == MSG_GEN_END)
			break;
		if (a.type == MSG_ACK)
			continue; /* nothing new within the wait */
		cr_assert_eq(a.type, MSG_GEN_TOKEN, "GEN_POLL answered %s", msg_type_name(a.type));
		const struct msg_gen_token *t = &a.u.gen_token;
		cr_assert_eq(t->index, n);
		cr_assert_lt(n, N_TOKENS);
		tok[n] = t->token, flags[n] = t->flags, lp[n] = t->logprob;
		if (t->flags & MSG_TOK_LOGPROB)
			cr_assert_eq(t->n_top, LP_TOP, "token %u: %u alternatives", n, t->n_top);
		for (uint32_t j = 0; j < t->n_top; j++)
			top[n][j] = t->top_lps[j], top_ids[n][j] = t->top_ids[j];
		n++;
	}
	bus_close(b);
	return n;
}

/* intake_client_generate's on_token and stop hooks (what the API process
 * builds on): tokens seen with their logprobs; stop after stop_at of them. */
struct seen {
	uint32_t n, stop_at, tok[N_TOKENS], flags[N_TOKENS];
	float lp[N_TOKENS];
};

static void seen_token(void *arg, const struct msg_gen_token *t)
{
	struct seen *s = arg;
	cr_assert_eq(t->index, s->n);
	cr_assert_lt(s->n, N_TOKENS);
	s->tok[s->n] = t->token, s->flags[s->n] = t->flags, s->lp[s->n] = t->logprob;
	s->n++;
}

static bool seen_stop(void *arg)
{
	const struct seen *s = arg;
	return s->stop_at && s->n >= s->stop_at;
}

static void client_logprobs(const struct proc_cluster *c, struct seen *s, uint32_t stop_at,
			    struct intake_gen_result *res)
{
	memset(s, 0, sizeof *s);
	s->stop_at = stop_at;
	struct intake_gen_opts o = { .max_tokens = N_TOKENS, .flags = MSG_GEN_CHAT | MSG_GEN_LOGPROBS,
				     .top_logprobs = LP_TOP, .on_token = seen_token, .stop = seen_stop,
				     .arg = s };
	o.sp.top_p = 1, o.sp.repetition_penalty = 1;
	cr_assert_eq(intake_gen_opts_check(&o), 0, "%s", err_msg());
	cr_assert_eq(intake_client_generate(c->dir, PROMPT, strlen(PROMPT), &o, res), 0, "%s",
		     err_msg());
}

/* GEN_TOKEN logprobs (MSG_VERSION 5) are the ones the HTTP API answers for
 * the same greedy request; a resumed request has none for the tokens it
 * resumed and the same ones after them. */
static void check_gen_logprobs(const struct proc_cluster *c)
{
	uint32_t tok[N_TOKENS], fl[N_TOKENS], tok2[N_TOKENS], fl2[N_TOKENS];
	float lp[N_TOKENS], top[N_TOKENS][LP_TOP], lp2[N_TOKENS], top2[N_TOKENS][LP_TOP];
	uint32_t ids[N_TOKENS][LP_TOP], ids2[N_TOKENS][LP_TOP];
	uint32_t n = ipc_logprobs(c, 0x5eed0001, NULL, 0, tok, fl, lp, top, ids);
	cr_assert_geq(n, 3, "only %u tokens", n);
	for (uint32_t i = 0; i < n; i++) {
		cr_assert(fl[i] & MSG_TOK_LOGPROB, "token %u without logprobs", i);
		cr_assert_eq(ids[i][0], tok[i], "greedy token %u is not the most likely", i);
		cr_assert_float_eq(lp[i], top[i][0], 1e-6);
		cr_assert(top[i][0] >= top[i][1] && top[i][1] >= top[i][2], "token %u: not descending", i);
	}
	char body[512], head[512];
	snprintf(body, sizeof body,
		 "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"" PROMPT "\"}],"
		 "\"max_tokens\":%d,\"temperature\":0,\"logprobs\":true,\"top_logprobs\":%d}",
		 N_TOKENS, LP_TOP);
	snprintf(head, sizeof head,
		 "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " KEY "\r\n"
		 "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		 strlen(body));
	size_t len;
	char *r = request(c->port, head, body, &len);
	json_t *j = json_loads(sse_body(r), 0, NULL);
	cr_assert_not_null(j, "%.300s", r);
	json_t *content = json_object_get(json_object_get(json_array_get(json_object_get(j, "choices"), 0),
							  "logprobs"), "content");
	cr_assert_eq(json_array_size(content), n, "HTTP has %zu logprobs, GEN_TOKEN %u",
		     json_array_size(content), n);
	for (uint32_t i = 0; i < n; i++) {
		json_t *e = json_array_get(content, i);
		cr_assert_float_eq(json_real_value(json_object_get(e, "logprob")), lp[i], 1e-4, "token %u", i);
		json_t *t = json_object_get(e, "top_logprobs");
		for (uint32_t k = 0; k < LP_TOP; k++)
			cr_assert_float_eq(json_real_value(json_object_get(json_array_get(t, k), "logprob")),
					   top[i][k], 1e-4, "token %u alternative %u", i, k);
	}
	json_decref(j);
	free(r);
	/* resumed after 2 tokens: those have no logprobs here, the rest the same */
	uint32_t n2 = ipc_logprobs(c, 0x5eed0002, tok, 2, tok2, fl2, lp2, top2, ids2);
	cr_assert_eq(n2, n);
	for (uint32_t i = 0; i < n; i++) {
		cr_assert_eq(tok2[i], tok[i], "resumed run differs at token %u", i);
		cr_assert_eq(!!(fl2[i] & MSG_TOK_LOGPROB), i >= 2, "token %u: flags %u", i, fl2[i]);
		if (i >= 2)
			cr_assert_float_eq(lp2[i], lp[i], 1e-3, "token %u", i);
	}
	/* the client library hands every token with its logprobs ... */
	struct seen s;
	struct intake_gen_result res;
	client_logprobs(c, &s, 0, &res);
	cr_assert_eq(s.n, n);
	cr_assert_eq(res.n_ids, n);
	for (uint32_t i = 0; i < n; i++) {
		cr_assert_eq(s.tok[i], tok[i]);
		cr_assert(s.flags[i] & MSG_TOK_LOGPROB);
		cr_assert_float_eq(s.lp[i], lp[i], 1e-6, "token %u", i);
	}
	cr_assert_neq(res.reason, MSG_END_CANCELLED);
	intake_gen_result_free(&res);
	/* ... and ends the request when stop says so */
	client_logprobs(c, &s, 2, &res);
	cr_assert_eq(res.reason, MSG_END_CANCELLED, "reason %u", res.reason);
	cr_assert_eq(s.n, 2, "%u tokens after stop at 2", s.n);
	intake_gen_result_free(&res);
}

Test(http, openai_api, .timeout = 240)
{
	struct proc_cluster c;
	start(&c);
	double t0 = proc_now_s();
	char *greedy = cli_text(&c);
	char url[64], cmd[512];
	snprintf(url, sizeof url, "http://127.0.0.1:%d", c.port);
	setenv("API_KEY", KEY, 1);
	setenv("EXPECT_GREEDY", greedy, 1);
	setenv("PROMPT", PROMPT, 1);
	char nt[16];
	snprintf(nt, sizeof nt, "%d", N_TOKENS);
	setenv("N_TOKENS", nt, 1);
	snprintf(cmd, sizeof cmd, "node tests/openai_client.mjs %s >&2", url);
	int st = system(cmd);
	if (st)
		proc_tail(c.log, 40);
	cr_assert_eq(st, 0, "tests/openai_client.mjs failed (status %d)", st);
	check_413(&c);
	check_sse(&c);
	check_disconnect(&c);
	check_gen_logprobs(&c);
	/* /health without a key (load balancers) */
	size_t n;
	char *r = request(c.port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			  NULL, &n);
	cr_assert(!strncmp(r, "HTTP/1.1 200", 12), "%.200s", r);
	free(r);
	/* unicorn status prints the URL */
	snprintf(cmd, sizeof cmd, "%s/unicorn status --name %s", proc_bin_dir_or_skip(), c.name);
	FILE *f = popen(cmd, "r");
	char out[8192];
	size_t k = fread(out, 1, sizeof out - 1, f);
	out[k] = 0;
	pclose(f);
	cr_assert_not_null(strstr(out, url), "unicorn status does not show %s:\n%s", url, out);
	cr_log_info("http checks took %.1f s", proc_now_s() - t0);
	free(greedy);
	stop(&c);
}

Test(http, non_loopback_needs_key)
{
	const char *bin = proc_bin_dir_or_skip();
	char cmd[1024];
	snprintf(cmd, sizeof cmd,
		 "UNICORN_API_KEY= %s/unicorn-up --model %s/golden/gemma3-tiny-q4_0.gguf --name nl%d "
		 "--host 0.0.0.0 2>&1",
		 bin, golden_shared_dir(), (int)getpid());
	FILE *f = popen(cmd, "r");
	char out[2048];
	size_t n = fread(out, 1, sizeof out - 1, f);
	out[n] = 0;
	int st = pclose(f);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status %d: %s", st, out);
	cr_assert_not_null(strstr(out, "--api-key"), "%s", out);
}

/* --- sampling options of the CLI and request timeouts ---------------------- */

/* Run sh -c cmd: stdout into out[cap], stderr into the file err (read back into
 * errout[cap] when given); the exit status. */
static int sh(const struct proc_cluster *c, const char *cmd, char *out, size_t cap, char *errout)
{
	char full[1024], errf[160];
	snprintf(errf, sizeof errf, "%s/cmd.err", c->tmp);
	snprintf(full, sizeof full, "%s 2>%s", cmd, errf);
	FILE *f = popen(full, "r");
	cr_assert_not_null(f);
	size_t n = fread(out, 1, cap - 1, f);
	out[n] = 0;
	int st = pclose(f);
	if (errout) {
		FILE *e = fopen(errf, "r");
		size_t k = e ? fread(errout, 1, cap - 1, e) : 0;
		errout[k] = 0;
		if (e)
			fclose(e);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `unicorn run --json` greedy ids of PROMPT with extra options. */
static json_t *cli_json(const struct proc_cluster *c, const char *opts, int want_status)
{
	char cmd[512];
	static char out[65536], err[65536];
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --json %s '" PROMPT "'",
		 proc_bin_dir_or_skip(), c->name, opts);
	int st = sh(c, cmd, out, sizeof out, err);
	cr_assert_eq(st, want_status, "%s: status %d: %s %s", cmd, st, out, err);
	json_t *j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "%s: %s %s", cmd, out, err);
	return j;
}

static uint32_t distinct_ids(json_t *ids)
{
	uint32_t n = 0;
	for (size_t i = 0; i < json_array_size(ids); i++) {
		bool seen = false;
		for (size_t k = 0; k < i && !seen; k++)
			seen = json_integer_value(json_array_get(ids, k)) ==
			       json_integer_value(json_array_get(ids, i));
		n += !seen;
	}
	return n;
}

static char *post_completion(const struct proc_cluster *c, const char *body)
{
	char head[512];
	snprintf(head, sizeof head,
		 "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " KEY "\r\n"
		 "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		 strlen(body));
	size_t n;
	return request(c->port, head, body, &n);
}

/* A 408 answer with the OpenAI-style timeout error object. */
static void assert_408(char *r)
{
	cr_assert(!strncmp(r, "HTTP/1.1 408", 12), "408 expected: %.400s", r);
	char *b = strstr(r, "\r\n\r\n");
	cr_assert_not_null(b);
	json_t *j = json_loads(b + 4, 0, NULL);
	cr_assert_not_null(j, "%s", b + 4);
	json_t *e = json_object_get(j, "error");
	cr_assert_str_eq(json_string_value(json_object_get(e, "type")), "timeout");
	cr_assert_str_eq(json_string_value(json_object_get(e, "code")), "request_timeout");
	cr_assert_gt(strlen(json_string_value(json_object_get(e, "message"))), 10);
	json_decref(j);
}

/* unicorn run/chat pass --min-p and the penalties (GEN_REQ v3) to the
 * sampler; --timeout, the HTTP "timeout" field and unicorn-up
 * --request-timeout (here 3 s) stop a long generation: the CLI exits 1 with
 * "timed out after", HTTP answers 408 or ends the stream with an error event. */
Test(http, cli_sampling_and_timeouts, .timeout = 240)
{
	struct proc_cluster c;
	start_with(&c, "--request-timeout", "3");
	char cmd[512], out[4096], err[4096];
	const char *bin = proc_bin_dir_or_skip();

	/* A strong repetition penalty changes the greedy text: the tiny model
	 * repeats itself without it, so the penalized reply has more distinct
	 * tokens. Penalty 1 is "off" (identical to no option). */
	json_t *plain = cli_json(&c, "--max-tokens 24", 0);
	json_t *rp = cli_json(&c, "--max-tokens 24 --repeat-penalty 5", 0);
	json_t *rp1 = cli_json(&c, "--max-tokens 24 --repeat-penalty 1", 0);
	json_t *pf = cli_json(&c, "--max-tokens 24 --presence-penalty 2 --frequency-penalty 2 "
			      "--min-p 0.01", 0);
	json_t *pids = json_object_get(plain, "ids"), *rids = json_object_get(rp, "ids");
	cr_assert_eq(json_array_size(pids), 24);
	cr_assert_eq(json_array_size(rids), 24);
	cr_assert(!json_equal(pids, rids), "--repeat-penalty 5 did not change the greedy ids");
	cr_assert_gt(distinct_ids(rids), distinct_ids(pids), "penalized %u distinct vs %u",
		     distinct_ids(rids), distinct_ids(pids));
	cr_assert(json_equal(pids, json_object_get(rp1, "ids")), "--repeat-penalty 1 is not off");
	cr_assert(!json_equal(pids, json_object_get(pf, "ids")),
		  "presence/frequency penalties did not change the greedy ids");
	json_decref(plain);
	json_decref(rp);
	json_decref(rp1);
	json_decref(pf);

	/* out-of-range values are refused before anything is sent, naming the flag */
	static const char *const bad[][2] = {
		{ "--min-p 1.5", "--min-p" }, { "--repeat-penalty 0", "--repeat-penalty" },
		{ "--repeat-penalty 101", "--repeat-penalty" },
		{ "--presence-penalty 2.5", "--presence-penalty" },
		{ "--frequency-penalty -3", "--frequency-penalty" }, { "--min-p nan", "--min-p" },
		{ "--timeout 0", "--timeout" }, { "--timeout -1", "--timeout" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s %s x", bin, c.name, bad[i][0]);
		cr_assert_eq(sh(&c, cmd, out, sizeof out, err), 2, "%s accepted", bad[i][0]);
		cr_assert_not_null(strstr(err, bad[i][1]), "%s: %s", bad[i][0], err);
	}
	snprintf(cmd, sizeof cmd, "echo hi | %s/unicorn chat --name %s --min-p 7", bin, c.name);
	cr_assert_eq(sh(&c, cmd, out, sizeof out, err), 2, "unicorn chat --min-p 7 accepted");

	/* unicorn run --timeout: stops well before the 3 s server limit */
	double t0 = proc_now_s();
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --max-tokens 4000 --timeout 0.5 '"
		 PROMPT "'", bin, c.name);
	cr_assert_eq(sh(&c, cmd, out, sizeof out, err), 1, "a timed-out run must exit 1: %s", err);
	double dt = proc_now_s() - t0;
	cr_assert_not_null(strstr(err, "timed out after"), "%s", err);
	cr_assert_lt(dt, 2.5, "--timeout 0.5 took %.1f s", dt);
	json_t *j = cli_json(&c, "--max-tokens 4000 --timeout 0.3", 1);
	cr_assert_str_eq(json_string_value(json_object_get(j, "reason")), "timeout");
	cr_assert_lt(json_array_size(json_object_get(j, "ids")), 4000);
	json_decref(j);

	/* HTTP, non-streaming: 408 with an OpenAI-style error */
	t0 = proc_now_s();
	char *r = post_completion(&c, "{\"prompt\":\"" PROMPT "\",\"max_tokens\":4000,"
				  "\"temperature\":0,\"timeout\":0.3}");
	assert_408(r);
	free(r);
	cr_assert_lt(proc_now_s() - t0, 2.5);

	/* HTTP, streaming: chunks, then one error event, then [DONE] */
	r = post_completion(&c, "{\"prompt\":\"" PROMPT "\",\"max_tokens\":4000,"
			    "\"temperature\":0,\"timeout\":0.3,\"stream\":true}");
	char *b = sse_body(r);
	int chunks = 0, errors = 0;
	bool done = false;
	for (char *p = b; *p;) {
		cr_assert(!done, "data after [DONE]: %s", p);
		cr_assert(!strncmp(p, "data: ", 6), "not an SSE event: %.80s", p);
		char *e = strstr(p, "\n\n");
		cr_assert_not_null(e);
		*e = 0;
		if (!strcmp(p + 6, "[DONE]")) {
			done = true;
		} else {
			json_t *ev = json_loads(p + 6, 0, NULL);
			cr_assert_not_null(ev, "%s", p + 6);
			json_t *er = json_object_get(ev, "error");
			if (er) {
				cr_assert_eq(errors, 0, "two error events");
				cr_assert_str_eq(json_string_value(json_object_get(er, "code")),
						 "request_timeout");
				cr_assert_str_eq(json_string_value(json_object_get(er, "type")), "timeout");
				errors++;
			} else {
				cr_assert_eq(errors, 0, "a chunk after the error event");
				json_t *fr = json_object_get(json_array_get(json_object_get(ev, "choices"),
									    0), "finish_reason");
				cr_assert(json_is_null(fr), "a finish_reason on a timed-out stream");
				chunks++;
			}
			json_decref(ev);
		}
		p = e + 2;
	}
	cr_assert(done, "no data: [DONE]");
	cr_assert_eq(errors, 1);
	cr_assert_gt(chunks, 0, "no text before the timeout");
	free(r);

	/* the server's --request-timeout (3 s) caps a longer "timeout" */
	t0 = proc_now_s();
	r = post_completion(&c, "{\"prompt\":\"" PROMPT "\",\"max_tokens\":4000,"
			    "\"temperature\":0,\"timeout\":100}");
	dt = proc_now_s() - t0;
	assert_408(r);
	free(r);
	cr_assert(dt > 2.5 && dt < 10, "capped request took %.1f s (limit 3 s)", dt);

	/* the slots were freed: a short request still completes */
	r = post_completion(&c, "{\"prompt\":\"" PROMPT "\",\"max_tokens\":3,\"timeout\":30}");
	cr_assert(!strncmp(r, "HTTP/1.1 200", 12), "%.300s", r);
	free(r);
	stop(&c);
}

/* --- the paged KV cache under a budget ------------------------------------- */

#include "api/dashboard.h"
#include "common/err.h"

/* A counter's value in the cluster's /metrics (0 when absent). */
static double metric(const struct proc_cluster *c, const char *name)
{
	char *body = NULL;
	size_t len = 0;
	int st = 0;
	setenv("UNICORN_API_KEY", KEY, 1);
	cr_assert_eq(dashboard_fetch(c->name, "/metrics", 10, &body, &len, &st), 0, "%s", err_msg());
	unsetenv("UNICORN_API_KEY");
	cr_assert_eq(st, 200, "/metrics: %d %s", st, body);
	double v = 0;
	size_t nl = strlen(name);
	for (char *p = body; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, name, nl) && p[nl] == ' ')
			v = strtod(p + nl + 1, NULL);
	free(body);
	return v;
}

/* `unicorn run --json` of prompt, started in the background. */
static FILE *run_bg(const struct proc_cluster *c, const char *prompt, int max_tokens)
{
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --json --max-tokens %d '%s'", proc_bin_dir_or_skip(),
		 c->name, max_tokens, prompt);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	return f;
}

/* Its generated ids, as a JSON string (caller frees). */
static char *run_ids(FILE *f)
{
	static char out[65536];
	size_t n = fread(out, 1, sizeof out - 1, f);
	out[n] = 0;
	cr_assert_eq(pclose(f), 0, "unicorn run: %s", out);
	json_t *j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "%s", out);
	char *ids = json_dumps(json_object_get(j, "ids"), JSON_COMPACT);
	json_decref(j);
	return ids;
}

/* 3.5 MiB of KV for the tiny model (4096 positions, 1 global + 5 sliding
 * layers): 23 local blocks, so four sequences of ~160 positions (10 ring
 * blocks each) cannot all hold their windows at once and some are preempted
 * and recomputed; each still generates exactly what it generates alone. A
 * prompt run twice reuses its cached prefix (whole 32-position units) and
 * generates the same ids. */
Test(http, kv_budget_preemption_and_prefix_reuse, .timeout = 300)
{
	struct proc_cluster c;
	start_with(&c, "--kv-budget", "1792K"); /* f16 KV: 3584K of f32 blocks */
	const char *prompts[4] = { "Once upon a time", "The quick brown fox", "In a hole in the ground there lived",
				   "It was a dark and stormy night" };
	enum { GEN = 150 };
	char *alone[4];
	for (int i = 0; i < 4; i++)
		alone[i] = run_ids(run_bg(&c, prompts[i], GEN));
	cr_assert_eq(metric(&c, "unicorn_kv_preemptions_total"), 0, "one at a time fits");
	FILE *f[4];
	for (int i = 0; i < 4; i++)
		f[i] = run_bg(&c, prompts[i], GEN);
	for (int i = 0; i < 4; i++) {
		char *ids = run_ids(f[i]);
		cr_assert_str_eq(ids, alone[i], "prompt %d: preempted and recomputed, the ids changed", i);
		free(ids);
		free(alone[i]);
	}
	double pre = metric(&c, "unicorn_kv_preemptions_total");
	cr_assert_gt(pre, 0, "four long sequences should not fit the budget together");
	/* a long prompt twice: the second run reuses its first positions */
	char longp[2048] = "";
	for (int i = 0; i < 12; i++)
		strcat(longp, "the cat sat on the mat and looked at the dog. ");
	double hits0 = metric(&c, "unicorn_kv_prefix_hit_tokens_total");
	char *first = run_ids(run_bg(&c, longp, 8));
	double hits1 = metric(&c, "unicorn_kv_prefix_hit_tokens_total");
	char *second = run_ids(run_bg(&c, longp, 8));
	double hits2 = metric(&c, "unicorn_kv_prefix_hit_tokens_total");
	cr_assert_str_eq(first, second, "a reused prefix changed the output");
	cr_assert_eq(hits1, hits0, "nothing cached yet for this prompt");
	cr_assert_geq(hits2 - hits1, 64, "the second run should reuse at least two 32-position units");
	cr_assert_eq(fmod(hits2 - hits1, 32), 0);
	printf("kv: %.0f preemptions, %.0f prefix positions reused\n", pre, hits2 - hits1);
	free(first);
	free(second);
	stop(&c);
}

/* Batched prefill: six prompts of different lengths (one longer than a
 * chunk of 256, one of a few units, four shorter than a unit) sent together
 * are prefilled in shared submissions (wide, beside each other) and decoded
 * in batched rounds, yet each generates the ids it generates alone; the
 * rounds show that they ran together. */
Test(http, batched_prompts_equal_alone, .timeout = 300)
{
	struct proc_cluster c;
	start_with(&c, "--max-seqs", "8");
	static char longp[4096], midp[1024];
	for (int i = 0; i < 40; i++)
		strcat(longp, "the cat sat on the mat. ");
	for (int i = 0; i < 8; i++)
		strcat(midp, "a dog ran in the park. ");
	const char *prompts[6] = { longp, "Once upon a time", midp, "Hi", "The quick brown fox jumps", "It was" };
	enum { N = 6, GEN = 16 };
	char *alone[N];
	const char *subs = "unicorn_worker_steps_total{worker=\"gpu\"}";
	double r0 = metric(&c, "unicorn_steps_total"), s0 = metric(&c, subs);
	for (int i = 0; i < N; i++)
		alone[i] = run_ids(run_bg(&c, prompts[i], GEN));
	double r1 = metric(&c, "unicorn_steps_total"), s1 = metric(&c, subs);
	FILE *f[N];
	for (int i = 0; i < N; i++)
		f[i] = run_bg(&c, prompts[i], GEN);
	for (int i = 0; i < N; i++) {
		char *ids = run_ids(f[i]);
		cr_assert_str_eq(ids, alone[i], "prompt %d: batched, the ids changed", i);
		free(ids);
		free(alone[i]);
	}
	double r2 = metric(&c, "unicorn_steps_total"), s2 = metric(&c, subs);
	printf("batched: %.0f rounds / %.0f submissions alone, %.0f / %.0f together\n", r1 - r0, s1 - s0, r2 - r1,
	       s2 - s1);
	cr_assert_gt(s1 - s0, 0, "the worker's submissions are counted");
	cr_assert_lt(r2 - r1, (r1 - r0) / 2, "together in %.0f rounds, one by one in %.0f", r2 - r1, r1 - r0);
	/* one submission per round (two when a round needs both kinds), plus a
	 * RESET_SEQ per request: the prompts did not go one per submission */
	cr_assert_leq(s2 - s1, r2 - r1 + N + 2, "%.0f submissions in %.0f rounds", s2 - s1, r2 - r1);
	stop(&c);
}
