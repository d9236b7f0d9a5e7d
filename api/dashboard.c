/* dashboard: /metrics, /metrics.json, /dashboard, /dashboard/events, /trace
 * (see dashboard.h). */
#include "api/dashboard.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "common/err.h"
#include "ipc/rundir.h"

#define SSE_INTERVAL_MS 1000

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static dashboard_source_fn g_source;
static void *g_source_arg;
static atomic_bool g_stopping;

void dashboard_register(dashboard_source_fn fn, void *arg)
{
	pthread_mutex_lock(&g_mu);
	g_source = fn;
	g_source_arg = arg;
	pthread_mutex_unlock(&g_mu);
	atomic_store(&g_stopping, false);
}

/* what from the registered source: 0 and a malloc'ed body, else ERR_*. */
static int fetch(const char *what, char **body, size_t *n)
{
	pthread_mutex_lock(&g_mu);
	dashboard_source_fn fn = g_source;
	void *arg = g_source_arg;
	pthread_mutex_unlock(&g_mu);
	*body = NULL;
	*n = 0;
	if (!fn)
		return err_set(ERR_NOTFOUND, "metrics are not available yet");
	return fn(arg, what, body, n);
}

void dashboard_shutdown(void)
{
	atomic_store(&g_stopping, true);
}

int dashboard_route(const char *url)
{
	if (!url)
		return DASH_NONE;
	if (!strcmp(url, "/metrics"))
		return DASH_METRICS;
	if (!strcmp(url, "/metrics.json"))
		return DASH_METRICS_JSON;
	if (!strcmp(url, "/dashboard") || !strcmp(url, "/dashboard/"))
		return DASH_PAGE;
	if (!strcmp(url, "/dashboard/events"))
		return DASH_EVENTS;
	if (!strcmp(url, "/trace"))
		return DASH_TRACE;
	return DASH_NONE;
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* The peer closed its side (EOF) or the socket failed. */
static bool peer_gone(int fd)
{
	if (fd < 0)
		return false;
	char b;
	ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static int conn_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

static struct MHD_Response *from_string(char *s, size_t n)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(n, s, MHD_RESPMEM_MUST_FREE);
	if (!r)
		free(s);
	return r;
}

static struct MHD_Response *text(const char *body, const char *type, unsigned status,
				 unsigned *out_status)
{
	char *s = strdup(body);
	if (!s)
		return NULL;
	struct MHD_Response *r = from_string(s, strlen(s));
	if (r)
		MHD_add_response_header(r, "Content-Type", type);
	*out_status = status;
	return r;
}

static char *snapshot_json(void)
{
	char *s;
	size_t n;
	return fetch("metrics.json", &s, &n) ? NULL : s;
}

/* --- SSE --------------------------------------------------------------------- */

struct sse {
	int fd;
	int64_t next_ms;
	char *frame;
	size_t n, off;
};

static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct sse *s = cls;
	while (s->off >= s->n) {
		free(s->frame);
		s->frame = NULL;
		s->n = s->off = 0;
		while (mono_ms() < s->next_ms) {
			if (atomic_load(&g_stopping) || peer_gone(s->fd))
				return MHD_CONTENT_READER_END_OF_STREAM;
			int64_t left = s->next_ms - mono_ms();
			sleep_ms(left > 100 ? 100 : left < 1 ? 1 : (int)left);
		}
		if (atomic_load(&g_stopping))
			return MHD_CONTENT_READER_END_OF_STREAM;
		s->next_ms = mono_ms() + SSE_INTERVAL_MS;
		char *json = snapshot_json();
		if (!json)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		size_t k = strlen(json);
		s->frame = malloc(k + 16);
		if (!s->frame) {
			free(json);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		/* a compact JSON dump has no raw newline: one data line per event */
		s->n = (size_t)snprintf(s->frame, k + 16, "data: %s\n\n", json);
		free(json);
	}
	size_t n = s->n - s->off;
	if (n > max)
		n = max;
	memcpy(buf, s->frame + s->off, n);
	s->off += n;
	return (ssize_t)n;
}

static void sse_free(void *cls)
{
	struct sse *s = cls;
	free(s->frame);
	free(s);
}

/* --- /trace -------------------------------------------------------------------- */

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct MHD_Response *trace_answer(struct MHD_Connection *c, unsigned *status)
{
	const char *arg = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "seconds");
	double secs = 2;
	if (arg) {
		char *end;
		secs = strtod(arg, &end);
		if (end == arg || *end || !(secs >= 0 && secs <= DASHBOARD_TRACE_MAX_S))
			return text("{\"error\":{\"message\":\"seconds must be a number 0..60\","
				    "\"type\":\"invalid_request_error\",\"param\":\"seconds\"}}\n",
				    "application/json", 400, status);
	}
	int64_t since = mono_ns();
	int64_t until_ms = mono_ms() + (int64_t)(secs * 1000);
	int fd = conn_fd(c);
	while (mono_ms() < until_ms) {
		if (atomic_load(&g_stopping) || peer_gone(fd))
			break;
		sleep_ms(50);
	}
	char *s = NULL, what[48];
	size_t n = 0;
	snprintf(what, sizeof what, "trace %" PRId64, since);
	if (fetch(what, &s, &n))
		return text("{\"error\":{\"message\":\"tracing is not available\"}}\n",
			    "application/json", 503, status);
	struct MHD_Response *r = from_string(s, n);
	if (r)
		MHD_add_response_header(r, "Content-Type", "application/json");
	*status = 200;
	return r;
}

struct MHD_Response *dashboard_response(struct MHD_Connection *c, int route, unsigned *status)
{
	*status = 200;
	switch (route) {
	case DASH_METRICS: {
		char *s = NULL;
		size_t n = 0;
		if (fetch("metrics", &s, &n))
			return text("metrics are not available now\n", "text/plain; charset=utf-8", 503,
				    status);
		struct MHD_Response *r = from_string(s, n);
		if (r)
			MHD_add_response_header(r, "Content-Type",
						"text/plain; version=0.0.4; charset=utf-8");
		return r;
	}
	case DASH_METRICS_JSON: {
		char *s = snapshot_json();
		if (!s)
			return text("metrics are not available now\n", "text/plain; charset=utf-8", 503,
				    status);
		struct MHD_Response *r = from_string(s, strlen(s));
		if (r)
			MHD_add_response_header(r, "Content-Type", "application/json");
		return r;
	}
	case DASH_PAGE: {
		struct MHD_Response *r = MHD_create_response_from_buffer(
			strlen(dashboard_page_html), (void *)dashboard_page_html,
			MHD_RESPMEM_PERSISTENT);
		if (r) {
			MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
			MHD_add_response_header(r, "Cache-Control", "no-cache");
		}
		return r;
	}
	case DASH_EVENTS: {
		struct sse *s = calloc(1, sizeof *s);
		if (!s)
			return NULL;
		s->fd = conn_fd(c);
		s->next_ms = 0; /* the first snapshot at once */
		struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096,
									   sse_reader, s, sse_free);
		if (!r) {
			free(s);
			return NULL;
		}
		MHD_add_response_header(r, "Content-Type", "text/event-stream");
		MHD_add_response_header(r, "Cache-Control", "no-cache");
		MHD_add_response_header(r, "X-Accel-Buffering", "no");
		return r;
	}
	case DASH_TRACE:
		return trace_answer(c, status);
	default:
		return text("not found\n", "text/plain; charset=utf-8", 404, status);
	}
}

/* --- client ---------------------------------------------------------------------- */

/* "http://HOST:PORT" or "http://[V6]:PORT" -> host, port */
static int parse_url(const char *url, char *host, size_t hcap, char *port, size_t pcap)
{
	if (strncmp(url, "http://", 7))
		return err_set(ERR_INVAL, "http: '%s' is not an http:// URL", url);
	const char *h = url + 7, *p;
	size_t hn;
	if (*h == '[') {
		const char *e = strchr(h, ']');
		if (!e || e[1] != ':')
			return err_set(ERR_INVAL, "http: bad URL '%s'", url);
		h++;
		hn = (size_t)(e - h);
		p = e + 2;
	} else {
		const char *e = strrchr(h, ':');
		if (!e)
			return err_set(ERR_INVAL, "http: no port in '%s'", url);
		hn = (size_t)(e - h);
		p = e + 1;
	}
	size_t pn = strcspn(p, "/");
	if (!hn || hn >= hcap || !pn || pn >= pcap)
		return err_set(ERR_INVAL, "http: bad URL '%s'", url);
	memcpy(host, h, hn);
	host[hn] = 0;
	memcpy(port, p, pn);
	port[pn] = 0;
	return 0;
}

int dashboard_fetch(const char *name, const char *path, int timeout_s, char **body,
		    size_t *len, int *http_status)
{
	char dir[RUNDIR_PATH_MAX], file[RUNDIR_PATH_MAX], url[320] = "";
	int rc = rundir_resolve(name, dir, sizeof dir);
	if (rc)
		return rc;
	if ((rc = rundir_path(dir, RUNDIR_HTTP, file, sizeof file)))
		return rc;
	FILE *f = fopen(file, "r");
	if (!f)
		return err_set(ERR_NOTFOUND, "cluster '%s' serves no HTTP (no %s: not running, or "
			       "started with --no-http)", name, file);
	if (!fgets(url, sizeof url, f))
		url[0] = 0;
	fclose(f);
	url[strcspn(url, "\r\n")] = 0;
	char host[256], port[16];
	if ((rc = parse_url(url, host, sizeof host, port, sizeof port)))
		return rc;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
	if (getaddrinfo(host, port, &hints, &ai) || !ai)
		return err_set(ERR_IO, "http: cannot resolve %s", host);
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) {
		int e = errno;
		freeaddrinfo(ai);
		if (fd >= 0)
			close(fd);
		return err_set(ERR_IO, "http: cannot connect to %s: %s", url, strerror(e));
	}
	freeaddrinfo(ai);
	struct timeval tv = { .tv_sec = timeout_s > 0 ? timeout_s : 10 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	const char *key = getenv("UNICORN_API_KEY");
	char req[1024];
	/* HTTP/1.0: the answer is not chunked and ends when the server closes */
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %s\r\n%s%s%sAccept: */*\r\n\r\n",
			 path, host, key && *key ? "Authorization: Bearer " : "",
			 key && *key ? key : "", key && *key ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof req || send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
		close(fd);
		return err_set(ERR_IO, "http: cannot send the request to %s", url);
	}
	size_t cap = 65536, got = 0;
	char *b = malloc(cap);
	if (!b) {
		close(fd);
		return err_set(ERR_NOMEM, "http: out of memory");
	}
	for (;;) {
		if (got + 4096 > cap) {
			if (cap > (256u << 20)) {
				free(b);
				close(fd);
				return err_set(ERR_RANGE, "http: answer larger than 256 MiB");
			}
			char *nb = realloc(b, cap * 2);
			if (!nb) {
				free(b);
				close(fd);
				return err_set(ERR_NOMEM, "http: out of memory");
			}
			b = nb;
			cap *= 2;
		}
		ssize_t k = recv(fd, b + got, cap - got - 1, 0);
		if (k == 0)
			break;
		if (k < 0) {
			int e = errno;
			free(b);
			close(fd);
			if (e == EAGAIN || e == EWOULDBLOCK)
				return err_set(ERR_TIMEOUT, "http: no answer from %s within %d s", url,
					       timeout_s);
			return err_set(ERR_IO, "http: %s: %s", url, strerror(e));
		}
		got += (size_t)k;
	}
	close(fd);
	b[got] = 0;
	int st = 0;
	char *hdr_end = strstr(b, "\r\n\r\n");
	if (sscanf(b, "HTTP/%*d.%*d %d", &st) != 1 || !hdr_end) {
		free(b);
		return err_set(ERR_INVAL, "http: %s: not an HTTP answer", url);
	}
	size_t off = (size_t)(hdr_end + 4 - b);
	memmove(b, b + off, got - off + 1);
	*body = b;
	*len = got - off;
	*http_status = st;
	return 0;
}
