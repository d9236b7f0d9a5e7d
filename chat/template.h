/* chat/template: the Gemma 3 chat template (../shared/spec/reference.md §2.5).
 *
 *   <bos><start_of_turn>user\n{system}\n\n{user}<end_of_turn>\n
 *   <start_of_turn>model\n{reply}<end_of_turn>\n ... <start_of_turn>model\n
 *
 * A leading system message is merged into the first user turn with "\n\n";
 * "assistant" is spelled "model"; roles must alternate user/model starting
 * with user; contents are trimmed of surrounding whitespace. <bos> is a token:
 * chat_encode emits exactly one BOS whatever the tokenizer's add_bos says.
 * Generation stops at <end_of_turn> and <eos> (chat_is_stop). */
#ifndef UNICORN_CHAT_TEMPLATE_H
#define UNICORN_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

struct chat_msg {
	const char *role;     /* "system" (first only), "user", "assistant" or "model" */
	const char *content;
};

/* Render msgs[n] as template text (starting with "<bos>") into a malloc'ed
 * NUL-terminated string; add_gen appends "<start_of_turn>model\n". ERR_INVAL
 * naming the message index for a bad role or broken alternation. */
int chat_render(const struct chat_msg *msgs, size_t n, bool add_gen, char **out, size_t *len);

/* Render and tokenize: one BOS, then the turns (special tokens as single ids). */
int chat_encode(const struct tok *t, const struct chat_msg *msgs, size_t n, bool add_gen,
		struct tok_ids *out);

/* Images (docs/vision.md): an image part of a message's content leaves
 * CHAT_IMAGE_MARK (U+FFFC, OBJECT REPLACEMENT CHARACTER) where it was;
 * chat_encode_images renders and tokenizes as chat_encode, the k-th mark
 * becoming Gemma 3's image sequence: "\n\n<start_of_image>", the rows ids
 * row_ids[k * rows .. (k + 1) * rows) (ids past every vocabulary, stored in
 * the int32 list as their bits), "<end_of_image>\n\n" (the delimiters text
 * tokenized around it, so they are single tokens where the vocabulary has
 * them). ERR_INVAL when the text holds another count of marks than n_images. */
#define CHAT_IMAGE_MARK "\xEF\xBF\xBC"
int chat_encode_images(const struct tok *t, const struct chat_msg *msgs, size_t n, bool add_gen,
		       const uint32_t *row_ids, uint32_t n_images, uint32_t rows, struct tok_ids *out);

/* Encode a plain prompt with the tokenizer's add_bos, never giving two BOS
 * (a prompt that already starts with "<bos>" keeps just that one). */
int chat_encode_plain(const struct tok *t, const char *text, size_t len, struct tok_ids *out);

/* Function calling (OpenAI "tools") in the Gemma 3 template, after Google's
 * guidance for Gemma (no tool tokens: the functions are described in the
 * first user turn and the model answers a call with a JSON object):
 *   chat_tools_preamble: the system text that lists the functions
 *     (functions_json: one JSON object {"name","description","parameters"}
 *     per line) and says how to call one (parallel: or several, as a JSON
 *     array of calls; required and parallel: always that array);
 *   a call (an assistant message's tool_calls, or what the model answers):
 *     {"name": NAME, "arguments": {...}} on a line of its own;
 *   chat_tool_result: a role "tool" message, given to the model as a user
 *     turn ("Result of NAME (call ID): CONTENT").
 * All malloc'ed, NUL-terminated; NULL when out of memory. */
char *chat_tools_preamble(const char *functions_json, bool required, bool parallel);
char *chat_tool_call(const char *name, const char *arguments_json);
char *chat_tool_result(const char *name, const char *call_id, const char *content);

/* True for <end_of_turn>, <eos> and the tokenizer's other end-of-generation ids. */
bool chat_is_stop(const struct tok *t, int32_t id);

#endif
