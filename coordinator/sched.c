/* sched: slots, queue, chunk history and replay, split step plans. */
#include "coordinator/sched.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	uint32_t c = *cap ? *cap : 64;
	while (c < need) {
		if (c > UINT32_MAX / 2)
			return err_set(ERR_RANGE, "sched: too many entries");
		c *= 2;
	}
	void *q = realloc(*p, (size_t)c * elem);
	if (!q)
		return err_set(ERR_NOMEM, "sched: out of memory");
	*p = q;
	*cap = c;
	return 0;
}

int sched_seq_init(struct sched_seq *s, const uint32_t *prompt, uint32_t n_prompt,
		   const uint32_t *resume, uint32_t n_resume, uint32_t chunk_max)
{
	memset(s, 0, sizeof *s);
	if (!prompt || n_prompt == 0)
		return err_set(ERR_INVAL, "sched: prompt: empty");
	if (n_resume && !resume)
		return err_set(ERR_INVAL, "sched: resume: NULL");
	if (chunk_max < 1 || chunk_max > MSG_MAX_TOKENS)
		return err_set(ERR_INVAL, "sched: chunk_max: %u not in 1..%d", chunk_max,
			       MSG_MAX_TOKENS);
	if (n_prompt > MSG_MAX_POS || n_resume > MSG_MAX_POS - n_prompt)
		return err_set(ERR_RANGE, "sched: prompt + resume: too many tokens");
	s->chunk_max = chunk_max;
	s->unit = chunk_max;
	int rc = grow((void **)&s->tokens, &s->cap_tok, n_prompt + n_resume + 1,
		      sizeof *s->tokens);
	if (rc)
		return rc;
	memcpy(s->tokens, prompt, (size_t)n_prompt * sizeof *prompt);
	if (n_resume)
		memcpy(s->tokens + n_prompt, resume, (size_t)n_resume * sizeof *resume);
	s->n_prompt = n_prompt;
	s->n_tok = s->n_resumed = n_prompt + n_resume;
	return 0;
}

void sched_seq_free(struct sched_seq *s)
{
	free(s->tokens);
	free(s->chunks);
	memset(s, 0, sizeof *s);
}

int sched_seq_push(struct sched_seq *s, uint32_t token)
{
	if (s->n_tok >= MSG_MAX_POS)
		return err_set(ERR_RANGE, "sched: sequence: position cap reached");
	int rc = grow((void **)&s->tokens, &s->cap_tok, s->n_tok + 1, sizeof *s->tokens);
	if (rc)
		return rc;
	s->tokens[s->n_tok++] = token;
	return 0;
}

int sched_seq_set_chunk_max(struct sched_seq *s, uint32_t n)
{
	if (n < s->unit || n > MSG_MAX_TOKENS || n % s->unit)
		return err_set(ERR_INVAL, "sched: chunk_max %u: a multiple of the unit %u up to %d", n, s->unit,
			       MSG_MAX_TOKENS);
	s->chunk_max = n;
	return 0;
}

/* Image spans (docs/vision.md): a maximal run of image-row ids
 * (SCHED_IMAGE_ROW) is one image, whose rows attend among themselves, so a
 * chunk [pos0, pos0 + n) must not end inside one. The chunk cut back to the
 * span's start, or, when the span starts the chunk and extend is set,
 * stretched to the span's end (a span is at most MSG_MAX_TOKENS rows: the
 * API's images are); 0 when neither fits. */
static uint32_t span_fit(const struct sched_seq *s, uint32_t pos0, uint32_t n, bool extend)
{
	uint32_t end = pos0 + n;
	if (n == 0 || end >= s->n_tok || !(s->tokens[end - 1] & SCHED_IMAGE_ROW) || !(s->tokens[end] & SCHED_IMAGE_ROW))
		return n;
	uint32_t a = end - 1;
	while (a > pos0 && (s->tokens[a - 1] & SCHED_IMAGE_ROW))
		a--;
	if (a > pos0 || !extend)
		return a - pos0;
	uint32_t b = end;
	while (b < s->n_tok && (s->tokens[b] & SCHED_IMAGE_ROW) && b - pos0 < MSG_MAX_TOKENS)
		b++;
	return b - pos0;
}

bool sched_seq_span_cut(const struct sched_seq *s, uint32_t pos)
{
	return pos > 0 && pos < s->n_tok && (s->tokens[pos - 1] & SCHED_IMAGE_ROW) && (s->tokens[pos] & SCHED_IMAGE_ROW);
}

uint32_t sched_seq_span_start(const struct sched_seq *s, uint32_t pos)
{
	while (sched_seq_span_cut(s, pos))
		pos--;
	return pos;
}

bool sched_seq_next(const struct sched_seq *s, struct sched_chunk *c)
{
	if (s->replaying && s->replay_idx < s->n_chunks) {
		/* the recorded chunk, or its rest when a wide one was cut */
		*c = s->chunks[s->replay_idx];
		c->n -= s->n_fed - c->pos0;
		c->pos0 = s->n_fed;
		return true;
	}
	if (s->n_fed >= s->n_tok)
		return false;
	c->flags = 0;
	c->pos0 = s->n_fed;
	if (s->n_fed < s->n_prompt) {
		/* prompt: full chunks; the last one ends at the prompt's end */
		uint32_t left = s->n_prompt - s->n_fed;
		c->n = span_fit(s, c->pos0, left < s->chunk_max ? left : s->chunk_max, true);
	} else {
		c->n = 1; /* generated tokens go one at a time, as decode fed them */
	}
	return true;
}

int sched_seq_advance(struct sched_seq *s, const struct sched_chunk *c)
{
	if (c->pos0 != s->n_fed || c->n == 0 || c->n > s->n_tok - s->n_fed)
		return err_set(ERR_STATE, "sched: chunk [%u, +%u) does not follow %u of %u",
			       c->pos0, c->n, s->n_fed, s->n_tok);
	if (s->replaying) {
		const struct sched_chunk *r = &s->chunks[s->replay_idx];
		uint32_t end = r->pos0 + r->n;
		if (c->pos0 + c->n > end || (c->pos0 + c->n < end && !(r->flags & SCHED_CHUNK_WIDE)) ||
		    (c->flags ^ r->flags) & SCHED_CHUNK_WIDE)
			return err_set(ERR_STATE, "sched: replayed chunk [%u, +%u) is not recorded chunk [%u, +%u) "
				       "of its kind", c->pos0, c->n, r->pos0, r->n);
		if (c->pos0 + c->n == end)
			s->replay_idx++;
		if (s->replay_idx >= s->n_chunks)
			s->replaying = false;
	} else {
		int rc = grow((void **)&s->chunks, &s->cap_chunks, s->n_chunks + 1,
			      sizeof *s->chunks);
		if (rc)
			return rc;
		s->chunks[s->n_chunks++] = *c;
	}
	s->n_fed += c->n;
	return 0;
}

bool sched_seq_chunk_samples(const struct sched_seq *s, const struct sched_chunk *c)
{
	return c->pos0 + c->n == s->n_tok;
}

void sched_seq_replay(struct sched_seq *s)
{
	s->n_fed = 0;
	s->replay_idx = 0;
	s->replaying = s->n_chunks > 0;
}

int sched_seq_skip(struct sched_seq *s, uint32_t n)
{
	if (s->n_fed || s->n_chunks || s->replaying || n > s->n_prompt || n % s->unit)
		return err_set(ERR_STATE, "sched: skip %u: only whole prompt units of a fresh sequence", n);
	if (sched_seq_span_cut(s, n))
		return err_set(ERR_STATE, "sched: skip %u: inside an image", n);
	while (s->n_fed < n) {
		/* units, but never ending inside an image (replays run these) */
		uint32_t u = n - s->n_fed < s->unit ? n - s->n_fed : s->unit;
		struct sched_chunk c = { s->n_fed, span_fit(s, s->n_fed, u, true), SCHED_CHUNK_WIDE };
		int rc = sched_seq_advance(s, &c);
		if (rc)
			return rc;
	}
	return 0;
}

int sched_seq_replay_from(struct sched_seq *s, uint32_t pos)
{
	uint32_t i = 0, at = 0;
	while (i < s->n_chunks && at + s->chunks[i].n <= pos)
		at += s->chunks[i++].n;
	/* inside a wide chunk: its rest replays as a chunk of its own */
	if (at != pos && (i == s->n_chunks || !(s->chunks[i].flags & SCHED_CHUNK_WIDE)))
		return err_set(ERR_STATE, "sched: replay from %u: not a chunk boundary", pos);
	s->n_fed = pos;
	s->replay_idx = i;
	s->replaying = i < s->n_chunks;
	return 0;
}

int sched_init(struct sched *s, uint32_t max_seqs, uint32_t queue_cap)
{
	memset(s, 0, sizeof *s);
	if (max_seqs < 1 || max_seqs > SCHED_MAX_SEQS)
		return err_set(ERR_INVAL, "sched: max_seqs: %u not in 1..%d", max_seqs,
			       SCHED_MAX_SEQS);
	if (queue_cap > SCHED_MAX_QUEUE)
		return err_set(ERR_INVAL, "sched: queue: %u > %d", queue_cap, SCHED_MAX_QUEUE);
	s->max_seqs = max_seqs;
	s->q_cap = queue_cap;
	return 0;
}

int sched_slot_alloc(struct sched *s, uint32_t *slot)
{
	for (uint32_t i = 0; i < s->max_seqs; i++)
		if (!s->used[i]) {
			s->used[i] = true;
			*slot = i;
			return 0;
		}
	return ERR_STATE;
}

void sched_slot_free(struct sched *s, uint32_t slot)
{
	if (slot < SCHED_MAX_SEQS)
		s->used[slot] = false;
}

uint32_t sched_live(const struct sched *s)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < s->max_seqs; i++)
		n += s->used[i];
	return n;
}

int sched_queue_push(struct sched *s, uint64_t id)
{
	/* Every request passes through the queue on its way to a slot, so a burst
	 * that fits the free slots is never refused: q_cap bounds only the
	 * requests that will really have to wait. */
	uint32_t room = s->q_cap + (s->max_seqs - sched_live(s));
	if (s->q_len >= room || s->q_len >= SCHED_MAX_QUEUE)
		return err_set(ERR_RANGE, "sched: queue full (%u waiting)", s->q_len);
	s->queue[(s->q_head + s->q_len) % SCHED_MAX_QUEUE] = id;
	s->q_len++;
	return 0;
}

int sched_queue_pop(struct sched *s, uint64_t *id)
{
	if (!s->q_len)
		return ERR_NOTFOUND;
	*id = s->queue[s->q_head];
	s->q_head = (s->q_head + 1) % SCHED_MAX_QUEUE;
	s->q_len--;
	return 0;
}

int sched_queue_peek(const struct sched *s, uint64_t *id)
{
	if (!s->q_len)
		return ERR_NOTFOUND;
	*id = s->queue[s->q_head];
	return 0;
}

uint32_t sched_queue_pos(const struct sched *s, uint64_t id)
{
	for (uint32_t i = 0; i < s->q_len; i++)
		if (s->queue[(s->q_head + i) % SCHED_MAX_QUEUE] == id)
			return i + 1;
	return 0;
}

bool sched_queue_remove(struct sched *s, uint64_t id)
{
	uint32_t pos = sched_queue_pos(s, id);
	if (!pos)
		return false;
	for (uint32_t i = pos - 1; i + 1 < s->q_len; i++)
		s->queue[(s->q_head + i) % SCHED_MAX_QUEUE] =
			s->queue[(s->q_head + i + 1) % SCHED_MAX_QUEUE];
	s->q_len--;
	return true;
}

/* Add entry (seq, c) to batch b. */
static void batch_add(struct sched_batch *b, struct sched_seq *const *seqs, uint32_t seq, struct sched_chunk c)
{
	c.flags = b->wide ? SCHED_CHUNK_WIDE : 0;
	b->e[b->n++] = (struct sched_entry){ seq, c, sched_seq_chunk_samples(seqs[seq], &c) };
	b->rows += c.n;
}

/* A chunk's kind: 1 wide, 0 narrow (a replay's recorded kind; a fresh
 * prompt chunk holding a whole unit), -1 either (decode tokens, a prompt's
 * last piece shorter than a unit: never part of a cached prefix). */
static int chunk_kind(const struct sched_seq *s, const struct sched_chunk *c)
{
	if (s->replaying)
		return (c->flags & SCHED_CHUNK_WIDE) != 0;
	/* tokens a client resubmitted after a coordinator restart were decoded
	 * one at a time, narrow unless UNICORN_BATCH_MM_MIN streams decoded
	 * together: narrow again gives the same KV, so the continuation is the
	 * uninterrupted one (within rounding otherwise) */
	if (c->pos0 >= s->n_prompt && c->pos0 < s->n_resumed)
		return 0;
	/* a prompt chunk that is not the prompt's last piece holds whole units,
	 * or ends where an image starts: wide either way (cached units run wide) */
	return c->pos0 < s->n_prompt && (c->n >= s->unit || c->pos0 + c->n < s->n_prompt) ? 1 : -1;
}

int sched_plan_round(struct sched_seq *const *seqs, uint32_t n, const struct sched_round_opts *o,
		     struct sched_batch *out, uint32_t cap, uint32_t *n_out)
{
	*n_out = 0;
	if (n > SCHED_MAX_SEQS || !o->budget || cap < (o->batch ? 2 : n))
		return err_set(ERR_INVAL, "sched: plan: %u sequences, budget %u, room for %u submissions", n, o->budget,
			       cap);
	struct sched_chunk ch[SCHED_MAX_SEQS];
	bool has[SCHED_MAX_SEQS];
	uint32_t used = 0, n_sel = 0;
	/* the chunks that go: fresh single tokens past the prompt always ... */
	for (uint32_t i = 0; i < n; i++) {
		has[i] = sched_seq_next(seqs[i], &ch[i]);
		if (has[i] && !seqs[i]->replaying && ch[i].pos0 >= seqs[i]->n_prompt)
			used++;
	}
	/* ... then prompt and replayed chunks, oldest first, within the budget */
	for (uint32_t i = 0; i < n && o->batch; i++) {
		struct sched_seq *s = seqs[i];
		if (!has[i] || (!s->replaying && ch[i].pos0 >= s->n_prompt))
			continue;
		uint32_t left = o->budget > used ? o->budget - used : 0;
		if (ch[i].n > left && (used || n_sel)) {
			/* cut to whole units of what is left (a narrow chunk is one token) */
			uint32_t cut = chunk_kind(s, &ch[i]) ? span_fit(s, ch[i].pos0, left / s->unit * s->unit, false) : 0;
			has[i] = cut > 0;
			ch[i].n = cut;
		}
		used += ch[i].n;
		n_sel += has[i];
	}
	/* kinds: the either-kind chunks go wide beside wide ones, or when there
	 * are mm_min of them; else narrow */
	uint32_t flex = 0;
	bool wide_needed = false;
	for (uint32_t i = 0; i < n; i++) {
		int k = has[i] ? chunk_kind(seqs[i], &ch[i]) : 0;
		flex += k < 0;
		wide_needed = wide_needed || k > 0;
	}
	bool flex_wide = o->batch && (wide_needed || (o->mm_min && flex >= o->mm_min));
	struct sched_batch *wide = &out[0], *narrow = &out[1];
	if (o->batch) {
		*wide = (struct sched_batch){ .wide = true };
		narrow->wide = false;
		narrow->n = narrow->rows = 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (!has[i])
			continue;
		int k = chunk_kind(seqs[i], &ch[i]);
		bool w = k > 0 || (k < 0 && flex_wide);
		struct sched_batch *b = w ? wide : narrow;
		if (!o->batch) { /* every chunk alone */
			b = &out[(*n_out)++];
			b->wide = w;
			b->n = b->rows = 0;
		}
		batch_add(b, seqs, i, ch[i]);
	}
	if (o->batch) {
		*n_out = (wide->n != 0) + (narrow->n != 0);
		if (!wide->n)
			*wide = *narrow; /* only narrow rows: one submission */
	}
	return 0;
}

static int add_round(struct sched_round *out, uint32_t cap, uint32_t *n, struct sched_op gpu,
		     struct sched_op npu)
{
	if (*n >= cap)
		return err_set(ERR_RANGE, "sched: plan: more than %u rounds", cap);
	out[*n].gpu = gpu;
	out[*n].npu = npu;
	(*n)++;
	return 0;
}

#define OP(k, w, l) ((struct sched_op){ .kind = (k), .who = (w), .layer = (uint16_t)(l) })
#define NOP OP(SCHED_OP_NONE, 0, 0)

int sched_split_plan(uint32_t n_layers, uint32_t n_seqs, const bool *head,
		     struct sched_round *out, uint32_t cap, uint32_t *n_rounds)
{
	if (n_layers < 1 || n_layers > MSG_MAX_LAYERS)
		return err_set(ERR_INVAL, "sched: plan: n_layers %u", n_layers);
	if (n_seqs < 1 || n_seqs > 2 || !head)
		return err_set(ERR_INVAL, "sched: plan: n_seqs %u", n_seqs);
	uint32_t n = 0;
	int rc = 0;
	if (n_seqs == 1) {
		rc = add_round(out, cap, &n, OP(SCHED_OP_EMBED, 0, 0), NOP);
		for (uint32_t l = 0; !rc && l < n_layers; l++) {
			rc = add_round(out, cap, &n, NOP, OP(SCHED_OP_ATTN, 0, l));
			if (!rc)
				rc = add_round(out, cap, &n, OP(SCHED_OP_FFN, 0, l), NOP);
		}
	} else {
		/* A's attention starts while B embeds; then per layer the two
		 * sequences swap devices, so the gpu and npu both stay busy. */
		rc = add_round(out, cap, &n, OP(SCHED_OP_EMBED, 0, 0), NOP);
		if (!rc)
			rc = add_round(out, cap, &n, OP(SCHED_OP_EMBED, 1, 0),
				       OP(SCHED_OP_ATTN, 0, 0));
		for (uint32_t l = 0; !rc && l < n_layers; l++) {
			rc = add_round(out, cap, &n, OP(SCHED_OP_FFN, 0, l), OP(SCHED_OP_ATTN, 1, l));
			if (!rc)
				rc = add_round(out, cap, &n, OP(SCHED_OP_FFN, 1, l),
					       l + 1 < n_layers ? OP(SCHED_OP_ATTN, 0, l + 1) : NOP);
		}
	}
	for (uint32_t w = 0; !rc && w < n_seqs; w++)
		if (head[w])
			rc = add_round(out, cap, &n, OP(SCHED_OP_HEAD, w, 0), NOP);
	if (rc)
		return rc;
	*n_rounds = n;
	return 0;
}

uint32_t sched_utf8_complete(const char *s, uint32_t n)
{
	/* Look back at most 3 bytes for the lead byte of a sequence. */
	for (uint32_t back = 1; back <= 4 && back <= n; back++) {
		unsigned char c = (unsigned char)s[n - back];
		if ((c & 0xC0) == 0x80)
			continue; /* continuation: keep looking for the lead */
		uint32_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
			      : (c & 0xF8) == 0xF0 ? 4 : 1;
		return need > back ? n - back : n;
	}
	return n; /* only continuation bytes: invalid, let them through */
}
