/* The split and pipeline placements' one-row heads (the HEAD op: argmax or
 * top-k and its log-sum-exp on the GPU, gpu_worker/worker.c do_head) answer
 * as fused's: a sampled completion with a seed gives the same text, and its
 * logprobs (top-k values and log-sum-exp) agree, on the tiny golden model. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/proc.h"

struct answer {
	char text[512];
	double lp[16];
	size_t n_lp;
};

static void ask(const char *placement, struct answer *a)
{
	struct proc_cluster c;
	const char *fused[] = { "--max-seqs", "2", NULL };
	const char *other[] = { "--placement", placement, "--max-seqs", "2", NULL };
	proc_cluster_start(&c, "heads", strcmp(placement, "fused") ? other : fused);
	char cmd[1024], *out = malloc(1 << 16);
	snprintf(cmd, sizeof cmd,
		 "curl -s --max-time 120 http://127.0.0.1:%d/v1/completions -d '{\"prompt\":\"Once upon a time\","
		 "\"max_tokens\":12,\"temperature\":0.9,\"seed\":7,\"logprobs\":3}'",
		 c.port);
	proc_sh(cmd, out, 1 << 16);
	proc_cluster_stop(&c);
	json_error_t je;
	json_t *j = json_loads(out, 0, &je);
	cr_assert_not_null(j, "%s: %s: %.300s", placement, je.text, out);
	json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
	const char *t = json_string_value(json_object_get(ch, "text"));
	cr_assert_not_null(t, "%s: no text: %.300s", placement, out);
	snprintf(a->text, sizeof a->text, "%s", t);
	json_t *tl = json_object_get(json_object_get(ch, "logprobs"), "token_logprobs");
	a->n_lp = json_array_size(tl) < 16 ? json_array_size(tl) : 16;
	for (size_t i = 0; i < a->n_lp; i++)
		a->lp[i] = json_real_value(json_array_get(tl, i));
	json_decref(j);
	free(out);
}

Test(placement_heads, split_and_pipeline_sample_as_fused, .timeout = 240)
{
	struct answer f, s, p;
	ask("fused", &f);
	ask("split", &s);
	ask("pipeline", &p);
	cr_assert_gt(f.n_lp, 4, "fused gave %zu logprobs", f.n_lp);
	const struct answer *o[2] = { &s, &p };
	const char *name[2] = { "split", "pipeline" };
	for (int k = 0; k < 2; k++) {
		cr_assert_str_eq(o[k]->text, f.text, "%s sampled another text", name[k]);
		cr_assert_eq(o[k]->n_lp, f.n_lp, "%s: %zu logprobs, fused %zu", name[k], o[k]->n_lp, f.n_lp);
		for (size_t i = 0; i < f.n_lp; i++) {
			cr_assert(f.lp[i] < 0 && isfinite(f.lp[i]), "fused logprob %zu: %g", i, f.lp[i]);
			cr_assert_float_eq(o[k]->lp[i], f.lp[i], 1e-3, "%s logprob %zu: %g, fused %g", name[k], i, o[k]->lp[i],
					   f.lp[i]);
		}
	}
	fprintf(stderr, "placement_heads: fused \"%s\", %zu logprobs (first %.4f); split and pipeline the same\n",
		f.text, f.n_lp, f.lp[0]);
}
