/* stages: pipeline layer ranges (see stages.h). */
#include "ipc/stages.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

static int parse_ranges(const char *s, uint32_t *lo, uint32_t *hi, uint32_t *n)
{
	*n = 0;
	const char *p = s;
	if (!s || !*s)
		return err_set(ERR_INVAL, "--layers: empty (want A-B,C-D,...)");
	for (;;) {
		char *end;
		if (*p < '0' || *p > '9')
			return err_set(ERR_INVAL, "--layers '%s': want inclusive ranges A-B,C-D,...", s);
		unsigned long a = strtoul(p, &end, 10);
		if (*end != '-' || end[1] < '0' || end[1] > '9')
			return err_set(ERR_INVAL, "--layers '%s': want inclusive ranges A-B,C-D,...", s);
		unsigned long b = strtoul(end + 1, &end, 10);
		if (a > MODEL_MAX_LAYERS || b > MODEL_MAX_LAYERS || b < a)
			return err_set(ERR_INVAL, "--layers '%s': range %lu-%lu", s, a, b);
		if (*n == STAGES_MAX)
			return err_set(ERR_INVAL, "--layers '%s': at most %d stages", s, STAGES_MAX);
		lo[*n] = (uint32_t)a;
		hi[*n] = (uint32_t)b;
		(*n)++;
		if (!*end)
			return 0;
		if (*end != ',')
			return err_set(ERR_INVAL, "--layers '%s': want inclusive ranges A-B,C-D,...", s);
		p = end + 1;
	}
}

int stages_parse_count(const char *s, uint32_t *n)
{
	uint32_t lo[STAGES_MAX], hi[STAGES_MAX];
	return parse_ranges(s, lo, hi, n);
}

int stages_parse(const char *s, uint32_t n_layer, struct stages *out)
{
	uint32_t lo[STAGES_MAX], hi[STAGES_MAX], n;
	int rc = parse_ranges(s, lo, hi, &n);
	if (rc)
		return rc;
	memset(out, 0, sizeof *out);
	out->n = n;
	for (uint32_t k = 0; k < n; k++) {
		if (lo[k] != (k ? hi[k - 1] + 1 : 0))
			return err_set(ERR_INVAL, "--layers '%s': range %u starts at %u, want %u (contiguous from 0)", s, k,
				       lo[k], k ? hi[k - 1] + 1 : 0);
		out->first[k] = lo[k];
	}
	if (hi[n - 1] + 1 != n_layer)
		return err_set(ERR_INVAL, "--layers '%s': the last range ends at %u; the model's last layer is %u", s,
			       hi[n - 1], n_layer - 1);
	out->first[n] = n_layer;
	return 0;
}

uint64_t stages_layer_bytes(const struct model *m, uint32_t l)
{
	char pre[32];
	int np = snprintf(pre, sizeof pre, "blk.%u.", l);
	uint64_t b = 0;
	for (size_t i = 0; i < m->n_tensors; i++)
		if (!strncmp(m->tensors[i].name, pre, (size_t)np))
			b += m->tensors[i].nbytes;
	return b;
}

int stages_balance(const struct model *m, uint32_t n, struct stages *out)
{
	uint32_t L = m->cfg.n_layer;
	if (n < 1 || n > STAGES_MAX || n > L)
		return err_set(ERR_INVAL, "stages: %u stages for %u layers (1..%u)", n, L, L < STAGES_MAX ? L : STAGES_MAX);
	uint64_t pre[MODEL_MAX_LAYERS + 1] = { 0 }; /* pre[l]: bytes of layers [0, l) */
	for (uint32_t l = 0; l < L; l++)
		pre[l + 1] = pre[l] + stages_layer_bytes(m, l);
	memset(out, 0, sizeof *out);
	out->n = n;
	/* the last stage's head reads the whole embedding matrix every step
	 * (the logits), as a layer reads its weights: it counts as its bytes */
	uint64_t head = m->tok_embd ? m->tok_embd->nbytes : 0;
	/* stage k starts at the layer boundary nearest to k/n of the bytes, with
	 * at least one layer in every stage */
	for (uint32_t k = 1; k < n; k++) {
		uint32_t best = out->first[k - 1] + 1;
		for (uint32_t l = best; l <= L - (n - k); l++) {
			double want = (double)(pre[L] + head) * k / n;
			if (__builtin_fabs((double)pre[l] - want) < __builtin_fabs((double)pre[best] - want))
				best = l;
		}
		out->first[k] = best;
	}
	out->first[n] = L;
	return 0;
}

uint64_t stages_kv_bytes(const struct kv_layout *kv, const struct gemma3_config *c, uint32_t l0, uint32_t l1)
{
	uint64_t b = 0;
	for (uint32_t l = l0; l < l1 && l < c->n_layer; l++) {
		if (c->layer_global[l] && kv->n_global)
			b += (uint64_t)kv->n_gblocks * (kv->gblock_bytes / kv->n_global);
		else if (!c->layer_global[l] && kv->n_local)
			b += (uint64_t)kv->n_lblocks * (kv->lblock_bytes / kv->n_local);
	}
	return b;
}

void stages_format(const struct stages *s, char *buf, uint32_t cap)
{
	uint32_t at = 0;
	buf[0] = 0;
	for (uint32_t k = 0; k < s->n && at < cap; k++) {
		int w = snprintf(buf + at, cap - at, "%s%u-%u", k ? "," : "", s->first[k], s->first[k + 1] - 1);
		if (w < 0)
			break;
		at += (uint32_t)w;
	}
}
