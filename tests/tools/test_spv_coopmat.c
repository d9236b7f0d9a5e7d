/* tools/spv_coopmat.c: the build-time SPIR-V fix for cooperative-matrix
 * shaders. A hand-made module in glslang's literal form is patched and
 * checked structurally; the embedded mul_mm_cm_* modules (patched by the
 * build) pass the check; malformed and mutated modules are refused or patched,
 * never crash. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_worker/shaders.h"
#include "tools/spv_coopmat.h"

#define OP(wc, op) (((uint32_t)(wc) << 16) | (op))

/* Literal form as glslang writes it, the f16 type declared after the matrix
 * types, an f32 type before, no OpTypeInt 32 0 at all, a uint-like int 32 1:
 *   %1 = OpTypeFloat 32
 *   %2 = OpTypeCooperativeMatrixKHR 16 3 16 16 0     (f16 A, not declared yet)
 *   %3 = OpTypeCooperativeMatrixKHR 32 3 16 16 2     (f32 accumulator)
 *   %4 = OpTypeFloat 16
 *   %5 = OpTypeInt 32 1
 *   %6 = OpConstant %5 7 */
static const uint32_t lit_mod[] = {
	0x07230203, 0x00010500, 0, 7, 0,
	OP(2, 17), 1,                         /* OpCapability Shader */
	OP(3, 22), 1, 32,
	OP(7, 4456), 2, 16, 3, 16, 16, 0,
	OP(7, 4456), 3, 32, 3, 16, 16, 2,
	OP(3, 22), 4, 16,
	OP(4, 21), 5, 32, 1,
	OP(4, 43), 5, 6, 7,
};
#define N_LIT (sizeof lit_mod / sizeof lit_mod[0])

static size_t count_op(const uint32_t *m, size_t n, uint32_t op, uint32_t arg1, uint32_t arg2)
{
	size_t c = 0;
	for (size_t i = 5; i < n; i += m[i] >> 16)
		if ((m[i] & 0xffffu) == op && (m[i] >> 16) >= 3 && (arg1 == ~0u || m[i + 1] == arg1) &&
		    (arg2 == ~0u || m[i + 2] == arg2))
			c++;
	return c;
}

Test(spv_coopmat, patches_literal_form)
{
	char err[256];
	cr_assert_eq(spv_coopmat_verify(lit_mod, N_LIT, err, sizeof err), -1, "literal operands must not verify");
	uint32_t *out;
	size_t n;
	cr_assert_eq(spv_coopmat_patch(lit_mod, N_LIT, &out, &n, err, sizeof err), 0, "%s", err);
	cr_assert_eq(spv_coopmat_verify(out, n, err, sizeof err), 2, "%s", err);
	/* new ids: uint type, four constants 3 16 0 2 (16 shared) -> 7..11 */
	cr_assert_eq(out[3], 7 + 5, "bound %u", out[3]);
	cr_assert_eq(count_op(out, n, 22, 4, 16), 1, "OpTypeFloat 16 moved, not copied");
	cr_assert_eq(count_op(out, n, 21, ~0u, 32), 2, "one OpTypeInt 32 0 declared next to the int 32 1");
	cr_assert_eq(count_op(out, n, 43, ~0u, ~0u), 5, "four constants reused across the two types + the module's own");
	/* the f16 matrix names %4 as its component type, the f32 one %1 */
	for (size_t i = 5; i < n; i += out[i] >> 16)
		if ((out[i] & 0xffffu) == 4456)
			cr_assert_eq(out[i + 2], out[i + 1] == 2 ? 4u : 1u);
	free(out);
}

Test(spv_coopmat, reuses_declared_uint_and_constants)
{
	/* %1 = OpTypeInt 32 0, %2 = OpConstant %1 16, then a literal matrix type
	 * (its f32 component declared after it) */
	const uint32_t m[] = {
		0x07230203, 0x00010500, 0, 5, 0,
		OP(4, 21), 1, 32, 0,
		OP(4, 43), 1, 2, 16,
		OP(7, 4456), 3, 32, 3, 16, 16, 2,
		OP(3, 22), 4, 32,
	};
	char err[256];
	uint32_t *out;
	size_t n;
	cr_assert_eq(spv_coopmat_patch(m, sizeof m / 4, &out, &n, err, sizeof err), 0, "%s", err);
	cr_assert_eq(spv_coopmat_verify(out, n, err, sizeof err), 1, "%s", err);
	cr_assert_eq(out[3], 5 + 2, "two new constants (3 and 2), bound %u", out[3]);
	cr_assert_eq(count_op(out, n, 21, ~0u, ~0u), 1);
	cr_assert_eq(n, sizeof m / 4 + 8, "two OpConstants of 4 words added, nothing else");
	free(out);
}

Test(spv_coopmat, embedded_shaders_are_patched)
{
	static const char *const types[] = { "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k" };
	char err[256], name[64];
	for (size_t i = 0; i < 2 * sizeof types / sizeof types[0]; i++) {
		snprintf(name, sizeof name, i % 2 ? "mul_mm_cms_%s" : "mul_mm_cm_%s", types[i / 2]);
		const struct shader_blob *b = shader_find(name);
		cr_assert_not_null(b, "%s not embedded", name);
		cr_assert_eq(spv_coopmat_verify(b->code, b->size / 4, err, sizeof err), 3, "%s: %s", name, err);
	}
	static const char *const fa[] = { "flash_attn_cm_h32_f16", "flash_attn_cm_h256_q8" };
	for (size_t i = 0; i < 2; i++) {
		const struct shader_blob *b = shader_find(fa[i]);
		cr_assert_not_null(b, "%s not embedded", fa[i]);
		cr_assert_eq(spv_coopmat_verify(b->code, b->size / 4, err, sizeof err), 3, "%s: %s", fa[i], err);
	}
	/* the other shaders have no matrix types and verify as such */
	const struct shader_blob *mm = shader_find("mul_mm_q4_0");
	cr_assert_eq(spv_coopmat_verify(mm->code, mm->size / 4, err, sizeof err), 0, "%s", err);
}

static void expect_refused(const uint32_t *m, size_t n, const char *what)
{
	char err[256] = "";
	uint32_t *out = (uint32_t *)1;
	size_t on = 1;
	cr_assert_eq(spv_coopmat_patch(m, n, &out, &on, err, sizeof err), -1, "%s: accepted", what);
	cr_assert_null(out);
	cr_assert_eq(on, 0);
	cr_assert(err[0], "%s: no message", what);
}

Test(spv_coopmat, refuses_malformed)
{
	uint32_t m[N_LIT];
	expect_refused(lit_mod, 4, "short header");
	expect_refused(NULL, 0, "no module");
#define BAD(stmt, what)                        \
	do {                                   \
		memcpy(m, lit_mod, sizeof m);  \
		stmt;                          \
		expect_refused(m, N_LIT, what); \
	} while (0)
	BAD(m[0] = 0x03022307, "big-endian magic");
	BAD(m[3] = 0, "bound 0");
	BAD(m[3] = 0x400000, "bound over the limit");
	BAD(m[5] = OP(0, 17), "word count 0");
	BAD(m[5] = OP(200, 17), "word count past the end");
	BAD(m[10] = OP(6, 4456), "matrix type of 6 words");
	BAD(m[12] = 8, "component width 8");
	BAD(m[13] = 4, "scope 4");
	BAD(m[14] = 0, "0 rows");
	BAD(m[15] = 70000, "70000 columns");
	BAD(m[16] = 3, "use 3");
#undef BAD
	/* the bound grows past the id limit */
	memcpy(m, lit_mod, sizeof m);
	m[3] = 0x3ffffe;
	expect_refused(m, N_LIT, "ids exhausted");
}

Test(spv_coopmat, verify_refuses_bad_ids)
{
	uint32_t *out;
	size_t n;
	char err[256];
	cr_assert_eq(spv_coopmat_patch(lit_mod, N_LIT, &out, &n, err, sizeof err), 0, "%s", err);
	size_t at = 0;
	for (size_t i = 5; i < n && !at; i += out[i] >> 16)
		if ((out[i] & 0xffffu) == 4456)
			at = i;
	cr_assert(at);
	uint32_t save = out[at + 2];
	out[at + 2] = out[at + 3]; /* component type names a constant */
	cr_assert_eq(spv_coopmat_verify(out, n, err, sizeof err), -1);
	out[at + 2] = save;
	out[at + 4] = 5; /* rows names a type */
	cr_assert_eq(spv_coopmat_verify(out, n, err, sizeof err), -1);
	out[at + 4] = 99; /* an undefined id */
	cr_assert_eq(spv_coopmat_verify(out, n, err, sizeof err), -1);
	free(out);
	cr_assert_eq(spv_coopmat_patch(lit_mod, N_LIT, &out, &n, err, sizeof err), 0, "%s", err);
	out[3] = 8; /* bound below the new ids */
	cr_assert_eq(spv_coopmat_verify(out, n, err, sizeof err), -1);
	free(out);
}

/* Random word mutations of an embedded module: refused, or patched into a
 * module that verifies or is refused by the check; never a crash (ASan). */
Test(spv_coopmat, mutations_do_not_crash)
{
	const struct shader_blob *b = shader_find("mul_mm_cm_q4_0");
	cr_assert_not_null(b);
	size_t n = b->size / 4;
	uint32_t *m = malloc(b->size);
	cr_assert_not_null(m);
	uint64_t rng = 12345;
	for (int it = 0; it < 300; it++) {
		memcpy(m, b->code, b->size);
		for (int k = 0; k < 1 + it % 4; k++) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			size_t at = (size_t)(rng >> 33) % n;
			m[at] = it % 2 ? (uint32_t)(rng >> 7) : m[at] ^ (1u << ((rng >> 40) % 32));
		}
		char err[256];
		uint32_t *out;
		size_t on;
		if (spv_coopmat_patch(m, n, &out, &on, err, sizeof err) == 0) {
			(void)spv_coopmat_verify(out, on, err, sizeof err);
			free(out);
		}
	}
	free(m);
}
