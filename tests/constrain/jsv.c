/* jsv: independent validator for the keywords constrain/ supports. */
#include "tests/constrain/jsv.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool fail(char *why, size_t cap, const char *msg)
{
	if (why && cap)
		snprintf(why, cap, "%s", msg);
	return false;
}

static size_t utf8_chars(const char *s, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xC0) != 0x80;
	return c;
}

static bool is_type(json_t *v, const char *t)
{
	if (!strcmp(t, "object")) return json_is_object(v);
	if (!strcmp(t, "array")) return json_is_array(v);
	if (!strcmp(t, "string")) return json_is_string(v);
	if (!strcmp(t, "number")) return json_is_number(v);
	if (!strcmp(t, "integer")) return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
	if (!strcmp(t, "boolean")) return json_is_boolean(v);
	if (!strcmp(t, "null")) return json_is_null(v);
	return false;
}

bool jsv_valid(json_t *v, json_t *sc, json_t *root, char *why, size_t cap)
{
	if (json_is_true(sc))
		return true;
	if (!json_is_object(sc))
		return fail(why, cap, "schema not an object");
	json_t *ref = json_object_get(sc, "$ref");
	if (ref) {
		const char *r = json_string_value(ref);
		json_t *t = NULL;
		if (!strcmp(r, "#"))
			t = root;
		else if (!strncmp(r, "#/$defs/", 8))
			t = json_object_get(json_object_get(root, "$defs"), r + 8);
		else if (!strncmp(r, "#/definitions/", 14))
			t = json_object_get(json_object_get(root, "definitions"), r + 14);
		if (!t)
			return fail(why, cap, "bad $ref");
		return jsv_valid(v, t, root, why, cap);
	}
	json_t *any = json_object_get(sc, "anyOf");
	if (!any)
		any = json_object_get(sc, "oneOf");
	if (any) {
		size_t i;
		json_t *a;
		json_array_foreach(any, i, a)
			if (jsv_valid(v, a, root, NULL, 0))
				return true;
		return fail(why, cap, "no anyOf alternative matches");
	}
	json_t *cn = json_object_get(sc, "const");
	if (cn && !json_equal(v, cn))
		return fail(why, cap, "const differs");
	json_t *en = json_object_get(sc, "enum");
	if (en) {
		size_t i;
		json_t *a;
		bool hit = false;
		json_array_foreach(en, i, a)
			hit = hit || json_equal(v, a);
		if (!hit)
			return fail(why, cap, "not in enum");
	}
	json_t *type = json_object_get(sc, "type");
	if (json_is_string(type) && !is_type(v, json_string_value(type)))
		return fail(why, cap, "wrong type");
	if (json_is_array(type)) {
		size_t i;
		json_t *a;
		bool hit = false;
		json_array_foreach(type, i, a)
			hit = hit || is_type(v, json_string_value(a));
		if (!hit)
			return fail(why, cap, "wrong type (of several)");
	}
	if (json_is_object(v)) {
		json_t *props = json_object_get(sc, "properties");
		json_t *addl = json_object_get(sc, "additionalProperties");
		const char *k;
		json_t *x;
		json_object_foreach(v, k, x) {
			json_t *ps = props ? json_object_get(props, k) : NULL;
			if (ps) {
				if (!jsv_valid(x, ps, root, why, cap))
					return false;
			} else if (json_is_false(addl)) {
				return fail(why, cap, "additional property");
			} else if (json_is_object(addl) && !jsv_valid(x, addl, root, why, cap)) {
				return false;
			}
		}
		json_t *req = json_object_get(sc, "required");
		size_t i;
		json_t *r;
		json_array_foreach(req, i, r)
			if (!json_object_get(v, json_string_value(r)))
				return fail(why, cap, "required property missing");
	}
	if (json_is_array(v)) {
		json_t *it = json_object_get(sc, "items");
		json_t *mn = json_object_get(sc, "minItems"), *mx = json_object_get(sc, "maxItems");
		if (mn && json_array_size(v) < (size_t)json_integer_value(mn))
			return fail(why, cap, "minItems");
		if (mx && json_array_size(v) > (size_t)json_integer_value(mx))
			return fail(why, cap, "maxItems");
		size_t i;
		json_t *x;
		if (it)
			json_array_foreach(v, i, x)
				if (!jsv_valid(x, it, root, why, cap))
					return false;
	}
	if (json_is_string(v)) {
		size_t n = utf8_chars(json_string_value(v), json_string_length(v));
		json_t *mn = json_object_get(sc, "minLength"), *mx = json_object_get(sc, "maxLength");
		if (mn && n < (size_t)json_integer_value(mn))
			return fail(why, cap, "minLength");
		if (mx && n > (size_t)json_integer_value(mx))
			return fail(why, cap, "maxLength");
	}
	return true;
}

const char *const jsv_schemas[] = {
	"{\"type\":\"object\"}",
	"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
	"{\"type\":\"string\"}",
	"{\"type\":\"integer\"}",
	"{\"type\":\"number\"}",
	"{\"type\":\"boolean\"}",
	"{\"type\":\"null\"}",
	"{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}",
	"{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":5},\"minItems\":2,\"maxItems\":4}",
	"{\"enum\":[\"red\",\"green\",\"blue\"]}",
	"{\"enum\":[1,12,123,\"x\",null,true]}",
	"{\"const\":{\"a\":[1,2,{\"b\":null}]}}",
	"{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\"]},\"n\":{\"type\":\"number\"}},\"required\":[\"color\"]}",
	"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}",
	"{\"type\":[\"string\",\"null\"]}",
	"{\"type\":\"string\",\"minLength\":3,\"maxLength\":8}",
	"{\"type\":\"object\",\"properties\":{\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":3}},\"required\":[\"tags\"],\"additionalProperties\":false}",
	"{\"$defs\":{\"pt\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},\"y\":{\"type\":\"number\"}},\"required\":[\"x\",\"y\"],\"additionalProperties\":false}},\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/pt\"},\"b\":{\"$ref\":\"#/$defs/pt\"}},\"required\":[\"a\",\"b\"]}",
	"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"},\"maxItems\":2}},\"required\":[\"v\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}",
	"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"},\"b\":{\"type\":\"null\"},\"c\":{\"type\":\"string\"}},\"additionalProperties\":false}",
	"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
	"{\"type\":\"object\",\"additionalProperties\":false}",
	"{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"},\"v\":{\"type\":\"integer\"}},\"required\":[\"k\",\"v\"],\"additionalProperties\":false},{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"b\"},\"s\":{\"type\":\"string\"}},\"required\":[\"k\",\"s\"],\"additionalProperties\":false}]},\"maxItems\":3}",
	"{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"meta\":{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"}},\"required\":[\"ok\"]}},\"required\":[\"id\",\"meta\"]}",
	"{\"type\":\"array\",\"minItems\":3,\"maxItems\":3,\"items\":{\"type\":\"number\"}}",
	"{\"definitions\":{\"s\":{\"type\":\"string\",\"maxLength\":4}},\"type\":\"object\",\"properties\":{\"s\":{\"$ref\":\"#/definitions/s\"}},\"required\":[\"s\"]}",
	"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"description\":\"who\",\"title\":\"Name\"}},\"required\":[\"name\"],\"additionalProperties\":false,\"$schema\":\"http://json-schema.org/draft-07/schema#\"}",
	"{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"maxItems\":2}]}",
	"{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":2},\"maxItems\":2}",
	"{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\",\"minLength\":1}},\"required\":[\"q\"],\"additionalProperties\":false}",
	"{}",
	"{\"type\":\"object\",\"properties\":{\"e\":{\"enum\":[\"a\\\"b\",\"caf\\u00e9\"]},\"k\":{\"type\":\"integer\"}},\"required\":[\"e\",\"k\"],\"additionalProperties\":false}",
	"{\"type\":\"object\",\"properties\":{\"say\":{\"type\":\"string\",\"maxLength\":12},\"n\":{\"type\":[\"integer\",\"null\"]}},\"required\":[\"say\",\"n\"],\"additionalProperties\":false}",
	NULL,
};
