/* UTF-8 checks for generated text: model output is bytes (byte tokens that
 * complete a character only with the next token, max_tokens cutting one in
 * half), while JSON and terminals need valid UTF-8. */
#ifndef UNICORN_COMMON_UTF8_H
#define UNICORN_COMMON_UTF8_H

#include <stdbool.h>
#include <stddef.h>

#define UTF8_REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD */

/* Length of the next well-formed character at s[0..n): 1..4, or 0 when the
 * bytes there are not one (an invalid byte, or a sequence that is wrong
 * already); *partial is set when s[0..n) is a well-formed but unfinished
 * start of a character (n too short), 0 returned. */
size_t utf8_char_len(const unsigned char *s, size_t n, bool *partial);
/* Whether s[0..n) is valid UTF-8. */
bool utf8_valid(const char *s, size_t n);
/* The length of s[0..n) without a well-formed but unfinished character at its
 * end (at most 3 bytes; those are held back while streaming). */
size_t utf8_complete_len(const char *s, size_t n);
/* s[0..n) as valid UTF-8 into a new NUL-terminated buffer (*out, its length
 * in *out_len): every maximal ill-formed subsequence (and an unfinished
 * character at the end) becomes U+FFFD, as Python's errors="replace",
 * transformers and llama.cpp do. NUL bytes are kept. 0 or ERR_NOMEM. */
int utf8_sanitize(const char *s, size_t n, char **out, size_t *out_len);

#endif
