/* toolcall: the tool calls in a generated reply, found while it grows
 * (docs/http.md "Tools").
 *
 * A reply is calls when, after blanks and an optional ``` fence, it is one
 * {"name": NAME, "arguments": {...}} object naming a known function, a JSON
 * array of such objects, or such objects one after the other ("parameters"
 * is read as "arguments"; missing arguments are {}); what follows the calls
 * is dropped. Anything else is content.
 *
 * The scanner commits to calls as soon as the first call's name is read and
 * known; from then on it reports each call's start (index, id, name) and the
 * bytes of its "arguments" as they arrive, so a stream sends them as
 * OpenAI's deltas. Until it commits it holds the text, and hands it all back
 * as content once the reply cannot be a call. Without parallel calls only
 * the first call counts. Bounded: at most TC_MAX_CALLS calls, names and keys
 * of at most TC_MAX_KEY bytes; work linear in the text. */
#ifndef UNICORN_TOOLCALL_H
#define UNICORN_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TC_MAX_CALLS 16
#define TC_MAX_KEY 256

enum tc_mode { TC_UNDECIDED = 0, TC_CALLS, TC_TEXT };
enum tc_ev_kind { TC_EV_TEXT = 1, TC_EV_CALL, TC_EV_ARGS };

/* What the scanner reports: content text (s, len); a call's start (index, id,
 * name); a piece of a call's arguments (index, s, len). Pointers are valid
 * during the callback only. */
struct tc_ev {
	int kind;
	uint32_t index;
	const char *id, *name;
	const char *s;
	size_t len;
};
typedef int (*tc_emit_fn)(void *arg, const struct tc_ev *ev);

struct tc_call {
	char id[32];             /* call_ + 24 hex digits */
	int32_t name;            /* index into names, -1 until read */
	bool has_args, args_done;
	size_t a0, a1;           /* arguments value: text[a0, a1) (a1 grows while read) */
	size_t sent;             /* argument bytes reported */
	bool started;            /* its TC_EV_CALL went out */
};

struct tc_parser {
	char *const *names;      /* borrowed */
	uint32_t n_names;
	bool parallel;
	int mode;                /* enum tc_mode */
	char *text;              /* everything fed */
	size_t n, cap;
	size_t at;               /* scan position */
	int st;                  /* scanner state (toolcall.c) */
	bool array, fenced, broken;
	uint32_t fence, depth;   /* backticks seen; open brackets of a value */
	bool in_str, esc;
	int key;                 /* the member being read: 0 other, 1 name, 2 arguments */
	size_t k0;               /* start of the key / name string */
	struct tc_call call[TC_MAX_CALLS];
	uint32_t n_calls;        /* calls begun */
	uint32_t n_done;         /* calls whole (closed, arguments valid) */
	size_t text_sent;        /* TC_TEXT: bytes reported as content */
};

void tc_init(struct tc_parser *p, char *const *names, uint32_t n_names, bool parallel);
/* Feed the next bytes of the reply; emit (may be NULL) gets what can be
 * reported now. 0, ERR_NOMEM, or what emit returned (non-zero stops). */
int tc_feed(struct tc_parser *p, const char *b, size_t len, tc_emit_fn emit, void *arg);
/* The reply ended: undecided text goes out as content. True when the reply
 * is calls, every one of them whole. */
bool tc_end(struct tc_parser *p, tc_emit_fn emit, void *arg, int *rc);
/* A whole answer's "tool_calls" array (id, type, function {name, arguments
 * as the model wrote them}); NULL when the reply is not whole calls. */
char *tc_calls_json(const struct tc_parser *p);
/* A stream chunk's "tool_calls" delta for a TC_EV_CALL (index, id, type,
 * function {name, arguments ""}) or TC_EV_ARGS (index, function
 * {arguments}) event. */
char *tc_delta_json(const struct tc_ev *ev);
void tc_free(struct tc_parser *p);

#endif
