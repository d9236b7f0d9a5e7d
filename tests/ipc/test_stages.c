/* stages: pipeline layer ranges parsed from --layers (inclusive, contiguous
 * from 0, covering the model) and balanced by the weight bytes each stage
 * reads per step (the golden tiny model, whose embedding outweighs its 6
 * layers: the last stage, which runs the head, keeps one layer; without the
 * head's bytes its equal layers cut in half, and a heavier first layer moves
 * the cut); a stage's share of the KV cache. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "formats/model.h"
#include "ipc/stages.h"
#include "tests/golden.h"

Test(stages, parse_accepts_contiguous_ranges)
{
	struct stages s;
	cr_assert_eq(stages_parse("0-30,31-61", 62, &s), 0, "%s", err_msg());
	cr_assert_eq(s.n, 2);
	cr_assert_eq(s.first[0], 0);
	cr_assert_eq(s.first[1], 31);
	cr_assert_eq(s.first[2], 62);
	char buf[64];
	stages_format(&s, buf, sizeof buf);
	cr_assert_str_eq(buf, "0-30,31-61");
	cr_assert_eq(stages_parse("0-5", 6, &s), 0);
	cr_assert_eq(s.n, 1);
	uint32_t n = 0;
	cr_assert_eq(stages_parse_count("0-1,2-9", &n), 0);
	cr_assert_eq(n, 2);
}

Test(stages, parse_refuses_gaps_overlaps_and_junk)
{
	struct stages s;
	const char *bad[] = { "", "0-30,32-61", "0-30,30-61", "1-30,31-61", "0-30,31-60", "0-30,31-62", "0-30;31-61",
			      "0-30,", "a-b", "5-3,4-61", "0-1,2-3,4-61", "0-99999999999,1-2", NULL };
	for (int i = 0; bad[i]; i++) {
		cr_assert_neq(stages_parse(bad[i], 62, &s), 0, "'%s' accepted", bad[i]);
		cr_assert_gt(strlen(err_msg()), 0);
	}
}

Test(stages, balance_cuts_by_weight_bytes)
{
	char path[4300];
	snprintf(path, sizeof path, "%s/golden/gemma3-tiny-q4_0.gguf", golden_shared_dir());
	struct model *m;
	cr_assert_eq(model_open(path, &m), 0, "%s", err_msg());
	struct stages s;
	cr_assert_eq(stages_balance(m, 2, &s), 0, "%s", err_msg());
	cr_assert_eq(s.n, 2);
	cr_assert_eq(s.first[1], 5, "the head's embedding outweighs the layers: cut at %u", s.first[1]);
	cr_assert_eq(s.first[2], m->cfg.n_layer);
	struct model_tensor *embd = NULL;
	for (size_t i = 0; i < m->n_tensors; i++)
		if (!strcmp(m->tensors[i].name, "token_embd.weight"))
			embd = &m->tensors[i];
	cr_assert_not_null(embd);
	uint64_t embd_bytes = embd->nbytes;
	embd->nbytes = 0; /* layers alone */
	cr_assert_eq(stages_balance(m, 2, &s), 0, "%s", err_msg());
	cr_assert_eq(s.first[1], 3, "6 equal layers cut at %u", s.first[1]);
	cr_assert_eq(stages_balance(m, 1, &s), 0);
	cr_assert_eq(s.first[1], m->cfg.n_layer);
	cr_assert_neq(stages_balance(m, 3, &s), 0, "more stages than STAGES_MAX");
	uint64_t l0 = stages_layer_bytes(m, 0);
	cr_assert_gt(l0, 0);
	/* heavier first layers: layer 0 weighs as much as the other five, so the
	 * cut goes right after it */
	for (size_t i = 0; i < m->n_tensors; i++)
		if (!strncmp(m->tensors[i].name, "blk.0.", 6))
			m->tensors[i].nbytes *= 5;
	cr_assert_eq(stages_balance(m, 2, &s), 0);
	cr_assert_eq(s.first[1], 1, "cut at %u", s.first[1]);
	embd->nbytes = embd_bytes;
	/* a stage's KV share: global and local layers in their pools' proportions */
	struct kv_layout kv;
	cr_assert_eq(kv_layout_plan(&m->cfg, 4096, 4, 0, KV_TYPE_F16, &kv), 0, "%s", err_msg());
	uint64_t a = stages_kv_bytes(&kv, &m->cfg, 0, 3), b = stages_kv_bytes(&kv, &m->cfg, 3, 6);
	cr_assert_eq(a + b, kv.bytes, "%llu + %llu != %llu", (unsigned long long)a, (unsigned long long)b,
		     (unsigned long long)kv.bytes);
	model_close(m);
}
