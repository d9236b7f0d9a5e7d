/* http: the coordinator's OpenAI-compatible HTTP server (docs/http.md).
 *
 * libmicrohttpd runs its own threads (one per connection). They parse and
 * validate requests (api/openai.h), answer /health and /v1/models
 * themselves, and hand everything that needs the tokenizer or the scheduler
 * to the coordinator's single-threaded loop as a struct http_job through a
 * mutex-protected queue. The loop takes jobs (http_take), answers them
 * (http_job_fail / http_job_result) or runs them through the same scheduler
 * as the CLI's GEN_REQ (http_job_accept, then http_job_emit per piece, then
 * http_job_end). Connection threads wait on a condition variable (with a
 * timeout, watching the socket) and write whole answers or SSE chunks. A
 * client that goes away marks its job gone (http_job_gone), and the loop
 * cancels the generation at its next iteration, i.e. within one step.
 *
 * A job is shared by the two sides (reference count); each side calls its
 * release exactly once (the loop: http_job_release). */
#ifndef UNICORN_HTTP_H
#define UNICORN_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/openai.h"

#define HTTP_DEFAULT_HOST "127.0.0.1"
#define HTTP_DEFAULT_PORT 8642
#define HTTP_MAX_JOBS 256         /* queued + running HTTP jobs; more -> 429 (above the
                                   * coordinator's bound: --max-seqs + 16 queued) */
/* Connections (docs/http.md "Connections and limits"). A connection is
 * accepted by the API's own gate thread and waits there until its request
 * head is complete (at most HTTP_HEAD_TIMEOUT_MS, HTTP_MAX_WAITING such
 * connections: the oldest is dropped for a new one); only then does
 * libmicrohttpd get it, HTTP_MAX_CONNECTIONS at most, HTTP_MAX_PER_ADDR of
 * them from one address, plus HTTP_RESERVED_CONNECTIONS kept for /health
 * and /metrics. Past a limit the client gets 503 with Retry-After. */
#define HTTP_MAX_CONNECTIONS 512
#define HTTP_RESERVED_CONNECTIONS 32
#define HTTP_MAX_PER_ADDR 256
#define HTTP_MAX_WAITING 1024
#define HTTP_HEAD_TIMEOUT_MS 10000  /* accept -> whole request head */
#define HTTP_BODY_TIMEOUT_S 10      /* a request body that stalls this long is dropped */
#define HTTP_IDLE_TIMEOUT_S 30      /* an idle keep-alive connection */
#define HTTP_MAX_BODY_TOTAL (256u << 20) /* request body bytes held at once, all requests */
#define HTTP_ACCEPT_TIMEOUT_MS 30000 /* the loop must take a job within this (else 503) */

enum http_health { HTTP_LOADING = 0, HTTP_READY, HTTP_DEGRADED, HTTP_DRAINING };

/* What /health reports besides its state (docs/http.md): the coordinator's
 * requests in a slot, waiting for one, and its slots, when known. */
struct http_load {
	bool known;
	uint32_t running, queued, slots;
};
enum http_job_kind { HTTP_JOB_GENERATE = 1, HTTP_JOB_TOKENIZE, HTTP_JOB_DETOKENIZE };

struct http_opts {
	const char *host;         /* default 127.0.0.1 */
	int port;                 /* 1..65535 */
	const char *api_key;      /* NULL/"" = none (refused for a non-loopback host) */
	const char *cors;         /* Access-Control-Allow-Origin value, NULL = none */
	const char *model;        /* name reported by /v1/models and in answers */
	uint32_t n_ctx;           /* for /v1/models */
	/* called (from a connection thread) after a job was queued or freed
	 * (http_jobs changed), so a loop that sleeps while idle wakes up; NULL = none */
	void (*on_job)(void *arg);
	void *on_job_arg;
	/* /health asks this (from a connection thread) for an enum http_health
	 * instead of the value http_set_health stored, and the load (load->known
	 * false: none); NULL = that value, no load */
	int (*health)(void *arg, struct http_load *load);
	void *health_arg;
	/* asked (from a connection thread) before a POST is queued: true while
	 * the cluster drains (docs/scale.md), and the request gets 503 with
	 * Retry-After; NULL = never */
	bool (*draining)(void *arg);
	void *draining_arg;
};

struct http_job {
	int kind;                 /* enum http_job_kind */
	struct oai_req req;       /* GENERATE */
	char *text;               /* TOKENIZE */
	bool add_special;
	int32_t *ids;             /* DETOKENIZE */
	size_t n_ids;
	/* below: the http module's, guarded by its mutex */
	int state;
	struct oai_err err;
	char *out;                /* generated text (stop strings cut) */
	size_t n_out, cap_out;
	char *result;             /* TOKENIZE/DETOKENIZE answer JSON */
	struct oai_lp_tok *lp;    /* logprobs of the emitted tokens (req.logprobs) */
	uint32_t n_lp, cap_lp;
	const char *finish;
	uint32_t prompt_tokens, completion_tokens;
	/* custom answers (n > 1 choices, tool calls; the relay builds them):
	 * streaming sends chunks[] (each a "choices" element, wrapped with the
	 * stream's id) instead of out; the whole answer is the choices array */
	bool custom;
	char **chunks;
	uint32_t n_chunks, cap_chunks;
	char *choices;
	bool gone;
	int refs;
	struct http_job *next;
};

struct http;

/* Bind and start serving. ERR_INVAL for a non-loopback host without a key,
 * ERR_IO when the address cannot be bound (the message names it). */
int http_start(const struct http_opts *o, struct http **out);
void http_stop(struct http *h);
void http_set_health(struct http *h, int health);
/* Jobs alive: queued, running, or still answering (an HTTP request in flight
 * from its body's parse to its last byte handed to the library). */
uint32_t http_jobs(struct http *h);
/* "http://HOST:PORT" */
const char *http_url(const struct http *h);

/* --- the coordinator loop's side --------------------------------------- */

/* Next queued job, or NULL. */
struct http_job *http_take(struct http *h);
/* Refuse (before accept) with an OpenAI error. */
void http_job_fail(struct http *h, struct http_job *j, const struct oai_err *e);
/* The same from its fields (param and code NULL = null). */
void http_job_refuse(struct http *h, struct http_job *j, int status, const char *type,
		     const char *param, const char *code, const char *msg);
/* TOKENIZE/DETOKENIZE answer (json is taken over). */
void http_job_result(struct http *h, struct http_job *j, char *json);
/* GENERATE: queued in the scheduler; the answer (or stream) starts. */
void http_job_accept(struct http *h, struct http_job *j, uint32_t prompt_tokens);
/* Append generated text. */
int http_job_emit(struct http *h, struct http_job *j, const char *text, size_t len);
/* Append generated text and the logprobs of the tokens it completes (lp[0..n)
 * is taken over, also on failure, and left zeroed); either may be empty. */
int http_job_emit_lp(struct http *h, struct http_job *j, const char *text, size_t len,
		     struct oai_lp_tok *lp, uint32_t n_lp);
/* Custom answers (set j->custom before the first): one stream chunk's
 * "choices" element (taken over); the whole answer's "choices" array (taken
 * over; with completion_tokens the usage counts every choice). */
int http_job_chunk(struct http *h, struct http_job *j, char *choice_json);
void http_job_choices(struct http *h, struct http_job *j, char *choices_json);
/* Generation over (finish: "stop", "length", or "error"/"cancelled"/"timeout"/"image";
 * "error" answers 500, "timeout" 408 and "image" 503 (an image of the request
 * could not be encoded when it ran), or an SSE error event when streaming). */
void http_job_end(struct http *h, struct http_job *j, const char *finish,
		  uint32_t completion_tokens);
/* The client disconnected or gave up: cancel the work. */
bool http_job_gone(struct http *h, struct http_job *j);
void http_job_release(struct http *h, struct http_job *j);

#endif
