/* prompt_parts: long prompts in GEN_PROMPT parts (coordinator/prompt_parts.h). */
#include "coordinator/prompt_parts.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"

static struct parts_entry *find(struct prompt_parts *t, uint64_t id)
{
	for (uint32_t i = 0; i < PARTS_MAX; i++)
		if (t->e[i].id == id)
			return &t->e[i];
	return NULL;
}

static void drop(struct parts_entry *e)
{
	free(e->buf);
	memset(e, 0, sizeof *e);
}

int parts_add(struct prompt_parts *t, const struct msg_gen_prompt *p, uint32_t peer, int64_t now,
	       uint32_t *got)
{
	/* the codec checked 1 <= total <= MSG_MAX_PROMPT_ALL and offset + n <= total */
	if (!p->request_id || p->total < 1 || p->total > MSG_MAX_PROMPT_ALL || p->n < 1 ||
	    p->offset > p->total || p->n > p->total - p->offset)
		return err_set(ERR_INVAL, "GEN_PROMPT: bytes %u+%u of %u", p->offset, p->n, p->total);
	struct parts_entry *e = find(t, p->request_id);
	if (p->offset == 0 && (!e || e->total != p->total)) {
		/* (re)start: the client lost its staging (our restart, or its own) */
		if (e)
			drop(e);
		e = find(t, 0);
		if (!e)
			return err_set(ERR_RANGE, "coordinator busy: %d long prompts are being received; "
				       "try again later", PARTS_MAX);
		/* the whole prompt at once: later parts and GEN_REQ's tail never grow it */
		e->buf = malloc((size_t)p->total + MSG_MAX_PROMPT + 1);
		if (!e->buf)
			return err_set(ERR_NOMEM, "out of memory for a prompt of %u bytes", p->total);
		e->id = p->request_id;
		e->total = p->total;
	}
	if (!e)
		return err_set(ERR_NOTFOUND, "GEN_PROMPT: nothing staged for request %016llx",
			       (unsigned long long)p->request_id);
	if (e->total != p->total || p->offset > e->got)
		return err_set(ERR_INVAL, "GEN_PROMPT: bytes %u+%u of %u do not follow the %u of %u staged",
			       p->offset, p->n, p->total, e->got, e->total);
	if (p->offset + p->n > e->got) { /* else a resend of a part we have */
		memcpy(e->buf + p->offset, p->data, p->n);
		e->got = p->offset + p->n;
	}
	e->peer = peer;
	e->t_last = now;
	*got = e->got;
	return 0;
}

int parts_take(struct prompt_parts *t, uint64_t id, const char *tail, uint32_t n_tail, char **out,
	       uint32_t *len)
{
	struct parts_entry *e = id ? find(t, id) : NULL;
	if (!e || e->got != e->total)
		return err_set(ERR_NOTFOUND, "GEN_REQ: no whole prompt staged for request %016llx "
			       "(%u of %u bytes)", (unsigned long long)id, e ? e->got : 0, e ? e->total : 0);
	if (n_tail > MSG_MAX_PROMPT || e->total > MSG_MAX_PROMPT_ALL - n_tail) {
		uint32_t total = e->total;
		drop(e);
		return err_set(ERR_RANGE, "prompt: %u + %u bytes exceed %u", total, n_tail,
			       MSG_MAX_PROMPT_ALL);
	}
	memcpy(e->buf + e->total, tail, n_tail);
	*len = e->total + n_tail;
	e->buf[*len] = 0;
	*out = e->buf;
	e->buf = NULL;
	drop(e);
	return 0;
}

void parts_expire(struct prompt_parts *t, int64_t now, int64_t idle_ns)
{
	for (uint32_t i = 0; i < PARTS_MAX; i++)
		if (t->e[i].id && now - t->e[i].t_last > idle_ns)
			drop(&t->e[i]);
}

void parts_drop_peer(struct prompt_parts *t, uint32_t peer)
{
	for (uint32_t i = 0; i < PARTS_MAX; i++)
		if (t->e[i].id && t->e[i].peer == peer)
			drop(&t->e[i]);
}

void parts_clear(struct prompt_parts *t)
{
	for (uint32_t i = 0; i < PARTS_MAX; i++)
		drop(&t->e[i]);
}

uint32_t parts_count(const struct prompt_parts *t)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < PARTS_MAX; i++)
		n += t->e[i].id != 0;
	return n;
}
