/* json_text: reply text as a JSON string (api/openai.c's answers, the tool
 * calls' argument deltas in api/toolcall.c). Generated text is valid UTF-8
 * (the coordinator replaces ill-formed bytes), but a string that is not still
 * gets U+FFFD for each bad sequence (common/utf8.h utf8_sanitize) instead of
 * failing the reply. */
#ifndef UNICORN_API_JSON_TEXT_H
#define UNICORN_API_JSON_TEXT_H

#include <jansson.h>
#include <stddef.h>

/* text[0..len) as a JSON string ("" for NULL); NULL only when out of memory. */
json_t *json_text(const char *text, size_t len);

#endif
