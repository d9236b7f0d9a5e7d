/* http: libmicrohttpd server, job queue and SSE streaming (see http.h). */
#include "api/http.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "api/dashboard.h"
#include "api/gate.h"
#include "common/err.h"

enum { JOB_QUEUED = 0, JOB_TAKEN, JOB_ACCEPTED, JOB_DONE, JOB_FAILED };

struct http {
	struct MHD_Daemon *d;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct http_job *head, *tail;
	uint32_t n_jobs;          /* jobs alive (queued or running) */
	int health;
	bool stopping;
	char *api_key, *cors, *model;
	uint32_t n_ctx;
	void (*o_on_job)(void *arg); /* http_opts.on_job */
	void *o_on_job_arg;
	int (*o_health)(void *arg, struct http_load *load); /* http_opts.health */
	void *o_health_arg;
	bool (*o_draining)(void *arg); /* http_opts.draining */
	void *o_draining_arg;
	char url[300];
	/* the gate (docs/http.md "Connections and limits"): our listening
	 * socket, its thread, and the connections libmicrohttpd holds */
	int lfd, wake[2];
	pthread_t gate_th;
	bool gate_on;
	uint32_t max_waiting;
	pthread_mutex_t gmu;      /* below */
	uint32_t n_active, n_started;
	struct addr_count *addrs; /* [HTTP_MAX_CONNECTIONS + HTTP_RESERVED_CONNECTIONS] */
	size_t body_bytes;        /* request body bytes held now */
	size_t body_freed;        /* since the last malloc_trim */
};

/* Connections libmicrohttpd holds from one address. */
struct addr_count {
	unsigned char a[17];      /* family byte + the address (4 or 16 bytes) */
	uint32_t n;
};
#define N_ADDRS (HTTP_MAX_CONNECTIONS + HTTP_RESERVED_CONNECTIONS)

/* Per connection. */
struct conn {
	struct http *h;
	int route;
	char *body;
	size_t n_body, cap_body;
	bool too_large, over_total;
	int64_t t_body;           /* when the body started (ms) */
	bool probed;              /* streaming: a comment sent after the client's EOF */
	int fd;
	struct http_job *job;
	int obs_route;            /* enum dashboard_route when route == R_OBS */
	/* streaming */
	char id[48];
	int64_t created;
	char *frame;              /* SSE bytes not yet handed to MHD */
	size_t n_frame, off_frame;
	size_t sent;              /* bytes of job->out already framed */
	uint32_t lp_sent;         /* job->lp entries already framed */
	uint32_t chunk_sent;      /* job->chunks already framed (custom answers) */
	int phase;                /* 0 role chunk, 1 text, 2 usage, 3 [DONE], 4 end */
};

enum route {
	R_NONE = 0, R_CHAT, R_COMPLETIONS, R_MODELS, R_HEALTH, R_TOKENIZE, R_DETOKENIZE,
	R_OBS,                    /* /metrics, /dashboard, /trace...: api/dashboard.c */
};

static void job_unref_locked(struct http *h, struct http_job *j)
{
	if (--j->refs > 0)
		return;
	oai_req_free(&j->req);
	free(j->text);
	free(j->ids);
	free(j->out);
	free(j->result);
	for (uint32_t i = 0; i < j->n_chunks; i++)
		free(j->chunks[i]);
	free(j->chunks);
	free(j->choices);
	for (uint32_t i = 0; i < j->n_lp; i++)
		oai_lp_tok_free(&j->lp[i]);
	free(j->lp);
	free(j);
	h->n_jobs--;
	if (h->o_on_job) /* the owner's count of jobs in flight changed */
		h->o_on_job(h->o_on_job_arg);
}

/* --- the loop's side ------------------------------------------------------ */

struct http_job *http_take(struct http *h)
{
	pthread_mutex_lock(&h->mu);
	struct http_job *j = h->head;
	if (j) {
		h->head = j->next;
		if (!h->head)
			h->tail = NULL;
		j->next = NULL;
		j->state = JOB_TAKEN;
	}
	pthread_mutex_unlock(&h->mu);
	return j;
}

void http_job_fail(struct http *h, struct http_job *j, const struct oai_err *e)
{
	pthread_mutex_lock(&h->mu);
	j->err = *e;
	j->state = JOB_FAILED;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

void http_job_refuse(struct http *h, struct http_job *j, int status, const char *type,
		     const char *param, const char *code, const char *msg)
{
	struct oai_err e;
	oai_err_set(&e, status, type, param, code, "%s", msg);
	http_job_fail(h, j, &e);
}

void http_job_result(struct http *h, struct http_job *j, char *json)
{
	pthread_mutex_lock(&h->mu);
	free(j->result);
	j->result = json;
	j->state = JOB_DONE;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

void http_job_accept(struct http *h, struct http_job *j, uint32_t prompt_tokens)
{
	pthread_mutex_lock(&h->mu);
	j->prompt_tokens = prompt_tokens;
	j->state = JOB_ACCEPTED;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

int http_job_emit(struct http *h, struct http_job *j, const char *text, size_t len)
{
	return http_job_emit_lp(h, j, text, len, NULL, 0);
}

int http_job_emit_lp(struct http *h, struct http_job *j, const char *text, size_t len,
		     struct oai_lp_tok *lp, uint32_t n_lp)
{
	if (!len && !n_lp)
		return 0;
	int rc = 0;
	pthread_mutex_lock(&h->mu);
	if (n_lp && j->n_lp + n_lp > j->cap_lp) {
		uint32_t cap = (j->n_lp + n_lp) * 2;
		struct oai_lp_tok *p = realloc(j->lp, cap * sizeof *p);
		if (!p) {
			for (uint32_t i = 0; i < n_lp; i++)
				oai_lp_tok_free(&lp[i]);
			rc = err_set(ERR_NOMEM, "http: out of memory");
			goto out;
		}
		j->lp = p;
		j->cap_lp = cap;
	}
	/* taken over: the caller's entries are left empty */
	if (n_lp)
		memcpy(j->lp + j->n_lp, lp, n_lp * sizeof *lp);
	j->n_lp += n_lp;
	if (n_lp)
		memset(lp, 0, n_lp * sizeof *lp);
	if (!len) {
		pthread_cond_broadcast(&h->cv);
		goto out;
	}
	if (j->n_out + len + 1 > j->cap_out) {
		size_t cap = (j->n_out + len + 1) * 2;
		char *p = realloc(j->out, cap);
		if (!p) {
			rc = err_set(ERR_NOMEM, "http: out of memory");
			goto out;
		}
		j->out = p;
		j->cap_out = cap;
	}
	memcpy(j->out + j->n_out, text, len);
	j->n_out += len;
	j->out[j->n_out] = 0;
	pthread_cond_broadcast(&h->cv);
out:
	pthread_mutex_unlock(&h->mu);
	return rc;
}

int http_job_chunk(struct http *h, struct http_job *j, char *choice_json)
{
	if (!choice_json)
		return err_set(ERR_NOMEM, "http: out of memory");
	int rc = 0;
	pthread_mutex_lock(&h->mu);
	if (j->n_chunks == j->cap_chunks) {
		uint32_t cap = j->cap_chunks ? j->cap_chunks * 2 : 16;
		char **p = realloc(j->chunks, cap * sizeof *p);
		if (!p) {
			free(choice_json);
			rc = err_set(ERR_NOMEM, "http: out of memory");
			goto out;
		}
		j->chunks = p;
		j->cap_chunks = cap;
	}
	j->chunks[j->n_chunks++] = choice_json;
	pthread_cond_broadcast(&h->cv);
out:
	pthread_mutex_unlock(&h->mu);
	return rc;
}

void http_job_choices(struct http *h, struct http_job *j, char *choices_json)
{
	pthread_mutex_lock(&h->mu);
	free(j->choices);
	j->choices = choices_json;
	pthread_mutex_unlock(&h->mu);
}

void http_job_end(struct http *h, struct http_job *j, const char *finish,
		  uint32_t completion_tokens)
{
	pthread_mutex_lock(&h->mu);
	j->finish = finish;
	j->completion_tokens = completion_tokens;
	j->state = JOB_DONE;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

bool http_job_gone(struct http *h, struct http_job *j)
{
	pthread_mutex_lock(&h->mu);
	bool g = j->gone;
	pthread_mutex_unlock(&h->mu);
	return g;
}

void http_job_release(struct http *h, struct http_job *j)
{
	pthread_mutex_lock(&h->mu);
	job_unref_locked(h, j);
	pthread_mutex_unlock(&h->mu);
}

void http_set_health(struct http *h, int health)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->health = health;
	pthread_mutex_unlock(&h->mu);
}

uint32_t http_jobs(struct http *h)
{
	pthread_mutex_lock(&h->mu);
	uint32_t n = h->n_jobs;
	pthread_mutex_unlock(&h->mu);
	return n;
}

const char *http_url(const struct http *h)
{
	return h->url;
}

/* --- answers ---------------------------------------------------------------- */

static void add_common_headers(struct http *h, struct MHD_Response *r, const char *type)
{
	MHD_add_response_header(r, "Content-Type", type);
	if (h->cors) {
		MHD_add_response_header(r, "Access-Control-Allow-Origin", h->cors);
		MHD_add_response_header(r, "Vary", "Origin");
	}
}

static enum MHD_Result send_text(struct MHD_Connection *c, struct http *h, unsigned status,
				 char *body, const char *type)
{
	if (!body)
		return MHD_NO;
	struct MHD_Response *r =
		MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	add_common_headers(h, r, type);
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, struct http *h, unsigned status,
				 char *json)
{
	return send_text(c, h, status, json, "application/json");
}

static enum MHD_Result send_err(struct MHD_Connection *c, struct http *h,
				const struct oai_err *e)
{
	char *j = oai_error_json(e);
	if (!j)
		return MHD_NO;
	struct MHD_Response *r =
		MHD_create_response_from_buffer(strlen(j), j, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(j);
		return MHD_NO;
	}
	add_common_headers(h, r, "application/json");
	if (e->status == 401)
		MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
	if (e->status == 405)
		MHD_add_response_header(r, "Allow", "GET, POST, OPTIONS");
	if (e->status == 429 || e->status == 503)
		MHD_add_response_header(r, "Retry-After", "1");
	enum MHD_Result ret = MHD_queue_response(c, (unsigned)e->status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *c, struct http *h, int status,
				  const char *type, const char *code, const char *msg)
{
	struct oai_err e;
	oai_err_set(&e, status, type, NULL, code, "%s", msg);
	return send_err(c, h, &e);
}

/* The connection failed (reset: the client is gone). An EOF is not that:
 * a client may shut down its sending side once its request is out (curl and
 * proxies do) and still read the answer (RFC 9112 9.6); a client that
 * closed for good is seen when the answer is written (a stream probes at
 * once, see reader). */
static bool peer_gone(int fd)
{
	if (fd < 0)
		return false;
	char b;
	ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

/* The client sent EOF (half-closed or gone: only a write tells). */
static bool peer_eof(int fd)
{
	if (fd < 0)
		return false;
	char b;
	return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static void timed_wait(struct http *h, int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)ms * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_cond_timedwait(&h->cv, &h->mu, &ts);
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait (mutex held) until the job leaves the states <= until_state; false
 * when the client went away or the server stops. */
static bool wait_job(struct conn *cn, int until_state, int64_t deadline_ms)
{
	struct http *h = cn->h;
	while (cn->job->state <= until_state) {
		if (h->stopping || peer_gone(cn->fd))
			return false;
		if (deadline_ms && mono_ms() > deadline_ms)
			return false;
		timed_wait(h, 100);
	}
	return true;
}

static void make_id(struct conn *cn, const char *prefix)
{
	unsigned char r[12];
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		for (size_t i = 0; i < sizeof r; i++)
			r[i] = (unsigned char)(mono_ms() >> (i % 8));
	int k = snprintf(cn->id, sizeof cn->id, "%s", prefix);
	for (size_t i = 0; i < sizeof r && k + 2 < (int)sizeof cn->id; i++)
		k += snprintf(cn->id + k, sizeof cn->id - (size_t)k, "%02x", r[i]);
	cn->created = (int64_t)time(NULL);
}

/* A generation that ran past its time limit (body "timeout" or the server's
 * --request-timeout): 408, OpenAI-style error object. */
static void timeout_err(struct oai_err *e)
{
	oai_err_set(e, 408, "timeout", NULL, "request_timeout",
		    "the request ran longer than its time limit and was stopped (the 'timeout' "
		    "field, capped by the server's --request-timeout)");
}

/* A generation whose end is an error of its own, not the server's: "timeout"
 * (timeout_err) or "image" (an image of the request could not be encoded
 * when it ran: 503, the same request again works once its pixels are back).
 * e may be NULL to ask only. */
static bool finish_err(const char *finish, struct oai_err *e)
{
	if (!finish)
		return false;
	if (!strcmp(finish, "timeout")) {
		if (e)
			timeout_err(e);
		return true;
	}
	if (!strcmp(finish, "image")) {
		if (e)
			oai_err_set(e, 503, "server_error", NULL, "image_unavailable",
				    "an image of this request could not be encoded when the request ran: its "
				    "pixels were evicted from the server's image store (64 newer images came in "
				    "while it waited) or could not be read; send the request again");
		return true;
	}
	return false;
}

/* SSE producer: called by MHD whenever it can send; blocks (on the condition
 * variable, watching the socket) until there is something to send. */
static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct conn *cn = cls;
	struct http *h = cn->h;
	struct http_job *j = cn->job;
	pthread_mutex_lock(&h->mu);
	while (cn->off_frame >= cn->n_frame) {
		free(cn->frame);
		cn->frame = NULL;
		cn->n_frame = cn->off_frame = 0;
		char *json = NULL;
		bool want = false;
		int kind = j->req.kind;
		if (cn->phase == 0) {
			cn->phase = 1;
			if (kind == OAI_CHAT) {
				json = oai_chunk_json(kind, cn->id, cn->created, h->model, "", 0, true,
						      NULL);
				want = true;
			}
		} else if (cn->phase == 1 && j->custom && cn->chunk_sent < j->n_chunks) {
			json = oai_chunk_wrap(kind, cn->id, cn->created, h->model, j->chunks[cn->chunk_sent++]);
			want = true;
		} else if (cn->phase == 1 && j->custom && j->state == JOB_DONE && j->finish &&
			   !finish_err(j->finish, NULL) && strcmp(j->finish, "error")) {
			/* the relay's chunks carried the finish reasons */
			cn->phase = j->req.include_usage ? 2 : 3;
			continue;
		} else if (cn->phase == 1 && !j->custom && (j->n_out > cn->sent || j->n_lp > cn->lp_sent)) {
			/* a chunk carries the logprobs of the tokens whose text it holds */
			json = oai_chunk_json_lp(kind, cn->id, cn->created, h->model, j->out + cn->sent,
						 j->n_out - cn->sent, false, NULL, j->lp + cn->lp_sent,
						 j->n_lp - cn->lp_sent);
			cn->sent = j->n_out;
			cn->lp_sent = j->n_lp;
			want = true;
		} else if (cn->phase == 1 && j->state == JOB_DONE && finish_err(j->finish, NULL)) {
			/* the status line is long sent: the error travels as an
			 * event of its own, then [DONE] (no finish chunk, no usage) */
			struct oai_err e;
			finish_err(j->finish, &e);
			json = oai_error_json(&e);
			cn->phase = 3;
			want = true;
		} else if (cn->phase == 1 && j->state == JOB_DONE) {
			json = oai_chunk_json(kind, cn->id, cn->created, h->model,
					      kind == OAI_CHAT ? NULL : "", 0, false, j->finish);
			cn->phase = j->req.include_usage ? 2 : 3;
			want = true;
		} else if (cn->phase == 2) {
			json = oai_usage_chunk_json(kind, cn->id, cn->created, h->model,
						    j->prompt_tokens, j->completion_tokens);
			cn->phase = 3;
			want = true;
		} else if (cn->phase == 3) {
			cn->phase = 4;
			cn->frame = oai_sse_frame(NULL, &cn->n_frame);
			if (!cn->frame)
				goto fail;
			continue;
		} else if (cn->phase == 4) {
			pthread_mutex_unlock(&h->mu);
			return MHD_CONTENT_READER_END_OF_STREAM;
		} else {
			if (h->stopping || peer_gone(cn->fd))
				goto fail;
			if (!cn->probed && peer_eof(cn->fd)) {
				/* EOF: an SSE comment tells a client that is gone (its
				 * kernel answers with a reset, peer_gone's next look) from
				 * one that only half-closed and still reads */
				cn->probed = true;
				cn->frame = strdup(": \n\n");
				if (!cn->frame)
					goto fail;
				cn->n_frame = strlen(cn->frame);
				cn->off_frame = 0;
				continue;
			}
			timed_wait(h, 100);
			continue;
		}
		if (want) {
			if (!json)
				goto fail;
			cn->frame = oai_sse_frame(json, &cn->n_frame);
			free(json);
			if (!cn->frame)
				goto fail;
		}
	}
	size_t n = cn->n_frame - cn->off_frame;
	if (n > max)
		n = max;
	memcpy(buf, cn->frame + cn->off_frame, n);
	cn->off_frame += n;
	pthread_mutex_unlock(&h->mu);
	return (ssize_t)n;
fail:
	j->gone = true;
	pthread_mutex_unlock(&h->mu);
	return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* Give back a request's body buffer (and its bytes to the total). Once no
 * body is held and 64 MiB were freed since, the allocator returns its free
 * pages to the system: a storm of large bodies leaves no residue. */
static void body_drop(struct http *h, struct conn *cn)
{
	if (!cn->body && !cn->cap_body)
		return;
	free(cn->body);
	cn->body = NULL;
	pthread_mutex_lock(&h->gmu);
	h->body_bytes -= cn->cap_body;
	h->body_freed += cn->cap_body;
	bool trim = !h->body_bytes && h->body_freed >= (64u << 20);
	if (trim)
		h->body_freed = 0;
	pthread_mutex_unlock(&h->gmu);
	cn->cap_body = cn->n_body = 0;
	if (trim)
		malloc_trim(0);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)toe;
	/* an idle keep-alive connection (or a slow next request) is dropped
	 * after HTTP_IDLE_TIMEOUT_S */
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)HTTP_IDLE_TIMEOUT_S);
	struct conn *cn = *con_cls;
	if (!cn)
		return;
	struct http *h = cn->h;
	if (cn->job) {
		pthread_mutex_lock(&h->mu);
		if (cn->job->state != JOB_DONE && cn->job->state != JOB_FAILED)
			cn->job->gone = true; /* the loop cancels the generation */
		job_unref_locked(h, cn->job);
		pthread_mutex_unlock(&h->mu);
	}
	body_drop(h, cn);
	free(cn->frame);
	free(cn);
	*con_cls = NULL;
}

static int route_of(const char *url, const char **method_ok)
{
	static const struct {
		const char *path, *method;
		int route;
	} t[] = {
		{ "/v1/chat/completions", "POST", R_CHAT },
		{ "/chat/completions", "POST", R_CHAT },
		{ "/v1/completions", "POST", R_COMPLETIONS },
		{ "/completions", "POST", R_COMPLETIONS },
		{ "/v1/models", "GET", R_MODELS },
		{ "/models", "GET", R_MODELS },
		{ "/health", "GET", R_HEALTH },
		{ "/tokenize", "POST", R_TOKENIZE },
		{ "/detokenize", "POST", R_DETOKENIZE },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (!strcmp(url, t[i].path)) {
			*method_ok = t[i].method;
			return t[i].route;
		}
	return R_NONE;
}

static enum MHD_Result answer_models(struct MHD_Connection *c, struct http *h)
{
	json_t *o = json_pack("{s:s, s:[{s:s, s:s, s:i, s:s, s:i}]}", "object", "list", "data",
			      "id", h->model, "object", "model", "created", 0, "owned_by",
			      "unicorn", "context_length", (int)h->n_ctx);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return send_json(c, h, 200, s);
}

/* Observability endpoints (api/dashboard.c builds the answer; the
 * CORS headers are ours). */
static enum MHD_Result answer_obs(struct MHD_Connection *c, struct http *h, int route)
{
	unsigned status = 200;
	struct MHD_Response *r = dashboard_response(c, route, &status);
	if (!r)
		return send_error(c, h, 500, "server_error", NULL, "out of memory");
	if (h->cors) {
		MHD_add_response_header(r, "Access-Control-Allow-Origin", h->cors);
		MHD_add_response_header(r, "Vary", "Origin");
	}
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* The dashboard in a browser cannot send an Authorization header (nor can
 * its EventSource): with an API key, ?key=KEY is accepted on the
 * observability endpoints. */
static bool obs_key_ok(struct MHD_Connection *c, struct http *h)
{
	const char *k = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "key");
	if (!k || !h->api_key)
		return false;
	char bearer[600];
	if (snprintf(bearer, sizeof bearer, "Bearer %s", k) >= (int)sizeof bearer)
		return false;
	return oai_auth_ok(bearer, h->api_key);
}

/* What /health says now: the server's own state, or the owner's callback,
 * and the load when the owner knows it. */
static int health_now(struct http *h, struct http_load *load)
{
	memset(load, 0, sizeof *load);
	pthread_mutex_lock(&h->mu);
	int hs = h->health;
	pthread_mutex_unlock(&h->mu);
	if (h->o_health)
		hs = h->o_health(h->o_health_arg, load);
	return hs;
}

static const char *health_word(int hs)
{
	return hs == HTTP_READY      ? "ok"
	       : hs == HTTP_LOADING  ? "loading"
	       : hs == HTTP_DRAINING ? "draining"
				     : "degraded";
}

/* /health's body: {"status":WORD} and, when known, "running", "queued",
 * "slots" (docs/http.md). */
static void health_body(int hs, const struct http_load *l, char *out, size_t cap)
{
	if (l->known)
		snprintf(out, cap, "{\"status\":\"%s\",\"running\":%u,\"queued\":%u,\"slots\":%u}",
			 health_word(hs), l->running, l->queued, l->slots);
	else
		snprintf(out, cap, "{\"status\":\"%s\"}", health_word(hs));
}

static enum MHD_Result answer_health(struct MHD_Connection *c, struct http *h)
{
	struct http_load l;
	int hs = health_now(h, &l);
	char b[160];
	health_body(hs, &l, b, sizeof b);
	return send_json(c, h, hs == HTTP_READY ? 200 : 503, strdup(b));
}

/* Build the job from the body (parsing happens here, off the loop). */
static enum MHD_Result post(struct MHD_Connection *c, struct conn *cn)
{
	struct http *h = cn->h;
	struct oai_err e;
	struct http_job *j = calloc(1, sizeof *j);
	if (!j)
		return send_error(c, h, 500, "server_error", NULL, "out of memory");
	const char *body = cn->body ? cn->body : "";
	int rc;
	if (cn->route == R_CHAT || cn->route == R_COMPLETIONS) {
		j->kind = HTTP_JOB_GENERATE;
		rc = oai_parse(cn->route == R_CHAT ? OAI_CHAT : OAI_COMPLETION, body, cn->n_body,
			       &j->req, &e);
		/* several choices or tool calls: the relay builds the answer */
		j->custom = !rc && (j->req.n > 1 || j->req.tool_choice != OAI_TOOLS_OFF);
	} else if (cn->route == R_TOKENIZE) {
		j->kind = HTTP_JOB_TOKENIZE;
		rc = oai_parse_tokenize(body, cn->n_body, &j->text, &j->add_special, &e);
	} else {
		j->kind = HTTP_JOB_DETOKENIZE;
		rc = oai_parse_detokenize(body, cn->n_body, UINT32_MAX / 2, &j->ids, &j->n_ids, &e);
	}
	if (rc) {
		oai_req_free(&j->req);
		free(j->text);
		free(j->ids);
		free(j);
		return send_err(c, h, &e);
	}
	if (h->o_draining && h->o_draining(h->o_draining_arg)) {
		/* the cluster is leaving (unicorn down --drain, SIGTERM): a
		 * balancer retries this elsewhere (docs/scale.md) */
		oai_req_free(&j->req);
		free(j->text);
		free(j->ids);
		free(j);
		return send_error(c, h, 503, "server_error", "draining",
				  "this server is draining (shutting down); retry on another replica");
	}
	pthread_mutex_lock(&h->mu);
	if (h->health == HTTP_LOADING) {
		pthread_mutex_unlock(&h->mu);
		oai_req_free(&j->req);
		free(j->text);
		free(j->ids);
		free(j);
		return send_error(c, h, 503, "server_error", "model_loading",
				  "the model is still loading; try again shortly (GET /health)");
	}
	if (h->n_jobs >= HTTP_MAX_JOBS) {
		pthread_mutex_unlock(&h->mu);
		oai_req_free(&j->req);
		free(j->text);
		free(j->ids);
		free(j);
		return send_error(c, h, 429, "rate_limit_error", "queue_full",
				  "too many requests in flight; try again later");
	}
	j->refs = 2; /* this connection and the loop */
	h->n_jobs++;
	if (h->tail)
		h->tail->next = j;
	else
		h->head = j;
	h->tail = j;
	cn->job = j;
	if (h->o_on_job)
		h->o_on_job(h->o_on_job_arg);
	bool ok = wait_job(cn, JOB_TAKEN, mono_ms() + HTTP_ACCEPT_TIMEOUT_MS);
	if (!ok) {
		bool queued = j->state == JOB_QUEUED;
		j->gone = true;
		pthread_mutex_unlock(&h->mu);
		if (queued && !h->stopping && !peer_gone(cn->fd))
			return send_error(c, h, 503, "server_error", "busy",
					  "the coordinator did not take the request in time");
		return MHD_NO;
	}
	if (j->state == JOB_FAILED) {
		e = j->err;
		pthread_mutex_unlock(&h->mu);
		return send_err(c, h, &e);
	}
	if (j->kind != HTTP_JOB_GENERATE) {
		char *res = j->result;
		j->result = NULL;
		pthread_mutex_unlock(&h->mu);
		return send_json(c, h, 200, res);
	}
	bool chat = j->req.kind == OAI_CHAT;
	make_id(cn, chat ? "chatcmpl-" : "cmpl-");
	if (j->req.stream) {
		pthread_mutex_unlock(&h->mu);
		struct MHD_Response *r =
			MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, reader, cn, NULL);
		if (!r)
			return MHD_NO;
		add_common_headers(h, r, "text/event-stream");
		MHD_add_response_header(r, "Cache-Control", "no-cache");
		MHD_add_response_header(r, "X-Accel-Buffering", "no");
		enum MHD_Result ret = MHD_queue_response(c, 200, r);
		MHD_destroy_response(r);
		return ret;
	}
	if (!wait_job(cn, JOB_ACCEPTED, 0)) {
		j->gone = true;
		pthread_mutex_unlock(&h->mu);
		return MHD_NO;
	}
	char *s = j->custom && j->choices
		? oai_response_wrap(j->req.kind, cn->id, cn->created, h->model, j->choices, j->prompt_tokens,
				    j->completion_tokens)
		: oai_response_json_lp(j->req.kind, cn->id, cn->created, h->model,
				       j->out ? j->out : "", j->n_out, j->finish, j->prompt_tokens,
				       j->completion_tokens, j->req.logprobs, j->lp, j->n_lp);
	bool failed = j->finish && !strcmp(j->finish, "error");
	struct oai_err fe;
	bool own_err = finish_err(j->finish, &fe);
	pthread_mutex_unlock(&h->mu);
	if (failed) {
		free(s);
		return send_error(c, h, 500, "server_error", "generation_failed",
				  "the generation failed (a worker error; see the cluster log)");
	}
	if (own_err) {
		free(s);
		return send_err(c, h, &fe);
	}
	return send_json(c, h, 200, s);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *upload_data,
			       size_t *upload_data_size, void **con_cls)
{
	(void)version;
	struct http *h = cls;
	struct conn *cn = *con_cls;
	if (!cn) {
		/* first call: headers only */
		if (!strcmp(method, "OPTIONS") && h->cors) {
			struct MHD_Response *r =
				MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
			if (!r)
				return MHD_NO;
			MHD_add_response_header(r, "Access-Control-Allow-Origin", h->cors);
			MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
			MHD_add_response_header(r, "Access-Control-Allow-Headers",
						"Authorization, Content-Type");
			MHD_add_response_header(r, "Access-Control-Max-Age", "600");
			enum MHD_Result ret = MHD_queue_response(c, 204, r);
			MHD_destroy_response(r);
			return ret;
		}
		const char *want = NULL;
		int route = route_of(url, &want);
		int obs = route == R_NONE ? dashboard_route(url) : DASH_NONE;
		if (obs != DASH_NONE) {
			route = R_OBS;
			want = "GET";
		}
		if (route == R_NONE)
			return send_error(c, h, 404, "invalid_request_error", "not_found",
					  "no such endpoint (see docs/http.md)");
		if (strcmp(method, want)) {
			struct oai_err e;
			oai_err_set(&e, 405, "invalid_request_error", NULL, "method_not_allowed",
				    "%s takes %s, not %.16s", url, want, method);
			return send_err(c, h, &e);
		}
		if (route != R_HEALTH &&
		    !oai_auth_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
				 h->api_key) &&
		    !(route == R_OBS && obs_key_ok(c, h)))
			return send_error(c, h, 401, "invalid_request_error", "invalid_api_key",
					  "missing or wrong API key (Authorization: Bearer KEY)");
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
		if (cl && strtoull(cl, NULL, 10) > OAI_MAX_BODY) {
			struct oai_err e;
			oai_err_set(&e, 413, "invalid_request_error", NULL, "body_too_large",
				    "the request body is larger than %u bytes", OAI_MAX_BODY);
			return send_err(c, h, &e);
		}
		cn = calloc(1, sizeof *cn);
		if (!cn)
			return MHD_NO;
		cn->h = h;
		cn->route = route;
		cn->obs_route = obs;
		cn->fd = -1;
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (ci)
			cn->fd = ci->connect_fd;
		*con_cls = cn;
		/* the body must keep coming (a stall of HTTP_BODY_TIMEOUT_S drops it) */
		MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)HTTP_BODY_TIMEOUT_S);
		return MHD_YES;
	}
	if (*upload_data_size) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		if (!cn->t_body)
			cn->t_body = mono_ms();
		/* a body trickled in for longer than its budget: drop it */
		if (mono_ms() - cn->t_body > (int64_t)HTTP_BODY_TIMEOUT_S * 1000 * 6)
			return MHD_NO;
		if (cn->too_large || cn->over_total || n > OAI_MAX_BODY ||
		    cn->n_body + n > OAI_MAX_BODY) {
			cn->too_large = !cn->over_total;
			body_drop(h, cn);
			return MHD_YES;
		}
		if (cn->n_body + n + 1 > cn->cap_body) {
			/* doubling (never past the per-request bound), counted in
			 * the total of all requests */
			size_t cap = cn->cap_body ? cn->cap_body : 4096;
			while (cap < cn->n_body + n + 1)
				cap *= 2;
			if (cap > (size_t)OAI_MAX_BODY + 1)
				cap = (size_t)OAI_MAX_BODY + 1;
			pthread_mutex_lock(&h->gmu);
			bool room = h->body_bytes - cn->cap_body + cap <= HTTP_MAX_BODY_TOTAL;
			if (room)
				h->body_bytes += cap - cn->cap_body;
			pthread_mutex_unlock(&h->gmu);
			char *b = room ? realloc(cn->body, cap) : NULL;
			if (!b) {
				if (room) { /* undo the count */
					pthread_mutex_lock(&h->gmu);
					h->body_bytes -= cap - cn->cap_body;
					pthread_mutex_unlock(&h->gmu);
				}
				cn->over_total = true;
				body_drop(h, cn);
				return MHD_YES;
			}
			cn->body = b;
			cn->cap_body = cap;
		}
		memcpy(cn->body + cn->n_body, upload_data, n);
		cn->n_body += n;
		cn->body[cn->n_body] = 0;
		return MHD_YES;
	}
	/* The whole request is in. No library timeout while the answer is made
	 * (a queued generation may wait long for its first token; we watch the
	 * socket ourselves); completed() sets the keep-alive one. */
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
	if (cn->over_total)
		return send_error(c, h, 503, "server_error", "busy",
				  "the server holds too many request bodies right now; try again");
	if (cn->too_large) {
		struct oai_err e;
		oai_err_set(&e, 413, "invalid_request_error", NULL, "body_too_large",
			    "the request body is larger than %u bytes", OAI_MAX_BODY);
		return send_err(c, h, &e);
	}
	switch (cn->route) {
	case R_MODELS: return answer_models(c, h);
	case R_HEALTH: return answer_health(c, h);
	case R_OBS: return answer_obs(c, h, cn->obs_route);
	default: return post(c, cn);
	}
}

/* --- the gate ----------------------------------------------------------------
 * Our thread accepts connections and holds each (peeking, MSG_PEEK, never
 * reading) until its request head is complete and checked (api/gate.h),
 * then hands it to libmicrohttpd (MHD_add_connection). It sleeps in poll()
 * on the listening socket and the waiting connections, with the earliest
 * head deadline as timeout (none: no timeout). Connections that get an
 * answer from here are shut down for writing and drained briefly, so the
 * answer is not lost to a reset. */

static void addr_key(const struct sockaddr *sa, unsigned char k[17])
{
	memset(k, 0, 17);
	if (sa->sa_family == AF_INET) {
		k[0] = 4;
		memcpy(k + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		k[0] = 6;
		memcpy(k + 1, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

/* gmu held: the entry of address k (created with n = 0 when create). */
static struct addr_count *addr_find(struct http *h, const unsigned char k[17], bool create)
{
	struct addr_count *free_e = NULL;
	for (uint32_t i = 0; i < N_ADDRS; i++) {
		struct addr_count *e = &h->addrs[i];
		if (e->n && !memcmp(e->a, k, 17))
			return e;
		if (!e->n && !free_e)
			free_e = e;
	}
	if (create && free_e) {
		memcpy(free_e->a, k, 17);
		return free_e;
	}
	return NULL;
}

static int started_mark;

static void notify_conn(void *cls, struct MHD_Connection *c, void **sc,
			enum MHD_ConnectionNotificationCode code)
{
	struct http *h = cls;
	pthread_mutex_lock(&h->gmu);
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		h->n_started++;
		*sc = &started_mark;
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *sc == &started_mark) {
		*sc = NULL;
		if (h->n_active)
			h->n_active--;
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if (ci && ci->client_addr) {
			unsigned char k[17];
			addr_key(ci->client_addr, k);
			struct addr_count *e = addr_find(h, k, false);
			if (e)
				e->n--;
		}
	}
	pthread_mutex_unlock(&h->gmu);
}

struct waiting {
	int fd;
	int64_t deadline;         /* ms: the head's, or the end of draining */
	size_t seen;              /* bytes peeked last time */
	bool drain;               /* answered here: reading until EOF, then closed */
	struct sockaddr_storage sa;
	socklen_t salen;
};

/* An answer from the gate itself (Connection: close), then draining. */
static void gate_answer(struct http *h, struct waiting *w, int status, const char *reason,
			const char *extra, const char *type, const char *code, const char *msg)
{
	char body[512], head[1024];
	if (type) {
		json_t *o = json_pack("{s:{s:s, s:s, s:n, s:s}}", "error", "message", msg, "type", type,
				      "param", "code", code);
		char *j = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		snprintf(body, sizeof body, "%s", j ? j : "{}");
		free(j);
	} else {
		snprintf(body, sizeof body, "%s", msg);
	}
	int n = snprintf(head, sizeof head,
			 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n%s%s%s%s\r\n%s",
			 status, reason, strlen(body), extra ? extra : "",
			 h->cors ? "Access-Control-Allow-Origin: " : "", h->cors ? h->cors : "",
			 h->cors ? "\r\nVary: Origin\r\n" : "", body);
	if (n > 0 && (size_t)n < sizeof head)
		(void)!send(w->fd, head, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	shutdown(w->fd, SHUT_WR);
	w->drain = true;
	w->deadline = mono_ms() + 2000;
}

/* The waiting room: slots by index (the epoll data), fd -1 when free. */
struct room {
	struct waiting *ws;
	uint32_t cap, n;
	int ep;
};

static void gate_close(struct room *rm, uint32_t i)
{
	close(rm->ws[i].fd); /* leaves the epoll set with it */
	rm->ws[i].fd = -1;
	rm->n--;
}

/* The slot that waited longest (n > 0). */
static uint32_t gate_oldest(const struct room *rm)
{
	uint32_t o = UINT32_MAX;
	for (uint32_t i = 0; i < rm->cap; i++)
		if (rm->ws[i].fd >= 0 && (o == UINT32_MAX || rm->ws[i].deadline < rm->ws[o].deadline))
			o = i;
	return o;
}

/* The head of slot i is complete and sound: to libmicrohttpd, or an
 * answer here when a limit says no. */
static void gate_pass(struct http *h, struct room *rm, uint32_t i, const struct gate_head *g)
{
	struct waiting *w = &rm->ws[i];
	unsigned char k[17];
	addr_key((const struct sockaddr *)&w->sa, k);
	pthread_mutex_lock(&h->gmu);
	bool priority = g->health || g->metrics;
	uint32_t limit = HTTP_MAX_CONNECTIONS + (priority ? HTTP_RESERVED_CONNECTIONS : 0);
	struct addr_count *e = addr_find(h, k, true);
	bool full = h->n_active >= limit || !e;
	bool addr_full = e && e->n >= HTTP_MAX_PER_ADDR && !priority;
	if (!full && !addr_full) {
		h->n_active++;
		e->n++;
	}
	uint32_t started = h->n_started;
	pthread_mutex_unlock(&h->gmu);
	if (full || addr_full) {
		if (g->health) {
			/* /health is always answered (what it would say) */
			struct http_load l;
			int hs = health_now(h, &l);
			char b[160];
			health_body(hs, &l, b, sizeof b);
			gate_answer(h, w, hs == HTTP_READY ? 200 : 503,
				    hs == HTTP_READY ? "OK" : "Service Unavailable", NULL, NULL, NULL, b);
			return;
		}
		gate_answer(h, w, 503, "Service Unavailable", "Retry-After: 1\r\n", "server_error", "busy",
			    addr_full ? "too many connections from this address; try again shortly"
				      : "too many connections; try again shortly");
		return;
	}
	epoll_ctl(rm->ep, EPOLL_CTL_DEL, w->fd, NULL);
	int fd = w->fd;
	w->fd = -1;
	rm->n--;
	if (MHD_add_connection(h->d, fd, (const struct sockaddr *)&w->sa, w->salen) != MHD_YES) {
		/* the socket is closed by the library either way */
		pthread_mutex_lock(&h->gmu);
		if (h->n_started == started) { /* never started: no CLOSED will come */
			if (h->n_active)
				h->n_active--;
			e->n--;
		}
		pthread_mutex_unlock(&h->gmu);
	}
}

static void gate_timeout(struct http *h, struct waiting *w)
{
	gate_answer(h, w, 408, "Request Timeout", NULL, "invalid_request_error", "request_timeout",
		    "the request head did not arrive in time");
}

/* Slot i has news (ev: epoll events). */
static void gate_event(struct http *h, struct room *rm, uint32_t i, uint32_t ev, char *buf)
{
	struct waiting *w = &rm->ws[i];
	int64_t now = mono_ms();
	if (w->drain) {
		for (;;) {
			ssize_t k = recv(w->fd, buf, GATE_MAX_HEAD, MSG_DONTWAIT);
			if (k > 0)
				continue;
			if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
				gate_close(rm, i);
			break;
		}
		return;
	}
	/* edge-triggered: each arrival of bytes is one event although the
	 * earlier ones stay unread */
	ssize_t k = recv(w->fd, buf, GATE_MAX_HEAD + 1, MSG_PEEK | MSG_DONTWAIT);
	if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
		gate_close(rm, i); /* went away before sending a whole head */
		return;
	}
	if (k < 0)
		return;
	bool eof = ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR);
	struct gate_head g;
	int v = gate_check(buf, (size_t)k, eof, &g);
	if (v == GATE_MORE) {
		if (now >= w->deadline)
			gate_timeout(h, w);
		return;
	}
	if (v == GATE_OK) {
		gate_pass(h, rm, i, &g);
		return;
	}
	const char *reason;
	int st = gate_status(v, &reason);
	gate_answer(h, w, st, reason, NULL, "invalid_request_error",
		    st == 414 ? "uri_too_long" : st == 431 ? "header_too_large"
		    : st == 505 ? "http_version" : "bad_request", g.why);
}

/* Take new connections into the waiting room. */
static void gate_accept(struct http *h, struct room *rm, int64_t *accept_pause)
{
	for (int a = 0; a < 64; a++) {
		struct sockaddr_storage sa;
		socklen_t sl = sizeof sa;
		int fd = accept4(h->lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* out of descriptors: the oldest waiting one goes, or
				 * accepting pauses a moment (never a busy loop) */
				if (rm->n)
					gate_close(rm, gate_oldest(rm));
				else
					*accept_pause = mono_ms() + 100;
			}
			return;
		}
		if (rm->n == rm->cap) /* full: the connection waiting longest makes room */
			gate_close(rm, gate_oldest(rm));
		uint32_t i = 0;
		while (rm->ws[i].fd >= 0)
			i++;
		rm->ws[i] = (struct waiting){ .fd = fd, .deadline = mono_ms() + HTTP_HEAD_TIMEOUT_MS,
					      .sa = sa, .salen = sl };
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.u32 = i };
		if (epoll_ctl(rm->ep, EPOLL_CTL_ADD, fd, &ev)) {
			close(fd);
			rm->ws[i].fd = -1;
			continue;
		}
		rm->n++;
	}
}

#define GATE_LISTEN UINT32_MAX
#define GATE_WAKE (UINT32_MAX - 1)

static void *gate_main(void *arg)
{
	struct http *h = arg;
	struct room rm = { .cap = h->max_waiting, .ep = epoll_create1(EPOLL_CLOEXEC) };
	rm.ws = calloc(rm.cap, sizeof *rm.ws);
	char *buf = malloc(GATE_MAX_HEAD + 2);
	struct epoll_event lev = { .events = EPOLLIN, .data.u32 = GATE_LISTEN };
	struct epoll_event wev = { .events = EPOLLIN, .data.u32 = GATE_WAKE };
	if (!rm.ws || !buf || rm.ep < 0 || epoll_ctl(rm.ep, EPOLL_CTL_ADD, h->lfd, &lev) ||
	    epoll_ctl(rm.ep, EPOLL_CTL_ADD, h->wake[0], &wev)) {
		fprintf(stderr, "api: gate: cannot start (%s); no new connections\n", strerror(errno));
		goto out;
	}
	for (uint32_t i = 0; i < rm.cap; i++)
		rm.ws[i].fd = -1;
	int64_t accept_pause = 0;
	bool listening = true;
	struct epoll_event evs[64];
	for (;;) {
		int64_t now = mono_ms(), next = -1;
		if (!listening && now >= accept_pause) {
			if (!epoll_ctl(rm.ep, EPOLL_CTL_ADD, h->lfd, &lev))
				listening = true;
		}
		if (!listening)
			next = accept_pause;
		for (uint32_t i = 0; rm.n && i < rm.cap; i++)
			if (rm.ws[i].fd >= 0 && (next < 0 || rm.ws[i].deadline < next))
				next = rm.ws[i].deadline;
		int to = next < 0 ? -1 : next > now ? (int)(next - now < 60000 ? next - now : 60000) : 0;
		int r = epoll_wait(rm.ep, evs, 64, to);
		if (r < 0 && errno != EINTR)
			break;
		bool stop = false, acc = false;
		for (int e = 0; e < r; e++) {
			uint32_t id = evs[e].data.u32;
			if (id == GATE_WAKE)
				stop = true;
			else if (id == GATE_LISTEN)
				acc = true;
			else if (id < rm.cap && rm.ws[id].fd >= 0)
				gate_event(h, &rm, id, evs[e].events, buf);
		}
		if (stop)
			break;
		/* deadlines: a head too slow gets 408, a drain ends */
		now = mono_ms();
		for (uint32_t i = 0; rm.n && i < rm.cap; i++) {
			struct waiting *w = &rm.ws[i];
			if (w->fd < 0 || now < w->deadline)
				continue;
			if (w->drain)
				gate_close(&rm, i);
			else
				gate_timeout(h, w);
		}
		if (acc) {
			gate_accept(h, &rm, &accept_pause);
			if (accept_pause > mono_ms() && listening) {
				epoll_ctl(rm.ep, EPOLL_CTL_DEL, h->lfd, NULL);
				listening = false;
			}
		}
	}
out:
	for (uint32_t i = 0; rm.ws && i < rm.cap; i++)
		if (rm.ws[i].fd >= 0)
			close(rm.ws[i].fd);
	if (rm.ep >= 0)
		close(rm.ep);
	free(rm.ws);
	free(buf);
	return NULL;
}

/* Our listening socket on ai. */
static int gate_listen(const struct addrinfo *ai)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (ai->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 1024)) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int http_start(const struct http_opts *o, struct http **out)
{
	const char *host = o->host && *o->host ? o->host : HTTP_DEFAULT_HOST;
	bool has_key = o->api_key && *o->api_key;
	if (!oai_host_is_loopback(host) && !has_key)
		return err_set(ERR_INVAL, "http: --host %s is not a loopback address: refusing to "
			       "serve it without --api-key", host);
	if (o->port < 1 || o->port > 65535)
		return err_set(ERR_INVAL, "http: --port %d: must be 1..65535", o->port);
	char port[16];
	snprintf(port, sizeof port, "%d", o->port);
	const char *bind_host = !strcmp(host, "[::1]") ? "::1" : host;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *ai = NULL;
	int g = getaddrinfo(bind_host, port, &hints, &ai);
	if (g || !ai)
		return err_set(ERR_INVAL, "http: --host %s: %s", host, gai_strerror(g));
	/* Memory: connection and relay threads each get an arena of their own
	 * by default, and a storm of large bodies leaves them all big (280 MiB
	 * seen); two arenas, and buffers past 128 KiB mapped on their own (the
	 * dynamic threshold would move them into the arenas), keep the process
	 * near its idle size (docs/http.md). */
	mallopt(M_ARENA_MAX, 2);
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	struct http *h = calloc(1, sizeof *h);
	if (!h || !(h->addrs = calloc(N_ADDRS, sizeof *h->addrs))) {
		free(h);
		freeaddrinfo(ai);
		return err_set(ERR_NOMEM, "http: out of memory");
	}
	/* descriptors: every connection libmicrohttpd holds, the waiting ones,
	 * and the process's own (links, files); raised to what the hard limit
	 * allows, and the waiting room shrinks to fit */
	uint32_t need = N_ADDRS + HTTP_MAX_WAITING + 256;
	struct rlimit rl;
	h->max_waiting = HTTP_MAX_WAITING;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
		rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
		if (want > rl.rlim_cur) {
			rl.rlim_cur = want;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
		if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < need) {
			rlim_t room = rl.rlim_cur > N_ADDRS + 256 + 16 ? rl.rlim_cur - N_ADDRS - 256 : 16;
			h->max_waiting = room < HTTP_MAX_WAITING ? (uint32_t)room : HTTP_MAX_WAITING;
		}
	}
	h->lfd = -1;
	h->wake[0] = h->wake[1] = -1;
	pthread_mutex_init(&h->gmu, NULL);
	pthread_mutex_init(&h->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_cond_init(&h->cv, &ca);
	pthread_condattr_destroy(&ca);
	h->api_key = has_key ? strdup(o->api_key) : NULL;
	h->cors = o->cors && *o->cors ? strdup(o->cors) : NULL;
	h->model = strdup(o->model ? o->model : "unicorn");
	h->n_ctx = o->n_ctx;
	h->o_on_job = o->on_job;
	h->o_on_job_arg = o->on_job_arg;
	h->o_health = o->health;
	h->o_health_arg = o->health_arg;
	h->o_draining = o->draining;
	h->o_draining_arg = o->draining_arg;
	h->health = HTTP_LOADING;
	bool v6 = ai->ai_family == AF_INET6;
	snprintf(h->url, sizeof h->url, v6 ? "http://[%s]:%d" : "http://%s:%d", bind_host,
		 o->port);
	/* libmicrohttpd gets its connections from the gate (no listening socket
	 * of its own); its own limit is a backstop above ours */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
			 MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC |
			 (v6 ? MHD_USE_IPv6 : 0);
	h->lfd = gate_listen(ai);
	int e = errno;
	freeaddrinfo(ai);
	if (h->lfd < 0)
		goto fail;
	if (pipe2(h->wake, O_CLOEXEC)) {
		e = errno;
		goto fail;
	}
	h->d = MHD_start_daemon(flags, 0, NULL, NULL, handler, h,
				MHD_OPTION_NOTIFY_COMPLETED, completed, h,
				MHD_OPTION_NOTIFY_CONNECTION, notify_conn, h,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)(N_ADDRS + 16),
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_TIMEOUT_S,
				MHD_OPTION_END);
	if (!h->d) {
		e = errno;
		goto fail;
	}
	if ((e = pthread_create(&h->gate_th, NULL, gate_main, h))) {
		MHD_stop_daemon(h->d);
		goto fail;
	}
	h->gate_on = true;
	*out = h;
	return 0;
fail:
	if (h->lfd >= 0)
		close(h->lfd);
	if (h->wake[0] >= 0) {
		close(h->wake[0]);
		close(h->wake[1]);
	}
	free(h->api_key);
	free(h->cors);
	free(h->model);
	free(h->addrs);
	free(h);
	return err_set(ERR_IO, "http: cannot listen on %s port %d (%s; another server on "
		       "that port? pick one with --port)", host, o->port,
		       e ? strerror(e) : "bind failed");
}

void http_stop(struct http *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->stopping = true;
	dashboard_shutdown(); /* SSE streams and /trace waits end */
	/* queued jobs nobody will take: fail them so their connections end */
	for (struct http_job *j = h->head; j;) {
		struct http_job *n = j->next;
		oai_err_set(&j->err, 503, "server_error", NULL, "shutting_down",
			    "the server is shutting down");
		j->state = JOB_FAILED;
		job_unref_locked(h, j);
		j = n;
	}
	h->head = h->tail = NULL;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	if (h->gate_on) {
		(void)!write(h->wake[1], "x", 1);
		pthread_join(h->gate_th, NULL);
	}
	close(h->lfd);
	close(h->wake[0]);
	close(h->wake[1]);
	MHD_stop_daemon(h->d);
	pthread_mutex_destroy(&h->gmu);
	free(h->addrs);
	free(h->api_key);
	free(h->cors);
	free(h->model);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
}
