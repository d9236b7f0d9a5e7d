/* hubserver: see hubserver.h. */
#include "tests/hubserver.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/sha256.h"

static pthread_mutex_t hs_mu = PTHREAD_MUTEX_INITIALIZER;

unsigned char *hs_bytes(size_t n, unsigned seed)
{
	unsigned char *p = malloc(n ? n : 1);
	cr_assert_not_null(p);
	uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)(x >> 24);
	}
	return p;
}

struct hs_file *hs_add(struct hubserver *s, const char *repo, const char *name, const void *data,
		       size_t len)
{
	cr_assert_lt(s->nfiles, HS_MAX_FILES);
	struct hs_file *f = &s->files[s->nfiles++];
	memset(f, 0, sizeof *f);
	snprintf(f->repo, sizeof f->repo, "%s", repo);
	snprintf(f->name, sizeof f->name, "%s", name);
	f->data = malloc(len ? len : 1);
	cr_assert_not_null(f->data);
	memcpy(f->data, data, len);
	f->len = len;
	struct hub_sha256 *h = hub_sha256_new();
	cr_assert_not_null(h);
	cr_assert_eq(hub_sha256_update(h, data, len), 0);
	cr_assert_eq(hub_sha256_final(h, f->sha), 0);
	hub_sha256_free(h);
	return f;
}

static void log_req(struct hubserver *s, struct MHD_Connection *c, const char *url)
{
	const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	pthread_mutex_lock(&hs_mu);
	if (s->nlog < HS_MAX_LOG)
		snprintf(s->log[s->nlog++], sizeof s->log[0], "GET %s range=%s auth=%s", url,
			 range ? range : "-", auth ? auth : "-");
	pthread_mutex_unlock(&hs_mu);
}

int hs_count(struct hubserver *s, const char *a, const char *b)
{
	int n = 0;
	pthread_mutex_lock(&hs_mu);
	for (size_t i = 0; i < s->nlog; i++)
		if ((!a || strstr(s->log[i], a)) && (!b || strstr(s->log[i], b)))
			n++;
	pthread_mutex_unlock(&hs_mu);
	return n;
}

const char *hs_dump(struct hubserver *s)
{
	static char buf[HS_MAX_LOG * 330];
	size_t len = 0;
	buf[0] = 0;
	pthread_mutex_lock(&hs_mu);
	for (size_t i = 0; i < s->nlog && len + 330 < sizeof buf; i++)
		len += (size_t)snprintf(buf + len, sizeof buf - len, "%s\n", s->log[i]);
	pthread_mutex_unlock(&hs_mu);
	return buf;
}

static enum MHD_Result send_buf(struct MHD_Connection *c, unsigned status, const char *body,
				const char *ctype, const char *h1, const char *v1, const char *h2,
				const char *v2)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body,
								 MHD_RESPMEM_MUST_COPY);
	MHD_add_response_header(r, "Content-Type", ctype);
	if (h1)
		MHD_add_response_header(r, h1, v1);
	if (h2)
		MHD_add_response_header(r, h2, v2);
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static bool authorized(struct hubserver *s, struct MHD_Connection *c, const char *repo)
{
	if (!s->gated[0] || strcmp(repo, s->gated))
		return true;
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	char want[96];
	snprintf(want, sizeof want, "Bearer %s", s->token);
	return auth && !strcmp(auth, want);
}

static bool repo_known(struct hubserver *s, const char *repo)
{
	if (s->gated[0] && !strcmp(repo, s->gated))
		return true;
	for (size_t i = 0; i < s->nfiles; i++)
		if (!strcmp(s->files[i].repo, repo))
			return true;
	return false;
}

struct cdn_body {
	const struct hs_file *f;
	size_t start, stop; /* bytes [start, stop) are sent, then the connection breaks if stop < end */
	size_t end;
};

static ssize_t cdn_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct cdn_body *b = cls;
	size_t at = b->start + (size_t)pos;
	if (at >= b->stop)
		return at >= b->end ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
	size_t n = b->stop - at < max ? b->stop - at : max;
	memcpy(buf, b->f->data + at, n);
	return (ssize_t)n;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_len, void **state)
{
	(void)version;
	(void)upload;
	(void)upload_len;
	(void)state;
	struct hubserver *s = cls;
	if (strcmp(method, "GET"))
		return send_buf(c, 405, "", "text/plain", NULL, NULL, NULL, NULL);
	log_req(s, c, url);
	static const char api[] = "/api/models/";
	if (!strncmp(url, api, sizeof api - 1)) {
		const char *repo = url + sizeof api - 1;
		if (!authorized(s, c, repo))
			return send_buf(c, 401, "{\"error\":\"Access to this repo is restricted\"}",
					"application/json", NULL, NULL, NULL, NULL);
		if (!repo_known(s, repo))
			return send_buf(c, 404, "{\"error\":\"Repository not found\"}", "application/json",
					NULL, NULL, NULL, NULL);
		char body[8192];
		size_t len = (size_t)snprintf(body, sizeof body, "{\"id\":\"%s\",\"siblings\":[", repo);
		bool first = true;
		for (size_t i = 0; i < s->nfiles; i++)
			if (!strcmp(s->files[i].repo, repo)) {
				len += (size_t)snprintf(body + len, sizeof body - len, "%s{\"rfilename\":\"%s\"}",
							first ? "" : ",", s->files[i].name);
				first = false;
			}
		snprintf(body + len, sizeof body - len, "]}");
		return send_buf(c, 200, body, "application/json", NULL, NULL, NULL, NULL);
	}
	static const char cdn[] = "/cdn/";
	if (!strncmp(url, cdn, sizeof cdn - 1)) {
		size_t idx = (size_t)atoi(url + sizeof cdn - 1);
		if (idx >= s->nfiles)
			return send_buf(c, 404, "no such object", "text/plain", NULL, NULL, NULL, NULL);
		struct hs_file *f = &s->files[idx];
		size_t start = 0;
		const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
		unsigned status = 200;
		if (range) {
			cr_assert(!strncmp(range, "bytes=", 6), "odd Range: %s", range);
			start = (size_t)strtoull(range + 6, NULL, 10);
			if (start >= f->len) {
				char cr[64];
				snprintf(cr, sizeof cr, "bytes */%zu", f->len);
				return send_buf(c, 416, "", "text/plain", "Content-Range", cr, NULL, NULL);
			}
			status = 206;
		}
		struct cdn_body *b = malloc(sizeof *b);
		cr_assert_not_null(b);
		b->f = f;
		b->start = start;
		b->end = f->len;
		b->stop = f->len;
		pthread_mutex_lock(&hs_mu);
		if (f->cuts > 0 && f->cut_at > start) {
			f->cuts--;
			b->stop = f->cut_at;
		}
		pthread_mutex_unlock(&hs_mu);
		struct MHD_Response *r = MHD_create_response_from_callback(f->len - start, 65536, cdn_read,
									   b, free);
		MHD_add_response_header(r, "Content-Type", "application/octet-stream");
		if (status == 206) {
			char cr[96];
			snprintf(cr, sizeof cr, "bytes %zu-%zu/%zu", start, f->len - 1, f->len);
			MHD_add_response_header(r, "Content-Range", cr);
		}
		if (f->sum == HS_ETAG || f->sum == HS_ETAG_WRONG) {
			char et[80];
			snprintf(et, sizeof et, "\"%s\"", f->sha);
			if (f->sum == HS_ETAG_WRONG)
				et[1] = et[1] == '0' ? '1' : '0';
			MHD_add_response_header(r, "ETag", et);
		} else {
			MHD_add_response_header(r, "ETag", "\"not-a-sha256\"");
		}
		enum MHD_Result ret = MHD_queue_response(c, status, r);
		MHD_destroy_response(r);
		return ret;
	}
	/* /ORG/NAME/resolve/main/FILE */
	const char *res = strstr(url, "/resolve/main/");
	if (res && url[0] == '/') {
		char repo[128];
		snprintf(repo, sizeof repo, "%.*s", (int)(res - url - 1), url + 1);
		const char *file = res + strlen("/resolve/main/");
		if (!authorized(s, c, repo))
			return send_buf(c, 401, "{\"error\":\"Access to this repo is restricted\"}",
					"application/json", NULL, NULL, NULL, NULL);
		for (size_t i = 0; i < s->nfiles; i++) {
			struct hs_file *f = &s->files[i];
			if (strcmp(f->repo, repo) || strcmp(f->name, file))
				continue;
			char loc[64], et[80], sz[32];
			snprintf(loc, sizeof loc, "/cdn/%zu", i);
			snprintf(sz, sizeof sz, "%zu", f->len);
			if (f->sum == HS_LINKED || f->sum == HS_WRONG) {
				snprintf(et, sizeof et, "\"%s\"", f->sha);
				if (f->sum == HS_WRONG)
					et[1] = et[1] == '0' ? '1' : '0';
				struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"",
											 MHD_RESPMEM_PERSISTENT);
				MHD_add_response_header(r, "Location", loc);
				MHD_add_response_header(r, "X-Linked-Etag", et);
				MHD_add_response_header(r, "X-Linked-Size", sz);
				enum MHD_Result ret = MHD_queue_response(c, 302, r);
				MHD_destroy_response(r);
				return ret;
			}
			return send_buf(c, 302, "", "text/plain", "Location", loc, NULL, NULL);
		}
		return send_buf(c, 404, "{\"error\":\"Entry not found\"}", "application/json", NULL, NULL,
				NULL, NULL);
	}
	return send_buf(c, 404, "not found", "text/plain", NULL, NULL, NULL, NULL);
}

void hs_start(struct hubserver *s)
{
	memset(s, 0, sizeof *s);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0,
						NULL, NULL, answer, s, MHD_OPTION_SOCK_ADDR, &a,
						MHD_OPTION_END);
	cr_assert_not_null(d, "hubserver: MHD_start_daemon failed");
	const union MHD_DaemonInfo *i = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	cr_assert_not_null(i);
	s->daemon = d;
	s->port = i->port;
	snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
}

void hs_stop(struct hubserver *s)
{
	if (s->daemon)
		MHD_stop_daemon(s->daemon);
	s->daemon = NULL;
	for (size_t i = 0; i < s->nfiles; i++)
		free(s->files[i].data);
	s->nfiles = 0;
}
