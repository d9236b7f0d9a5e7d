/* relay: see relay.h. */
#include "api/relay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "api/http.h"
#include "api/image_fetch.h"
#include "coordinator/image_input.h"
#include "api/openai.h"
#include "api/toolcall.h"
#include "common/err.h"
#include "chat/template.h"
#include "coordinator/intake.h"
#include "coordinator/sampler.h"
#include "ipc/imagefile.h"
#include "tokenizer/tokenizer.h"

/* One generated token as the coordinator sent it: its id, and its logprobs
 * when the request asked for them. */
struct gtok {
	uint32_t id;
	float lp;
	uint32_t n_top;
	uint32_t top_ids[MSG_MAX_TOP_LP];
	float top_lps[MSG_MAX_TOP_LP];
	size_t off;                  /* offset of its piece in the text fed to the cutter */
};

struct relay {
	struct relay_ctx *rc;
	struct http_job *j;
	uint32_t *prompt;
	uint32_t n_prompt;
	uint8_t (*images)[MSG_DIGEST]; /* the request's images' digests (GEN_REQ v12) */
	uint32_t n_images;
	bool accepted;
	struct oai_stop stop;
	struct gtok *gen;
	uint32_t n_gen, cap_gen;
	uint32_t n_done;             /* completion tokens when a stop string ended it */
	size_t fed, emitted;         /* bytes fed to the cutter / emitted */
	uint32_t lp_out;             /* tokens whose logprobs went out */
	bool failed;                 /* out of memory while streaming */
	/* custom answers (n > 1 choices, tools: http_job_chunk / _choices) */
	uint32_t index;              /* the choice */
	bool custom;
	bool hold;                   /* tools: the text goes through the tool-call scanner */
	struct tc_parser tc;         /* tools, streamed: calls and content as they come */
	bool said_role;              /* streamed: this choice's role went out */
	uint32_t lp_sent;            /* tools, streamed: logprobs of r->lps sent with content */
	char *text;                  /* the choice's text so far */
	size_t n_text, cap_text;
	struct oai_lp_tok *lps;      /* whole answers: the choice's logprobs */
	uint32_t n_lps, cap_lps;
	struct intake_gen_opts go;   /* this choice's request (seed + index) */
	int gen_rc;
	uint32_t reason;
	uint32_t n_tok;              /* completion tokens */
	pthread_t th;
	/* n > 1: the other choices start once choice 0 has its first token (its
	 * prompt's KV is then in the coordinator's prefix cache, and theirs share
	 * it), or ended */
	struct relay *lead;          /* choice 0 (NULL for choice 0 itself) */
	pthread_mutex_t go_mu;       /* choice 0's */
	pthread_cond_t go_cv;
	bool go_ready;
	bool go_sync;                /* choice 0 of n > 1: go_mu / go_cv are set up */
};

static void lead_ready(struct relay *r)
{
	if (!r->go_sync || r->go_ready)
		return;
	pthread_mutex_lock(&r->go_mu);
	r->go_ready = true;
	pthread_cond_broadcast(&r->go_cv);
	pthread_mutex_unlock(&r->go_mu);
}

/* A token's text for logprobs: its bytes after prev, or, for an alternative
 * (spell) that decodes to nothing (a control token), its spelling. */
static void lp_text(const struct tok *t, int32_t prev, uint32_t id, bool spell, char **b, size_t *n)
{
	if (tok_decode_next(t, prev, (int32_t)id, b, n)) {
		*b = NULL;
		*n = 0;
	}
	if (spell && !*n) {
		free(*b);
		int32_t one = (int32_t)id;
		if (tok_decode(t, &one, 1, 0, b, n)) {
			*b = NULL;
			*n = 0;
		}
	}
}

/* A stream chunk of this choice (its first carries the role; index 0's went
 * first): content text with logprobs, or a tool_calls delta. */
static int choice_chunk(struct relay *r, const char *text, size_t n, const struct oai_lp_tok *lp, uint32_t m,
			const char *calls)
{
	bool role = r->index > 0 && !r->said_role && r->j->req.kind == OAI_CHAT;
	r->said_role = true;
	return http_job_chunk(r->rc->h, r->j, oai_chunk_choice_json(r->j->req.kind, r->index, text, n, role, NULL, lp, m,
								     calls));
}

/* The tool-call scanner's reports, streamed: content (with the logprobs of
 * the tokens held so far), a call's start, a piece of its arguments. */
static int tc_emit(void *arg, const struct tc_ev *ev)
{
	struct relay *r = arg;
	if (ev->kind == TC_EV_TEXT) {
		int rc = choice_chunk(r, ev->s, ev->len, r->lps + r->lp_sent, r->n_lps - r->lp_sent, NULL);
		r->lp_sent = r->n_lps;
		return rc;
	}
	char *d = tc_delta_json(ev);
	if (!d)
		return err_set(ERR_NOMEM, "relay: out of memory");
	int rc = choice_chunk(r, NULL, 0, NULL, 0, d);
	free(d);
	return rc;
}

/* Custom answers: keep the text (and, for a whole answer or a tool
 * scanner's content, the logprobs), or send a stream chunk of this choice.
 * lp[0..m) is taken over. */
static void custom_piece(struct relay *r, const char *out, size_t n, struct oai_lp_tok *lp, uint32_t m)
{
	if (n && r->n_text + n + 1 > r->cap_text) {
		size_t cap = (r->n_text + n + 1) * 2;
		char *t = realloc(r->text, cap);
		if (!t) {
			r->failed = true;
			goto drop;
		}
		r->text = t;
		r->cap_text = cap;
	}
	if (n) {
		memcpy(r->text + r->n_text, out, n);
		r->n_text += n;
		r->text[r->n_text] = 0;
	}
	if (r->j->req.stream && !r->hold) {
		if ((n || m) && choice_chunk(r, out, n, lp, m, NULL))
			r->failed = true;
		goto drop;
	}
	if (m && r->n_lps + m > r->cap_lps) {
		uint32_t cap = (r->n_lps + m) * 2;
		struct oai_lp_tok *p = realloc(r->lps, cap * sizeof *p);
		if (!p) {
			r->failed = true;
			goto drop;
		}
		r->lps = p;
		r->cap_lps = cap;
	}
	if (m)
		memcpy(r->lps + r->n_lps, lp, m * sizeof *lp);
	r->n_lps += m;
	if (r->j->req.stream && r->hold && tc_feed(&r->tc, out, n, tc_emit, r))
		r->failed = true;
	return;
drop:
	for (uint32_t i = 0; i < m; i++)
		oai_lp_tok_free(&lp[i]);
}

static void out_piece(struct relay *r, const char *out, size_t n, struct oai_lp_tok *lp, uint32_t m)
{
	if (r->custom)
		custom_piece(r, out, n, lp, m);
	else
		http_job_emit_lp(r->rc->h, r->j, out, n, lp, m);
}

/* Emit text out[n] with the logprobs of the tokens whose first byte it
 * completes (all the rest when all). A token whose text a stop string cut
 * entirely never goes out. */
static void emit(struct relay *r, const char *out, size_t n, bool all)
{
	r->emitted += n;
	if (!r->j->req.logprobs) {
		out_piece(r, out, n, NULL, 0);
		return;
	}
	struct oai_lp_tok t[8];
	uint32_t m = 0;
	bool sent = false;
	while (r->lp_out < r->n_gen && (all || r->gen[r->lp_out].off < r->emitted)) {
		uint32_t i = r->lp_out++;
		const struct gtok *g = &r->gen[i];
		int32_t prev = (int32_t)(i ? r->gen[i - 1].id : r->prompt[r->n_prompt - 1]);
		struct oai_lp_tok *e = &t[m++];
		memset(e, 0, sizeof *e);
		lp_text(r->rc->tok, prev, g->id, false, &e->bytes, &e->len);
		e->logprob = g->lp;
		e->text_offset = (uint32_t)g->off;
		for (uint32_t k = 0; k < g->n_top && k < OAI_MAX_TOP_LOGPROBS; k++) {
			lp_text(r->rc->tok, prev, g->top_ids[k], true, &e->top[k].bytes, &e->top[k].len);
			e->top[k].logprob = g->top_lps[k];
			e->n_top = k + 1;
		}
		if (m == sizeof t / sizeof t[0]) {
			/* the text goes with the first batch of its tokens */
			out_piece(r, sent ? "" : out, sent ? 0 : n, t, m);
			sent = true;
			m = 0;
		}
	}
	if (!sent || m)
		out_piece(r, sent ? "" : out, sent ? 0 : n, t, m);
}

static void on_accept(void *arg)
{
	struct relay *r = arg;
	r->accepted = true;
	http_job_accept(r->rc->h, r->j, r->n_prompt);
}

static void on_token(void *arg, const struct msg_gen_token *t)
{
	struct relay *r = arg;
	if (r->stop.stopped || r->failed)
		return;
	if (r->n_gen == r->cap_gen) {
		uint32_t cap = r->cap_gen ? 2 * r->cap_gen : 64;
		struct gtok *g = realloc(r->gen, cap * sizeof *g);
		if (!g) {
			r->failed = true;
			return;
		}
		r->gen = g;
		r->cap_gen = cap;
	}
	struct gtok *g = &r->gen[r->n_gen++];
	memset(g, 0, sizeof *g);
	if (r->n_gen == 1)
		lead_ready(r);
	g->id = t->token;
	g->off = r->fed;
	if (t->flags & MSG_TOK_LOGPROB) {
		g->lp = t->logprob;
		g->n_top = t->n_top <= MSG_MAX_TOP_LP ? t->n_top : MSG_MAX_TOP_LP;
		memcpy(g->top_ids, t->top_ids, g->n_top * sizeof *g->top_ids);
		memcpy(g->top_lps, t->top_lps, g->n_top * sizeof *g->top_lps);
	}
	r->fed += t->n_piece;
	char *out = NULL;
	size_t n = 0;
	if (oai_stop_feed(&r->stop, t->piece, t->n_piece, &out, &n))
		r->failed = true;
	else
		emit(r, out, n, false);
	free(out);
	if (r->stop.stopped)
		r->n_done = r->n_gen;
}

static bool should_stop(void *arg)
{
	struct relay *r = arg;
	pthread_mutex_lock(&r->rc->mu);
	bool stopping = r->rc->stopping;
	pthread_mutex_unlock(&r->rc->mu);
	return stopping || r->stop.stopped || r->failed || http_job_gone(r->rc->h, r->j);
}

/* The request's images: each data URL's pixels into the run directory and
 * its rows' ids (*rows: [n_images][n_tokens]); false: the job was refused
 * (400 naming the image's error: bad data, too large, no projector). */
/* One image_url: a data URL, or (--allow-image-urls) an http(s) one fetched. */
static int image_load_one(const struct relay_ctx *rc, const struct vision_config *vc, const char *url,
			  uint8_t digest[MSG_DIGEST])
{
	if (!image_fetch_remote(url))
		return image_input_load(rc->rundir, vc, url, digest);
	if (!rc->allow_image_urls)
		return err_set(ERR_UNSUP, "image_url: remote image URLs are fetched only when the cluster runs with "
			       "unicorn-up --allow-image-urls; send the image inline (data:image/png;base64,...)");
	uint8_t *bytes;
	size_t n;
	int r = image_fetch(url, &bytes, &n);
	if (r)
		return r;
	r = image_input_bytes(rc->rundir, vc, bytes, n, digest);
	free(bytes);
	return r;
}

static bool images_load(struct relay *r, uint32_t **rows)
{
	const struct oai_req *o = &r->j->req;
	const struct vision_config *vc = r->rc->vision;
	if (!vc) {
		http_job_refuse(r->rc->h, r->j, 400, "invalid_request_error", "messages", NULL,
				"this model has no vision projector (unicorn-up finds mmproj-*.gguf beside the model, "
				"or takes --mmproj FILE)");
		return false;
	}
	r->images = calloc(o->n_images, MSG_DIGEST);
	*rows = malloc((size_t)o->n_images * vc->n_tokens * sizeof **rows);
	if (!r->images || !*rows) {
		http_job_refuse(r->rc->h, r->j, 500, "server_error", NULL, NULL, "out of memory");
		return false;
	}
	for (uint32_t k = 0; k < o->n_images; k++) {
		int rc = image_load_one(r->rc, vc, o->image_urls[k], r->images[k]);
		if (rc) {
			char m[400];
			snprintf(m, sizeof m, "image %u: %s", k, err_msg());
			http_job_refuse(r->rc->h, r->j, rc == ERR_NOMEM || rc == ERR_IO ? 500 : 400,
					rc == ERR_NOMEM || rc == ERR_IO ? "server_error" : "invalid_request_error", "messages",
					NULL, m);
			return false;
		}
		for (uint32_t j = 0; j < vc->n_tokens; j++)
			(*rows)[(size_t)k * vc->n_tokens + j] = imagefile_row_id(r->images[k], j);
	}
	r->n_images = o->n_images;
	return true;
}

/* Tokenize the prompt (the chat template for chat). false: the job failed. */
static bool tokenize(struct relay *r)
{
	const struct oai_req *o = &r->j->req;
	const char *param = o->kind == OAI_CHAT ? "messages" : "prompt";
	struct tok_ids ids = { 0 };
	int rc;
	if (o->kind == OAI_CHAT) {
		struct chat_msg *cm = calloc(o->n_msgs ? o->n_msgs : 1, sizeof *cm);
		if (!cm) {
			http_job_refuse(r->rc->h, r->j, 500, "server_error", NULL, NULL, "out of memory");
			return false;
		}
		for (uint32_t i = 0; i < o->n_msgs; i++) {
			cm[i].role = o->msgs[i].role;
			cm[i].content = o->msgs[i].content;
		}
		uint32_t *rows = NULL;
		if (o->n_images && !images_load(r, &rows)) {
			free(cm);
			return false;
		}
		rc = o->n_images ? chat_encode_images(r->rc->tok, cm, o->n_msgs, true, rows, o->n_images,
						      r->rc->vision->n_tokens, &ids)
				 : chat_encode(r->rc->tok, cm, o->n_msgs, true, &ids);
		free(rows);
		free(cm);
	} else {
		rc = chat_encode_plain(r->rc->tok, o->prompt, strlen(o->prompt), &ids);
	}
	if (rc) {
		http_job_refuse(r->rc->h, r->j, 400, "invalid_request_error", param, NULL, err_msg());
		tok_ids_free(&ids);
		return false;
	}
	if (ids.n == 0 || ids.n >= r->rc->n_ctx || ids.n > MSG_MAX_PROMPT_ALL / 4) {
		char m[200];
		if (ids.n > MSG_MAX_PROMPT_ALL / 4 && ids.n < r->rc->n_ctx)
			snprintf(m, sizeof m, "the prompt is %zu tokens; a request holds at most %u prompt tokens",
				 ids.n, MSG_MAX_PROMPT_ALL / 4);
		else
			snprintf(m, sizeof m, "the prompt is %zu tokens; the model's context is %u tokens "
				 "(the prompt must leave room for at least one generated token; unicorn-up --ctx "
				 "sets it up to the model's own)", ids.n, r->rc->n_ctx);
		http_job_refuse(r->rc->h, r->j, 400, "invalid_request_error", param, "context_length_exceeded", m);
		tok_ids_free(&ids);
		return false;
	}
	r->prompt = malloc(ids.n * sizeof *r->prompt);
	if (!r->prompt) {
		tok_ids_free(&ids);
		http_job_refuse(r->rc->h, r->j, 500, "server_error", NULL, NULL, "out of memory");
		return false;
	}
	for (size_t i = 0; i < ids.n; i++)
		r->prompt[i] = (uint32_t)ids.ids[i];
	r->n_prompt = (uint32_t)ids.n;
	tok_ids_free(&ids);
	return true;
}

/* A refusal before the coordinator accepted: the HTTP status its error code means. */
static void refuse(struct relay *r, int rc)
{
	if (rc == ERR_RANGE) /* the coordinator's queue is full */
		http_job_refuse(r->rc->h, r->j, 429, "rate_limit_error", NULL, "queue_full", err_msg());
	else if (rc == ERR_INVAL || rc == ERR_UNSUP)
		http_job_refuse(r->rc->h, r->j, 400, "invalid_request_error", NULL, NULL, err_msg());
	else
		http_job_refuse(r->rc->h, r->j, 503, "server_error", NULL, "unavailable", err_msg());
}

/* One choice's generation (r->go), to its end: the rest of the stop cutter
 * flushed, r->reason and r->n_tok set. */
static void gen_one(struct relay *r)
{
	oai_stop_init(&r->stop, r->j->req.stop, r->j->req.n_stop);
	r->go.arg = r;
	struct intake_gen_result res;
	r->gen_rc = intake_client_generate(r->rc->rundir, NULL, 0, &r->go, &res);
	if (!r->gen_rc && !r->failed && !http_job_gone(r->rc->h, r->j)) {
		char *out = NULL;
		size_t n = 0;
		if (!oai_stop_flush(&r->stop, &out, &n))
			emit(r, out, n, !r->stop.stopped);
		free(out);
		r->reason = r->stop.stopped ? MSG_END_STOP : res.reason;
		if (r->reason == MSG_END_CANCELLED && should_stop(r))
			r->reason = MSG_END_ERROR; /* the API is shutting down */
	}
	r->n_tok = r->stop.stopped ? r->n_done : r->n_gen;
	if (!r->gen_rc && res.resubmits)
		fprintf(stderr, "api: a request continued after %u coordinator restart%s\n", res.resubmits,
			res.resubmits == 1 ? "" : "s");
	intake_gen_result_free(&res);
}

static void *gen_thread(void *arg)
{
	struct relay *c = arg, *l = c->lead;
	pthread_mutex_lock(&l->go_mu);
	while (!l->go_ready)
		pthread_cond_wait(&l->go_cv, &l->go_mu);
	pthread_mutex_unlock(&l->go_mu);
	if (http_job_gone(c->rc->h, c->j))
		c->reason = MSG_END_CANCELLED; /* choice 0 ended because its client left */
	else
		gen_one(c);
	return NULL;
}

static void relay_free_choice(struct relay *c)
{
	oai_stop_free(&c->stop);
	tc_free(&c->tc);
	free(c->gen);
	free(c->text);
	for (uint32_t i = 0; i < c->n_lps; i++)
		oai_lp_tok_free(&c->lps[i]);
	free(c->lps);
}

/* The end of a custom answer: every choice's finish (a tool call parsed out
 * of a held text), the stream's last chunks or the whole answer's choices. */
static void custom_end(struct relay *r, struct relay **ch, uint32_t n)
{
	const struct oai_req *o = &r->j->req;
	struct http *h = r->rc->h;
	uint32_t tokens = 0;
	const char *fin0 = NULL;
	size_t cap = 16, len = 1;
	char *arr = malloc(cap);
	if (arr)
		arr[0] = '[', arr[1] = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct relay *c = ch[i];
		tokens += c->n_tok;
		const char *fin = oai_finish_reason(c->reason);
		char *calls = NULL;
		if (c->hold && !o->stream)
			calls = oai_tool_calls_from(c->text ? c->text : "", c->n_text, o->tool_names, o->n_tools,
						    o->parallel_calls);
		if (calls)
			fin = "tool_calls";
		if (o->stream) {
			/* the scanner's held text goes out as content; whole calls finish as tool_calls */
			int rc = 0;
			if (c->hold && tc_end(&c->tc, tc_emit, c, &rc))
				fin = "tool_calls";
			bool role = c->index > 0 && !c->said_role && o->kind == OAI_CHAT;
			http_job_chunk(h, r->j, oai_chunk_choice_json(o->kind, c->index, o->kind == OAI_CHAT ? NULL : "",
								0, role, fin, NULL, 0, NULL));
		}
		if (!fin0)
			fin0 = fin;
		if (!o->stream) {
			char *cj = oai_choice_json(o->kind, c->index, c->text ? c->text : "", c->n_text, fin, o->logprobs,
						   c->lps, c->n_lps, calls);
			size_t cl = cj ? strlen(cj) : 0;
			char *na = cj && arr ? realloc(arr, len + cl + 3) : NULL;
			if (na) {
				arr = na;
				if (i)
					arr[len++] = ',';
				memcpy(arr + len, cj, cl);
				len += cl;
				arr[len] = 0;
			} else {
				free(arr);
				arr = NULL;
			}
			free(cj);
		}
		free(calls);
	}
	if (!o->stream) {
		if (!arr) {
			http_job_end(h, r->j, "error", tokens);
			return;
		}
		arr[len++] = ']';
		arr[len] = 0;
		http_job_choices(h, r->j, arr);
	} else {
		free(arr);
	}
	http_job_end(h, r->j, fin0 ? fin0 : "stop", tokens);
}

static void run(struct relay *r)
{
	const struct oai_req *o = &r->j->req;
	struct intake_gen_opts go = { 0 };
	go.max_tokens = o->max_tokens;
	go.sp.temperature = o->temperature;
	go.sp.top_k = o->top_k;
	go.sp.top_p = o->top_p;
	go.sp.seed = o->seed;
	go.sp.min_p = o->min_p;
	go.sp.repetition_penalty = o->repetition_penalty;
	go.sp.presence_penalty = o->presence_penalty;
	go.sp.frequency_penalty = o->frequency_penalty;
	/* one seed for the whole request, resubmissions included: the same tokens */
	if (!o->has_seed && getrandom(&go.sp.seed, sizeof go.sp.seed, 0) != sizeof go.sp.seed)
		go.sp.seed = (uint64_t)intake_now_ns();
	if (sampler_check(&go.sp)) {
		http_job_refuse(r->rc->h, r->j, 400, "invalid_request_error", NULL, NULL, err_msg());
		return;
	}
	if (!tokenize(r))
		return;
	if (o->logprobs) {
		go.flags |= MSG_GEN_LOGPROBS;
		go.top_logprobs = o->top_logprobs < MSG_MAX_TOP_LP ? o->top_logprobs : MSG_MAX_TOP_LP;
	}
	if (o->json) {
		go.flags |= MSG_GEN_JSON;
		go.schema = o->schema;
		go.n_schema = (uint32_t)o->n_schema;
	}
	go.bias_ids = o->bias_ids;
	go.bias = o->bias;
	go.n_bias = o->n_bias;
	double to_ms = o->timeout * 1000.0;
	go.timeout_ms = to_ms > 0 ? (to_ms < 4e9 ? (uint32_t)to_ms : 4000000000u) : 0;
	/* patience without progress: the request's own limit (queued time counts),
	 * plus a coordinator restart */
	uint32_t lim = r->rc->request_timeout_s ? r->rc->request_timeout_s : 3600;
	go.deadline_ms = (int)(lim < 2000000 ? lim * 1000 + 30000 : 2000000000);
	go.prompt_ids = r->prompt;
	go.n_prompt_ids = r->n_prompt;
	go.images = (const uint8_t(*)[MSG_DIGEST])r->images;
	go.n_images = r->n_images;
	go.on_accept = on_accept;
	go.on_token = on_token;
	go.stop = should_stop;
	r->go = go;
	uint32_t n = o->n ? o->n : 1;
	r->custom = r->j->custom; /* http.c decided when it made the job */
	r->hold = o->tool_choice == OAI_TOOLS_AUTO || o->tool_choice == OAI_TOOLS_REQUIRED ||
		  o->tool_choice == OAI_TOOLS_NAMED;
	tc_init(&r->tc, o->tool_names, o->n_tools, o->parallel_calls);
	/* n choices: n sequences of the same prompt; the others are submitted
	 * once choice 0 has its first token, so they share its prompt's KV
	 * through the coordinator's prefix cache (no output bit changes); seeds
	 * seed, seed + 1, ...: reproducible with a seed */
	struct relay *ch[OAI_MAX_N] = { r };
	uint32_t started = 1;
	bool sync = n > 1 && !pthread_mutex_init(&r->go_mu, NULL);
	if (sync && pthread_cond_init(&r->go_cv, NULL)) {
		pthread_mutex_destroy(&r->go_mu);
		sync = false;
	}
	r->go_sync = sync;
	for (uint32_t i = 1; sync && i < n && i < OAI_MAX_N; i++) {
		struct relay *c = calloc(1, sizeof *c);
		if (!c)
			break;
		*c = (struct relay){ .rc = r->rc, .j = r->j, .prompt = r->prompt, .n_prompt = r->n_prompt,
				     .index = i, .custom = true, .hold = r->hold, .go = go, .lead = r };
		c->go.sp.seed = go.sp.seed + i;
		tc_init(&c->tc, o->tool_names, o->n_tools, o->parallel_calls);
		if (pthread_create(&c->th, NULL, gen_thread, c)) {
			free(c);
			break;
		}
		ch[started++] = c;
	}
	gen_one(r);
	lead_ready(r); /* ended without a token: the others go anyway */
	for (uint32_t i = 1; i < started; i++)
		pthread_join(ch[i]->th, NULL);
	if (sync) {
		pthread_cond_destroy(&r->go_cv);
		pthread_mutex_destroy(&r->go_mu);
		r->go_sync = false;
	}
	bool accepted = false, failed = started < n;
	int rc0 = 0;
	uint32_t timeouts = 0, images = 0;
	for (uint32_t i = 0; i < started; i++) {
		accepted = accepted || ch[i]->accepted;
		if (ch[i]->gen_rc && !rc0)
			rc0 = ch[i]->gen_rc;
		failed = failed || ch[i]->gen_rc || ch[i]->failed || ch[i]->reason == MSG_END_ERROR;
		timeouts += ch[i]->reason == MSG_END_TIMEOUT;
		images += ch[i]->reason == MSG_END_IMAGE;
	}
	if (rc0 && !accepted) {
		refuse(r, rc0);
	} else if (failed) {
		fprintf(stderr, "api: a request failed: %s\n", rc0 ? err_msg() : "out of memory or a worker error");
		http_job_end(r->rc->h, r->j, "error", r->n_gen);
	} else if (http_job_gone(r->rc->h, r->j)) {
		fprintf(stderr, "api: http client went away after %u tokens: request cancelled\n", r->n_gen);
	} else if (timeouts) {
		http_job_end(r->rc->h, r->j, "timeout", r->n_gen);
	} else if (images) {
		/* the coordinator could not encode an image of this request when it
		 * ran (its pixels were evicted or unreadable): the client is told so */
		http_job_end(r->rc->h, r->j, "image", r->n_gen);
	} else if (r->custom) {
		custom_end(r, ch, started);
	} else {
		http_job_end(r->rc->h, r->j, oai_finish_reason(r->reason), r->n_tok);
	}
	for (uint32_t i = 1; i < started; i++) {
		relay_free_choice(ch[i]);
		free(ch[i]);
	}
}

static void *relay_main(void *arg)
{
	struct relay *r = arg;
	struct relay_ctx *rc = r->rc;
	run(r);
	http_job_release(rc->h, r->j);
	relay_free_choice(r);
	free(r->prompt);
	free(r->images);
	free(r);
	pthread_mutex_lock(&rc->mu);
	rc->running--;
	pthread_cond_broadcast(&rc->cv);
	pthread_mutex_unlock(&rc->mu);
	return NULL;
}

int relay_init(struct relay_ctx *rc)
{
	rc->running = 0;
	rc->stopping = false;
	if (pthread_mutex_init(&rc->mu, NULL))
		return err_set(ERR_NOMEM, "relay: mutex");
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	int e = pthread_cond_init(&rc->cv, &ca);
	pthread_condattr_destroy(&ca);
	return e ? err_set(ERR_NOMEM, "relay: condition variable") : 0;
}

int relay_start(struct relay_ctx *rc, struct http_job *j)
{
	struct relay *r = calloc(1, sizeof *r);
	pthread_attr_t at;
	pthread_t th;
	int e = ENOMEM;
	if (r && !pthread_attr_init(&at)) {
		r->rc = rc;
		r->j = j;
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_mutex_lock(&rc->mu);
		rc->running++;
		pthread_mutex_unlock(&rc->mu);
		e = pthread_create(&th, &at, relay_main, r);
		pthread_attr_destroy(&at);
		if (!e)
			return 0;
		pthread_mutex_lock(&rc->mu);
		rc->running--;
		pthread_mutex_unlock(&rc->mu);
	}
	free(r);
	http_job_refuse(rc->h, j, 503, "server_error", NULL, "unavailable", "cannot start a thread for the request");
	http_job_release(rc->h, j);
	return err_set(ERR_NOMEM, "relay: cannot start a thread (%s)", strerror(e));
}

uint32_t relay_running(struct relay_ctx *rc)
{
	pthread_mutex_lock(&rc->mu);
	uint32_t n = rc->running;
	pthread_mutex_unlock(&rc->mu);
	return n;
}

void relay_stop_all(struct relay_ctx *rc, int ms)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&rc->mu);
	rc->stopping = true;
	while (rc->running && pthread_cond_timedwait(&rc->cv, &rc->mu, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&rc->mu);
}
