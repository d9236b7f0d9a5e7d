/* stages: see stages.h. */
#include "coordinator/stages.h"

#include "common/err.h"

int coord_stages_plan(const struct model *m, const char *layers, uint32_t n, struct stages *out)
{
	int rc = layers ? stages_parse(layers, m->cfg.n_layer, out) : stages_balance(m, n, out);
	if (!rc && out->n != n)
		rc = err_set(ERR_INVAL, "--layers names %u stages, the cluster runs %u", out->n, n);
	return rc ? err_prefix(rc, "pipeline") : 0;
}

uint32_t coord_stages_op_stage(const struct stages *s, uint32_t n_layer, uint32_t i)
{
	if (i == 0)
		return 0;
	if (i >= 1 + 2 * n_layer)
		return s->n - 1;
	uint32_t layer = (i - 1) / 2;
	uint32_t k = 0;
	while (k + 1 < s->n && layer >= s->first[k + 1])
		k++;
	return k;
}

void coord_stages_ops(const struct stages *s, uint32_t n_layer, bool head, uint32_t ops[2])
{
	ops[0] = ops[1] = 0;
	for (uint32_t k = 0; k < s->n && k < 2; k++)
		ops[k] = 2 * (s->first[k + 1] - s->first[k]);
	ops[0] += 1;
	ops[s->n > 1 ? 1 : 0] += head ? 1 : 0;
	(void)n_layer;
}
