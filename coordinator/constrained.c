/* constrained: schema + logit_bias candidates from the whole logit row. */
#include "coordinator/constrained.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"

int constrained_vocab(const struct tok *t, struct cs_vocab **out)
{
	uint32_t n = tok_n_vocab(t);
	char **bytes = calloc(n, sizeof *bytes);
	uint32_t *lens = calloc(n, sizeof *lens);
	int rc = 0;
	if (!bytes || !lens) {
		rc = err_set(ERR_NOMEM, "constrain: vocabulary: out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < n && !rc; i++) {
		int ty = tok_type_of(t, (int32_t)i);
		size_t len = 0;
		const char *p = tok_piece(t, (int32_t)i);
		if (!p || !(ty == TOK_NORMAL || ty == TOK_BYTE || ty == TOK_USER)) {
			lens[i] = 0;
			continue;
		}
		/* what tok_decode_next emits after a token: "\xe2\x96\x81" is a
		 * space, <0xXX> the byte (never the decoder's leading-space strip,
		 * which only a text's first token gets) */
		size_t pl = strlen(p);
		bytes[i] = malloc(pl + 1);
		if (!bytes[i]) {
			rc = err_set(ERR_NOMEM, "constrain: vocabulary: out of memory");
			break;
		}
		unsigned bv;
		if (ty == TOK_BYTE && pl == 6 && sscanf(p, "<0x%2X>", &bv) == 1) {
			bytes[i][0] = (char)bv;
			len = 1;
		} else {
			for (size_t j = 0; j < pl;) {
				if (pl - j >= 3 && (uint8_t)p[j] == 0xE2 && (uint8_t)p[j + 1] == 0x96 &&
				    (uint8_t)p[j + 2] == 0x81) {
					bytes[i][len++] = ' ';
					j += 3;
				} else {
					bytes[i][len++] = p[j++];
				}
			}
		}
		lens[i] = (uint32_t)len;
	}
	rc = cs_vocab_create(n, (const char *const *)bytes, lens, out);
out:
	for (uint32_t i = 0; bytes && i < n; i++)
		free(bytes[i]);
	free(bytes);
	free(lens);
	return rc;
}

static int by_id(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

int constrained_setup(struct cs_vocab *v, uint32_t n_vocab, const struct msg_gen_req *g, struct intake_req *r)
{
	int rc = 0;
	if (g->n_bias) {
		/* (id, index) pairs sorted by id: the row is scanned in id order */
		uint32_t (*pairs)[2] = malloc(g->n_bias * sizeof *pairs);
		r->bias_ids = malloc(g->n_bias * sizeof *r->bias_ids);
		r->bias = malloc(g->n_bias * sizeof *r->bias);
		if (!pairs || !r->bias_ids || !r->bias) {
			free(pairs);
			return err_set(ERR_NOMEM, "logit_bias: out of memory");
		}
		for (uint32_t i = 0; i < g->n_bias; i++) {
			if (g->bias_ids[i] >= n_vocab) {
				free(pairs);
				return err_set(ERR_RANGE, "logit_bias: token %u out of the vocabulary (%u)", g->bias_ids[i],
					       n_vocab);
			}
			pairs[i][0] = g->bias_ids[i], pairs[i][1] = i;
		}
		qsort(pairs, g->n_bias, sizeof *pairs, by_id);
		for (uint32_t i = 0; i < g->n_bias; i++)
			r->bias_ids[i] = pairs[i][0], r->bias[i] = g->bias[pairs[i][1]];
		r->n_bias = g->n_bias;
		free(pairs);
	}
	if (!(g->flags & MSG_GEN_JSON))
		return 0;
	if ((rc = cs_schema_compile(g->n_schema ? g->schema : NULL, g->n_schema, &r->cs)))
		return rc;
	r->cst = malloc(sizeof *r->cst);
	if (!r->cst)
		return err_set(ERR_NOMEM, "constrain: out of memory");
	cs_state_init(r->cs, r->cst);
	for (uint32_t i = 0; i < r->n_resume; i++) {
		bool complete;
		if ((rc = constrained_feed(v, r, r->resume[i], &complete)))
			return err_prefix(rc, "resumed token %u", i);
	}
	return 0;
}

int constrained_feed(struct cs_vocab *v, struct intake_req *r, uint32_t token, bool *complete)
{
	*complete = false;
	if (!r->cs)
		return 0;
	uint32_t len;
	const char *b = cs_vocab_token(v, token, &len);
	if (!cs_state_feed(r->cs, r->cst, b, len))
		return err_set(ERR_STATE, "constrain: token %u leaves the schema", token);
	*complete = cs_state_complete(r->cst);
	return 0;
}

static int64_t mask_in(const struct cs_vocab *v, struct cs_scratch *ws, const struct intake_req *r, uint32_t budget,
		       int32_t eos, uint64_t *allowed)
{
	int64_t got = cs_vocab_allowed_in(v, ws, r->cs, r->cst, budget, allowed);
	if (got == 0 && budget != UINT32_MAX) /* the budget cannot be kept: the output will be cut */
		got = cs_vocab_allowed_in(v, ws, r->cs, r->cst, UINT32_MAX, allowed);
	if (got >= 0 && eos >= 0 && (uint32_t)eos < cs_vocab_size(v) && cs_state_can_end(r->cs, r->cst) &&
	    !(allowed[eos / 64] >> (eos % 64) & 1)) {
		allowed[eos / 64] |= 1ull << (eos % 64);
		got++;
	}
	return got;
}

int64_t constrained_mask(struct cs_vocab *v, struct intake_req *r, uint32_t budget, int32_t eos, uint64_t *allowed)
{
	static struct cs_scratch *ws;
	int rc = ws ? 0 : cs_scratch_new(v, &ws);
	return rc ? rc : mask_in(v, ws, r, budget, eos, allowed);
}

/* The mask pool: MASK_HELPERS threads beside the caller (fewer on a machine
 * of fewer cores, at least one), started at the first step with two masks;
 * between steps they sleep on a condition variable. */
#define MASK_HELPERS 3
static struct {
	bool started;
	uint32_t n_th;
	pthread_t th[MASK_HELPERS];
	struct cs_scratch *ws[MASK_HELPERS + 1]; /* [n_th]: the caller's */
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	uint64_t gen;   /* a new batch of jobs */
	uint32_t busy;  /* helpers still on this batch */
	const struct cs_vocab *v;
	struct mask_job *jobs;
	uint32_t n;
	atomic_uint next;
} pool = { .mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER };

static void pool_work(struct cs_scratch *ws)
{
	for (uint32_t i; (i = atomic_fetch_add(&pool.next, 1)) < pool.n;) {
		struct mask_job *j = &pool.jobs[i];
		j->got = mask_in(pool.v, ws, j->r, j->budget, j->eos, j->allowed);
	}
}

static void *pool_main(void *arg)
{
	struct cs_scratch *ws = arg;
	uint64_t seen = 0;
	pthread_mutex_lock(&pool.mu);
	for (;;) {
		while (pool.gen == seen)
			pthread_cond_wait(&pool.go, &pool.mu);
		seen = pool.gen;
		pthread_mutex_unlock(&pool.mu);
		pool_work(ws);
		pthread_mutex_lock(&pool.mu);
		if (--pool.busy == 0)
			pthread_cond_signal(&pool.done);
	}
	return NULL;
}

static int pool_start(const struct cs_vocab *v)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t want = cpus > 1 && cpus - 1 < MASK_HELPERS ? (uint32_t)(cpus - 1) : MASK_HELPERS;
	int rc = cs_scratch_new(v, &pool.ws[0]);
	/* helpers take no signal (SIGTERM's handler must interrupt the
	 * coordinator's own sleep): they inherit a full mask */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (uint32_t i = 0; !rc && i < want; i++) {
		if ((rc = cs_scratch_new(v, &pool.ws[i + 1])))
			break;
		if (pthread_create(&pool.th[i], NULL, pool_main, pool.ws[i + 1])) {
			cs_scratch_free(pool.ws[i + 1]);
			pool.ws[i + 1] = NULL;
			break; /* fewer helpers */
		}
		pool.n_th++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc && !pool.n_th)
		return rc;
	/* the caller's scratch last: ws[n_th] */
	struct cs_scratch *mine = pool.ws[0];
	for (uint32_t i = 0; i < pool.n_th; i++)
		pool.ws[i] = pool.ws[i + 1];
	pool.ws[pool.n_th] = mine;
	pool.started = true;
	return 0;
}

int constrained_masks(struct cs_vocab *v, struct mask_job *jobs, uint32_t n)
{
	if (n == 0)
		return 0;
	if (n == 1 || (!pool.started && pool_start(v))) {
		for (uint32_t i = 0; i < n; i++)
			jobs[i].got = constrained_mask(v, jobs[i].r, jobs[i].budget, jobs[i].eos, jobs[i].allowed);
		return 0;
	}
	pthread_mutex_lock(&pool.mu);
	pool.v = v;
	pool.jobs = jobs;
	pool.n = n;
	atomic_store(&pool.next, 0);
	pool.busy = pool.n_th;
	pool.gen++;
	pthread_cond_broadcast(&pool.go);
	pthread_mutex_unlock(&pool.mu);
	pool_work(pool.ws[pool.n_th]);
	pthread_mutex_lock(&pool.mu);
	while (pool.busy)
		pthread_cond_wait(&pool.done, &pool.mu);
	pthread_mutex_unlock(&pool.mu);
	return 0;
}

/* Insert (id, val) into the descending top-k lists (ties: the lower id first,
 * as ids arrive in increasing order). */
static void top_insert(uint32_t *ids, float *vals, uint32_t *have, uint32_t k, uint32_t id, float val)
{
	if (!(val > -INFINITY))
		return;
	if (*have == k && !(val > vals[k - 1]))
		return;
	uint32_t j = *have < k ? (*have)++ : k - 1;
	while (j > 0 && val > vals[j - 1]) {
		vals[j] = vals[j - 1];
		ids[j] = ids[j - 1];
		j--;
	}
	vals[j] = val;
	ids[j] = id;
}

int constrained_candidates(struct cs_vocab *v, struct intake_req *r, const float *row, uint32_t n_text,
			   uint32_t budget, int32_t eos, uint32_t *ids, float *vals, uint32_t *k)
{
	static uint64_t *allowed;
	static uint32_t allowed_n;
	*k = 0;
	/* a bias alone has no vocabulary trie (v NULL until a schema came) */
	uint32_t n = r->cs && cs_vocab_size(v) < n_text ? cs_vocab_size(v) : n_text;
	if (r->cs && allowed_n < n) {
		uint64_t *a = realloc(allowed, ((size_t)cs_vocab_size(v) + 63) / 64 * sizeof *a);
		if (!a)
			return err_set(ERR_NOMEM, "constrain: out of memory");
		allowed = a;
		allowed_n = cs_vocab_size(v);
	}
	if (r->cs) {
		int64_t got = constrained_mask(v, r, budget, eos < 0 || (uint32_t)eos < n ? eos : -1, allowed);
		if (got < 0)
			return (int)got;
	}
	uint32_t have = 0, bi = 0;
	const uint32_t kk = MSG_MAX_TOPK;
	for (uint32_t i = 0; i < n; i++) {
		if (r->cs && !(allowed[i / 64] >> (i % 64) & 1)) {
			if (!allowed[i / 64])
				i |= 63; /* skip the empty word */
			continue;
		}
		float x = row[i];
		while (bi < r->n_bias && r->bias_ids[bi] < i)
			bi++;
		for (uint32_t j = bi; j < r->n_bias && r->bias_ids[j] == i; j++)
			x += r->bias[j];
		top_insert(ids, vals, &have, kk, i, isnan(x) ? -INFINITY : x);
	}
	if (have == 0 && r->cs) {
		/* every allowed logit is -inf (a bias of -100 cannot do that, but
		 * a broken row could): the lowest allowed id, so the text stays valid */
		for (uint32_t i = 0; i < n; i++)
			if (allowed[i / 64] >> (i % 64) & 1) {
				ids[0] = i, vals[0] = 0.0f, have = 1;
				break;
			}
	}
	*k = have;
	return 0;
}

void constrained_raw_head(const float *row, uint32_t n, uint32_t k, uint32_t *ids, float *vals, float *lse)
{
	uint32_t have = 0;
	for (uint32_t i = 0; i < n; i++)
		top_insert(ids, vals, &have, k, i, isnan(row[i]) ? -INFINITY : row[i]);
	for (uint32_t i = have; i < k; i++)
		ids[i] = have ? ids[0] : 0, vals[i] = -INFINITY;
	double mx = have ? vals[0] : 0, sum = 0;
	for (uint32_t i = 0; i < n; i++)
		if (row[i] > -INFINITY)
			sum += exp((double)row[i] - mx);
	*lse = have ? (float)(mx + log(sum)) : NAN;
}
