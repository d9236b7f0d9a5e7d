/* http_hostile: the API against hostile and careless clients on loopback
 * (docs/http.md "Connections and limits"), over real sockets to a real
 * cluster: 300 idle sockets do not lock /health out; a slowloris client is
 * dropped at the head timeout (with a 408); a half-closed POST gets its
 * answer; malformed heads get 400/414/431; one address past its cap gets
 * 503 with Retry-After (and /health still 200); 64 concurrent 1 MB bodies,
 * repeated, leave the API process near its idle size.
 *
 * Needs UNICORN_BIN (set by `make test`). Takes the cluster tests' lock. */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/http.h"
#include "tests/api/hostile.h"
#include "tests/proc.h"

static int status_of(int port, const char *head, const char *body)
{
	size_t n;
	char *r = hx_request(port, head, body, body ? strlen(body) : 0, &n);
	int st = hx_status(r);
	if (!st)
		cr_log_error("no status for %.60s: %.200s", head, r);
	free(r);
	return st;
}

/* Slowloris: a header line every second, never the end of the head. */
struct loris {
	int port;
	double t_closed;
	int status;
};

static void *slowloris(void *arg)
{
	struct loris *l = arg;
	int fd = hx_dial(l->port, 30);
	double t0 = proc_now_s();
	l->t_closed = -1;
	if (fd < 0)
		return NULL;
	hx_send_all(fd, "GET /v1/models HTTP/1.1\r\nHost: x\r\n", 34);
	for (int i = 0; i < 30; i++) {
		sleep(1);
		if (!hx_send_all(fd, "X-a: b\r\n", 8))
			break;
		char b[256];
		ssize_t k = recv(fd, b, sizeof b - 1, MSG_DONTWAIT);
		if (k > 0) {
			b[k] = 0;
			l->status = hx_status(b);
			break;
		}
		if (k == 0)
			break;
	}
	l->t_closed = proc_now_s() - t0;
	close(fd);
	return NULL;
}

static void check_idle_sockets(const struct proc_cluster *c)
{
	enum { N = 300 };
	int fds[N];
	for (int i = 0; i < N; i++) {
		fds[i] = hx_dial(c->port, 5);
		cr_assert_geq(fds[i], 0, "connect %d: %s", i, strerror(errno));
	}
	usleep(200 * 1000);
	double t0 = proc_now_s();
	int st = status_of(c->port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", NULL);
	double dt = proc_now_s() - t0;
	cr_assert_eq(st, 200, "/health with %d idle sockets: %d", N, st);
	cr_assert_lt(dt, 1.0, "/health took %.2f s with %d idle sockets", dt, N);
	/* and real work still goes through */
	const char *body = "{\"text\":\"hello\"}";
	char head[256];
	snprintf(head, sizeof head, "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n", strlen(body));
	cr_assert_eq(status_of(c->port, head, body), 200);
	for (int i = 0; i < N; i++)
		close(fds[i]);
}

/* A whole request, then shutdown(SHUT_WR) (curl, proxies): answered. */
static void check_half_close(const struct proc_cluster *c)
{
	static const char *const bodies[][2] = {
		{ "/tokenize", "{\"text\":\"hello world\"}" },
		{ "/detokenize", "{\"tokens\":[2,3,4]}" },
		{ "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":4}" },
		{ "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":4,\"stream\":true}" },
	};
	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		char head[256];
		snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
			 bodies[i][0], strlen(bodies[i][1]));
		int fd = hx_dial(c->port, 30);
		cr_assert_geq(fd, 0);
		hx_send_all(fd, head, strlen(head));
		hx_send_all(fd, bodies[i][1], strlen(bodies[i][1]));
		shutdown(fd, SHUT_WR);
		size_t n;
		char *r = hx_recv_all(fd, &n);
		close(fd);
		cr_assert_eq(hx_status(r), 200, "half-closed POST %s %s: %.300s", bodies[i][0], bodies[i][1], r);
		free(r);
	}
}

static void check_malformed(const struct proc_cluster *c)
{
	cr_assert_eq(status_of(c->port, "GARBAGE\r\n\r\n", NULL), 400);
	cr_assert_eq(status_of(c->port, "GET /health HTTP/9.9\r\n\r\n", NULL), 505);
	size_t big = 12000;
	char *q = malloc(big + 200);
	int k = snprintf(q, big + 200, "GET /health?");
	memset(q + k, '&', 10000);
	snprintf(q + k + 10000, 200, " HTTP/1.1\r\nHost: x\r\n\r\n");
	cr_assert_eq(status_of(c->port, q, NULL), 414, "a query of 10,000 &");
	k = snprintf(q, big + 200, "GET /health HTTP/1.1\r\nX-Long: ");
	memset(q + k, 'a', 10000);
	snprintf(q + k + 10000, 200, "\r\n\r\n");
	cr_assert_eq(status_of(c->port, q, NULL), 431, "a 10 KB header line");
	free(q);
	/* a chunk-size line of 40 KB: libmicrohttpd's own answer (docs/http.md) */
	size_t cl = 40000;
	char *chunk = malloc(cl + 300);
	k = snprintf(chunk, cl + 300, "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
	memset(chunk + k, '0', cl);
	snprintf(chunk + k + cl, 300, "5\r\nhello\r\n0\r\n\r\n");
	size_t n;
	char *r = hx_request(c->port, chunk, NULL, 0, &n);
	int st = hx_status(r);
	cr_log_info("a 40 KB chunk-size line: status %d", st);
	cr_assert(st >= 400 && st < 600, "a 40 KB chunk-size line: no error status: %.200s", r);
	free(r);
	free(chunk);
}

/* HTTP_MAX_PER_ADDR connections held by the library (a head whose body
 * never comes) from one address: the next request from it gets 503 with
 * Retry-After, /health still 200 (the reserve). */
static void check_per_address(const struct proc_cluster *c)
{
	enum { N = HTTP_MAX_PER_ADDR };
	static int fds[N];
	const char *head = "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n";
	for (int i = 0; i < N; i++) {
		fds[i] = hx_dial(c->port, 5);
		cr_assert_geq(fds[i], 0);
		hx_send_all(fds[i], head, strlen(head));
	}
	usleep(500 * 1000);
	size_t n;
	char *r = hx_request(c->port, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", NULL, 0, &n);
	cr_assert_eq(hx_status(r), 503, "connection %d from one address: %.200s", N + 1, r);
	cr_assert_not_null(strstr(r, "Retry-After: 1"), "%.300s", r);
	free(r);
	cr_assert_eq(status_of(c->port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", NULL),
		     200);
	for (int i = 0; i < N; i++)
		close(fds[i]);
}

struct big {
	int port, status;
	const char *body;
	size_t len;
};

static void *big_body(void *arg)
{
	struct big *b = arg;
	char head[256];
	snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu\r\nConnection: close\r\n\r\n", b->len);
	size_t n;
	char *r = hx_request(b->port, head, b->body, b->len, &n);
	b->status = hx_status(r);
	free(r);
	return NULL;
}

static void check_memory(const struct proc_cluster *c)
{
	pid_t api = hx_api_pid(c->sup);
	cr_assert_gt(api, 0, "no unicorn-api process");
	long idle = hx_rss_kib(api);
	/* 1 MB of prompt and an invalid max_tokens: parsed, then refused (400) */
	size_t len = 1000000;
	char *body = malloc(len + 1);
	int k = snprintf(body, len, "{\"max_tokens\":-1,\"prompt\":\"");
	memset(body + k, 'a', len - (size_t)k - 2);
	memcpy(body + len - 2, "\"}", 2);
	body[len] = 0;
	enum { N = 64, ROUNDS = 3 };
	static struct big b[N];
	pthread_t th[N];
	long peak = 0;
	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < N; i++) {
			b[i] = (struct big){ .port = c->port, .body = body, .len = len };
			cr_assert_eq(pthread_create(&th[i], NULL, big_body, &b[i]), 0);
		}
		for (int i = 0; i < N; i++) {
			pthread_join(th[i], NULL);
			cr_assert(b[i].status == 400 || b[i].status == 503, "round %d body %d: status %d",
				  round, i, b[i].status);
		}
		long r = hx_rss_kib(api);
		peak = r > peak ? r : peak;
	}
	usleep(500 * 1000);
	long after = hx_rss_kib(api);
	cr_log_info("API RSS: idle %ld KiB, after %d x %d bodies of 1 MB %ld KiB (peak seen %ld)", idle, ROUNDS,
		    N, after, peak);
	cr_assert_leq(after, 2 * idle, "RSS %ld KiB after the storm, idle %ld KiB", after, idle);
	free(body);
}

Test(http_hostile, limits_and_timeouts, .timeout = 240)
{
	struct proc_cluster c;
	proc_cluster_start(&c, "hostile", (const char *const[]){ "--placement", "fused", NULL });
	/* warm up (tokenizer, first answers), so "idle" is the process at rest */
	const char *health = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	int st = 0, ok = 0;
	for (double end = proc_now_s() + 30; ok < 3 && proc_now_s() < end;) {
		st = status_of(c.port, health, NULL);
		ok = st == 200 ? ok + 1 : 0;
		if (st != 200)
			usleep(200 * 1000);
	}
	if (ok < 3)
		proc_tail(c.log, 30);
	cr_assert_eq(ok, 3, "/health: %d", st);
	struct loris l = { .port = c.port };
	pthread_t lt;
	cr_assert_eq(pthread_create(&lt, NULL, slowloris, &l), 0);
	double t = proc_now_s();
	check_memory(&c);
	cr_log_info("memory: %.1f s", proc_now_s() - t);
	check_idle_sockets(&c);
	check_half_close(&c);
	check_malformed(&c);
	check_per_address(&c);
	pthread_join(lt, NULL);
	cr_log_info("all checks: %.1f s", proc_now_s() - t);
	cr_log_info("slowloris: dropped after %.1f s with status %d", l.t_closed, l.status);
	cr_assert(l.t_closed > 0 && l.t_closed < HTTP_HEAD_TIMEOUT_MS / 1000.0 + 3,
		  "slowloris kept for %.1f s", l.t_closed);
	cr_assert_eq(l.status, 408);
	cr_assert(!proc_log_has(c.log, "restarting"), "a process restarted");
	t = proc_now_s();
	proc_cluster_stop(&c);
	cr_log_info("stop: %.1f s", proc_now_s() - t);
}
