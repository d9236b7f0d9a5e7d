/* jsv: an independent JSON-schema validator for the tests (jansson values),
 * written apart from constrain/ so the decoder is checked by other code. */
#ifndef UNICORN_TEST_JSV_H
#define UNICORN_TEST_JSV_H

#include <jansson.h>
#include <stdbool.h>

/* True when v validates against schema (root: the document for $ref). why
 * gets a reason when false (may be NULL). */
bool jsv_valid(json_t *v, json_t *schema, json_t *root, char *why, size_t cap);

/* The test schemas: a NULL-terminated list of JSON texts. */
extern const char *const jsv_schemas[];

#endif
