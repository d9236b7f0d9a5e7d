/* http: libmicrohttpd server, job queue and SSE streaming (see http.h). */
#include "api/http.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include <jansson.h>
#include <microhttpd.h>

#include "api/dashboard.h"
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
	int (*o_health)(void *arg);  /* http_opts.health */
	void *o_health_arg;
	char url[300];
};

/* Per connection. */
struct conn {
	struct http *h;
	int route;
	char *body;
	size_t n_body;
	bool too_large;
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
	for (uint32_t i = 0; i < j->n_lp; i++)
		oai_lp_tok_free(&j->lp[i]);
	free(j->lp);
	free(j);
	h->n_jobs--;
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

/* The peer closed its side (EOF) or the socket failed. */
static bool peer_gone(int fd)
{
	if (fd < 0)
		return false;
	char b;
	ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
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
		} else if (cn->phase == 1 && (j->n_out > cn->sent || j->n_lp > cn->lp_sent)) {
			/* a chunk carries the logprobs of the tokens whose text it holds */
			json = oai_chunk_json_lp(kind, cn->id, cn->created, h->model, j->out + cn->sent,
						 j->n_out - cn->sent, false, NULL, j->lp + cn->lp_sent,
						 j->n_lp - cn->lp_sent);
			cn->sent = j->n_out;
			cn->lp_sent = j->n_lp;
			want = true;
		} else if (cn->phase == 1 && j->state == JOB_DONE && j->finish &&
			   !strcmp(j->finish, "timeout")) {
			/* the status line is long sent: the error travels as an
			 * event of its own, then [DONE] (no finish chunk, no usage) */
			struct oai_err e;
			timeout_err(&e);
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

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)c;
	(void)toe;
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
	free(cn->body);
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

static enum MHD_Result answer_health(struct MHD_Connection *c, struct http *h)
{
	pthread_mutex_lock(&h->mu);
	int hs = h->health;
	pthread_mutex_unlock(&h->mu);
	if (h->o_health)
		hs = h->o_health(h->o_health_arg);
	const char *st = hs == HTTP_READY ? "ok" : hs == HTTP_LOADING ? "loading" : "degraded";
	json_t *o = json_pack("{s:s}", "status", st);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return send_json(c, h, hs == HTTP_READY ? 200 : 503, s);
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
	char *s = oai_response_json_lp(j->req.kind, cn->id, cn->created, h->model,
				       j->out ? j->out : "", j->n_out, j->finish, j->prompt_tokens,
				       j->completion_tokens, j->req.logprobs, j->lp, j->n_lp);
	bool failed = j->finish && !strcmp(j->finish, "error");
	bool timed_out = j->finish && !strcmp(j->finish, "timeout");
	pthread_mutex_unlock(&h->mu);
	if (failed) {
		free(s);
		return send_error(c, h, 500, "server_error", "generation_failed",
				  "the generation failed (a worker error; see the cluster log)");
	}
	if (timed_out) {
		free(s);
		struct oai_err e;
		timeout_err(&e);
		return send_err(c, h, &e);
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
		return MHD_YES;
	}
	if (*upload_data_size) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		if (cn->too_large || cn->n_body + n > OAI_MAX_BODY) {
			cn->too_large = true;
			return MHD_YES;
		}
		char *b = realloc(cn->body, cn->n_body + n + 1);
		if (!b)
			return MHD_NO;
		memcpy(b + cn->n_body, upload_data, n);
		cn->n_body += n;
		b[cn->n_body] = 0;
		cn->body = b;
		return MHD_YES;
	}
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
	struct http *h = calloc(1, sizeof *h);
	if (!h) {
		freeaddrinfo(ai);
		return err_set(ERR_NOMEM, "http: out of memory");
	}
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
	h->health = HTTP_LOADING;
	bool v6 = ai->ai_family == AF_INET6;
	snprintf(h->url, sizeof h->url, v6 ? "http://[%s]:%d" : "http://%s:%d", bind_host,
		 o->port);
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
			 MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
	h->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, handler, h,
				MHD_OPTION_SOCK_ADDR, ai->ai_addr,
				MHD_OPTION_NOTIFY_COMPLETED, completed, h,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNECTIONS,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
				MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!h->d) {
		int e = errno;
		free(h->api_key);
		free(h->cors);
		free(h->model);
		free(h);
		return err_set(ERR_IO, "http: cannot listen on %s port %d (%s; another server on "
			       "that port? pick one with --port)", host, o->port,
			       e ? strerror(e) : "bind failed");
	}
	*out = h;
	return 0;
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
	MHD_stop_daemon(h->d);
	free(h->api_key);
	free(h->cors);
	free(h->model);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
}
