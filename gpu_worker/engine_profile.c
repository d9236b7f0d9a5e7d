/* engine_profile: a forward with a timestamp around every dispatch (see
 * engine.h engine_profile), for `unicorn bench --profile`. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_worker/engine_priv.h"
#include "common/err.h"

const char *engine_kernels(const struct engine *e) { return e->kernels; }

/* The engine's one-time command buffer, reset for a recording that begins
 * its own way (eng_record_mode begins it) */
static int once_reset(struct engine *e)
{
	vkResetCommandBuffer(e->once, 0);
	return 0;
}

/* Record the step buffer's n rows (n_out heads) in the kernel kind of mode
 * with a timestamp after every dispatch, run it once and sum the GPU time per
 * dispatch kind. */
static int profile_run(struct engine *e, uint32_t n, uint32_t n_out, int mode, struct engine_prof *out)
{
	int rc = once_reset(e);
	if (rc)
		return rc;
	e->prof = true;
	e->prof_n = 0;
	e->rec_disp = e->rec_bars = 0;
	e->rec_distinct = mode >= MODE_B_ALL;
	rc = eng_record_mode(e, e->once, n, n_out, mode);
	e->prof = e->rec_distinct = false;
	if (rc)
		return rc;
	rc = eng_submit(e, e->once);
	e->timed = false;
	if (rc)
		return rc;
	uint32_t nq = e->prof_n + 1;
	uint64_t *ns = malloc(nq * sizeof *ns);
	if (!ns)
		return err_set(ERR_NOMEM, "engine: profile: out of memory");
	rc = vk_query_ns(e->vk, 0, nq, ns);
	for (uint32_t i = 0; !rc && i < e->prof_n; i++) {
		uint32_t k = 0;
		while (k < out->n_kind && strcmp(out->kind[k].name, e->prof_name[i]) != 0)
			k++;
		if (k == out->n_kind) {
			if (k == ENGINE_PROF_KINDS)
				continue;
			out->kind[out->n_kind++].name = e->prof_name[i];
		}
		out->kind[k].count++;
		out->kind[k].ns += ns[i + 1] - ns[i];
		out->kind[k].bytes += e->prof_bytes[i];
	}
	if (!rc) {
		out->n_dispatch = e->rec_disp;
		out->n_barrier = e->rec_bars;
		out->total_ns = ns[nq - 1] - ns[0];
	}
	free(ns);
	return rc;
}

static int profile_check(const struct engine *e, const void *tokens, struct engine_prof *out)
{
	if (eng_whole_check(e, "profile"))
		return ERR_STATE;
	memset(out, 0, sizeof *out);
	if (!e->vk->timestamps)
		return err_set(ERR_UNSUP, "engine: profile: %s has no timestamps on the compute queue", e->vk->info.name);
	if (!tokens)
		return err_set(ERR_INVAL, "engine: profile: no tokens");
	return 0;
}

int engine_profile(struct engine *e, const uint32_t *tokens, uint32_t n, uint32_t pos0, struct engine_prof *out)
{
	int rc = profile_check(e, tokens, out);
	if (!rc)
		rc = eng_step_write(e, tokens, n, pos0, 0);
	return rc ? rc : profile_run(e, n, 1, MODE_ARGMAX, out);
}

int engine_profile_batch(struct engine *e, uint32_t n, const uint32_t *tokens, const uint32_t *seqs, const uint32_t *pos,
			 bool wide, struct engine_prof *out)
{
	int rc = profile_check(e, tokens, out);
	if (!rc && (!seqs || !pos))
		rc = err_set(ERR_INVAL, "engine: profile: seqs and pos are required");
	if (!rc)
		rc = eng_batch_write(e, n, tokens, seqs, pos, 1);
	return rc ? rc : profile_run(e, n, n, wide ? MODE_W_ARGMAX : MODE_B_ARGMAX, out);
}

