/* msg: wire codec. One function per type walks the fields in wire order with a
 * cursor that either writes (encode) or reads (decode), so the two directions
 * cannot disagree about the layout. */
#include "ipc/msg.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "common/err.h"
#include "common/le.h"

struct cur {
	uint8_t *p;
	size_t len, off;
	int dec;     /* 1: read fields from p; 0: write them */
	int bad;     /* ran past len, or a count exceeded its cap */
	const char *why;
};

static int room(struct cur *c, size_t n)
{
	if (c->bad || n > c->len - c->off) {
		if (!c->bad)
			c->why = "payload shorter than its fields";
		c->bad = 1;
		return 0;
	}
	return 1;
}

static void c_u32(struct cur *c, uint32_t *v)
{
	if (!room(c, 4))
		return;
	if (c->dec)
		*v = (uint32_t)le_get(c->p + c->off, 4);
	else
		le_put(c->p + c->off, *v, 4);
	c->off += 4;
}

static void c_i32(struct cur *c, int32_t *v)
{
	uint32_t u = (uint32_t)*v;
	c_u32(c, &u);
	if (c->dec)
		*v = (int32_t)u;
}

static void c_u64(struct cur *c, uint64_t *v)
{
	if (!room(c, 8))
		return;
	if (c->dec)
		*v = le_get(c->p + c->off, 8);
	else
		le_put(c->p + c->off, *v, 8);
	c->off += 8;
}

static void c_f32(struct cur *c, float *v)
{
	uint32_t u;
	memcpy(&u, v, 4);
	c_u32(c, &u);
	if (c->dec)
		memcpy(v, &u, 4);
}

static void c_bytes(struct cur *c, void *v, size_t n)
{
	if (!room(c, n))
		return;
	if (c->dec)
		memcpy(v, c->p + c->off, n);
	else
		memcpy(c->p + c->off, v, n);
	c->off += n;
}

/* A count that sizes an array: refuse it before the array is walked. */
static void c_count(struct cur *c, uint32_t *v, uint32_t cap, const char *why)
{
	c_u32(c, v);
	if (!c->bad && *v > cap) {
		c->bad = 1;
		c->why = why;
	}
}

static void c_u32s(struct cur *c, uint32_t *v, uint32_t n)
{
	for (uint32_t i = 0; i < n && !c->bad; i++)
		c_u32(c, &v[i]);
}

/* Length-prefixed text; the decoder NUL-terminates it (the array has cap+1). */
static void c_text(struct cur *c, uint32_t *n, char *s, uint32_t cap, const char *why)
{
	c_count(c, n, cap, why);
	if (c->bad)
		return;
	c_bytes(c, s, *n);
	if (c->dec && !c->bad)
		s[*n] = 0;
}

static void codec(struct cur *c, struct msg *m)
{
	switch (m->type) {
	case MSG_HELLO:
	case MSG_WELCOME: {
		struct msg_hello *h = &m->u.hello;
		c_u32(c, &h->role), c_u32(c, &h->pid), c_u32(c, &h->version), c_u32(c, &h->flags);
		break;
	}
	case MSG_ACK:
		c_u32(c, &m->u.ack.ack_seq), c_i32(c, &m->u.ack.code), c_u64(c, &m->u.ack.value);
		break;
	case MSG_PING:
	case MSG_PONG:
		c_u64(c, &m->u.ping.nonce);
		break;
	case MSG_STATUS_REQ:
		break;
	case MSG_STATUS: {
		struct msg_status *s = &m->u.status;
		c_u32(c, &s->role), c_u32(c, &s->pid);
		c_bytes(c, s->backend, sizeof s->backend), c_bytes(c, s->device, sizeof s->device);
		c_u64(c, &s->weights_bytes), c_u64(c, &s->kv_bytes), c_u64(c, &s->scratch_bytes);
		c_u32(c, &s->share_path), c_u32(c, &s->import_mode);
		c_u64(c, &s->uptime_ns), c_u64(c, &s->busy_ns), c_u64(c, &s->steps);
		c_u32(c, &s->restarts), c_u32(c, &s->reserved);
		break;
	}
	case MSG_SHUTDOWN:
		c_u32(c, &m->u.shutdown.grace_ms), c_u32(c, &m->u.shutdown.reason);
		break;
	case MSG_ERROR:
		c_i32(c, &m->u.error.code), c_u32(c, &m->u.error.ref_seq);
		c_bytes(c, m->u.error.text, sizeof m->u.error.text);
		break;
	case MSG_EMBED: {
		struct msg_embed *e = &m->u.embed;
		c_u32(c, &e->seq_id), c_u32(c, &e->slot);
		c_count(c, &e->n, MSG_MAX_TOKENS, "EMBED: n exceeds MSG_MAX_TOKENS");
		c_u32s(c, e->tokens, e->n);
		break;
	}
	case MSG_STAGE: {
		struct msg_stage *s = &m->u.stage;
		c_u32(c, &s->seq_id), c_u32(c, &s->slot), c_u32(c, &s->stage), c_u32(c, &s->layer);
		c_u32(c, &s->n_layers), c_u32(c, &s->n), c_u32(c, &s->pos0);
		break;
	}
	case MSG_HEAD: {
		struct msg_head *h = &m->u.head;
		c_u32(c, &h->seq_id), c_u32(c, &h->slot), c_u32(c, &h->n), c_u32(c, &h->mode);
		c_u32(c, &h->k);
		break;
	}
	case MSG_RUN: {
		struct msg_run *r = &m->u.run;
		c_u32(c, &r->seq_id), c_u32(c, &r->slot);
		c_count(c, &r->n, MSG_MAX_TOKENS, "RUN: n exceeds MSG_MAX_TOKENS");
		c_u32(c, &r->pos0), c_u32(c, &r->mode), c_u32(c, &r->k);
		c_u32s(c, r->tokens, r->n);
		break;
	}
	case MSG_RUN_BATCH: {
		struct msg_run_batch *b = &m->u.run_batch;
		c_count(c, &b->n, MSG_MAX_SLOTS, "RUN_BATCH: n exceeds MSG_MAX_SLOTS");
		c_u32(c, &b->mode), c_u32(c, &b->k);
		for (uint32_t i = 0; i < b->n && !c->bad; i++) {
			struct msg_run_batch_entry *e = &b->e[i];
			c_u32(c, &e->seq_id), c_u32(c, &e->slot), c_u32(c, &e->pos), c_u32(c, &e->token);
		}
		break;
	}
	case MSG_STAGE_BATCH: {
		struct msg_stage_batch *b = &m->u.stage_batch;
		c_u32(c, &b->op), c_u32(c, &b->layer);
		c_count(c, &b->n, MSG_MAX_SLOTS, "STAGE_BATCH: n exceeds MSG_MAX_SLOTS");
		c_u32(c, &b->mode), c_u32(c, &b->k);
		for (uint32_t i = 0; i < b->n && !c->bad; i++) {
			struct msg_run_batch_entry *e = &b->e[i];
			c_u32(c, &e->seq_id), c_u32(c, &e->slot), c_u32(c, &e->pos), c_u32(c, &e->token);
		}
		break;
	}
	case MSG_RUN_CHUNKS: {
		struct msg_run_chunks *b = &m->u.run_chunks;
		c_count(c, &b->n, MSG_MAX_SLOTS, "RUN_CHUNKS: n exceeds MSG_MAX_SLOTS");
		c_count(c, &b->n_tok, MSG_MAX_ROWS, "RUN_CHUNKS: n_tok exceeds MSG_MAX_ROWS");
		c_u32(c, &b->mode), c_u32(c, &b->k), c_u32(c, &b->flags);
		for (uint32_t i = 0; i < b->n && !c->bad; i++) {
			struct msg_run_chunk *e = &b->e[i];
			c_u32(c, &e->seq_id), c_u32(c, &e->slot), c_u32(c, &e->pos0), c_u32(c, &e->n);
			c_u32(c, &e->head);
		}
		c_u32s(c, b->tokens, b->n_tok);
		break;
	}
	case MSG_FLOW: {
		struct msg_flow *f = &m->u.flow;
		c_u32(c, &f->op), c_u32(c, &f->layer), c_u32(c, &f->n_layer), c_u32(c, &f->flags);
		c_u32(c, &f->mode), c_u32(c, &f->k), c_u32(c, &f->origin_seq), c_u32(c, &f->epoch);
		c_i32(c, &f->status), c_u32(c, &f->token), c_u64(c, &f->t_post_ns);
		c_u64(c, &f->gpu_ns[0]), c_u64(c, &f->gpu_ns[1]), c_u32(c, &f->wall_us[0]), c_u32(c, &f->wall_us[1]);
		c_count(c, &f->n_hops, MSG_MAX_HOPS, "FLOW: n_hops exceeds MSG_MAX_HOPS");
		c_u32s(c, f->hop_us, f->n_hops);
		c_count(c, &f->n, MSG_MAX_SLOTS, "FLOW: n exceeds MSG_MAX_SLOTS");
		for (uint32_t i = 0; i < f->n && !c->bad; i++) {
			struct msg_run_batch_entry *e = &f->e[i];
			c_u32(c, &e->seq_id), c_u32(c, &e->slot), c_u32(c, &e->pos), c_u32(c, &e->token);
		}
		c_count(c, &f->n_tok, MSG_MAX_FLOW_TOKENS, "FLOW: n_tok exceeds MSG_MAX_FLOW_TOKENS");
		c_u32s(c, f->tokens, f->n_tok);
		c_u64(c, &f->t_origin_ns);
		c_count(c, &f->n_ops, MSG_MAX_HOPS, "FLOW: n_ops exceeds MSG_MAX_HOPS");
		if (!c->bad)
			c_u32s(c, f->op_us, 2 * f->n_ops);
		break;
	}
	case MSG_DONE: {
		struct msg_done *d = &m->u.done;
		c_u32(c, &d->ref_seq), c_u32(c, &d->seq_id), c_i32(c, &d->status), c_u32(c, &d->token);
		c_u32(c, &d->k), c_u32(c, &d->wall_us), c_u64(c, &d->gpu_ns);
		break;
	}
	case MSG_RESET_SEQ:
		c_u32(c, &m->u.reset_seq.seq_id), c_u32(c, &m->u.reset_seq.flags);
		break;
	case MSG_GEN_REQ: {
		struct msg_gen_req *g = &m->u.gen_req;
		c_u64(c, &g->request_id), c_u64(c, &g->seed);
		c_u32(c, &g->max_tokens), c_u32(c, &g->top_k);
		c_f32(c, &g->temperature), c_f32(c, &g->top_p), c_u32(c, &g->flags);
		c_count(c, &g->n_resume, MSG_MAX_GEN, "GEN_REQ: n_resume exceeds MSG_MAX_GEN");
		c_count(c, &g->n_prompt, MSG_MAX_PROMPT, "GEN_REQ: n_prompt exceeds MSG_MAX_PROMPT");
		c_f32(c, &g->min_p), c_f32(c, &g->repetition_penalty);
		c_f32(c, &g->presence_penalty), c_f32(c, &g->frequency_penalty);
		c_u32(c, &g->timeout_ms);
		c_count(c, &g->top_logprobs, MSG_MAX_TOP_LP, "GEN_REQ: top_logprobs exceeds MSG_MAX_TOP_LP");
		c_count(c, &g->n_schema, MSG_MAX_SCHEMA, "GEN_REQ: n_schema exceeds MSG_MAX_SCHEMA");
		c_count(c, &g->n_bias, MSG_MAX_BIAS, "GEN_REQ: n_bias exceeds MSG_MAX_BIAS");
		c_u32s(c, g->resume, g->n_resume);
		if (!c->bad)
			c_bytes(c, g->prompt, g->n_prompt);
		if (c->dec && !c->bad)
			g->prompt[g->n_prompt] = 0;
		if (!c->bad)
			c_bytes(c, g->schema, g->n_schema);
		if (c->dec && !c->bad)
			g->schema[g->n_schema] = 0;
		for (uint32_t i = 0; i < g->n_bias && !c->bad; i++)
			c_u32(c, &g->bias_ids[i]), c_f32(c, &g->bias[i]);
		c_count(c, &g->n_images, MSG_MAX_IMAGES, "GEN_REQ: n_images exceeds MSG_MAX_IMAGES");
		if (!c->bad)
			c_bytes(c, g->images, (size_t)g->n_images * MSG_DIGEST);
		break;
	}
	case MSG_IMAGE:
		c_u32(c, &m->u.image.slot), c_u32(c, &m->u.image.rows);
		c_bytes(c, m->u.image.digest, MSG_DIGEST), c_u32(c, &m->u.image.pad);
		break;
	case MSG_GEN_POLL:
		c_u64(c, &m->u.gen_poll.request_id), c_u32(c, &m->u.gen_poll.from);
		c_u32(c, &m->u.gen_poll.wait_ms);
		break;
	case MSG_GEN_TOKEN: {
		struct msg_gen_token *t = &m->u.gen_token;
		c_u64(c, &t->request_id), c_u32(c, &t->index), c_u32(c, &t->token);
		c_u32(c, &t->flags), c_f32(c, &t->logprob);
		c_count(c, &t->n_top, MSG_MAX_TOP_LP, "GEN_TOKEN: n_top exceeds MSG_MAX_TOP_LP");
		for (uint32_t i = 0; i < t->n_top && !c->bad; i++)
			c_u32(c, &t->top_ids[i]), c_f32(c, &t->top_lps[i]);
		c_text(c, &t->n_piece, t->piece, MSG_MAX_PIECE, "GEN_TOKEN: n_piece exceeds MSG_MAX_PIECE");
		break;
	}
	case MSG_GEN_END:
		c_u64(c, &m->u.gen_end.request_id), c_u32(c, &m->u.gen_end.n_tokens);
		c_u32(c, &m->u.gen_end.reason);
		break;
	case MSG_GEN_CANCEL:
		c_u64(c, &m->u.gen_cancel.request_id);
		break;
	case MSG_GEN_PROMPT: {
		struct msg_gen_prompt *g = &m->u.gen_prompt;
		c_u64(c, &g->request_id), c_u32(c, &g->total), c_u32(c, &g->offset);
		c_count(c, &g->n, MSG_MAX_PROMPT, "GEN_PROMPT: n exceeds MSG_MAX_PROMPT");
		if (!c->bad)
			c_bytes(c, g->data, g->n);
		break;
	}
	default:
		c->bad = 1;
		c->why = "unknown type";
	}
}

const char *msg_type_name(uint32_t type)
{
	switch (type) {
	case MSG_HELLO: return "HELLO";
	case MSG_WELCOME: return "WELCOME";
	case MSG_ACK: return "ACK";
	case MSG_PING: return "PING";
	case MSG_PONG: return "PONG";
	case MSG_STATUS_REQ: return "STATUS_REQ";
	case MSG_STATUS: return "STATUS";
	case MSG_SHUTDOWN: return "SHUTDOWN";
	case MSG_ERROR: return "ERROR";
	case MSG_EMBED: return "EMBED";
	case MSG_STAGE: return "STAGE";
	case MSG_HEAD: return "HEAD";
	case MSG_RUN: return "RUN";
	case MSG_RUN_BATCH: return "RUN_BATCH";
	case MSG_STAGE_BATCH: return "STAGE_BATCH";
	case MSG_RUN_CHUNKS: return "RUN_CHUNKS";
	case MSG_DONE: return "DONE";
	case MSG_FLOW: return "FLOW";
	case MSG_IMAGE: return "IMAGE";
	case MSG_RESET_SEQ: return "RESET_SEQ";
	case MSG_GEN_REQ: return "GEN_REQ";
	case MSG_GEN_POLL: return "GEN_POLL";
	case MSG_GEN_TOKEN: return "GEN_TOKEN";
	case MSG_GEN_END: return "GEN_END";
	case MSG_GEN_CANCEL: return "GEN_CANCEL";
	case MSG_GEN_PROMPT: return "GEN_PROMPT";
	}
	return "?";
}

/* A fixed char field: NUL-terminated within its cap. */
static int fixed_str_ok(const char *s, size_t cap)
{
	return memchr(s, 0, cap) != NULL;
}

#define BAD(...) err_set(ERR_INVAL, "msg: " __VA_ARGS__)

static int check_slot_n(const char *t, uint32_t slot, uint32_t n)
{
	if (slot >= MSG_MAX_SLOTS)
		return BAD("%s: slot %u >= %d", t, slot, MSG_MAX_SLOTS);
	if (n < 1 || n > MSG_MAX_TOKENS)
		return BAD("%s: n %u outside [1, %d]", t, n, MSG_MAX_TOKENS);
	return 0;
}

/* Batch entries (RUN_BATCH, STAGE_BATCH): 1..MSG_MAX_SLOTS, distinct slots, positions in range. */
static int check_entries(const char *t, const struct msg_run_batch_entry *e, uint32_t n)
{
	if (n < 1 || n > MSG_MAX_SLOTS)
		return BAD("%s: n %u outside [1, %d]", t, n, MSG_MAX_SLOTS);
	uint64_t used = 0; /* MSG_MAX_SLOTS == 64 bits */
	for (uint32_t i = 0; i < n; i++) {
		if (e[i].slot >= MSG_MAX_SLOTS)
			return BAD("%s: entry %u: slot %u >= %d", t, i, e[i].slot, MSG_MAX_SLOTS);
		if (used >> e[i].slot & 1)
			return BAD("%s: entry %u: slot %u appears twice", t, i, e[i].slot);
		used |= (uint64_t)1 << e[i].slot;
		if (e[i].pos >= MSG_MAX_POS)
			return BAD("%s: entry %u: pos %u >= %u", t, i, e[i].pos, MSG_MAX_POS);
	}
	return 0;
}

/* full_ok: the message may ask for MSG_HEAD_FULL (HEAD, STAGE_BATCH, FLOW). */
static int check_head(const char *t, uint32_t mode, uint32_t k, bool full_ok)
{
	if (mode == MSG_HEAD_ARGMAX) {
		if (k != 1)
			return BAD("%s: argmax head with k %u (must be 1)", t, k);
	} else if (mode == MSG_HEAD_TOPK || (mode == MSG_HEAD_FULL && full_ok)) {
		if (k < 1 || k > MSG_MAX_TOPK)
			return BAD("%s: top-k k %u outside [1, %d]", t, k, MSG_MAX_TOPK);
	} else {
		return BAD("%s: head mode %u unknown", t, mode);
	}
	return 0;
}

static int check_pos(const char *t, uint32_t pos0, uint32_t n)
{
	if (pos0 > MSG_MAX_POS || n > MSG_MAX_POS - pos0)
		return BAD("%s: positions %u+%u exceed %u", t, pos0, n, MSG_MAX_POS);
	return 0;
}

int msg_validate(const struct msg *m)
{
	const char *t = msg_type_name(m->type);
	int rc;
	switch (m->type) {
	case MSG_HELLO:
	case MSG_WELCOME: {
		const struct msg_hello *h = &m->u.hello;
		if (h->role < 1 || h->role > MSG_ROLE_MAX)
			return BAD("%s: role %u unknown", t, h->role);
		if (h->version != MSG_VERSION)
			return BAD("%s: peer speaks version %u, we speak %d", t, h->version, MSG_VERSION);
		if (h->flags)
			return BAD("%s: flags 0x%x not 0", t, h->flags);
		return 0;
	}
	case MSG_ACK:
		if (m->u.ack.code > 0)
			return BAD("ACK: code %d positive", m->u.ack.code);
		return 0;
	case MSG_PING:
	case MSG_PONG:
	case MSG_STATUS_REQ:
	case MSG_SHUTDOWN:
	case MSG_GEN_CANCEL:
		return 0;
	case MSG_STATUS: {
		const struct msg_status *s = &m->u.status;
		if (s->role < 1 || s->role > MSG_ROLE_MAX)
			return BAD("STATUS: role %u unknown", s->role);
		if (!fixed_str_ok(s->backend, sizeof s->backend))
			return BAD("STATUS: backend not NUL-terminated within %d bytes", MSG_MAX_BACKEND);
		if (!fixed_str_ok(s->device, sizeof s->device))
			return BAD("STATUS: device not NUL-terminated within %d bytes", MSG_MAX_DEVICE);
		if (s->share_path > MSG_SHARE_UDMABUF)
			return BAD("STATUS: share_path %u unknown", s->share_path);
		if (s->import_mode > MSG_IMPORT_UPLOAD)
			return BAD("STATUS: import_mode %u unknown", s->import_mode);
		if (s->reserved)
			return BAD("STATUS: reserved not 0");
		return 0;
	}
	case MSG_ERROR:
		if (m->u.error.code >= 0)
			return BAD("ERROR: code %d not negative", m->u.error.code);
		if (!fixed_str_ok(m->u.error.text, sizeof m->u.error.text))
			return BAD("ERROR: text not NUL-terminated within %d bytes", MSG_MAX_TEXT);
		return 0;
	case MSG_EMBED:
		return check_slot_n(t, m->u.embed.slot, m->u.embed.n);
	case MSG_STAGE: {
		const struct msg_stage *s = &m->u.stage;
		if ((rc = check_slot_n(t, s->slot, s->n)) || (rc = check_pos(t, s->pos0, s->n)))
			return rc;
		if (s->stage < MSG_STAGE_ATTN || s->stage > MSG_STAGE_LAYERS)
			return BAD("STAGE: stage %u unknown", s->stage);
		if (s->layer >= MSG_MAX_LAYERS || s->n_layers < 1 ||
		    s->n_layers > MSG_MAX_LAYERS - s->layer)
			return BAD("STAGE: layers [%u, +%u) outside [0, %d)", s->layer, s->n_layers,
				   MSG_MAX_LAYERS);
		if (s->stage != MSG_STAGE_LAYERS && s->n_layers != 1)
			return BAD("STAGE: attn/ffn stage with n_layers %u (must be 1)", s->n_layers);
		return 0;
	}
	case MSG_HEAD:
		if ((rc = check_slot_n(t, m->u.head.slot, m->u.head.n)))
			return rc;
		return check_head(t, m->u.head.mode, m->u.head.k, true);
	case MSG_RUN: {
		const struct msg_run *r = &m->u.run;
		if ((rc = check_slot_n(t, r->slot, r->n)) || (rc = check_pos(t, r->pos0, r->n)))
			return rc;
		return check_head(t, r->mode, r->k, false);
	}
	case MSG_RUN_BATCH: {
		const struct msg_run_batch *b = &m->u.run_batch;
		if ((rc = check_entries(t, b->e, b->n)))
			return rc;
		return check_head(t, b->mode, b->k, false);
	}
	case MSG_STAGE_BATCH: {
		const struct msg_stage_batch *b = &m->u.stage_batch;
		if (b->op < MSG_OP_EMBED || b->op > MSG_OP_HEAD)
			return BAD("STAGE_BATCH: op %u unknown", b->op);
		bool layered = b->op == MSG_OP_ATTN || b->op == MSG_OP_FFN;
		if (layered ? b->layer >= MSG_MAX_LAYERS : b->layer != 0)
			return BAD("STAGE_BATCH: layer %u (< %d for attn/ffn, else 0)", b->layer, MSG_MAX_LAYERS);
		if ((rc = check_entries(t, b->e, b->n)))
			return rc;
		if (b->op != MSG_OP_HEAD && (b->mode != MSG_HEAD_ARGMAX || b->k != 1))
			return BAD("STAGE_BATCH: mode %u k %u on a non-head op (must be argmax, 1)", b->mode, b->k);
		return check_head(t, b->mode, b->k, true);
	}
	case MSG_RUN_CHUNKS: {
		const struct msg_run_chunks *b = &m->u.run_chunks;
		if (b->n < 1 || b->n > MSG_MAX_SLOTS)
			return BAD("RUN_CHUNKS: n %u outside [1, %d]", b->n, MSG_MAX_SLOTS);
		if (b->flags & ~MSG_CHUNKS_WIDE)
			return BAD("RUN_CHUNKS: flags 0x%x unknown", b->flags);
		uint64_t used = 0, rows = 0;
		for (uint32_t i = 0; i < b->n; i++) {
			const struct msg_run_chunk *e = &b->e[i];
			if ((rc = check_slot_n(t, e->slot, e->n)) || (rc = check_pos(t, e->pos0, e->n)))
				return err_prefix(rc, "RUN_CHUNKS entry %u", i);
			if (used >> e->slot & 1)
				return BAD("RUN_CHUNKS: entry %u: slot %u appears twice", i, e->slot);
			if (e->head > MSG_CHUNK_HEAD_BIAS)
				return BAD("RUN_CHUNKS: entry %u: head %u (0..3)", i, e->head);
			used |= (uint64_t)1 << e->slot;
			rows += e->n;
		}
		if (rows != b->n_tok)
			return BAD("RUN_CHUNKS: n_tok %u, the entries hold %llu", b->n_tok, (unsigned long long)rows);
		return check_head(t, b->mode, b->k, false);
	}
	case MSG_FLOW: {
		const struct msg_flow *f = &m->u.flow;
		if (f->op < MSG_OP_EMBED || f->op > MSG_OP_END)
			return BAD("FLOW: op %u unknown", f->op);
		if (f->n_layer < 1 || f->n_layer > MSG_MAX_LAYERS)
			return BAD("FLOW: n_layer %u outside [1, %d]", f->n_layer, MSG_MAX_LAYERS);
		bool layered = f->op == MSG_OP_ATTN || f->op == MSG_OP_FFN;
		if (layered ? f->layer >= f->n_layer : f->layer != 0)
			return BAD("FLOW: layer %u (< n_layer %u for attn/ffn, else 0)", f->layer, f->n_layer);
		if (f->flags & ~(MSG_FLOW_HEAD | MSG_FLOW_WIDE | MSG_FLOW_CHUNK | MSG_FLOW_TIMES))
			return BAD("FLOW: flags 0x%x unknown", f->flags);
		if (f->n_ops && !(f->flags & MSG_FLOW_TIMES))
			return BAD("FLOW: %u op times without the times flag", f->n_ops);
		if (f->flags & MSG_FLOW_CHUNK) {
			if (f->n < 1 || f->n > MSG_FLOW_CHUNK_SEQS || f->n_tok < 1 || f->n_tok > MSG_MAX_FLOW_TOKENS ||
			    (f->flags & MSG_FLOW_WIDE))
				return BAD("FLOW: chunks of 1..%d sequences, 1..%d tokens, no wide flag (n %u, n_tok %u)",
					   MSG_FLOW_CHUNK_SEQS, MSG_MAX_FLOW_TOKENS, f->n, f->n_tok);
			uint32_t sum = 0;
			bool heads = false;
			for (uint32_t i = 0; i < f->n; i++) {
				uint32_t cnt = f->e[i].token & MSG_CHUNK_COUNT;
				if (cnt < 1 || (f->e[i].token & ~(MSG_CHUNK_COUNT | MSG_CHUNK_HEAD)))
					return BAD("FLOW: chunk %u: word 0x%x (a count of 1.. tokens, and the head bit)", i,
						   f->e[i].token);
				if ((rc = check_pos(t, f->e[i].pos, cnt)))
					return rc;
				sum += cnt; /* <= 16 * 0xffff: no overflow */
				heads = heads || (f->e[i].token & MSG_CHUNK_HEAD);
			}
			if (sum != f->n_tok)
				return BAD("FLOW: chunks of %u tokens in all, n_tok %u", sum, f->n_tok);
			if (heads != !!(f->flags & MSG_FLOW_HEAD))
				return BAD("FLOW: the head flag %s a chunk that samples", heads ? "missing with" : "without");
		} else if (f->n_tok) {
			return BAD("FLOW: n_tok %u without the chunk flag", f->n_tok);
		}
		if (f->status > 0 || f->status < -64)
			return BAD("FLOW: status %d outside [-64, 0]", f->status);
		if (f->status && f->op != MSG_OP_END)
			return BAD("FLOW: status %d on op %u (only END carries one)", f->status, f->op);
		if ((rc = check_entries(t, f->e, f->n)))
			return rc;
		if (!(f->flags & MSG_FLOW_HEAD) && (f->mode != MSG_HEAD_ARGMAX || f->k != 1))
			return BAD("FLOW: mode %u k %u without a head (must be argmax, 1)", f->mode, f->k);
		return check_head(t, f->mode, f->k, true);
	}
	case MSG_DONE: {
		const struct msg_done *d = &m->u.done;
		if (d->status > 0 || d->status < -64)
			return BAD("DONE: status %d outside [-64, 0]", d->status);
		if (d->k > MSG_MAX_TOPK)
			return BAD("DONE: k %u > %d", d->k, MSG_MAX_TOPK);
		return 0;
	}
	case MSG_RESET_SEQ:
		if (m->u.reset_seq.flags & ~MSG_RESET_ALL)
			return BAD("RESET_SEQ: unknown flags 0x%x", m->u.reset_seq.flags);
		return 0;
	case MSG_GEN_REQ: {
		const struct msg_gen_req *g = &m->u.gen_req;
		if (!g->request_id)
			return BAD("GEN_REQ: request_id 0");
		if (g->max_tokens < 1 || g->max_tokens > MSG_MAX_GEN)
			return BAD("GEN_REQ: max_tokens %u outside [1, %d]", g->max_tokens, MSG_MAX_GEN);
		if (g->top_k > MSG_MAX_TOPK)
			return BAD("GEN_REQ: top_k %u > %d", g->top_k, MSG_MAX_TOPK);
		if (!(g->temperature >= 0 && g->temperature <= 100))
			return BAD("GEN_REQ: temperature %g outside [0, 100]", g->temperature);
		if (!(g->top_p > 0 && g->top_p <= 1))
			return BAD("GEN_REQ: top_p %g outside (0, 1]", g->top_p);
		/* min_p and the penalties: the ranges of the HTTP API (openai.c);
		 * the negated comparisons also refuse NaN */
		if (!(g->min_p >= 0 && g->min_p <= 1))
			return BAD("GEN_REQ: min_p %g outside [0, 1]", g->min_p);
		if (!(g->repetition_penalty > 0 && g->repetition_penalty <= 100))
			return BAD("GEN_REQ: repetition_penalty %g outside (0, 100] (1 = off)",
				   g->repetition_penalty);
		if (!(g->presence_penalty >= -2 && g->presence_penalty <= 2))
			return BAD("GEN_REQ: presence_penalty %g outside [-2, 2]", g->presence_penalty);
		if (!(g->frequency_penalty >= -2 && g->frequency_penalty <= 2))
			return BAD("GEN_REQ: frequency_penalty %g outside [-2, 2]",
				   g->frequency_penalty);
		if (g->flags & ~MSG_GEN_FLAGS_ALL)
			return BAD("GEN_REQ: unknown flags 0x%x", g->flags);
		if (g->top_logprobs > MSG_MAX_TOP_LP)
			return BAD("GEN_REQ: top_logprobs %u > %d", g->top_logprobs, MSG_MAX_TOP_LP);
		if (g->top_logprobs && !(g->flags & MSG_GEN_LOGPROBS))
			return BAD("GEN_REQ: top_logprobs %u without MSG_GEN_LOGPROBS", g->top_logprobs);
		if (g->n_resume > g->max_tokens || g->n_resume > MSG_MAX_GEN)
			return BAD("GEN_REQ: n_resume %u exceeds max_tokens %u", g->n_resume,
				   g->max_tokens);
		if (g->n_prompt < 1 || g->n_prompt > MSG_MAX_PROMPT)
			return BAD("GEN_REQ: n_prompt %u outside [1, %d]", g->n_prompt, MSG_MAX_PROMPT);
		if ((g->flags & MSG_GEN_TOKENS) && ((g->n_prompt % 4) || (g->flags & MSG_GEN_CHAT)))
			return BAD("GEN_REQ: a token prompt of %u bytes (whole u32 ids, no MSG_GEN_CHAT)",
				   g->n_prompt);
		if (!(g->flags & MSG_GEN_TOKENS) && memchr(g->prompt, 0, g->n_prompt))
			return BAD("GEN_REQ: prompt contains a NUL byte");
		if (g->n_schema > MSG_MAX_SCHEMA || (g->n_schema && !(g->flags & MSG_GEN_JSON)))
			return BAD("GEN_REQ: n_schema %u (at most %d, only with MSG_GEN_JSON)", g->n_schema,
				   MSG_MAX_SCHEMA);
		if (memchr(g->schema, 0, g->n_schema))
			return BAD("GEN_REQ: schema contains a NUL byte");
		if (g->n_bias > MSG_MAX_BIAS)
			return BAD("GEN_REQ: n_bias %u > %d", g->n_bias, MSG_MAX_BIAS);
		for (uint32_t i = 0; i < g->n_bias; i++)
			if (!(g->bias[i] >= -100.0f && g->bias[i] <= 100.0f))
				return BAD("GEN_REQ: bias[%u] %g outside [-100, 100]", i, (double)g->bias[i]);
		if (g->n_images > MSG_MAX_IMAGES || (g->n_images && !(g->flags & MSG_GEN_TOKENS)))
			return BAD("GEN_REQ: n_images %u (at most %d, only with MSG_GEN_TOKENS)", g->n_images,
				   MSG_MAX_IMAGES);
		return 0;
	}
	case MSG_IMAGE:
		if (m->u.image.rows < 1 || m->u.image.rows > MSG_MAX_TOKENS || m->u.image.pad)
			return BAD("IMAGE: rows %u outside [1, %d] or pad set", m->u.image.rows, MSG_MAX_TOKENS);
		return 0;
	case MSG_GEN_PROMPT: {
		const struct msg_gen_prompt *g = &m->u.gen_prompt;
		if (!g->request_id)
			return BAD("GEN_PROMPT: request_id 0");
		if (g->total < 1 || g->total > MSG_MAX_PROMPT_ALL)
			return BAD("GEN_PROMPT: total %u outside [1, %u]", g->total, MSG_MAX_PROMPT_ALL);
		if (g->n < 1 || g->n > MSG_MAX_PROMPT || g->offset > g->total || g->n > g->total - g->offset)
			return BAD("GEN_PROMPT: bytes %u+%u outside the total %u (a part holds 1..%d)", g->offset,
				   g->n, g->total, MSG_MAX_PROMPT);
		return 0;
	}
	case MSG_GEN_POLL:
		if (!m->u.gen_poll.request_id)
			return BAD("GEN_POLL: request_id 0");
		if (m->u.gen_poll.from > MSG_MAX_GEN)
			return BAD("GEN_POLL: from %u > %d", m->u.gen_poll.from, MSG_MAX_GEN);
		if (m->u.gen_poll.wait_ms > MSG_MAX_WAIT_MS)
			return BAD("GEN_POLL: wait_ms %u > %d", m->u.gen_poll.wait_ms, MSG_MAX_WAIT_MS);
		return 0;
	case MSG_GEN_TOKEN: {
		const struct msg_gen_token *g = &m->u.gen_token;
		if (g->index >= MSG_MAX_GEN)
			return BAD("GEN_TOKEN: index %u >= %d", g->index, MSG_MAX_GEN);
		if (g->n_piece > MSG_MAX_PIECE)
			return BAD("GEN_TOKEN: n_piece %u > %d", g->n_piece, MSG_MAX_PIECE);
		if (memchr(g->piece, 0, g->n_piece))
			return BAD("GEN_TOKEN: piece contains a NUL byte");
		if (g->flags & ~MSG_TOK_FLAGS_ALL)
			return BAD("GEN_TOKEN: unknown flags 0x%x", g->flags);
		if (g->n_top > MSG_MAX_TOP_LP)
			return BAD("GEN_TOKEN: n_top %u > %d", g->n_top, MSG_MAX_TOP_LP);
		if (!(g->flags & MSG_TOK_LOGPROB) && (g->n_top || g->logprob != 0))
			return BAD("GEN_TOKEN: logprobs without MSG_TOK_LOGPROB");
		/* a log-probability is <= 0; -inf is a token the model rules out.
		 * The negated comparison also refuses NaN. */
		if (!(g->logprob <= 0))
			return BAD("GEN_TOKEN: logprob %g is not <= 0", g->logprob);
		for (uint32_t i = 0; i < g->n_top; i++)
			if (!(g->top_lps[i] <= 0))
				return BAD("GEN_TOKEN: top logprob %u (%g) is not <= 0", i, g->top_lps[i]);
		return 0;
	}
	case MSG_GEN_END:
		if (m->u.gen_end.n_tokens > MSG_MAX_GEN)
			return BAD("GEN_END: n_tokens %u > %d", m->u.gen_end.n_tokens, MSG_MAX_GEN);
		if (m->u.gen_end.reason < 1 || m->u.gen_end.reason > MSG_END_MAX)
			return BAD("GEN_END: reason %u unknown", m->u.gen_end.reason);
		return 0;
	}
	return BAD("type %u unknown", m->type);
}

/* Encoded payload size from the (validated) counts. */
int msg_payload_size(const struct msg *m, size_t *size)
{
	int rc = msg_validate(m);
	if (rc)
		return rc;
	size_t s = 0;
	switch (m->type) {
	case MSG_HELLO: case MSG_WELCOME: s = MSG_SIZE_HELLO; break;
	case MSG_ACK: s = MSG_SIZE_ACK; break;
	case MSG_PING: case MSG_PONG: s = MSG_SIZE_PING; break;
	case MSG_STATUS_REQ: s = 0; break;
	case MSG_STATUS: s = MSG_SIZE_STATUS; break;
	case MSG_SHUTDOWN: s = MSG_SIZE_SHUTDOWN; break;
	case MSG_ERROR: s = MSG_SIZE_ERROR; break;
	case MSG_EMBED: s = MSG_SIZE_EMBED_BASE + 4 * (size_t)m->u.embed.n; break;
	case MSG_STAGE: s = MSG_SIZE_STAGE; break;
	case MSG_HEAD: s = MSG_SIZE_HEAD; break;
	case MSG_RUN: s = MSG_SIZE_RUN_BASE + 4 * (size_t)m->u.run.n; break;
	case MSG_RUN_BATCH:
		s = MSG_SIZE_RUN_BATCH_BASE + MSG_SIZE_RUN_BATCH_ENTRY * (size_t)m->u.run_batch.n;
		break;
	case MSG_STAGE_BATCH:
		s = MSG_SIZE_STAGE_BATCH_BASE + MSG_SIZE_RUN_BATCH_ENTRY * (size_t)m->u.stage_batch.n;
		break;
	case MSG_RUN_CHUNKS:
		s = MSG_SIZE_RUN_CHUNKS_BASE + MSG_SIZE_RUN_CHUNK_ENTRY * (size_t)m->u.run_chunks.n +
		    4 * (size_t)m->u.run_chunks.n_tok;
		break;
	case MSG_DONE: s = MSG_SIZE_DONE; break;
	case MSG_FLOW:
		s = MSG_SIZE_FLOW_BASE + 4 * (size_t)m->u.flow.n_hops + MSG_SIZE_RUN_BATCH_ENTRY * (size_t)m->u.flow.n +
		    4 * (size_t)m->u.flow.n_tok + 8 * (size_t)m->u.flow.n_ops;
		break;
	case MSG_RESET_SEQ: s = MSG_SIZE_RESET_SEQ; break;
	case MSG_GEN_REQ:
		s = MSG_SIZE_GEN_REQ_BASE + 4 * (size_t)m->u.gen_req.n_resume + m->u.gen_req.n_prompt +
		    m->u.gen_req.n_schema + 8 * (size_t)m->u.gen_req.n_bias + 4 + MSG_DIGEST * (size_t)m->u.gen_req.n_images;
		break;
	case MSG_IMAGE: s = MSG_SIZE_IMAGE; break;
	case MSG_GEN_POLL: s = MSG_SIZE_GEN_POLL; break;
	case MSG_GEN_TOKEN:
		s = MSG_SIZE_GEN_TOKEN_BASE + 8 * (size_t)m->u.gen_token.n_top + m->u.gen_token.n_piece;
		break;
	case MSG_GEN_END: s = MSG_SIZE_GEN_END; break;
	case MSG_GEN_CANCEL: s = MSG_SIZE_GEN_CANCEL; break;
	case MSG_GEN_PROMPT: s = MSG_SIZE_GEN_PROMPT_BASE + (size_t)m->u.gen_prompt.n; break;
	}
	*size = s;
	return 0;
}

int msg_encode(const struct msg *m, void *buf, size_t cap, size_t *len)
{
	size_t plen;
	int rc = msg_payload_size(m, &plen);
	if (rc)
		return rc;
	if (cap < MSG_HDR_SIZE || plen > cap - MSG_HDR_SIZE)
		return err_set(ERR_RANGE, "msg: %s: %zu bytes do not fit a %zu-byte buffer",
			       msg_type_name(m->type), MSG_HDR_SIZE + plen, cap);
	uint8_t *p = buf;
	le_put(p + 0, MSG_MAGIC, 4);
	le_put(p + 4, MSG_VERSION, 2);
	le_put(p + 6, m->type, 2);
	le_put(p + 8, m->seq, 4);
	le_put(p + 12, plen, 4);
	le_put(p + 16, 0, 4);
	le_put(p + 20, 0, 4);
	struct cur c = { .p = p + MSG_HDR_SIZE, .len = plen, .dec = 0 };
	/* Encoding only reads m; the cursor API is shared with the decoder. */
	codec(&c, (struct msg *)m);
	if (c.bad || c.off != plen)
		return err_set(ERR_STATE, "msg: %s: encoder wrote %zu of %zu bytes", msg_type_name(m->type),
			       c.off, plen);
	*len = MSG_HDR_SIZE + plen;
	return 0;
}

int msg_decode(const void *buf, size_t len, struct msg *out)
{
	const uint8_t *p = buf;
	memset(out, 0, offsetof(struct msg, u) + sizeof out->u.hello);
	if (len < MSG_HDR_SIZE)
		return BAD("%zu bytes is shorter than the %d-byte header", len, MSG_HDR_SIZE);
	if (le_get(p, 4) != MSG_MAGIC)
		return BAD("bad magic 0x%08x (want \"UNIC\")", (unsigned)le_get(p, 4));
	uint32_t version = (uint32_t)le_get(p + 4, 2);
	if (version != MSG_VERSION)
		return BAD("version %u unsupported (we speak %d)", version, MSG_VERSION);
	uint16_t type = (uint16_t)le_get(p + 6, 2);
	uint32_t plen = (uint32_t)le_get(p + 12, 4);
	if (le_get(p + 16, 4) || le_get(p + 20, 4))
		return BAD("header flags/reserved not 0");
	if (!strcmp(msg_type_name(type), "?"))
		return BAD("type %u unknown", type);
	if (plen > MSG_MAX_PAYLOAD)
		return BAD("%s: payload length %u > %d", msg_type_name(type), plen, MSG_MAX_PAYLOAD);
	if (plen != len - MSG_HDR_SIZE)
		return BAD("%s: header says %u payload bytes, message has %zu", msg_type_name(type), plen,
			   len - MSG_HDR_SIZE);
	out->type = type;
	out->seq = (uint32_t)le_get(p + 8, 4);
	struct cur c = { .p = (uint8_t *)p + MSG_HDR_SIZE, .len = plen, .dec = 1 };
	codec(&c, out);
	if (c.bad)
		return BAD("%s: %s", msg_type_name(type), c.why ? c.why : "malformed");
	if (c.off != plen)
		return BAD("%s: %u payload bytes, fields take %zu", msg_type_name(type), plen, c.off);
	return msg_validate(out);
}

void msg_init(struct msg *m, uint16_t type)
{
	memset(m, 0, sizeof *m);
	m->type = type;
}

void msg_set_str(char *field, size_t cap, const char *s)
{
	if (!cap)
		return;
	memset(field, 0, cap);
	size_t n = strnlen(s, cap - 1);
	memcpy(field, s, n);
}
