/* mmproj: a random-weight Gemma 3 vision projector written by mkmodel opens
 * with the config it was written with; one hostile change at a time (keys out
 * of range, sizes that do not divide, a missing tensor, a wrong shape, every
 * truncation, random byte flips) fails with an error and never crashes;
 * the projector is found beside a model. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/readfile.h"
#include "formats/mmproj.h"
#include "formats/quant.h"
#include "tools/mkmodel.h"

static char dir[64];
static char path[128];

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/unicorn-test-mmproj-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/mmproj-m.gguf", dir);
	struct vision_config vc;
	cr_assert_eq(mkmodel_vision_config("tiny", 128, &vc), 0, "%s", err_msg());
	cr_assert_eq(mkmodel_write_mmproj(path, &vc, TENSOR_F32, 7, 1, true), 0, "%s", err_msg());
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

static uint8_t *slurp(size_t *n)
{
	FILE *f = fopen(path, "rb");
	cr_assert(f);
	fseek(f, 0, SEEK_END);
	*n = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc(*n);
	cr_assert(b && fread(b, 1, *n, f) == *n);
	fclose(f);
	return b;
}

Test(mmproj, tiny_roundtrip, .init = setup, .fini = teardown)
{
	struct mmproj *p;
	cr_assert_eq(mmproj_open(path, &p), 0, "%s", err_msg());
	const struct vision_config *c = &p->cfg;
	cr_expect_eq(c->image_size, 112);
	cr_expect_eq(c->patch_size, 14);
	cr_expect_eq(c->n_embd, 64);
	cr_expect_eq(c->n_ff, 240);
	cr_expect_eq(c->n_layer, 2);
	cr_expect_eq(c->n_head, 4);
	cr_expect_eq(c->head_dim, 16);
	cr_expect_eq(c->merge, 2);
	cr_expect_eq(c->n_patches, 64);
	cr_expect_eq(c->n_tokens, 16);
	cr_expect_eq(c->proj_dim, 128);
	cr_expect_float_eq(c->image_std[2], 0.5f, 1e-9);
	cr_expect_eq(p->proj->ne[0], 128);
	cr_expect_eq(p->proj->ne[1], 64);
	cr_expect_eq(p->patch_w->ne[2], 3);
	struct gemma3_config text = { .n_embd = 128 };
	cr_expect_eq(mmproj_check_text(p, &text), 0);
	text.n_embd = 256;
	cr_expect_eq(mmproj_check_text(p, &text), ERR_INVAL);
	cr_expect(strstr(err_msg(), "128-wide"), "%s", err_msg());
	mmproj_close(p);
}

Test(mmproj, real_shapes)
{
	struct vision_config c;
	cr_assert_eq(mkmodel_vision_config("27b", 5376, &c), 0, "%s", err_msg());
	cr_expect_eq(c.n_patches, 4096);
	cr_expect_eq(c.n_tokens, 256);
	cr_expect_eq(c.head_dim, 72);
	cr_expect_eq(mkmodel_vision_config("1b", 1152, &c), ERR_INVAL);
}

Test(mmproj, found_beside_model, .init = setup, .fini = teardown)
{
	char model[160];
	snprintf(model, sizeof model, "%s/m.gguf", dir);
	char *f = mmproj_find_beside(model);
	cr_assert_not_null(f);
	cr_expect_str_eq(f, path);
	free(f);
	cr_expect(mmproj_is_clip(path));
	char *mp = mkmodel_mmproj_path("/a/b/model-q4.gguf");
	cr_expect_str_eq(mp, "/a/b/mmproj-model-q4.gguf");
	free(mp);
	cr_expect_null(mmproj_find_beside("/nonexistent-dir/x.gguf"));
}

/* Overwrite the u32 value of metadata key `key` (GGUF: u64 length, bytes,
 * u32 type, value). */
static void set_key_u32(uint8_t *b, size_t n, const char *key, uint32_t v)
{
	size_t kl = strlen(key);
	for (size_t i = 8; i + kl + 8 < n; i++)
		if (!memcmp(b + i, key, kl) && b[i - 8] == kl) {
			uint32_t type;
			memcpy(&type, b + i + kl, 4);
			cr_assert_eq(type, 4, "%s: not a u32", key);
			memcpy(b + i + kl + 4, &v, 4);
			return;
		}
	cr_assert_fail("key %s not found", key);
}

static int parse_copy(const uint8_t *b, size_t n)
{
	struct mmproj *p = NULL;
	int rc = mmproj_parse(b, n, "hostile", &p);
	mmproj_close(p);
	return rc;
}

Test(mmproj, hostile_keys, .init = setup, .fini = teardown)
{
	size_t n;
	uint8_t *orig = slurp(&n), *b = malloc(n);
	cr_assert_eq(parse_copy(orig, n), 0, "%s", err_msg());
	struct {
		const char *key;
		uint32_t v;
		const char *msg;
	} cases[] = {
		{ "clip.vision.block_count", 0, "block_count" },
		{ "clip.vision.block_count", 100000, "block_count" },
		{ "clip.vision.block_count", 3, "v.blk.2" },               /* a layer with no tensors */
		{ "clip.vision.attention.head_count", 7, "head_count" },   /* does not divide 64 */
		{ "clip.vision.patch_size", 15, "patch_size" },            /* does not divide 112 */
		{ "clip.vision.patch_size", 0, "patch_size" },
		{ "clip.vision.image_size", 0xffffffffu, "image_size" },
		{ "clip.vision.image_size", 140, "position_embd" },        /* 10x10 patches, 8x8 positions */
		{ "clip.vision.projector.scale_factor", 3, "pooling" },    /* does not divide 8 */
		{ "clip.vision.projector.scale_factor", 0, "scale_factor" },
		{ "clip.vision.embedding_length", 96, "shape" },
		{ "clip.vision.feed_forward_length", 1u << 30, "feed_forward" },
		{ "clip.vision.projection_dim", 64, "projection_dim" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		memcpy(b, orig, n);
		set_key_u32(b, n, cases[i].key, cases[i].v);
		int rc = parse_copy(b, n);
		cr_expect_neq(rc, 0, "%s = %u accepted", cases[i].key, cases[i].v);
		cr_expect(strstr(err_msg(), cases[i].msg), "%s = %u: '%s' lacks '%s'", cases[i].key, cases[i].v,
			  err_msg(), cases[i].msg);
	}
	/* a missing tensor: rename one in the tensor-info table */
	memcpy(b, orig, n);
	uint8_t *hit = memmem(b, n, "v.blk.1.ffn_down.bias", 21);
	cr_assert(hit);
	hit[2] = 'X';
	cr_expect_eq(parse_copy(b, n), ERR_NOTFOUND);
	cr_expect(strstr(err_msg(), "v.blk.1.ffn_down.bias"), "%s", err_msg());
	/* the wrong projector */
	memcpy(b, orig, n);
	hit = memmem(b, n, "clip.projector_type", 19);
	cr_assert(hit);
	hit = memmem(hit, n - (size_t)(hit - b), "gemma3", 6);
	cr_assert(hit);
	hit[5] = '4';
	cr_expect_eq(parse_copy(b, n), ERR_UNSUP);
	free(b);
	free(orig);
}

Test(mmproj, hostile_truncation_and_flips, .init = setup, .fini = teardown)
{
	size_t n;
	uint8_t *orig = slurp(&n), *b = malloc(n);
	/* every prefix of the metadata, then a stride through the data */
	for (size_t cut = 0; cut < n; cut += cut < 4096 ? 1 : 4099)
		cr_expect_neq(parse_copy(orig, cut), 0, "truncated at %zu accepted", cut);
	/* flips in the header and metadata: any outcome but a crash */
	uint64_t z = 12345;
	for (int i = 0; i < 3000; i++) {
		memcpy(b, orig, n);
		z = z * 6364136223846793005ull + 1442695040888963407ull;
		size_t at = (size_t)(z >> 33) % 4096;
		b[at] ^= (uint8_t)(1u << ((z >> 20) & 7));
		(void)parse_copy(b, n);
	}
	free(b);
	free(orig);
}
