/* intake: coordinator.ipc server (long-poll) and client. */
#include "coordinator/intake.h"
#include "common/utf8.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "coordinator/prompt_parts.h"
#include "ipc/bus.h"
#include "common/err.h"
#include "common/le.h"
#include "ipc/rundir.h"

int64_t intake_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct pending {
	struct bus_pending *p;
	uint64_t id;
	uint32_t from;
	int64_t deadline;
};

struct intake {
	struct bus *bus;
	intake_submit_fn submit;
	void *arg;
	struct intake_req reqs[INTAKE_MAX_REQS];
	struct pending pend[INTAKE_MAX_PENDING];
	uint32_t n_pend;
	struct msg in, out;  /* large: kept off the stack */
	struct prompt_parts parts; /* long prompts arriving in GEN_PROMPT parts */
	/* connections that closed (bus_on_peer_gone, from an nng thread): their
	 * requests are cancelled by the next intake_serve */
	pthread_mutex_t gone_mu;
	uint32_t gone[INTAKE_MAX_PENDING];
	uint32_t n_gone;
};

static void peer_gone(void *arg, uint32_t peer)
{
	struct intake *in = arg;
	pthread_mutex_lock(&in->gone_mu);
	/* beyond the table, the unpolled-for-5-s rule still cancels them */
	if (in->n_gone < INTAKE_MAX_PENDING)
		in->gone[in->n_gone++] = peer;
	pthread_mutex_unlock(&in->gone_mu);
}

int intake_open(const char *url, intake_submit_fn submit, void *arg, struct intake **out)
{
	struct intake *in = calloc(1, sizeof *in);
	if (!in)
		return err_set(ERR_NOMEM, "intake: out of memory");
	int rc = bus_listen(url, BUS_REP, &in->bus);
	if (rc) {
		free(in);
		return rc;
	}
	in->submit = submit;
	in->arg = arg;
	pthread_mutex_init(&in->gone_mu, NULL);
	if ((rc = bus_on_peer_gone(in->bus, peer_gone, in))) {
		bus_close(in->bus);
		free(in);
		return rc;
	}
	*out = in;
	return 0;
}

void intake_req_clear(struct intake_req *r)
{
	for (uint32_t i = 0; i < r->n_gen; i++)
		free(r->pieces[i]);
	free(r->pieces);
	free(r->gen);
	free(r->prompt);
	free(r->resume);
	free(r->lp);
	free(r->lp_ids);
	free(r->lp_vals);
	cs_schema_free(r->cs);
	free(r->cst);
	free(r->bias_ids);
	free(r->bias);
	free(r->img_digest);
	free(r->img_pos);
	sched_seq_free(&r->seq);
	memset(r, 0, sizeof *r);
}

int intake_wait_fd(struct intake *in, int *fd)
{
	return bus_recv_fd(in->bus, fd);
}

void intake_close(struct intake *in)
{
	if (!in)
		return;
	for (uint32_t i = 0; i < in->n_pend; i++)
		bus_pending_drop(in->pend[i].p);
	for (uint32_t i = 0; i < INTAKE_MAX_REQS; i++)
		intake_req_clear(&in->reqs[i]);
	parts_clear(&in->parts);
	bus_close(in->bus);
	free(in);
}

struct intake_req *intake_at(struct intake *in, uint32_t i)
{
	if (i >= INTAKE_MAX_REQS || in->reqs[i].state == INTAKE_FREE)
		return NULL;
	return &in->reqs[i];
}

static struct intake_req *find(struct intake *in, uint64_t id)
{
	for (uint32_t i = 0; i < INTAKE_MAX_REQS; i++)
		if (in->reqs[i].state != INTAKE_FREE && in->reqs[i].id == id)
			return &in->reqs[i];
	return NULL;
}

/* A free entry, evicting the oldest finished request if needed. */
static struct intake_req *alloc_req(struct intake *in)
{
	struct intake_req *old = NULL;
	for (uint32_t i = 0; i < INTAKE_MAX_REQS; i++) {
		struct intake_req *r = &in->reqs[i];
		if (r->state == INTAKE_FREE)
			return r;
		if (r->state == INTAKE_DONE && (!old || r->t_done < old->t_done))
			old = r;
	}
	if (old)
		intake_req_clear(old);
	return old;
}

int intake_add_token(struct intake_req *r, uint32_t token, const char *bytes, size_t len)
{
	if (r->n_gen >= MSG_MAX_GEN)
		return err_set(ERR_RANGE, "intake: request %llx: more than %d tokens",
			       (unsigned long long)r->id, MSG_MAX_GEN);
	if (r->n_gen == r->cap_gen) {
		uint32_t cap = r->cap_gen ? r->cap_gen * 2 : 64;
		uint32_t *g = realloc(r->gen, cap * sizeof *g);
		if (!g)
			return err_set(ERR_NOMEM, "intake: out of memory");
		r->gen = g;
		char **p = realloc(r->pieces, cap * sizeof *p);
		if (!p)
			return err_set(ERR_NOMEM, "intake: out of memory");
		r->pieces = p;
		r->cap_gen = cap;
	}
	/* piece = held bytes + new bytes up to the last complete character (a
	 * well-formed but unfinished one is held for the next token); every
	 * ill-formed byte sequence becomes U+FFFD, so a piece is always valid
	 * UTF-8 (JSON needs it) */
	size_t total = r->n_pend + len;
	char *buf = malloc(total + 1);
	if (!buf)
		return err_set(ERR_NOMEM, "intake: out of memory");
	memcpy(buf, r->pend, r->n_pend);
	if (len)
		memcpy(buf + r->n_pend, bytes, len);
	size_t cut = utf8_complete_len(buf, total);
	size_t rest = total - cut;
	if (rest > sizeof r->pend)
		rest = 0;
	memcpy(r->pend, buf + cut, rest);
	r->n_pend = (uint32_t)rest;
	char *piece;
	size_t n_piece;
	int rc = utf8_sanitize(buf, cut, &piece, &n_piece);
	free(buf);
	if (rc)
		return rc;
	/* an absurdly long piece is truncated (at a character), never overflows */
	if (n_piece > MSG_MAX_PIECE) {
		n_piece = utf8_complete_len(piece, MSG_MAX_PIECE);
		piece[n_piece] = 0;
	}
	buf = piece;
	/* The wire forbids NUL inside a piece. */
	for (size_t i = 0; i < n_piece; i++)
		if (!buf[i])
			buf[i] = '?';
	r->gen[r->n_gen] = token;
	r->pieces[r->n_gen] = buf;
	r->n_gen++;
	return 0;
}

void intake_finish(struct intake_req *r, uint32_t reason)
{
	if (r->state == INTAKE_DONE)
		return;
	/* an unfinished character at the end (max_tokens cut it, or the model
	 * stopped inside it) is U+FFFD on the last piece: the generation ending
	 * right after its token, that piece is not sent yet */
	if (r->n_pend && r->n_gen) {
		char *last = r->pieces[r->n_gen - 1];
		size_t n = strlen(last);
		if (n + 3 > MSG_MAX_PIECE)
			n = utf8_complete_len(last, MSG_MAX_PIECE - 3);
		char *t = realloc(last, n + 4);
		if (t) {
			memcpy(t + n, UTF8_REPLACEMENT, 4);
			r->pieces[r->n_gen - 1] = t;
		}
		r->n_pend = 0;
	}
	r->state = INTAKE_DONE;
	r->reason = reason;
	r->t_done = intake_now_ns();
}

static void reply_error(struct intake *in, struct bus_pending *p, int code, const char *text)
{
	msg_init(&in->out, MSG_ERROR);
	in->out.u.error.code = code < 0 ? code : ERR_INVAL;
	in->out.u.error.ref_seq = bus_pending_seq(p);
	msg_set_str(in->out.u.error.text, sizeof in->out.u.error.text, text);
	bus_reply(p, &in->out);
}

static void reply_ack(struct intake *in, struct bus_pending *p, int code, uint64_t value)
{
	msg_init(&in->out, MSG_ACK);
	in->out.u.ack.ack_seq = bus_pending_seq(p);
	in->out.u.ack.code = code;
	in->out.u.ack.value = value;
	bus_reply(p, &in->out);
}

/* The logprobs of generated token i into t (MSG_GEN_LOGPROBS requests).
 * lp[] starts at the first token of this run: a resumed token (i < n_resume)
 * was generated by an earlier coordinator and has none here, and neither has
 * one whose record failed (the request then ends with an error anyway). */
static void lp_fill(const struct intake_req *r, uint32_t i, struct msg_gen_token *t)
{
	if (!r->want_lp || i < r->n_resume || i - r->n_resume >= r->n_lp)
		return;
	uint32_t k = i - r->n_resume, n = r->lp_n;
	t->flags = MSG_TOK_LOGPROB;
	t->logprob = r->lp[k];
	for (uint32_t j = 0; j < n && j < MSG_MAX_TOP_LP; j++) {
		uint32_t id = r->lp_ids[(size_t)k * n + j];
		if (id == UINT32_MAX) /* fewer candidates than asked */
			break;
		t->top_ids[j] = id;
		t->top_lps[j] = r->lp_vals[(size_t)k * n + j];
		t->n_top = j + 1;
	}
}

/* Answer poll pd if possible (or forced at its deadline); true when answered. */
static bool try_answer(struct intake *in, struct pending *pd, int64_t now)
{
	struct intake_req *r = find(in, pd->id);
	if (!r) {
		reply_error(in, pd->p, ERR_NOTFOUND, "unknown request (coordinator restarted?): resubmit");
		return true;
	}
	if (pd->from < r->n_gen) {
		msg_init(&in->out, MSG_GEN_TOKEN);
		struct msg_gen_token *t = &in->out.u.gen_token;
		t->request_id = r->id;
		t->index = pd->from;
		t->token = r->gen[pd->from];
		size_t n = strlen(r->pieces[pd->from]);
		t->n_piece = (uint32_t)n;
		memcpy(t->piece, r->pieces[pd->from], n + 1);
		lp_fill(r, pd->from, t);
		bus_reply(pd->p, &in->out);
		return true;
	}
	if (pd->from > r->n_gen) {
		reply_error(in, pd->p, ERR_RANGE, "poll: from is beyond the tokens produced");
		return true;
	}
	if (r->state == INTAKE_DONE) {
		msg_init(&in->out, MSG_GEN_END);
		in->out.u.gen_end.request_id = r->id;
		in->out.u.gen_end.n_tokens = r->n_gen;
		in->out.u.gen_end.reason = r->reason;
		bus_reply(pd->p, &in->out);
		return true;
	}
	if (now >= pd->deadline) {
		reply_ack(in, pd->p, ERR_TIMEOUT, r->n_gen);
		return true;
	}
	return false;
}

static void handle(struct intake *in, struct bus_pending *p, int64_t now)
{
	struct msg *m = &in->in;
	switch (m->type) {
	case MSG_GEN_REQ: {
		struct msg_gen_req *g = &m->u.gen_req;
		struct intake_req *r = find(in, g->request_id);
		if (r) { /* resend: same answer */
			r->t_last_poll = now;
			r->peer = bus_pending_peer(p);
			r->t_orphan = 0;
			reply_ack(in, p, 0, r->id);
			return;
		}
		r = alloc_req(in);
		if (!r) {
			reply_error(in, p, ERR_RANGE, "coordinator busy: too many requests");
			return;
		}
		memset(r, 0, sizeof *r);
		r->id = g->request_id;
		r->sp.temperature = g->temperature;
		r->sp.top_k = g->top_k;
		r->sp.top_p = g->top_p;
		r->sp.seed = g->seed;
		r->sp.min_p = g->min_p;
		r->sp.repetition_penalty = g->repetition_penalty;
		r->sp.presence_penalty = g->presence_penalty;
		r->sp.frequency_penalty = g->frequency_penalty;
		r->max_tokens = g->max_tokens;
		r->flags = g->flags;
		r->want_lp = g->flags & MSG_GEN_LOGPROBS;
		r->lp_n = g->top_logprobs;
		r->t_start = r->t_last_poll = now;
		r->peer = bus_pending_peer(p);
		err_clear();
		/* a long prompt: its staged parts, then GEN_REQ's own */
		char *whole = NULL;
		uint32_t n_whole = 0;
		int rc = 0;
		if (g->flags & MSG_GEN_STAGED) {
			rc = parts_take(&in->parts, g->request_id, g->prompt, g->n_prompt, &whole, &n_whole);
			if (!rc && (g->flags & MSG_GEN_TOKENS) && n_whole % 4)
				rc = err_set(ERR_INVAL, "prompt: %u bytes of token ids (whole u32 ids)", n_whole);
			if (!rc && !(g->flags & MSG_GEN_TOKENS) && memchr(whole, 0, n_whole))
				rc = err_set(ERR_INVAL, "prompt contains a NUL byte");
		}
		if (!rc)
			rc = in->submit(in->arg, g, whole ? whole : g->prompt, whole ? n_whole : g->n_prompt, r);
		free(whole);
		if (rc) {
			char text[MSG_MAX_TEXT];
			snprintf(text, sizeof text, "%s", err_msg());
			intake_req_clear(r);
			reply_error(in, p, rc, text);
			return;
		}
		reply_ack(in, p, 0, r->id);
		return;
	}
	case MSG_GEN_PROMPT: {
		uint32_t got = 0;
		err_clear();
		int rc = parts_add(&in->parts, &m->u.gen_prompt, bus_pending_peer(p), now, &got);
		if (rc)
			reply_error(in, p, rc, err_msg());
		else
			reply_ack(in, p, 0, got);
		return;
	}
	case MSG_GEN_POLL: {
		struct intake_req *r = find(in, m->u.gen_poll.request_id);
		if (r && r->peer != bus_pending_peer(p)) {
			r->peer = bus_pending_peer(p);
			r->t_orphan = 0; /* claimed over a new link */
		}
		if (r)
			r->t_last_poll = now;
		struct pending np = { p, m->u.gen_poll.request_id, m->u.gen_poll.from,
				      now + (int64_t)m->u.gen_poll.wait_ms * 1000000 };
		if (try_answer(in, &np, now))
			return;
		/* Held. A request has one reader: a newer poll of the same id
		 * supersedes the older one (its client gave up waiting for it,
		 * e.g. while a long step kept this loop away, and polled again;
		 * nobody reads that answer). So held polls never outnumber the
		 * requests, and a busy coordinator only makes its clients wait. */
		for (uint32_t i = 0; i < in->n_pend; i++)
			if (in->pend[i].id == np.id) {
				bus_pending_drop(in->pend[i].p);
				in->pend[i] = np;
				return;
			}
		if (in->n_pend >= INTAKE_MAX_PENDING) {
			/* unreachable while every held poll names a live request
			 * (INTAKE_MAX_PENDING == INTAKE_MAX_REQS); should it happen, the
			 * oldest poll is answered "nothing yet" and its client polls
			 * again: never an error for a busy coordinator */
			uint32_t o = 0;
			for (uint32_t i = 1; i < in->n_pend; i++)
				if (in->pend[i].deadline < in->pend[o].deadline)
					o = i;
			struct intake_req *orq = find(in, in->pend[o].id);
			reply_ack(in, in->pend[o].p, ERR_TIMEOUT, orq ? orq->n_gen : 0);
			in->pend[o] = np;
			return;
		}
		in->pend[in->n_pend++] = np;
		return;
	}
	case MSG_GEN_CANCEL: {
		struct intake_req *r = find(in, m->u.gen_cancel.request_id);
		if (r)
			intake_finish(r, MSG_END_CANCELLED);
		reply_ack(in, p, r ? 0 : ERR_NOTFOUND, m->u.gen_cancel.request_id);
		return;
	}
	case MSG_STATUS_REQ:
	default:
		reply_error(in, p, ERR_UNSUP, "coordinator.ipc takes GEN_REQ, GEN_PROMPT, GEN_POLL, GEN_CANCEL");
		return;
	}
}

/* The requests (and held polls) of connections that closed: their client
 * died or gave up, nobody will read the answer. */
static void cancel_gone(struct intake *in)
{
	uint32_t gone[INTAKE_MAX_PENDING], n;
	pthread_mutex_lock(&in->gone_mu);
	n = in->n_gone;
	memcpy(gone, in->gone, n * sizeof *gone);
	in->n_gone = 0;
	pthread_mutex_unlock(&in->gone_mu);
	for (uint32_t k = 0; k < n; k++) {
		parts_drop_peer(&in->parts, gone[k]);
		for (uint32_t i = 0; i < in->n_pend;) {
			if (bus_pending_peer(in->pend[i].p) == gone[k]) {
				bus_pending_drop(in->pend[i].p);
				in->pend[i] = in->pend[--in->n_pend];
				continue;
			}
			i++;
		}
		for (uint32_t i = 0; i < INTAKE_MAX_REQS; i++) {
			struct intake_req *r = &in->reqs[i];
			/* cancelled unless a poll over another link claims it within
			 * INTAKE_ORPHAN_MS: a client that re-dialled (its calls timed
			 * out on a busy coordinator) closed its old link */
			if (r->peer == gone[k] && (r->state == INTAKE_QUEUED || r->state == INTAKE_LIVE) &&
			    !r->t_orphan)
				r->t_orphan = intake_now_ns();
		}
	}
}

int intake_serve(struct intake *in, int timeout_ms)
{
	int wait = timeout_ms > 0 ? timeout_ms : 0; /* 0: take what has arrived, never sleep */
	/* every waiting message (at most one per request and client link, plus
	 * cancels) in one pass, so a step never leaves polls unread */
	for (int i = 0; i < INTAKE_MAX_PENDING + 64; i++) {
		struct bus_pending *p;
		int rc = bus_serve(in->bus, wait, &in->in, &p);
		if (rc == ERR_TIMEOUT)
			break;
		if (rc) {
			fprintf(stderr, "coordinator: intake: %s\n", err_msg());
			if (rc != ERR_INVAL)
				break;
			continue;
		}
		wait = 0;
		handle(in, p, intake_now_ns());
	}
	int64_t now = intake_now_ns();
	cancel_gone(in);
	/* a client that stopped sending its prompt's parts */
	parts_expire(&in->parts, now, (int64_t)INTAKE_ABANDON_MS * 1000000);
	for (uint32_t i = 0; i < in->n_pend;) {
		/* a held poll counts as polling, up to the moment it is answered:
		 * held across a step longer than INTAKE_ABANDON_MS, it is the only
		 * sign of its client (who polls again once it has the answer) */
		struct intake_req *r = find(in, in->pend[i].id);
		if (r)
			r->t_last_poll = now;
		if (try_answer(in, &in->pend[i], now)) {
			in->pend[i] = in->pend[--in->n_pend];
			continue;
		}
		i++;
	}
	for (uint32_t i = 0; i < INTAKE_MAX_REQS; i++) {
		struct intake_req *r = &in->reqs[i];
		if ((r->state == INTAKE_QUEUED || r->state == INTAKE_LIVE) && r->t_orphan &&
		    now - r->t_orphan > (int64_t)INTAKE_ORPHAN_MS * 1000000) {
			fprintf(stderr, "coordinator: request %016llx: its client went away, "
				"cancelled\n", (unsigned long long)r->id);
			intake_finish(r, MSG_END_CANCELLED);
		} else if (r->state == INTAKE_QUEUED || r->state == INTAKE_LIVE) {
			if (now - r->t_last_poll > (int64_t)INTAKE_ABANDON_MS * 1000000) {
				fprintf(stderr, "coordinator: request %016llx: not polled for %d ms, "
					"cancelled\n", (unsigned long long)r->id, INTAKE_ABANDON_MS);
				intake_finish(r, MSG_END_CANCELLED);
			}
		} else if (r->state == INTAKE_DONE && !r->has_slot &&
			   now - r->t_done > (int64_t)INTAKE_KEEP_DONE_MS * 1000000) {
			intake_req_clear(r);
		}
	}
	return 0;
}

/* --- CLI side -------------------------------------------------------- */

const char *intake_reason_name(uint32_t reason)
{
	switch (reason) {
	case MSG_END_STOP: return "stop";
	case MSG_END_LENGTH: return "length";
	case MSG_END_CANCELLED: return "cancelled";
	case MSG_END_ERROR: return "error";
	case MSG_END_CONTEXT: return "context";
	case MSG_END_TIMEOUT: return "timeout";
	case MSG_END_IMAGE: return "image";
	default: return "?";
	}
}

int intake_client_find(const char *name, char *rundir_out, size_t cap)
{
	const char *n = name && *name ? name : RUNDIR_DEFAULT_NAME;
	if (!rundir_name_valid(n))
		return err_set(ERR_INVAL, "cluster name '%s': use 1..32 of [A-Za-z0-9_-]", n);
	int rc = rundir_resolve(n, rundir_out, cap);
	if (rc)
		return rc;
	pid_t pid = 0;
	rc = rundir_pid_read(rundir_out, &pid);
	if (rc == ERR_INVAL)
		return rc;
	if (rc || pid <= 0)
		return err_set(ERR_NOTFOUND,
			       "no cluster '%s' is running; start one with unicorn-up --model PATH%s%s",
			       n, strcmp(n, RUNDIR_DEFAULT_NAME) ? " --name " : "",
			       strcmp(n, RUNDIR_DEFAULT_NAME) ? n : "");
	return 0;
}

void intake_gen_result_free(struct intake_gen_result *res)
{
	free(res->ids);
	free(res->text);
	memset(res, 0, sizeof *res);
}

static int res_add(struct intake_gen_result *res, uint32_t id, const char *piece, size_t n)
{
	uint32_t *ids = realloc(res->ids, (res->n_ids + 1) * sizeof *ids);
	if (!ids)
		return err_set(ERR_NOMEM, "out of memory");
	res->ids = ids;
	res->ids[res->n_ids++] = id;
	char *t = realloc(res->text, res->text_len + n + 1);
	if (!t)
		return err_set(ERR_NOMEM, "out of memory");
	res->text = t;
	memcpy(t + res->text_len, piece, n);
	res->text_len += n;
	t[res->text_len] = 0;
	return 0;
}

int intake_gen_opts_check(const struct intake_gen_opts *o)
{
	const struct sampler_params *p = &o->sp;
	/* the rules of msg_validate (GEN_REQ), worded for the command line; the
	 * negated comparisons also refuse NaN */
	if (o->max_tokens < 1 || o->max_tokens > MSG_MAX_GEN)
		return err_set(ERR_INVAL, "--max-tokens: %u outside 1..%d", o->max_tokens,
			       MSG_MAX_GEN);
	/* the HTTP API's range (api/openai.c); the wire takes up to 100 */
	if (!(p->temperature >= 0 && p->temperature <= 2))
		return err_set(ERR_INVAL, "--temp: %g outside [0, 2]", (double)p->temperature);
	if (p->top_k > MSG_MAX_TOPK)
		return err_set(ERR_INVAL, "--top-k: %u outside 0..%d", p->top_k, MSG_MAX_TOPK);
	if (!(p->top_p > 0 && p->top_p <= 1))
		return err_set(ERR_INVAL, "--top-p: %g outside (0, 1]", (double)p->top_p);
	if (!(p->min_p >= 0 && p->min_p <= 1))
		return err_set(ERR_INVAL, "--min-p: %g outside [0, 1]", (double)p->min_p);
	if (!(p->repetition_penalty > 0 && p->repetition_penalty <= 100))
		return err_set(ERR_INVAL, "--repeat-penalty: %g outside (0, 100] (1 = off)",
			       (double)p->repetition_penalty);
	if (!(p->presence_penalty >= -2 && p->presence_penalty <= 2))
		return err_set(ERR_INVAL, "--presence-penalty: %g outside [-2, 2]",
			       (double)p->presence_penalty);
	if (!(p->frequency_penalty >= -2 && p->frequency_penalty <= 2))
		return err_set(ERR_INVAL, "--frequency-penalty: %g outside [-2, 2]",
			       (double)p->frequency_penalty);
	if (o->top_logprobs > MSG_MAX_TOP_LP)
		return err_set(ERR_INVAL, "top_logprobs: %u outside 0..%d", o->top_logprobs,
			       MSG_MAX_TOP_LP);
	if (o->top_logprobs && !(o->flags & MSG_GEN_LOGPROBS))
		return err_set(ERR_INVAL, "top_logprobs without logprobs");
	return 0;
}

int intake_gen_opt(int ch, const char *arg, struct intake_gen_opts *o)
{
	struct sampler_params *p = &o->sp;
	char *end;
	switch (ch) {
	case 't': p->temperature = strtof(arg, &end); break;
	case 'k': p->top_k = (uint32_t)strtoul(arg, &end, 10); break;
	case 'p': p->top_p = strtof(arg, &end); break;
	case 's': p->seed = strtoull(arg, &end, 0); break;
	case 'M': p->min_p = strtof(arg, &end); break;
	case 'R': p->repetition_penalty = strtof(arg, &end); break;
	case 'E': p->presence_penalty = strtof(arg, &end); break;
	case 'F': p->frequency_penalty = strtof(arg, &end); break;
	default: return 0;
	}
	return *end || end == arg ? -1 : 1;
}

/* The client's link to coordinator.ipc. A send waits at most 3 s for the
 * link (no pipe while the coordinator restarts), so a call never blocks for
 * good in nng_send. */
static int client_dial(const char *url, struct bus **b)
{
	int rc = bus_dial(url, BUS_REQ, b);
	if (!rc && (rc = bus_set_send_timeout(*b, 3000))) {
		bus_close(*b);
		*b = NULL;
	}
	return rc;
}

/* A call was lost: after three in a row, a fresh link (a restarted
 * coordinator is reached by a new dial whatever state the old socket is in:
 * once, here, one of four HTTP requests never came back after a restart). */
static int client_lost(const char *url, struct bus **b, uint32_t *lost, int failed)
{
	/* a reset link (the coordinator died) is dialled again at once: the old
	 * socket's sends could wait out their 3 s for a pipe that never came */
	if (failed != ERR_IO && ++*lost < 3)
		return 0;
	*lost = 0;
	bus_close(*b);
	*b = NULL;
	return client_dial(url, b);
}

/* A call's wait is given up when the caller's stop says so or the request
 * made no progress within its deadline (both handled at the top of the
 * generate loop). */
struct client_wait {
	const struct intake_gen_opts *o;
	const int64_t *give_up;      /* ns, CLOCK_MONOTONIC */
};

static bool client_give_up(void *arg)
{
	const struct client_wait *w = arg;
	return intake_now_ns() > *w->give_up || (w->o->stop && w->o->stop(w->o->arg));
}

/* One call, sent once and waited for (intake.h): ERR_AGAIN when stop or the
 * deadline ended the wait, ERR_TIMEOUT / ERR_IO / ERR_STATE when it was lost. */
static int client_call(struct bus *b, struct msg *m, struct msg *a, struct client_wait *w)
{
	return bus_call_patient(b, m, INTAKE_CLIENT_CALL_MS, INTAKE_CLIENT_SLICE_MS, client_give_up, w, a);
}

/* Send wire[0..n) as GEN_PROMPT parts of request id, in order. ERR_TIMEOUT /
 * ERR_IO / ERR_STATE: a call was lost or the coordinator lost the parts
 * (stage again); ERR_AGAIN: stop or the deadline; another ERR_*: the
 * coordinator refused (its text in err). */
static int client_stage(struct bus *b, struct msg *m, struct msg *a, struct client_wait *w, uint64_t id,
			const uint8_t *wire, size_t n)
{
	for (size_t off = 0; off < n;) {
		msg_init(m, MSG_GEN_PROMPT);
		struct msg_gen_prompt *p = &m->u.gen_prompt;
		p->request_id = id;
		p->total = (uint32_t)n;
		p->offset = (uint32_t)off;
		p->n = (uint32_t)(n - off < MSG_MAX_PROMPT ? n - off : MSG_MAX_PROMPT);
		memcpy(p->data, wire + off, p->n);
		int rc = client_call(b, m, a, w);
		if (rc)
			return rc;
		if (a->type == MSG_ERROR && a->u.error.code == ERR_NOTFOUND)
			return err_set(ERR_STATE, "coordinator: %s", a->u.error.text);
		if (a->type == MSG_ERROR)
			return err_set(a->u.error.code, "coordinator: %s", a->u.error.text);
		/* the bytes staged so far: more than this part's end when a
		 * restaged prompt finds its parts still there (a lost answer) */
		if (a->type != MSG_ACK || a->u.ack.code || a->u.ack.value < off + p->n || a->u.ack.value > n)
			return err_set(ERR_STATE, "coordinator: unexpected answer %s to GEN_PROMPT",
				       msg_type_name(a->type));
		off = (size_t)a->u.ack.value;
	}
	return 0;
}

int intake_client_generate(const char *rundir, const char *prompt, size_t len,
			   const struct intake_gen_opts *o, struct intake_gen_result *res)
{
	memset(res, 0, sizeof *res);
	res->text = calloc(1, 1);
	if (!res->text)
		return err_set(ERR_NOMEM, "out of memory");
	if (o->prompt_ids) {
		if (o->n_prompt_ids < 1 || o->n_prompt_ids > MSG_MAX_PROMPT_ALL / 4)
			return err_set(ERR_INVAL, "prompt: %u tokens (1..%u)", o->n_prompt_ids,
				       MSG_MAX_PROMPT_ALL / 4);
	} else if (len < 1 || len > MSG_MAX_PROMPT_ALL || memchr(prompt, 0, len)) {
		return err_set(ERR_INVAL, "prompt: %zu bytes (1..%u, no NUL)", len, MSG_MAX_PROMPT_ALL);
	}
	char url[BUS_URL_MAX];
	int rc = rundir_url(rundir, RUNDIR_COORDINATOR, url, sizeof url);
	if (rc)
		return rc;
	struct bus *b;
	if ((rc = client_dial(url, &b)))
		return rc;
	uint32_t lost = 0; /* calls lost in a row (the coordinator restarting) */
	struct msg *m = malloc(sizeof *m), *a = malloc(sizeof *a);
	/* the prompt as the wire carries it: text, or u32 LE ids */
	size_t n_wire = o->prompt_ids ? 4 * (size_t)o->n_prompt_ids : len;
	uint8_t *ids_le = o->prompt_ids ? malloc(n_wire) : NULL;
	const uint8_t *wire = o->prompt_ids ? ids_le : (const uint8_t *)prompt;
	if (!m || !a || (o->prompt_ids && !ids_le)) {
		rc = err_set(ERR_NOMEM, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; ids_le && i < o->n_prompt_ids; i++)
		le_put(ids_le + 4 * i, o->prompt_ids[i], 4);
	/* longer than one GEN_REQ: all but the last part go ahead as GEN_PROMPTs
	 * (whole ids: MSG_MAX_PROMPT is a multiple of 4) */
	size_t n_staged = n_wire > MSG_MAX_PROMPT ? MSG_MAX_PROMPT * ((n_wire - 1) / MSG_MAX_PROMPT) : 0;
	uint64_t id = 0;
	while (!id)
		if (getrandom(&id, sizeof id, 0) != sizeof id)
			id = (uint64_t)intake_now_ns() ^ ((uint64_t)getpid() << 32);
	int deadline_ms = o->deadline_ms > 0 ? o->deadline_ms : 60000;
	int64_t give_up = intake_now_ns() + (int64_t)deadline_ms * 1000000;
	bool submitted = false;
	uint32_t restage = 0; /* GEN_REQs that found their staged prompt gone */
	struct client_wait wait = { o, &give_up };
	for (;;) {
		if (intake_now_ns() > give_up) {
			rc = err_set(ERR_TIMEOUT, "the coordinator made no progress for %d ms "
				     "(is the cluster healthy? try unicorn status)", deadline_ms);
			goto out;
		}
		if (o->stop && o->stop(o->arg)) {
			/* best effort: a coordinator that misses it drops the request
			 * once we stop polling (INTAKE_ABANDON_MS) */
			msg_init(m, MSG_GEN_CANCEL);
			m->u.gen_cancel.request_id = id;
			bus_call(b, m, 1000, a);
			res->reason = MSG_END_CANCELLED;
			rc = 0;
			goto out;
		}
		if (!submitted && n_staged) {
			rc = client_stage(b, m, a, &wait, id, wire, n_staged);
			if (rc == ERR_AGAIN)
				continue; /* stop or the deadline: the loop's top says which */
			if (rc == ERR_TIMEOUT || rc == ERR_IO || rc == ERR_STATE) {
				usleep(200000);
				if ((rc = client_lost(url, &b, &lost, rc)))
					goto out;
				continue; /* coordinator (re)starting: stage again */
			}
			if (rc)
				goto out;
		}
		if (!submitted) {
			msg_init(m, MSG_GEN_REQ);
			struct msg_gen_req *g = &m->u.gen_req;
			g->request_id = id;
			g->seed = o->sp.seed;
			g->max_tokens = o->max_tokens;
			g->top_k = o->sp.top_k;
			g->temperature = o->sp.temperature;
			g->top_p = o->sp.top_p;
			g->min_p = o->sp.min_p;
			/* the sampler reads 0 as "off" too; the wire spells off as 1 */
			g->repetition_penalty = o->sp.repetition_penalty ? o->sp.repetition_penalty : 1.0f;
			g->presence_penalty = o->sp.presence_penalty;
			g->frequency_penalty = o->sp.frequency_penalty;
			g->timeout_ms = o->timeout_ms;
			g->flags = o->flags;
			g->top_logprobs = o->top_logprobs;
			if (o->n_schema > MSG_MAX_SCHEMA || o->n_bias > MSG_MAX_BIAS) {
				rc = err_set(ERR_RANGE, "schema of %u bytes (at most %d) or %u logit_bias entries (at most %d)",
					     o->n_schema, MSG_MAX_SCHEMA, o->n_bias, MSG_MAX_BIAS);
				goto out;
			}
			g->n_schema = o->schema ? o->n_schema : 0;
			if (g->n_schema)
				memcpy(g->schema, o->schema, g->n_schema);
			g->schema[g->n_schema] = 0;
			g->n_bias = o->bias_ids && o->bias ? o->n_bias : 0;
			for (uint32_t i = 0; i < g->n_bias; i++)
				g->bias_ids[i] = o->bias_ids[i], g->bias[i] = o->bias[i];
			if (o->n_images > MSG_MAX_IMAGES) {
				rc = err_set(ERR_RANGE, "%u images (at most %d)", o->n_images, MSG_MAX_IMAGES);
				goto out;
			}
			g->n_images = o->images && o->prompt_ids ? o->n_images : 0;
			if (g->n_images)
				memcpy(g->images, o->images, (size_t)g->n_images * MSG_DIGEST);
			g->n_resume = res->n_ids;
			if (res->n_ids) /* ids is NULL before the first token */
				memcpy(g->resume, res->ids, res->n_ids * sizeof *res->ids);
			if (o->prompt_ids)
				g->flags = (g->flags & ~MSG_GEN_CHAT) | MSG_GEN_TOKENS;
			if (n_staged)
				g->flags |= MSG_GEN_STAGED;
			g->n_prompt = (uint32_t)(n_wire - n_staged);
			memcpy(g->prompt, wire + n_staged, g->n_prompt);
			g->prompt[g->n_prompt] = 0;
			rc = client_call(b, m, a, &wait);
			if (rc == ERR_AGAIN)
				continue;
			if (rc == ERR_TIMEOUT || rc == ERR_IO || rc == ERR_STATE) {
				usleep(200000);
				if ((rc = client_lost(url, &b, &lost, rc)))
					goto out;
				continue; /* coordinator (re)starting */
			}
			lost = 0;
			if (rc)
				goto out;
			if (a->type == MSG_ERROR && a->u.error.code == ERR_NOTFOUND && n_staged &&
			    ++restage <= 3)
				continue; /* its staged parts are gone (a restart between): again */
			if (a->type == MSG_ERROR) {
				rc = err_set(a->u.error.code, "coordinator: %s", a->u.error.text);
				goto out;
			}
			if (a->type != MSG_ACK || a->u.ack.code) {
				rc = err_set(ERR_INVAL, "coordinator: unexpected answer %s to GEN_REQ",
					     msg_type_name(a->type));
				goto out;
			}
			if (!submitted && !res->resubmits && o->on_accept)
				o->on_accept(o->arg);
			submitted = true;
			give_up = intake_now_ns() + (int64_t)deadline_ms * 1000000;
		}
		msg_init(m, MSG_GEN_POLL);
		m->u.gen_poll.request_id = id;
		m->u.gen_poll.from = res->n_ids;
		m->u.gen_poll.wait_ms = INTAKE_CLIENT_POLL_MS;
		rc = client_call(b, m, a, &wait);
		if (rc == ERR_AGAIN)
			continue;
		if (rc == ERR_TIMEOUT || rc == ERR_IO || rc == ERR_STATE) {
			usleep(100000);
			if ((rc = client_lost(url, &b, &lost, rc)))
				goto out;
			continue; /* a lost poll is simply repeated (idempotent) */
		}
		lost = 0;
		if (rc)
			goto out;
		if (a->type == MSG_GEN_TOKEN) {
			struct msg_gen_token *t = &a->u.gen_token;
			if (t->index != res->n_ids)
				continue;
			if ((rc = res_add(res, t->token, t->piece, t->n_piece)))
				goto out;
			if (o->on_piece && t->n_piece)
				o->on_piece(o->arg, t->piece, t->n_piece);
			if (o->on_token)
				o->on_token(o->arg, t);
			give_up = intake_now_ns() + (int64_t)deadline_ms * 1000000;
		} else if (a->type == MSG_GEN_END) {
			res->reason = a->u.gen_end.reason;
			rc = 0;
			goto out;
		} else if (a->type == MSG_ACK && a->u.ack.code == ERR_TIMEOUT) {
			continue; /* alive, nothing new yet */
		} else if (a->type == MSG_ERROR && a->u.error.code == ERR_NOTFOUND) {
			/* the coordinator restarted: resubmit with what we have */
			submitted = false;
			res->resubmits++;
		} else if (a->type == MSG_ERROR) {
			rc = err_set(a->u.error.code, "coordinator: %s", a->u.error.text);
			goto out;
		} else {
			rc = err_set(ERR_INVAL, "coordinator: unexpected %s", msg_type_name(a->type));
			goto out;
		}
	}
out:
	free(ids_le);
	free(m);
	free(a);
	bus_close(b);
	return rc;
}
