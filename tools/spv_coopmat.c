/* spv_coopmat: see tools/spv_coopmat.h. */
#include "tools/spv_coopmat.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPV_MAGIC 0x07230203u
#define SPV_HDR 5u
#define OP_TYPE_INT 21u
#define OP_TYPE_FLOAT 22u
#define OP_CONSTANT 43u
#define ID_LIMIT 0x3fffffu /* Vulkan implementations need not take larger Bounds */

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* Header and instruction framing; *n_inst = number of instructions. */
static int check_frame(const uint32_t *m, size_t n, size_t *n_inst, char *err, size_t errlen)
{
	if (!m || n < SPV_HDR)
		return fail(err, errlen, "spirv: %zu words: shorter than the header", n);
	if (n > SPV_MAX_WORDS)
		return fail(err, errlen, "spirv: %zu words: larger than %u", n, SPV_MAX_WORDS);
	if (m[0] != SPV_MAGIC)
		return fail(err, errlen, "spirv: bad magic 0x%08x (not a little-endian SPIR-V module)", m[0]);
	if (m[3] == 0 || m[3] > ID_LIMIT)
		return fail(err, errlen, "spirv: bound %u out of range", m[3]);
	size_t k = 0;
	for (size_t i = SPV_HDR; i < n; k++) {
		uint32_t wc = m[i] >> 16;
		if (wc == 0 || wc > n - i)
			return fail(err, errlen, "spirv: instruction at word %zu: word count %u overruns the module", i, wc);
		i += wc;
	}
	*n_inst = k;
	return 0;
}

/* The value of a 32-bit integer constant id, or false. */
struct known {
	uint32_t id;
	uint32_t op;      /* OP_TYPE_FLOAT, OP_TYPE_INT, OP_CONSTANT, SPV_OP_TYPE_COOPMAT */
	uint32_t a, b;    /* float: width; int: width, signedness; constant: type id, value */
};

static const struct known *find(const struct known *k, size_t nk, uint32_t id)
{
	for (size_t i = 0; i < nk; i++)
		if (k[i].id == id)
			return &k[i];
	return NULL;
}

static bool valid_scope(uint32_t s) { return s == 1 || s == 2 || s == 3 || s == 5; }

int spv_coopmat_verify(const uint32_t *m, size_t n, char *err, size_t errlen)
{
	size_t n_inst;
	if (check_frame(m, n, &n_inst, err, errlen))
		return -1;
	struct known *k = calloc(n_inst ? n_inst : 1, sizeof *k);
	if (!k)
		return fail(err, errlen, "spirv: out of memory");
	size_t nk = 0;
	int found = 0, rc = 0;
	uint32_t bound = m[3];
	for (size_t i = SPV_HDR; i < n && !rc; i += m[i] >> 16) {
		uint32_t wc = m[i] >> 16, op = m[i] & 0xffffu;
		struct known d = { 0, op, 0, 0 };
		if (op == OP_TYPE_FLOAT || op == OP_TYPE_INT) {
			if (wc < 3 || (op == OP_TYPE_INT && wc != 4))
				rc = fail(err, errlen, "spirv: word %zu: OpType%s of %u words", i, op == OP_TYPE_INT ? "Int" : "Float", wc);
			else
				d = (struct known){ m[i + 1], op, m[i + 2], op == OP_TYPE_INT ? m[i + 3] : 0 };
		} else if (op == OP_CONSTANT) {
			if (wc < 4)
				rc = fail(err, errlen, "spirv: word %zu: OpConstant of %u words", i, wc);
			else
				d = (struct known){ m[i + 2], op, m[i + 1], m[i + 3] };
		} else if (op == SPV_OP_TYPE_COOPMAT) {
			if (wc != 7) {
				rc = fail(err, errlen, "spirv: word %zu: OpTypeCooperativeMatrixKHR of %u words (7)", i, wc);
				break;
			}
			const struct known *ct = find(k, nk, m[i + 2]);
			if (!ct || ct->op != OP_TYPE_FLOAT || (ct->a != 16 && ct->a != 32 && ct->a != 64)) {
				rc = fail(err, errlen, "spirv: word %zu: component type %u is not an OpTypeFloat declared before", i,
					  m[i + 2]);
				break;
			}
			static const char *const what[4] = { "scope", "rows", "columns", "use" };
			for (int j = 0; j < 4 && !rc; j++) {
				const struct known *c = find(k, nk, m[i + 3 + j]);
				const struct known *t = c && c->op == OP_CONSTANT ? find(k, nk, c->a) : NULL;
				if (!t || t->op != OP_TYPE_INT || t->a != 32)
					rc = fail(err, errlen, "spirv: word %zu: %s %u is not a 32-bit integer OpConstant declared before",
						  i, what[j], m[i + 3 + j]);
				else if ((j == 0 && !valid_scope(c->b)) || ((j == 1 || j == 2) && (c->b == 0 || c->b > 65536)) ||
					 (j == 3 && c->b > 2))
					rc = fail(err, errlen, "spirv: word %zu: %s value %u out of range", i, what[j], c->b);
			}
			d = (struct known){ m[i + 1], op, 0, 0 };
			found++;
		}
		if (!rc && d.id) {
			if (d.id >= bound)
				rc = fail(err, errlen, "spirv: word %zu: id %u not below the bound %u", i, d.id, bound);
			else if (find(k, nk, d.id))
				rc = fail(err, errlen, "spirv: word %zu: id %u defined twice", i, d.id);
			else
				k[nk++] = d;
		}
	}
	free(k);
	return rc ? -1 : found;
}

/* Output buffer. */
struct obuf {
	uint32_t *w;
	size_t n, cap;
};

static int put(struct obuf *o, const uint32_t *w, size_t n)
{
	if (o->n + n > o->cap) {
		size_t cap = (o->n + n) * 2;
		uint32_t *p = realloc(o->w, cap * sizeof *p);
		if (!p)
			return -1;
		o->w = p;
		o->cap = cap;
	}
	memcpy(o->w + o->n, w, n * sizeof *w);
	o->n += n;
	return 0;
}

/* A type the patch needs at some point: where the module declares it (word
 * offset, 0 if nowhere), its id, and whether it was emitted already. */
struct need {
	size_t at;
	uint32_t id;
	bool emitted;
};

struct patch {
	const uint32_t *m;
	size_t n;
	struct obuf o;
	uint32_t next_id;
	struct need uint32, fl[3];    /* OpTypeInt 32 0; OpTypeFloat 16, 32, 64 */
	uint32_t cval[64], cid[64];   /* uint constants emitted so far (value -> id) */
	size_t nc;
	char *err;
	size_t errlen;
};

static int fresh(struct patch *p, uint32_t *id)
{
	if (p->next_id >= ID_LIMIT)
		return fail(p->err, p->errlen, "spirv: bound would exceed %u", ID_LIMIT);
	*id = p->next_id++;
	return 0;
}

/* Emit type t (declared at t->at, or fresh) now if not emitted yet. */
static int ensure(struct patch *p, struct need *t, const uint32_t *fresh_inst, size_t fresh_n)
{
	if (t->emitted)
		return 0;
	t->emitted = true;
	if (t->at)
		return put(&p->o, p->m + t->at, p->m[t->at] >> 16) ? fail(p->err, p->errlen, "spirv: out of memory") : 0;
	if (fresh(p, &t->id))
		return -1;
	uint32_t w[4];
	memcpy(w, fresh_inst, fresh_n * sizeof *w);
	w[1] = t->id;
	return put(&p->o, w, fresh_n) ? fail(p->err, p->errlen, "spirv: out of memory") : 0;
}

static int const_id(struct patch *p, uint32_t v, uint32_t *id)
{
	for (size_t i = 0; i < p->nc; i++)
		if (p->cval[i] == v) {
			*id = p->cid[i];
			return 0;
		}
	if (fresh(p, id))
		return -1;
	uint32_t w[4] = { (4u << 16) | OP_CONSTANT, p->uint32.id, *id, v };
	if (put(&p->o, w, 4))
		return fail(p->err, p->errlen, "spirv: out of memory");
	if (p->nc < sizeof p->cval / sizeof p->cval[0]) {
		p->cval[p->nc] = v;
		p->cid[p->nc++] = *id;
	}
	return 0;
}

static int fl_index(uint32_t width) { return width == 16 ? 0 : width == 32 ? 1 : width == 64 ? 2 : -1; }

/* One literal-form OpTypeCooperativeMatrixKHR at word i. */
static int patch_one(struct patch *p, size_t i)
{
	const uint32_t *m = p->m + i;
	if ((m[0] >> 16) != 7)
		return fail(p->err, p->errlen, "spirv: word %zu: OpTypeCooperativeMatrixKHR of %u words (7)", i, m[0] >> 16);
	int fi = fl_index(m[2]);
	if (fi < 0)
		return fail(p->err, p->errlen, "spirv: word %zu: component literal %u is not a float width (16, 32, 64)", i, m[2]);
	if (!valid_scope(m[3]) || m[4] == 0 || m[4] > 65536 || m[5] == 0 || m[5] > 65536 || m[6] > 2)
		return fail(p->err, p->errlen, "spirv: word %zu: literals scope %u rows %u columns %u use %u out of range", i,
			    m[3], m[4], m[5], m[6]);
	const uint32_t int_inst[4] = { (4u << 16) | OP_TYPE_INT, 0, 32, 0 };
	const uint32_t fl_inst[3] = { (3u << 16) | OP_TYPE_FLOAT, 0, m[2] };
	if (ensure(p, &p->uint32, int_inst, 4) || ensure(p, &p->fl[fi], fl_inst, 3))
		return -1;
	uint32_t w[7] = { m[0], m[1], p->fl[fi].id, 0, 0, 0, 0 };
	for (int j = 0; j < 4; j++)
		if (const_id(p, m[3 + j], &w[3 + j]))
			return -1;
	return put(&p->o, w, 7) ? fail(p->err, p->errlen, "spirv: out of memory") : 0;
}

int spv_coopmat_patch(const uint32_t *in, size_t n, uint32_t **out, size_t *out_n, char *err, size_t errlen)
{
	*out = NULL;
	*out_n = 0;
	size_t n_inst;
	if (check_frame(in, n, &n_inst, err, errlen))
		return -1;
	struct patch p = { .m = in, .n = n, .next_id = in[3], .err = err, .errlen = errlen };
	/* where the module declares the types the patch needs */
	for (size_t i = SPV_HDR; i < n; i += in[i] >> 16) {
		uint32_t wc = in[i] >> 16, op = in[i] & 0xffffu;
		if (op == OP_TYPE_INT && wc == 4 && in[i + 2] == 32 && in[i + 3] == 0 && !p.uint32.at)
			p.uint32 = (struct need){ i, in[i + 1], false };
		int fi = op == OP_TYPE_FLOAT && wc == 3 ? fl_index(in[i + 2]) : -1;
		if (fi >= 0 && !p.fl[fi].at)
			p.fl[fi] = (struct need){ i, in[i + 1], false };
	}
	if (put(&p.o, in, SPV_HDR)) {
		fail(err, errlen, "spirv: out of memory");
		goto bad;
	}
	for (size_t i = SPV_HDR; i < n; i += in[i] >> 16) {
		uint32_t wc = in[i] >> 16, op = in[i] & 0xffffu;
		int rc = 0;
		if (op == SPV_OP_TYPE_COOPMAT) {
			rc = patch_one(&p, i);
		} else if (i == p.uint32.at || (p.fl[0].at == i) || (p.fl[1].at == i) || (p.fl[2].at == i)) {
			struct need *t = i == p.uint32.at ? &p.uint32 : p.fl[0].at == i ? &p.fl[0] : p.fl[1].at == i ? &p.fl[1] : &p.fl[2];
			if (!t->emitted) { /* else moved ahead of a matrix type already */
				t->emitted = true;
				rc = put(&p.o, in + i, wc) ? fail(err, errlen, "spirv: out of memory") : 0;
			}
		} else {
			if (op == OP_CONSTANT && wc == 4 && p.uint32.emitted && in[i + 1] == p.uint32.id &&
			    p.nc < sizeof p.cval / sizeof p.cval[0]) {
				p.cval[p.nc] = in[i + 3];
				p.cid[p.nc++] = in[i + 2];
			}
			rc = put(&p.o, in + i, wc) ? fail(err, errlen, "spirv: out of memory") : 0;
		}
		if (rc)
			goto bad;
	}
	p.o.w[3] = p.next_id;
	*out = p.o.w;
	*out_n = p.o.n;
	return 0;
bad:
	free(p.o.w);
	return -1;
}

#ifdef SPV_COOPMAT_MAIN
/* Host tool: spv-coopmat IN.spv OUT.spv (patch, verify, write). */
int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: spv-coopmat IN.spv OUT.spv\n");
		return 2;
	}
	FILE *f = fopen(argv[1], "rb");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
	uint32_t *in = NULL;
	size_t n = size > 0 ? (size_t)size / 4 : 0;
	bool ok = size >= 0 && size % 4 == 0 && n <= SPV_MAX_WORDS && fseek(f, 0, SEEK_SET) == 0 &&
		  (in = malloc(n ? n * 4 : 4)) != NULL && fread(in, 4, n, f) == n;
	fclose(f);
	if (!ok) {
		fprintf(stderr, "spv-coopmat: %s: unreadable, not whole words, or over %u words\n", argv[1], SPV_MAX_WORDS);
		free(in);
		return 1;
	}
	char err[256];
	uint32_t *out;
	size_t out_n;
	int found = -1;
	if (spv_coopmat_patch(in, n, &out, &out_n, err, sizeof err) == 0) {
		found = spv_coopmat_verify(out, out_n, err, sizeof err);
		if (found < 0)
			free(out);
	}
	free(in);
	if (found < 0) {
		fprintf(stderr, "spv-coopmat: %s: %s\n", argv[1], err);
		return 1;
	}
	f = fopen(argv[2], "wb");
	ok = f && fwrite(out, 4, out_n, f) == out_n;
	if (f && fclose(f) != 0)
		ok = false;
	free(out);
	if (!ok) {
		fprintf(stderr, "spv-coopmat: %s: write failed\n", argv[2]);
		remove(argv[2]);
		return 1;
	}
	return 0;
}
#endif
