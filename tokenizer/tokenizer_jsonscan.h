/* tokenizer_jsonscan: fast reader for tokenizer.json (internal to tokenizer/tokenizer*).
 * model.vocab and model.merges become flat arrays; everything else is a jansson tree in
 * root (with model.vocab / model.merges left out when they were taken). */
#ifndef UNICORN_TOKENIZER_JSONSCAN_H
#define UNICORN_TOKENIZER_JSONSCAN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tok_jstr {
	const char *p; /* into the file buffer or the scratch buffer; not NUL-terminated */
	uint32_t len;
};

struct tok_jfile {
	char *buf, *scratch;
	size_t len;
	json_t *root;
	bool has_vocab, has_merges;
	struct tok_jstr *vocab_key;
	uint32_t *vocab_id;          /* checked < TOK_MAX_VOCAB */
	size_t n_vocab;
	struct tok_jstr (*merges)[2];
	size_t n_merges;
};

/* Errors name the file and the line (syntax) or the field. */
int tok_jfile_read(const char *path, struct tok_jfile *f);
void tok_jfile_free(struct tok_jfile *f);

#endif
