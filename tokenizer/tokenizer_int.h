/* tokenizer_int: the tokenizer's internal representation, shared by the core
 * (tokenizer.c), the encoder (tokenizer_encode.c) and the loaders (tokenizer_gguf.c,
 * tokenizer_json.c). Not for use outside tokenizer/tokenizer*. */
#ifndef UNICORN_TOKENIZER_INT_H
#define UNICORN_TOKENIZER_INT_H

#include "tokenizer/tokenizer.h"

#define TOK_MAX_VOCAB (1u << 24)   /* hostile-input cap on vocab size */
#define TOK_MAX_PIECE 4096u        /* longest piece we accept (bytes) */
#define TOK_EMPTY UINT32_MAX       /* empty hash slot */

enum tok_mode {
	TOK_MODE_SPM = 1, /* merge by highest score of the merged piece (llama.cpp SPM) */
	TOK_MODE_BPE = 2, /* merge by lowest merge rank (HF tokenizers BPE) */
};

enum tok_prefix {
	TOK_PREFIX_NONE = 0,
	TOK_PREFIX_SEGMENT = 1, /* "▁" before every plain-text segment (llama.cpp, HF Prepend) */
	TOK_PREFIX_FIRST = 2,   /* only before a segment at the start of the text (Metaspace "first") */
};

struct tok_merge {          /* BPE merge table slot: (a, b) -> (rank, merged id) */
	uint64_t key;           /* (uint64)a << 32 | b; UINT64_MAX = empty */
	uint32_t rank;
	uint32_t id;
};

struct tok {
	char *path;
	int mode;
	uint32_t n;             /* vocab size */
	char *arena;            /* pieces, each NUL-terminated */
	uint32_t *off;          /* n+1 offsets into arena; piece i has off[i+1]-off[i]-1 bytes */
	float *score;           /* n */
	uint8_t *type;          /* n, enum tok_type */

	uint32_t *hash;         /* piece -> id: {id, tag} slots, open addressing, TOK_EMPTY id = free */
	uint32_t hmask;

	struct tok_merge *merges; /* BPE only */
	uint32_t mmask;

	int32_t byte_id[256];   /* id of <0xXX>, -1 if absent */

	/* Special-token split: ids of CONTROL/USER/UNKNOWN pieces, a first-byte filter and the
	 * distinct piece lengths, longest first (leftmost-longest match). */
	uint32_t *sp_hash;      /* piece -> id, only special tokens ({id, tag} slots) */
	uint32_t sp_mask;
	uint8_t sp_first[256];
	uint32_t *sp_lens;
	uint32_t n_sp_lens;

	int32_t bos, eos, eot, unk, pad;
	bool add_bos;
	bool replace_space;     /* ' ' -> U+2581 before merging */
	int prefix;             /* enum tok_prefix */
	bool byte_fallback;
	bool fuse_unk;
	bool strip_space;       /* decode: drop one leading space of the first token */
};

/* Allocate a tokenizer for n pieces (ptrs[i]/lens[i]; a NULL ptr is an empty UNUSED hole)
 * named path; types default to NORMAL, scores to 0. */
int tok_build(const char *path, uint32_t n, const char *const *ptrs, const uint32_t *lens,
	      struct tok **out);
/* After types (and merges) are set: byte ids, special split tables, eot. */
int tok_finish(struct tok *t);
uint64_t tok_hash_bytes(const char *s, size_t len);
static inline size_t tok_piece_len(const struct tok *t, uint32_t id)
{
	return t->off[id + 1] - t->off[id] - 1;
}
/* BPE merge table: insert (a, b) -> (rank, id); keeps the first (lowest) rank. */
int tok_merges_alloc(struct tok *t, size_t n);
void tok_merges_put(struct tok *t, uint32_t a, uint32_t b, uint32_t rank, uint32_t id);
const struct tok_merge *tok_merges_get(const struct tok *t, uint32_t a, uint32_t b);

#endif
