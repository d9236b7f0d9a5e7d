/* manifest: the q4_0 golden model planned into regions, copied, serialised and
 * rebuilt with every tensor byte-identical; corrupt manifests rejected. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "ipc/manifest.h"
#include "ipc/shm.h"
#include "formats/model.h"
#include "tests/golden.h"

static struct model *src;
static struct manifest_plan plan;
static struct shm_region regs[MANIFEST_MAX_REGIONS];
static struct manifest_region mr[MANIFEST_MAX_REGIONS];
static uint8_t *man;
static size_t man_len;

static void setup(uint64_t max_region)
{
	char path[4300];
	snprintf(path, sizeof path, "%s/golden/gemma3-tiny-q4_0.gguf", golden_shared_dir());
	cr_assert_eq(model_open(path, &src), 0, "%s", err_msg());
	cr_assert_eq(manifest_plan(src, max_region, &plan), 0, "%s", err_msg());
	for (uint32_t r = 0; r < plan.n_regions; r++) {
		cr_assert_eq(shm_create("w", plan.region_size[r], &regs[r]), 0, "%s", err_msg());
		cr_assert_eq(regs[r].size, plan.region_size[r]);
		mr[r] = (struct manifest_region){ regs[r].addr, regs[r].size };
	}
	cr_assert_eq(manifest_fill(src, &plan, mr, plan.n_regions), 0, "%s", err_msg());
	cr_assert_eq(manifest_size(src->n_tensors, plan.n_regions, &man_len), 0);
	man = malloc(man_len);
	size_t len;
	cr_assert_eq(manifest_write(src, &plan, man, man_len, &len), 0, "%s", err_msg());
	cr_assert_eq(len, man_len);
}

static void teardown(void)
{
	for (uint32_t r = 0; r < plan.n_regions; r++)
		shm_destroy(&regs[r]);
	manifest_plan_free(&plan);
	model_close(src);
	free(man);
}

static void check_same(const struct model *m)
{
	cr_assert_eq(m->n_tensors, src->n_tensors);
	cr_assert_eq(memcmp(&m->cfg, &src->cfg, sizeof m->cfg), 0, "config differs");
	for (size_t i = 0; i < src->n_tensors; i++) {
		const struct model_tensor *a = &src->tensors[i], *b = model_find(m, a->name);
		cr_assert_not_null(b, "%s missing", a->name);
		cr_assert_eq(b->type, a->type);
		cr_assert_eq(b->nbytes, a->nbytes);
		cr_assert_eq(memcmp(b->ne, a->ne, sizeof a->ne), 0);
		cr_assert_eq(b->norm_offset, a->norm_offset);
		cr_assert_neq(b->data, a->data, "must point into the regions");
		cr_assert_eq(memcmp(b->data, a->data, a->nbytes), 0, "%s bytes differ", a->name);
	}
	cr_assert_str_eq(m->tok_embd->name, "token_embd.weight");
	cr_assert_str_eq(m->output_norm->name, "output_norm.weight");
	for (uint32_t l = 0; l < m->cfg.n_layer; l++) {
		char n[64];
		snprintf(n, sizeof n, "blk.%u.ffn_down.weight", l);
		cr_assert_str_eq(m->layers[l].ffn_down->name, n);
		cr_assert_eq(m->layers[l].wq, model_find(m, src->layers[l].wq->name));
	}
}

Test(manifest, roundtrip_q4_0_one_region)
{
	setup(0);
	cr_assert_eq(plan.n_regions, 1);
	struct model *m;
	cr_assert_eq(manifest_load(man, man_len, mr, plan.n_regions, "manifest", &m), 0, "%s", err_msg());
	check_same(m);
	model_close(m);
	teardown();
}

Test(manifest, roundtrip_many_small_regions)
{
	setup(64 * 1024); /* forces many regions; a bigger tensor gets its own */
	cr_assert_gt(plan.n_regions, 2);
	for (size_t i = 0; i < plan.n_tensors; i++) {
		cr_assert_eq(plan.offset[i] % MANIFEST_ALIGN, 0);
		cr_assert_leq(plan.offset[i] + src->tensors[i].nbytes, plan.region_size[plan.region[i]]);
		if (plan.offset[i] > 0)
			cr_assert_leq(plan.offset[i] + src->tensors[i].nbytes, 64 * 1024);
	}
	struct model *m;
	cr_assert_eq(manifest_load(man, man_len, mr, plan.n_regions, "manifest", &m), 0, "%s", err_msg());
	check_same(m);
	model_close(m);
	teardown();
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Corrupt a copy at off with a u32 or u64 and expect rejection. */
static void corrupt(size_t off, uint64_t v, int width, int want, const char *why)
{
	uint8_t *c = malloc(man_len);
	memcpy(c, man, man_len);
	if (width == 4)
		put32(c + off, (uint32_t)v);
	else if (width == 8)
		put64(c + off, v);
	else
		c[off] = (uint8_t)v;
	struct model *m = NULL;
	err_clear();
	int rc = manifest_load(c, man_len, mr, plan.n_regions, "manifest", &m);
	cr_assert_eq(rc, want, "%s: rc %d (%s)", why, rc, err_msg());
	cr_assert_null(m);
	cr_assert(strstr(err_msg(), "manifest"), "%s: message '%s' does not name the manifest", why,
		  err_msg());
	free(c);
}

Test(manifest, corrupt_rejected)
{
	setup(0);
	const size_t H = MANIFEST_HDR_SIZE, C = MANIFEST_CFG_SIZE;
	const size_t T = H + C + 8 * plan.n_regions; /* first tensor */
	corrupt(0, 0x12345678, 4, ERR_INVAL, "magic");
	corrupt(4, 2, 4, ERR_INVAL, "version");
	corrupt(8, 2, 4, ERR_RANGE, "n_regions");
	corrupt(12, 0, 4, ERR_RANGE, "n_tensors 0");
	corrupt(12, 100000, 4, ERR_RANGE, "n_tensors cap");
	corrupt(12, (uint32_t)src->n_tensors - 1, 4, ERR_INVAL, "n_tensors vs length");
	corrupt(16, 9, 4, ERR_INVAL, "format");
	corrupt(20, 1, 4, ERR_INVAL, "reserved");
	corrupt(H + 0, 0, 4, ERR_RANGE, "n_embd 0");
	corrupt(H + 8, 1000, 4, ERR_RANGE, "n_layer cap");
	corrupt(H + 16, 3, 4, ERR_INVAL, "kv heads do not divide");
	corrupt(H + 40, 0x7fc00000, 4, ERR_RANGE, "eps NaN");
	corrupt(H + 64, 2, 1, ERR_INVAL, "layer_global 2");
	corrupt(H + C, plan.region_size[0] + 4096, 8, ERR_RANGE, "region size vs mapping");
	corrupt(T + 95, 'x', 1, ERR_INVAL, "name not terminated");
	corrupt(T + 0, 0, 1, ERR_INVAL, "empty name");
	corrupt(T + 96, 16, 4, ERR_UNSUP, "type 16 (IQ2_XXS)");
	corrupt(T + 100, 5, 4, ERR_INVAL, "n_dims 5");
	corrupt(T + 104, 0, 8, ERR_INVAL, "ne0 zero");
	corrupt(T + 104 + 24, 2, 8, ERR_INVAL, "unused dim not 1");
	corrupt(T + 104, 1ull << 62, 8, ERR_RANGE, "element overflow");
	corrupt(T + 136, plan.n_regions, 4, ERR_RANGE, "region index");
	corrupt(T + 144, 100, 8, ERR_INVAL, "offset alignment");
	corrupt(T + 144, plan.region_size[0], 8, ERR_RANGE, "offset past region");
	corrupt(T + 144, UINT64_MAX - 255, 8, ERR_RANGE, "offset overflow");
	corrupt(T + 152, src->tensors[0].nbytes + 1, 8, ERR_INVAL, "nbytes vs dims");
	corrupt(T + 160, 0x7f800000, 4, ERR_INVAL, "norm_offset inf");
	/* second tensor renamed like the first: duplicate */
	uint8_t *c = malloc(man_len);
	memcpy(c, man, man_len);
	memcpy(c + T + MANIFEST_TENSOR_SIZE, c + T, 96);
	struct model *m = NULL;
	int rc = manifest_load(c, man_len, mr, plan.n_regions, "manifest", &m);
	cr_assert_neq(rc, 0, "duplicate name accepted");
	/* a required tensor renamed away */
	memcpy(c, man, man_len);
	for (size_t i = 0; i < src->n_tensors; i++) {
		uint8_t *q = c + T + i * MANIFEST_TENSOR_SIZE;
		if (!strcmp((char *)q, "blk.0.ffn_up.weight"))
			memcpy(q, "blk.0.ffn_uq.weight", 19);
	}
	rc = manifest_load(c, man_len, mr, plan.n_regions, "manifest", &m);
	cr_assert_eq(rc, ERR_NOTFOUND, "%s", err_msg());
	cr_assert(strstr(err_msg(), "blk.0.ffn_up.weight"), "%s", err_msg());
	cr_assert_eq(manifest_load(man, man_len - 1, mr, plan.n_regions, "manifest", &m), ERR_INVAL);
	free(c);
	teardown();
}
