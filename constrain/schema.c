/* constrain/schema.c: JSON schema -> nodes (constrain.h says what is
 * supported). Every structure is capped; anything else is an error that
 * names the keyword and where it is (a JSON pointer). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "constrain/cs_int.h"

#define MAX_REFS 256

struct ctx {
	struct cs_schema *s;
	json_t *doc;
	struct {
		char *name;
		uint32_t node;
	} refs[MAX_REFS];
	uint32_t n_refs;
};

static int node_new(struct cs_schema *s, uint8_t kind, uint32_t *out)
{
	if (s->n_nodes >= CS_MAX_NODES)
		return err_set(ERR_RANGE, "schema: more than %d nodes", CS_MAX_NODES);
	if (s->n_nodes == s->cap_nodes) {
		uint32_t cap = s->cap_nodes ? s->cap_nodes * 2 : 32;
		struct cs_node *n = realloc(s->nodes, cap * sizeof *n);
		if (!n)
			return err_set(ERR_NOMEM, "schema: out of memory");
		s->nodes = n;
		s->cap_nodes = cap;
	}
	memset(&s->nodes[s->n_nodes], 0, sizeof s->nodes[0]);
	s->nodes[s->n_nodes].kind = kind;
	s->nodes[s->n_nodes].max_items = UINT32_MAX;
	s->nodes[s->n_nodes].max_len = UINT32_MAX;
	s->nodes[s->n_nodes].min_bytes = CS_INF;
	*out = s->n_nodes++;
	return 0;
}

static int lit_of(json_t *v, const char *where, struct cs_lit *out)
{
	char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!t)
		return err_set(ERR_NOMEM, "schema: %s: cannot serialise a value", where);
	size_t n = strlen(t);
	if (n == 0 || n > CS_MAX_LIT_BYTES) {
		free(t);
		return err_set(ERR_RANGE, "schema: %s: a value of %zu bytes (at most %d)", where, n, CS_MAX_LIT_BYTES);
	}
	out->s = t;
	out->len = (uint32_t)n;
	return 0;
}

/* Keywords that only annotate (or that we accept as no-ops). */
static bool annotation(const char *k)
{
	static const char *const ok[] = { "title", "description", "default", "examples", "$schema", "$id",
					  "$comment", "deprecated", "readOnly", "writeOnly", "name", "strict" };
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		if (!strcmp(k, ok[i]))
			return true;
	return false;
}

static bool known(const char *k)
{
	static const char *const ok[] = { "type", "properties", "required", "additionalProperties", "items",
					  "minItems", "maxItems", "minLength", "maxLength", "enum", "const",
					  "anyOf", "oneOf", "$ref", "$defs", "definitions" };
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		if (!strcmp(k, ok[i]))
			return true;
	return annotation(k);
}

static int compile(struct ctx *c, json_t *j, const char *ptr, int nest, uint32_t *out);

static int get_count(json_t *o, const char *k, const char *ptr, uint32_t *out)
{
	json_t *v = json_object_get(o, k);
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000)
		return err_set(ERR_INVAL, "schema: %s/%s: not an integer in [0, 1000000]", ptr, k);
	*out = (uint32_t)json_integer_value(v);
	return 1;
}

static int resolve_ref(struct ctx *c, const char *ref, const char *ptr, int nest, uint32_t *out)
{
	for (uint32_t i = 0; i < c->n_refs; i++)
		if (!strcmp(c->refs[i].name, ref)) {
			*out = c->refs[i].node;
			return 0;
		}
	json_t *target = NULL;
	if (!strcmp(ref, "#")) {
		target = c->doc;
	} else if (!strncmp(ref, "#/$defs/", 8) || !strncmp(ref, "#/definitions/", 14)) {
		const char *name = ref[2] == '$' ? ref + 8 : ref + 14;
		json_t *defs = json_object_get(c->doc, ref[2] == '$' ? "$defs" : "definitions");
		if (strchr(name, '/') || strchr(name, '~'))
			return err_set(ERR_UNSUP, "schema: %s/$ref: \"%s\": only #, #/$defs/NAME and "
				       "#/definitions/NAME are supported", ptr, ref);
		target = json_is_object(defs) ? json_object_get(defs, name) : NULL;
	} else {
		return err_set(ERR_UNSUP, "schema: %s/$ref: \"%s\": only #, #/$defs/NAME and #/definitions/NAME "
			       "are supported", ptr, ref);
	}
	if (!target)
		return err_set(ERR_INVAL, "schema: %s/$ref: \"%s\" names nothing", ptr, ref);
	if (c->n_refs >= MAX_REFS)
		return err_set(ERR_RANGE, "schema: more than %d $ref targets", MAX_REFS);
	uint32_t alias;
	int rc = node_new(c->s, CS_K_ALIAS, &alias);
	if (rc)
		return rc;
	c->s->nodes[alias].alt = malloc(sizeof(uint32_t));
	if (!c->s->nodes[alias].alt)
		return err_set(ERR_NOMEM, "schema: out of memory");
	c->s->nodes[alias].n_alt = 1;
	c->s->nodes[alias].alt[0] = alias; /* until compiled: a cycle, no instance */
	c->refs[c->n_refs].name = strdup(ref);
	if (!c->refs[c->n_refs].name)
		return err_set(ERR_NOMEM, "schema: out of memory");
	c->refs[c->n_refs++].node = alias;
	uint32_t body;
	rc = compile(c, target, ref, nest + 1, &body);
	if (rc)
		return rc;
	c->s->nodes[alias].alt[0] = body;
	*out = alias;
	return 0;
}

static int compile_lits(struct ctx *c, json_t *vals, const char *ptr, uint32_t *out)
{
	size_t n = json_array_size(vals);
	if (n == 0)
		return err_set(ERR_INVAL, "schema: %s/enum: empty", ptr);
	if (n > CS_MAX_LITS)
		return err_set(ERR_RANGE, "schema: %s/enum: %zu values (at most %d)", ptr, n, CS_MAX_LITS);
	uint32_t id;
	int rc = node_new(c->s, CS_K_LITS, &id);
	if (rc)
		return rc;
	struct cs_lit *l = calloc(n, sizeof *l);
	if (!l)
		return err_set(ERR_NOMEM, "schema: out of memory");
	c->s->nodes[id].lits = l;
	for (size_t i = 0; i < n; i++) {
		if ((rc = lit_of(json_array_get(vals, i), ptr, &l[i])))
			return rc;
		c->s->nodes[id].n_lits = (uint32_t)i + 1;
	}
	*out = id;
	return 0;
}

static int lits_from(struct ctx *c, const char *const *texts, uint32_t n, uint32_t *out)
{
	json_t *a = json_array();
	for (uint32_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_loads(texts[i], JSON_DECODE_ANY, NULL));
	int rc = a ? compile_lits(c, a, "", out) : err_set(ERR_NOMEM, "schema: out of memory");
	json_decref(a);
	return rc;
}

static int compile_object(struct ctx *c, json_t *j, const char *ptr, int nest, uint32_t *out)
{
	json_t *props = json_object_get(j, "properties");
	json_t *req = json_object_get(j, "required");
	json_t *addl = json_object_get(j, "additionalProperties");
	if (props && !json_is_object(props))
		return err_set(ERR_INVAL, "schema: %s/properties: not an object", ptr);
	if (req && !json_is_array(req))
		return err_set(ERR_INVAL, "schema: %s/required: not an array", ptr);
	size_t np = props ? json_object_size(props) : 0;
	size_t nr = req ? json_array_size(req) : 0;
	if (np + nr > CS_MAX_LITS)
		return err_set(ERR_RANGE, "schema: %s: %zu properties (at most %d)", ptr, np + nr, CS_MAX_LITS);
	uint32_t id;
	int rc = node_new(c->s, CS_K_OBJECT, &id);
	if (rc)
		return rc;
	struct cs_prop *pp = calloc(np + nr + 1, sizeof *pp);
	struct cs_lit *kk = calloc(np + nr + 1, sizeof *kk);
	c->s->nodes[id].props = pp;
	c->s->nodes[id].keys = kk;
	if (!pp || !kk)
		return err_set(ERR_NOMEM, "schema: out of memory");
	char sub[512];
	uint32_t n = 0;
	const char *key;
	json_t *val;
	json_object_foreach(props, key, val) {
		json_t *ks = json_string(key);
		rc = ks ? lit_of(ks, ptr, &kk[n]) : err_set(ERR_INVAL, "schema: %s/properties: a key that is not UTF-8", ptr);
		json_decref(ks);
		if (rc)
			return rc;
		c->s->nodes[id].n_props = n + 1; /* owns the key from here */
		snprintf(sub, sizeof sub, "%.200s/properties/%.200s", ptr, key);
		uint32_t pn;
		if ((rc = compile(c, val, sub, nest + 1, &pn)))
			return rc;
		pp[n].node = pn;
		n++;
	}
	for (size_t i = 0; i < nr; i++) {
		json_t *r = json_array_get(req, i);
		if (!json_is_string(r))
			return err_set(ERR_INVAL, "schema: %s/required/%zu: not a string", ptr, i);
		uint32_t k = 0;
		for (; k < n && !(json_string_length(r) + 2 == kk[k].len &&
				  !strncmp(kk[k].s + 1, json_string_value(r), json_string_length(r))); k++)
			;
		if (k == n) {
			/* required but not described: any value (unless no extras may exist) */
			if (json_is_false(addl))
				return err_set(ERR_INVAL, "schema: %s/required: \"%s\" is not in properties and "
					       "additionalProperties is false", ptr, json_string_value(r));
			if ((rc = lit_of(r, ptr, &kk[n])))
				return rc;
			c->s->nodes[id].n_props = n + 1;
			pp[n].node = c->s->any;
			n++;
		}
		pp[k].required = 1;
	}
	struct cs_node *o = &c->s->nodes[id];
	if (n == 0) {
		if (json_is_false(addl)) {
			o->addl_none = 1;
		} else {
			o->free_keys = 1;
			o->addl = c->s->any;
			if (json_is_object(addl)) {
				snprintf(sub, sizeof sub, "%.400s/additionalProperties", ptr);
				uint32_t an;
				if ((rc = compile(c, addl, sub, nest + 1, &an)))
					return rc;
				c->s->nodes[id].addl = an;
			} else if (addl && !json_is_boolean(addl)) {
				return err_set(ERR_INVAL, "schema: %s/additionalProperties: not a boolean or schema", ptr);
			}
		}
	} else if (addl && !json_is_boolean(addl) && !json_is_object(addl)) {
		return err_set(ERR_INVAL, "schema: %s/additionalProperties: not a boolean or schema", ptr);
	}
	*out = id;
	return 0;
}

static int compile_type(struct ctx *c, json_t *j, const char *type, const char *ptr, int nest, uint32_t *out)
{
	int rc;
	uint32_t id;
	if (!strcmp(type, "object"))
		return compile_object(c, j, ptr, nest, out);
	if (!strcmp(type, "array")) {
		if ((rc = node_new(c->s, CS_K_ARRAY, &id)))
			return rc;
		uint32_t mn = 0, mx = UINT32_MAX, items = c->s->any;
		if ((rc = get_count(j, "minItems", ptr, &mn)) < 0 || (rc = get_count(j, "maxItems", ptr, &mx)) < 0)
			return rc;
		if (mn > mx)
			return err_set(ERR_INVAL, "schema: %s: minItems %u > maxItems %u", ptr, mn, mx);
		if (mn > 4096)
			return err_set(ERR_RANGE, "schema: %s/minItems: %u (at most 4096)", ptr, mn);
		json_t *it = json_object_get(j, "items");
		if (it) {
			if (!json_is_object(it) && !json_is_boolean(it))
				return err_set(ERR_UNSUP, "schema: %s/items: only one schema for all items is supported "
					       "(prefixItems / tuple items are not)", ptr);
			if (json_is_false(it))
				mx = 0;
			else if (json_is_object(it)) {
				char sub[512];
				snprintf(sub, sizeof sub, "%.400s/items", ptr);
				if ((rc = compile(c, it, sub, nest + 1, &items)))
					return rc;
			}
		}
		struct cs_node *a = &c->s->nodes[id];
		a->items = items, a->min_items = mn, a->max_items = mx;
		*out = id;
		return 0;
	}
	if (!strcmp(type, "string")) {
		if ((rc = node_new(c->s, CS_K_STRING, &id)))
			return rc;
		uint32_t mn = 0, mx = UINT32_MAX;
		if ((rc = get_count(j, "minLength", ptr, &mn)) < 0 || (rc = get_count(j, "maxLength", ptr, &mx)) < 0)
			return rc;
		if (mn > mx)
			return err_set(ERR_INVAL, "schema: %s: minLength %u > maxLength %u", ptr, mn, mx);
		if (mn > 4096)
			return err_set(ERR_RANGE, "schema: %s/minLength: %u (at most 4096)", ptr, mn);
		c->s->nodes[id].min_len = mn, c->s->nodes[id].max_len = mx;
		*out = id;
		return 0;
	}
	if (!strcmp(type, "number") || !strcmp(type, "integer")) {
		if ((rc = node_new(c->s, type[0] == 'n' ? CS_K_NUMBER : CS_K_INTEGER, &id)))
			return rc;
		*out = id;
		return 0;
	}
	if (!strcmp(type, "boolean")) {
		static const char *const tf[] = { "true", "false" };
		return lits_from(c, tf, 2, out);
	}
	if (!strcmp(type, "null")) {
		static const char *const nu[] = { "null" };
		return lits_from(c, nu, 1, out);
	}
	return err_set(ERR_INVAL, "schema: %s/type: unknown type \"%s\"", ptr, type);
}

/* A new anyOf node with room for n alternatives (filled by the caller, n_alt
 * counting those set so far). */
static int anyof_new(struct ctx *c, size_t n, uint32_t *id)
{
	int rc = node_new(c->s, CS_K_ANYOF, id);
	if (rc)
		return rc;
	uint32_t *alt = calloc(n, sizeof *alt);
	if (!alt)
		return err_set(ERR_NOMEM, "schema: out of memory");
	c->s->nodes[*id].alt = alt;
	return 0;
}

static int compile(struct ctx *c, json_t *j, const char *ptr, int nest, uint32_t *out)
{
	if (nest > CS_MAX_NEST)
		return err_set(ERR_RANGE, "schema: %s: nested more than %d levels", ptr, CS_MAX_NEST);
	if (json_is_true(j)) {
		*out = c->s->any;
		return 0;
	}
	if (!json_is_object(j))
		return err_set(ERR_INVAL, "schema: %s: a schema must be an object (or true)", ptr[0] ? ptr : "#");
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v) {
		if (!known(k))
			return err_set(ERR_UNSUP, "schema: %s: keyword \"%s\" is not supported", ptr[0] ? ptr : "#", k);
	}
	json_t *ref = json_object_get(j, "$ref");
	json_t *type = json_object_get(j, "type");
	json_t *anyof = json_object_get(j, "anyOf");
	if (!anyof)
		anyof = json_object_get(j, "oneOf");
	json_t *en = json_object_get(j, "enum");
	json_t *cn = json_object_get(j, "const");
	int structural = !!type + !!anyof + !!ref + !!(en || cn);
	if (structural > 1 && !(type && (en || cn)))
		return err_set(ERR_UNSUP, "schema: %s: combining %s is not supported", ptr[0] ? ptr : "#",
			       ref ? "$ref with type/anyOf/enum" : "anyOf with type/enum");
	if (ref) {
		if (!json_is_string(ref))
			return err_set(ERR_INVAL, "schema: %s/$ref: not a string", ptr);
		return resolve_ref(c, json_string_value(ref), ptr, nest, out);
	}
	if (cn) {
		json_t *a = json_pack("[O]", cn);
		int rc = a ? compile_lits(c, a, ptr, out) : err_set(ERR_NOMEM, "schema: out of memory");
		json_decref(a);
		return rc;
	}
	if (en) {
		if (!json_is_array(en))
			return err_set(ERR_INVAL, "schema: %s/enum: not an array", ptr);
		return compile_lits(c, en, ptr, out);
	}
	if (anyof) {
		size_t n = json_is_array(anyof) ? json_array_size(anyof) : 0;
		if (n == 0 || n > 64)
			return err_set(n ? ERR_RANGE : ERR_INVAL, "schema: %s/anyOf: %zu alternatives (1..64)", ptr, n);
		uint32_t id;
		int rc = anyof_new(c, n, &id);
		if (rc)
			return rc;
		for (size_t i = 0; i < n; i++) {
			char sub[512];
			snprintf(sub, sizeof sub, "%.400s/anyOf/%zu", ptr, i);
			uint32_t a;
			if ((rc = compile(c, json_array_get(anyof, i), sub, nest + 1, &a)))
				return rc;
			c->s->nodes[id].alt[i] = a;
			c->s->nodes[id].n_alt = (uint32_t)i + 1;
		}
		*out = id;
		return 0;
	}
	if (json_is_string(type))
		return compile_type(c, j, json_string_value(type), ptr, nest, out);
	if (json_is_array(type)) {
		size_t n = json_array_size(type);
		if (n == 0 || n > 7)
			return err_set(ERR_INVAL, "schema: %s/type: %zu types", ptr, n);
		if (n == 1 && json_is_string(json_array_get(type, 0)))
			return compile_type(c, j, json_string_value(json_array_get(type, 0)), ptr, nest, out);
		uint32_t id;
		int rc = anyof_new(c, n, &id);
		if (rc)
			return rc;
		for (size_t i = 0; i < n; i++) {
			json_t *t = json_array_get(type, i);
			if (!json_is_string(t))
				return err_set(ERR_INVAL, "schema: %s/type/%zu: not a string", ptr, i);
			uint32_t a;
			if ((rc = compile_type(c, j, json_string_value(t), ptr, nest, &a)))
				return rc;
			c->s->nodes[id].alt[i] = a;
			c->s->nodes[id].n_alt = (uint32_t)i + 1;
		}
		*out = id;
		return 0;
	}
	if (type)
		return err_set(ERR_INVAL, "schema: %s/type: not a string or an array", ptr);
	/* no type: infer from the keywords, else any value */
	if (json_object_get(j, "properties") || json_object_get(j, "required") ||
	    json_object_get(j, "additionalProperties"))
		return compile_type(c, j, "object", ptr, nest, out);
	if (json_object_get(j, "items") || json_object_get(j, "minItems") || json_object_get(j, "maxItems"))
		return compile_type(c, j, "array", ptr, nest, out);
	if (json_object_get(j, "minLength") || json_object_get(j, "maxLength"))
		return compile_type(c, j, "string", ptr, nest, out);
	*out = c->s->any;
	return 0;
}

static uint32_t sat_add(uint32_t a, uint32_t b)
{
	uint64_t s = (uint64_t)a + b;
	return s >= CS_INF ? CS_INF : (uint32_t)s;
}

static uint32_t sat_mul(uint32_t a, uint32_t b)
{
	uint64_t s = (uint64_t)a * b;
	return s >= CS_INF ? CS_INF : (uint32_t)s;
}

static uint32_t node_min(const struct cs_schema *s, const struct cs_node *n)
{
	uint32_t m = CS_INF;
	switch (n->kind) {
	case CS_K_ANY: return 1;
	case CS_K_NUMBER: case CS_K_INTEGER: return 1;
	case CS_K_STRING: return sat_add(2, n->min_len);
	case CS_K_LITS:
		for (uint32_t i = 0; i < n->n_lits; i++)
			m = n->lits[i].len < m ? n->lits[i].len : m;
		return m;
	case CS_K_ANYOF: case CS_K_ALIAS:
		for (uint32_t i = 0; i < n->n_alt; i++)
			m = s->nodes[n->alt[i]].min_bytes < m ? s->nodes[n->alt[i]].min_bytes : m;
		return m;
	case CS_K_ARRAY: {
		if (n->min_items == 0)
			return 2;
		uint32_t it = s->nodes[n->items].min_bytes;
		return sat_add(2 + n->min_items - 1, sat_mul(n->min_items, it));
	}
	case CS_K_OBJECT: {
		uint32_t t = 2, k = 0;
		for (uint32_t i = 0; i < n->n_props; i++)
			if (n->props[i].required) {
				t = sat_add(t, sat_add(n->keys[i].len + 1 + (k ? 1 : 0), s->nodes[n->props[i].node].min_bytes));
				k++;
			}
		return t;
	}
	}
	return CS_INF;
}

void cs_schema_free(struct cs_schema *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->n_nodes; i++) {
		struct cs_node *n = &s->nodes[i];
		for (uint32_t k = 0; n->keys && k < n->n_props; k++)
			free(n->keys[k].s);
		for (uint32_t k = 0; n->lits && k < n->n_lits; k++)
			free(n->lits[k].s);
		free(n->props);
		free(n->keys);
		free(n->lits);
		free(n->alt);
	}
	free(s->nodes);
	free(s);
}

uint32_t cs_schema_min_len(const struct cs_schema *s)
{
	return s->nodes[s->root].min_bytes;
}

uint32_t cs_schema_grow(const struct cs_schema *s)
{
	return s->grow;
}

int cs_schema_compile(const char *text, size_t len, struct cs_schema **out)
{
	*out = NULL;
	if (len > CS_MAX_SCHEMA_BYTES)
		return err_set(ERR_RANGE, "schema: %zu bytes (at most %d)", len, CS_MAX_SCHEMA_BYTES);
	struct cs_schema *s = calloc(1, sizeof *s);
	if (!s)
		return err_set(ERR_NOMEM, "schema: out of memory");
	struct ctx c = { .s = s };
	int rc = 0;
	/* the helper nodes every "any value" uses */
	static const char *const tfn[] = { "true", "false", "null" };
	if ((rc = node_new(s, CS_K_ANY, &s->any)) || (rc = node_new(s, CS_K_OBJECT, &s->any_obj)) ||
	    (rc = node_new(s, CS_K_ARRAY, &s->any_arr)) || (rc = node_new(s, CS_K_STRING, &s->any_str)) ||
	    (rc = node_new(s, CS_K_NUMBER, &s->any_num)) || (rc = lits_from(&c, tfn, 3, &s->any_tfn)))
		goto out;
	s->nodes[s->any_obj].free_keys = 1;
	s->nodes[s->any_obj].addl = s->any;
	s->nodes[s->any_arr].items = s->any;
	if (!text || len == 0) {
		s->root = s->any_obj;
	} else {
		json_error_t je;
		c.doc = json_loadb(text, len, 0, &je);
		if (!c.doc) {
			rc = err_set(ERR_INVAL, "schema: not JSON: %s (line %d)", je.text, je.line);
			goto out;
		}
		json_t *defs = json_object_get(c.doc, "$defs");
		if (defs && !json_is_object(defs)) {
			rc = err_set(ERR_INVAL, "schema: $defs: not an object");
			goto out;
		}
		/* the root is reachable as "#": compile it through the ref table */
		if ((rc = resolve_ref(&c, "#", "", 0, &s->root)))
			goto out;
		/* $defs nobody references are still checked for unsupported keywords */
		const char *k;
		json_t *v;
		json_object_foreach(defs, k, v) {
			char ref[300];
			snprintf(ref, sizeof ref, "#/$defs/%.250s", k);
			uint32_t ignored;
			if (strlen(k) < 250 && (rc = resolve_ref(&c, ref, "", 1, &ignored)))
				goto out;
		}
	}
	/* shortest instances: a fixpoint (each pass can only lower values) */
	for (uint32_t pass = 0; pass <= s->n_nodes + 1; pass++) {
		bool changed = false;
		for (uint32_t i = 0; i < s->n_nodes; i++) {
			uint32_t m = node_min(s, &s->nodes[i]);
			if (m < s->nodes[i].min_bytes) {
				s->nodes[i].min_bytes = m;
				changed = true;
			}
		}
		if (!changed)
			break;
	}
	/* one byte can open a value (at most the largest finite instance) or a
	 * key / literal (at most its length), plus a separator or two */
	uint32_t grow = 4;
	for (uint32_t i = 0; i < s->n_nodes; i++) {
		const struct cs_node *n = &s->nodes[i];
		uint32_t g = n->min_bytes < CS_INF ? n->min_bytes : 0;
		for (uint32_t k = 0; k < n->n_props; k++)
			g = n->keys[k].len + 1 > g ? n->keys[k].len + 1 : g;
		if (g + 4 > grow)
			grow = g + 4;
	}
	s->grow = grow;
	if (s->nodes[s->root].min_bytes >= CS_INF)
		rc = err_set(ERR_INVAL, "schema: no finite JSON value satisfies it (a required recursive $ref?)");
out:
	for (uint32_t i = 0; i < c.n_refs; i++)
		free(c.refs[i].name);
	json_decref(c.doc);
	if (rc) {
		cs_schema_free(s);
		return rc;
	}
	*out = s;
	return 0;
}
