/* libFuzzer target for formats/gguf: parse arbitrary bytes, then walk every
 * key, array element and tensor so that ASan checks all pointers the parser
 * handed out really lie inside the input. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "formats/gguf.h"

/* Read every byte of [p, p + n) through a volatile pointer so the loads
 * cannot be optimized away. */
static void touch(const void *p, uint64_t n)
{
	const volatile uint8_t *b = p;
	for (uint64_t i = 0; i < n; i++)
		(void)b[i];
}

static void walk_array(const struct gguf_array *a)
{
	/* Bounded so that a large array does not slow the fuzzer down; the last
	 * element is visited too since that is where off-by-ones live. */
	for (uint64_t k = 0; k < a->n; k = k < 64 ? k + 1 : (k == a->n - 1 ? a->n : a->n - 1)) {
		struct gguf_str s;
		double f;
		int64_t i;
		if (gguf_arr_str(a, k, &s) == 0)
			touch(s.ptr, s.len);
		(void)gguf_arr_f64(a, k, &f);
		(void)gguf_arr_i64(a, k, &i);
		if (a->offsets)
			touch(a->data + a->offsets[k], a->offsets[k + 1] - a->offsets[k]);
	}
	struct gguf_str s;
	(void)gguf_arr_str(a, a->n, &s); /* out of range on purpose */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gguf *g;
	if (gguf_parse(data, size, "fuzz.gguf", &g))
		return 0;
	for (uint64_t i = 0; i < g->n_kv; i++) {
		const struct gguf_kv *kv = &g->kv[i];
		char key[256];
		touch(kv->key.ptr, kv->key.len);
		if (kv->key.len >= sizeof key || memchr(kv->key.ptr, 0, kv->key.len))
			continue;
		memcpy(key, kv->key.ptr, kv->key.len);
		key[kv->key.len] = 0;
		if (gguf_find(g, key) != kv)
			__builtin_trap(); /* keys are unique, so lookup must find this one */
		uint64_t u;
		double f;
		bool b;
		struct gguf_str s;
		const struct gguf_array *a;
		(void)gguf_get_u64(g, key, &u);
		(void)gguf_get_f64(g, key, &f);
		(void)gguf_get_bool(g, key, &b);
		if (gguf_get_str(g, key, &s) == 0)
			touch(s.ptr, s.len);
		if (gguf_get_arr(g, key, &a) == 0)
			walk_array(a);
	}
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->tensors[i];
		if (gguf_find_tensor(g, t->name) != t)
			__builtin_trap(); /* names are unique */
		if (t->nbytes == 0 || t->data < g->base || t->data + t->nbytes > g->base + g->size)
			__builtin_trap();
		touch(t->data, 1);
		touch(t->data + t->nbytes - 1, 1);
	}
	gguf_close(g);
	return 0;
}
