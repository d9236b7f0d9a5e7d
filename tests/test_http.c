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

#include "golden.h"
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

struct cl {
	char tmp[64], name[32], dir[200], log[128];
	pid_t sup;
	int port, lock_fd;
};

static void start(struct cl *c)
{
	const char *bin = proc_bin_dir_or_skip();
	memset(c, 0, sizeof *c);
	c->lock_fd = proc_cluster_lock();
	snprintf(c->tmp, sizeof c->tmp, "/tmp/unicorn-http-XXXXXX");
	cr_assert_not_null(mkdtemp(c->tmp));
	snprintf(c->name, sizeof c->name, "h%d", (int)getpid());
	snprintf(c->dir, sizeof c->dir, "%s/unicorn/%s", c->tmp, c->name);
	snprintf(c->log, sizeof c->log, "%s/up.log", c->tmp);
	setenv("XDG_RUNTIME_DIR", c->tmp, 1);
	c->port = proc_free_port();
	char up[512], model[512], port[16];
	snprintf(up, sizeof up, "%s/unicorn-up", bin);
	snprintf(model, sizeof model, "%s/golden/gemma3-tiny-q4_0.gguf", golden_shared_dir());
	snprintf(port, sizeof port, "%d", c->port);
	c->sup = fork();
	cr_assert_geq(c->sup, 0);
	if (c->sup == 0) {
		int fd = open(c->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(up, up, "--model", model, "--name", c->name, "--placement", "fused", "--port",
		      port, "--api-key", KEY, (char *)NULL);
		_exit(127);
	}
	char ready[256];
	snprintf(ready, sizeof ready, "%s/ready", c->dir);
	double end = proc_now_s() + 90;
	while (access(ready, F_OK)) {
		int st;
		if (waitpid(c->sup, &st, WNOHANG) == c->sup) {
			proc_tail(c->log, 40);
			cr_assert_fail("unicorn-up exited (status %d) before ready", st);
		}
		if (proc_now_s() > end) {
			proc_tail(c->log, 40);
			cr_assert_fail("cluster not ready within 90 s");
		}
		usleep(50 * 1000);
	}
}

static void stop(struct cl *c)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s/unicorn down --name %s >/dev/null", proc_bin_dir_or_skip(), c->name);
	cr_assert_eq(system(cmd), 0, "unicorn down failed");
	int ws;
	double end = proc_now_s() + 15;
	pid_t r;
	while ((r = waitpid(c->sup, &ws, WNOHANG)) == 0 && proc_now_s() < end)
		usleep(20 * 1000);
	cr_assert_eq(r, c->sup, "unicorn-up still running");
	snprintf(cmd, sizeof cmd, "rm -rf %s", c->tmp);
	if (system(cmd)) {}
	close(c->lock_fd);
}

/* `unicorn run --chat --json` text of PROMPT (greedy). */
static char *cli_text(const struct cl *c)
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

static void check_413(const struct cl *c)
{
	char head[512];
	snprintf(head, sizeof head,
		 "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " KEY "\r\n"
		 "Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
		 2 << 20);
	size_t n;
	char *r = request(c->port, head, "{\"prompt\": \"", &n);
	cr_assert(!strncmp(r, "HTTP/1.1 413", 12), "413 expected: %.200s", r);
	cr_assert_not_null(strstr(r, "body_too_large"), "%s", r);
	free(r);
}

static void check_sse(const struct cl *c)
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
	cr_assert(!strncmp(r, "HTTP/1.1 200", 12), "%.300s", r);
	cr_assert_not_null(strcasestr(r, "content-type: text/event-stream"), "%.300s", r);
	char *b = strstr(r, "\r\n\r\n");
	cr_assert_not_null(b);
	b += 4;
	if (strcasestr(r, "transfer-encoding: chunked"))
		unchunk(b);
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
static void check_disconnect(const struct cl *c)
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
		FILE *f = fopen(c->log, "r");
		char line[1024];
		while (f && fgets(line, sizeof line, f))
			seen |= strstr(line, "http client went away") != NULL;
		if (f)
			fclose(f);
		usleep(100 * 1000);
	}
	if (!seen)
		proc_tail(c->log, 40);
	cr_assert(seen, "the generation was not cancelled after the client disconnected");
}

Test(http, openai_api, .timeout = 240)
{
	struct cl c;
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
