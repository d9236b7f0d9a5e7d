/* prompt_parts: prompts longer than one GEN_REQ carries, received in GEN_PROMPT
 * parts before their GEN_REQ (flag MSG_GEN_STAGED; docs/protocol.md).
 *
 * A table of at most PARTS_MAX prompts by request id. A part at offset 0
 * allocates the whole prompt at once (total, checked by the codec against
 * MSG_MAX_PROMPT_ALL, plus room for GEN_REQ's own part), later parts fill it
 * in order, and nothing grows afterwards: memory stays within
 * PARTS_MAX * (MSG_MAX_PROMPT_ALL + MSG_MAX_PROMPT) whatever clients send. */
#ifndef UNICORN_PROMPT_PARTS_H
#define UNICORN_PROMPT_PARTS_H

#include <stdint.h>

#include "ipc/msg.h"

#define PARTS_MAX 8 /* prompts staged at once (a ninth waits for one to finish: ERR_RANGE) */

struct parts_entry {
	uint64_t id;                 /* 0: free */
	uint32_t peer;               /* the client's connection */
	char *buf;                   /* [total + MSG_MAX_PROMPT + 1] */
	uint32_t total, got;
	int64_t t_last;              /* ns: the last part */
};

struct prompt_parts {
	struct parts_entry e[PARTS_MAX];
};

/* One part: 0 and *got = bytes staged so far (a resent part is taken again
 * without effect), or ERR_NOTFOUND (offset > 0 and nothing staged under the
 * id), ERR_INVAL (a part that does not follow the staged bytes, or another
 * total), ERR_RANGE (PARTS_MAX prompts staging), ERR_NOMEM; with err_set. */
int parts_add(struct prompt_parts *t, const struct msg_gen_prompt *p, uint32_t peer, int64_t now,
	       uint32_t *got);
/* GEN_REQ with MSG_GEN_STAGED: the whole prompt, the staged bytes of id then
 * tail[n_tail], in *out (malloc'ed, NUL-terminated; the entry is freed).
 * ERR_NOTFOUND if nothing complete is staged under id (the client stages
 * again), ERR_RANGE if the whole is over MSG_MAX_PROMPT_ALL. */
int parts_take(struct prompt_parts *t, uint64_t id, const char *tail, uint32_t n_tail, char **out,
	       uint32_t *len);
/* Free entries whose last part came more than idle_ns before now, or (peer
 * != 0) whose client's connection closed. */
void parts_expire(struct prompt_parts *t, int64_t now, int64_t idle_ns);
void parts_drop_peer(struct prompt_parts *t, uint32_t peer);
void parts_clear(struct prompt_parts *t);
/* Entries in use. */
uint32_t parts_count(const struct prompt_parts *t);

#endif
