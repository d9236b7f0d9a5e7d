/* constrain: JSON-schema constrained decoding (issue 31, docs/http.md
 * "Structured output").
 *
 * Three pieces, all bounded:
 *   - cs_schema_compile: a JSON schema (jansson) -> a small graph of nodes.
 *     Supported: type (object, array, string, number, integer, boolean,
 *     null, or an array of them), properties, required,
 *     additionalProperties, items, minItems, maxItems, minLength, maxLength,
 *     enum, const, anyOf / oneOf (oneOf as anyOf), $ref to "#", "#/$defs/X"
 *     or "#/definitions/X" (recursion allowed), plus annotations (title,
 *     description, default, examples, $schema, $id, $comment, format-free
 *     keywords listed in schema.c). Any other keyword is ERR_UNSUP naming
 *     it. Caps (nodes, depth, enum values, properties, text sizes) make a
 *     hostile schema an ERR_RANGE, never unbounded work.
 *   - struct cs_state: where a generated text stands against the schema: a
 *     few parse threads (anyOf), each a stack of frames, fed byte by byte.
 *   - struct cs_vocab: the vocabulary's byte strings in a trie, so the set of
 *     tokens allowed after a state is found by one walk that prunes every
 *     rejected prefix (and takes whole subtrees of plain string text at once).
 *
 * Output rules (what every accepted text satisfies): compact JSON except for
 * at most CS_MAX_WS whitespace bytes at each structural gap; object members
 * in the order of "properties" (optional ones may be skipped); strings
 * without \u escapes; numbers without exponents, at most 15 integer and 6
 * fraction digits. All are valid JSON and validate against the schema.
 *
 * Budget: cs_state_close_len gives the bytes of the shortest completion; the
 * allowed set can be limited to tokens after which the completion still fits
 * a number of tokens (every completion byte is a token of its own in the
 * vocabularies we serve), so a generation given at least that many tokens
 * always ends with a whole value. */
#ifndef UNICORN_CONSTRAIN_H
#define UNICORN_CONSTRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CS_MAX_SCHEMA_BYTES 32768  /* schema text */
#define CS_MAX_NODES 1024
#define CS_MAX_NEST 32             /* schema nesting while compiling */
#define CS_MAX_DEPTH 32            /* open values while generating */
#define CS_MAX_THREADS 8           /* anyOf alternatives followed at once */
#define CS_MAX_LITS 256            /* enum values of one node; properties of one object */
#define CS_MAX_LIT_BYTES 256       /* one enum value / property name, as JSON text */
#define CS_MAX_WS 2                /* whitespace bytes at one gap */
#define CS_INF 0x3fffffffu         /* "no finite instance" */

struct cs_schema;

/* Compile schema_text (JSON, <= CS_MAX_SCHEMA_BYTES). NULL or "" = any JSON
 * object (response_format json_object). ERR_UNSUP names an unsupported
 * keyword, ERR_RANGE a cap, ERR_INVAL anything malformed (err_msg says
 * where, as a JSON pointer). */
int cs_schema_compile(const char *schema_text, size_t len, struct cs_schema **out);
void cs_schema_free(struct cs_schema *s);
/* Bytes of the shortest text the schema accepts. */
uint32_t cs_schema_min_len(const struct cs_schema *s);
/* An upper bound of how much one byte of text can lengthen the shortest
 * completion (a value or a member begun: the largest finite instance plus
 * the longest key or literal): tokens short enough against a budget skip
 * the exact check. */
uint32_t cs_schema_grow(const struct cs_schema *s);

struct cs_frame {
	uint32_t node;
	uint8_t kind, st;
	uint16_t aux;
	uint32_t a, b;
};

struct cs_thread {
	uint16_t depth;
	uint8_t ws;
	uint8_t pad;
	uint16_t lit_pos;
	uint16_t pad2;
	uint64_t lit_mask[CS_MAX_LITS / 64];
	struct cs_frame f[CS_MAX_DEPTH];
};

struct cs_state {
	uint32_t n;                   /* live threads; 0 = dead (nothing accepted) */
	struct cs_thread t[CS_MAX_THREADS];
};

void cs_state_init(const struct cs_schema *s, struct cs_state *st);
/* Feed bytes; false (state undefined) when the text leaves the language. */
bool cs_state_feed(const struct cs_schema *s, struct cs_state *st, const void *bytes, size_t len);
/* A whole value has been read (generation should stop). */
bool cs_state_complete(const struct cs_state *st);
/* The text so far is a whole value if it ended here (a number at the top may
 * still go on): end-of-generation is allowed. */
bool cs_state_can_end(const struct cs_schema *s, const struct cs_state *st);
/* Bytes of the shortest completion (0 when complete; CS_INF if none). */
uint32_t cs_state_close_len(const struct cs_schema *s, const struct cs_state *st);

/* Copy only what is in use (st->n threads, their depths). */
void cs_state_copy(struct cs_state *dst, const struct cs_state *src);

/* Check text against the schema the way the decoder does (tests, tools):
 * true when all of text is accepted and complete. */
bool cs_accepts(const struct cs_schema *s, const char *text, size_t len);

/* --- vocabulary ---------------------------------------------------------- */

struct cs_vocab;

/* bytes[i][lens[i]]: what token i adds to the text; tokens with lens[i] == 0
 * (control, unused) are never allowed by a state. */
int cs_vocab_create(uint32_t n, const char *const *bytes, const uint32_t *lens, struct cs_vocab **out);
void cs_vocab_free(struct cs_vocab *v);
uint32_t cs_vocab_size(const struct cs_vocab *v);
/* Token id's bytes (*len 0 for an id out of range or without text). */
const char *cs_vocab_token(const struct cs_vocab *v, uint32_t id, uint32_t *len);

/* Set bit i of allowed[(n + 63) / 64] for every token whose bytes the state
 * accepts and (budget != UINT32_MAX) after which the shortest completion is at
 * most budget bytes. Returns the number of allowed tokens (0: none) or a
 * negative ERR_*. Not reentrant: v keeps the walk's scratch. */
int64_t cs_vocab_allowed(struct cs_vocab *v, const struct cs_schema *s, const struct cs_state *st,
			 uint32_t budget, uint64_t *allowed);
/* The same with a scratch of the caller's: walks over one vocabulary with
 * scratches of their own may run at once (threads). */
struct cs_scratch;
int cs_scratch_new(const struct cs_vocab *v, struct cs_scratch **out);
void cs_scratch_free(struct cs_scratch *w);
int64_t cs_vocab_allowed_in(const struct cs_vocab *v, struct cs_scratch *w, const struct cs_schema *s,
			    const struct cs_state *st, uint32_t budget, uint64_t *allowed);

#endif
