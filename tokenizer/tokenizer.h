/* tokenizer: Gemma 3 / SentencePiece-style tokenizer (encode text -> ids, decode ids -> text).
 *
 * Two sources, one engine:
 *  - a GGUF with tokenizer.ggml.model = "llama" (SentencePiece): pieces are merged by the
 *    highest vocab score (llama.cpp llm_tokenizer_spm semantics);
 *  - a Hugging Face tokenizer.json with model.type = "BPE": pieces are merged by the lowest
 *    merge rank (tokenizers' BPE word merge semantics), byte fallback to <0xXX>.
 * Input text is first split on special/added tokens (leftmost, longest match), each plain
 * segment has ' ' replaced by U+2581 (plus a "▁" prefix where the source asks for one) and is
 * merged; pieces that are not in the vocab become <0xXX> byte tokens, else <unk>.
 * See ../shared/spec/reference.md §2.4. */
#ifndef UNICORN_TOKENIZER_H
#define UNICORN_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Token types (GGUF tokenizer.ggml.token_type values). */
enum tok_type {
	TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5,
	TOK_BYTE = 6,
};

struct tok; /* opaque */

/* Growable id list; zero-initialise, free with tok_ids_free. */
struct tok_ids {
	int32_t *ids;
	size_t n, cap;
};

/* Load from a GGUF file, a tokenizer.json, or a directory holding tokenizer.json
 * (the file kind is detected from its first bytes). Returns 0 or ERR_*. */
int tok_load(const char *path, struct tok **out);
int tok_load_gguf(const char *path, struct tok **out);
int tok_load_json(const char *path, struct tok **out);
struct gguf;
/* From an already-open GGUF (the tokenizer copies what it needs). */
int tok_load_from_gguf(const struct gguf *g, struct tok **out);
void tok_free(struct tok *t);

/* Encode len bytes of text (need not be NUL-terminated), appending to out. BOS is added
 * first when add_bos is set (and the tokenizer has one). Special tokens in the text
 * become single ids. On error out keeps what it had. */
int tok_encode(const struct tok *t, const char *text, size_t len, bool add_bos,
	       struct tok_ids *out);
/* Same into a caller buffer: *n_out gets the count needed; ERR_RANGE if cap is too small. */
int tok_encode_buf(const struct tok *t, const char *text, size_t len, bool add_bos,
		   int32_t *buf, size_t cap, size_t *n_out);
void tok_ids_free(struct tok_ids *ids);

enum { TOK_DECODE_SKIP_SPECIAL = 1 }; /* leave out control tokens (bos, eos, <start_of_turn>...) */
/* Decode ids into a malloc'ed NUL-terminated string (*len_out without the NUL; may be NULL).
 * "▁" becomes a space, <0xXX> tokens become raw bytes, control tokens print as their text
 * unless skipped; the prefix space added at encode time is removed. ERR_RANGE for a bad id. */
int tok_decode(const struct tok *t, const int32_t *ids, size_t n, unsigned flags,
	       char **text_out, size_t *len_out);

/* Raw vocab piece of id (NUL-terminated, "▁" not replaced), NULL if out of range. */
const char *tok_piece(const struct tok *t, int32_t id);
/* -1 if absent. */
/* The text token adds after prev (prev < 0: none), control tokens left out:
 * a generated token's piece, spaces kept. Malloc'ed, NUL-terminated. */
int tok_decode_next(const struct tok *t, int32_t prev, int32_t token, char **text, size_t *len);
int32_t tok_find(const struct tok *t, const char *piece, size_t len);
int tok_type_of(const struct tok *t, int32_t id); /* enum tok_type, 0 if out of range */
uint32_t tok_n_vocab(const struct tok *t);
/* Special ids, -1 when the tokenizer has none. eot is <end_of_turn> if present, else eos. */
int32_t tok_bos(const struct tok *t);
int32_t tok_eos(const struct tok *t);
int32_t tok_eot(const struct tok *t);
int32_t tok_unk(const struct tok *t);
int32_t tok_pad(const struct tok *t);
bool tok_add_bos(const struct tok *t);       /* the source's default for add_bos */
/* True for eos, eot and other end-of-generation ids. */
bool tok_is_eog(const struct tok *t, int32_t id);

#endif
