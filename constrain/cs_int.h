/* constrain internals: the compiled schema's nodes (schema.c builds them,
 * match.c walks them). */
#ifndef UNICORN_CS_INT_H
#define UNICORN_CS_INT_H

#include <stdint.h>

#include "constrain/constrain.h"

enum cs_kind {
	CS_K_ANY = 1,  /* any JSON value */
	CS_K_OBJECT, CS_K_ARRAY, CS_K_STRING, CS_K_NUMBER, CS_K_INTEGER,
	CS_K_LITS,     /* one of a set of literal JSON texts (enum, const, boolean, null) */
	CS_K_ANYOF,
	CS_K_ALIAS,    /* a $ref placeholder: alt[0] */
};

struct cs_lit {
	char *s;       /* JSON text (a property key: the quoted name) */
	uint32_t len;
};

struct cs_prop {
	uint32_t node;
	uint8_t required;
};

struct cs_node {
	uint8_t kind;
	/* object: props[] with keys[] (quoted JSON strings) in declaration
	 * order; free_keys: no properties declared, any key, values addl */
	uint32_t n_props;
	struct cs_prop *props;
	struct cs_lit *keys;
	uint8_t free_keys;
	uint8_t addl_none;   /* additionalProperties false with no properties: only {} */
	uint32_t addl;       /* value node of free keys */
	/* array */
	uint32_t items, min_items, max_items;
	/* string */
	uint32_t min_len, max_len;
	/* literals (CS_K_LITS) */
	uint32_t n_lits;
	struct cs_lit *lits;
	/* anyOf / alias */
	uint32_t n_alt;
	uint32_t *alt;
	uint32_t min_bytes;  /* shortest instance, CS_INF if none */
};

struct cs_schema {
	struct cs_node *nodes;
	uint32_t n_nodes, cap_nodes;
	uint32_t root;
	uint32_t grow;     /* cs_schema_grow */
	/* helper nodes for CS_K_ANY values */
	uint32_t any, any_obj, any_arr, any_str, any_num, any_tfn;
};

#endif
