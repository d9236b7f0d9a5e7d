/* kvlayout: pool sizes of the paged KV cache (see kvlayout.h). */
#include "ipc/kvlayout.h"

#include <inttypes.h>
#include <string.h>
#include <strings.h>

#include "common/err.h"
#include "ipc/rundir.h"

#include <stdio.h>
#include <unistd.h>

static int budget_path(const char *rundir, const char *role, char *out, size_t cap)
{
	char name[64];
	snprintf(name, sizeof name, "kv-%s.budget", role);
	return rundir_path(rundir, name, out, cap);
}

int kv_budget_file_write(const char *rundir, const char *role, uint64_t ident, uint64_t budget)
{
	char path[RUNDIR_PATH_MAX], tmp[RUNDIR_PATH_MAX + 8];
	if (budget_path(rundir, role, path, sizeof path))
		return err_set(ERR_RANGE, "kv: run directory path too long");
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return err_set(ERR_IO, "kv: %s: cannot write", tmp);
	fprintf(f, "%016" PRIx64 " %" PRIu64 "\n", ident, budget);
	if (fclose(f) || rename(tmp, path)) {
		unlink(tmp);
		return err_set(ERR_IO, "kv: %s: cannot write", path);
	}
	return 0;
}

int kv_budget_file_read(const char *rundir, const char *role, uint64_t ident, uint64_t *budget)
{
	char path[RUNDIR_PATH_MAX];
	*budget = 0;
	if (budget_path(rundir, role, path, sizeof path))
		return ERR_NOTFOUND;
	FILE *f = fopen(path, "r");
	if (!f)
		return ERR_NOTFOUND;
	uint64_t id = 0, b = 0;
	int n = fscanf(f, "%" SCNx64 " %" SCNu64, &id, &b);
	fclose(f);
	if (n != 2 || id != ident || b == 0)
		return ERR_NOTFOUND;
	*budget = b;
	return 0;
}

int kv_type_parse(const char *s, uint32_t *out)
{
	if (s && !strcasecmp(s, "f16"))
		*out = KV_TYPE_F16;
	else if (s && !strcasecmp(s, "f32"))
		*out = KV_TYPE_F32;
	else if (s && (!strcasecmp(s, "q8_0") || !strcasecmp(s, "q8")))
		*out = KV_TYPE_Q8_0;
	else
		return err_set(ERR_INVAL, "kv: type '%s': must be " KV_TYPE_NAMES, s ? s : "");
	return 0;
}

const char *kv_type_name(uint32_t type)
{
	return type == KV_TYPE_F16 ? "f16" : type == KV_TYPE_F32 ? "f32" : type == KV_TYPE_Q8_0 ? "q8_0" : "?";
}

uint64_t kv_type_row_bytes(uint32_t type, uint64_t n)
{
	switch (type) {
	case KV_TYPE_F16: return n * 2;
	case KV_TYPE_F32: return n * 4;
	case KV_TYPE_Q8_0: return n % 32 ? 0 : n / 32 * 34;
	default: return 0;
	}
}

int kv_layout_plan(const struct gemma3_config *cfg, uint32_t max_ctx, uint32_t max_seqs, uint64_t budget,
		   uint32_t type, struct kv_layout *out)
{
	memset(out, 0, sizeof *out);
	if (max_ctx == 0 || max_ctx > KV_MAX_CTX)
		return err_set(ERR_RANGE, "kv: context of %u positions outside [1, %d]", max_ctx, KV_MAX_CTX);
	if (max_seqs == 0 || max_seqs > KV_MAX_SEQS)
		return err_set(ERR_RANGE, "kv: %u sequences outside [1, %d]", max_seqs, KV_MAX_SEQS);
	if (cfg->n_layer == 0 || cfg->n_layer > MODEL_MAX_LAYERS || !cfg->n_head_kv || !cfg->head_dim ||
	    (uint64_t)cfg->n_head_kv * cfg->head_dim > (1u << 20))
		return err_set(ERR_RANGE, "kv: model shape (%u layers, %u kv heads of %u) out of range",
			       cfg->n_layer, cfg->n_head_kv, cfg->head_dim);
	if (type > KV_TYPE_Q8_0)
		return err_set(ERR_INVAL, "kv: type %u unknown", type);
	if (type == KV_TYPE_Q8_0 && cfg->head_dim % 32)
		return err_set(ERR_UNSUP, "kv: --kv-type q8_0 needs head_dim a multiple of 32 (this model's is %u): "
			       "use --kv-type f16", cfg->head_dim);
	struct kv_layout l = { .block = KV_BLOCK, .type = type, .max_ctx = max_ctx };
	l.max_blocks = (max_ctx + KV_BLOCK - 1) / KV_BLOCK;
	for (uint32_t i = 0; i < cfg->n_layer; i++) {
		if (cfg->layer_global[i])
			l.n_global++;
		else
			l.n_local++;
	}
	/* a step of up to KV_RING_SLACK positions reads back sliding_window - 1
	 * positions before its first: that span, rounded out to whole blocks,
	 * plus one block for a start in mid-block */
	uint64_t ring = l.n_local ? ((uint64_t)cfg->sliding_window + KV_RING_SLACK + KV_BLOCK - 1) / KV_BLOCK + 1 : 0;
	l.ring = ring < l.max_blocks ? (uint32_t)ring : (l.n_local ? l.max_blocks : 0);
	if (kv_table_len(&l) > KV_MAX_TABLE)
		return err_set(ERR_RANGE, "kv: a table of %u + %u blocks exceeds %d entries (sliding window %u)",
			       l.max_blocks, l.ring, KV_MAX_TABLE, cfg->sliding_window);
	l.row_bytes = (uint32_t)kv_type_row_bytes(type, (uint64_t)cfg->n_head_kv * cfg->head_dim);
	uint64_t row = 2ull * l.row_bytes; /* K and V */
	l.gblock_bytes = row * KV_BLOCK * l.n_global;
	l.lblock_bytes = row * KV_BLOCK * l.n_local;
	uint64_t full = (uint64_t)l.max_blocks * l.gblock_bytes + (uint64_t)l.ring * l.lblock_bytes;
	if (budget == 0) {
		l.n_gblocks = l.n_global ? max_seqs * l.max_blocks : 0;
		l.n_lblocks = l.n_local ? max_seqs * l.ring : 0;
	} else {
		if (budget < full)
			return err_set(ERR_RANGE,
				       "kv: a budget of %" PRIu64 " bytes does not hold one sequence of %u positions "
				       "(%" PRIu64 " bytes); raise --kv-budget to at least that",
				       budget, max_ctx, full);
		/* the pools split as for sequences of KV_PLAN_POSITIONS (or max_ctx
		 * when shorter): the local pool holds a ring for each such sequence
		 * that fits, at most max_seqs. (Split by a full-length sequence of
		 * a 128K context, a 27B budget of 40 GB held rings for 4 sequences:
		 * 64 streams preempted each other at 121 positions.) */
		uint64_t plan_blocks = KV_PLAN_POSITIONS / KV_BLOCK < l.max_blocks ? KV_PLAN_POSITIONS / KV_BLOCK : l.max_blocks;
		uint64_t plan = plan_blocks * l.gblock_bytes + (uint64_t)l.ring * l.lblock_bytes;
		uint64_t nl = l.n_local ? (uint64_t)((long double)budget * l.ring / plan) : 0;
		if (nl > (uint64_t)max_seqs * l.ring)
			nl = (uint64_t)max_seqs * l.ring;
		if (l.n_local && nl < l.ring)
			nl = l.ring;
		uint64_t rest = budget - nl * l.lblock_bytes;
		uint64_t ng = l.n_global ? rest / l.gblock_bytes : 0;
		if (ng > (uint64_t)max_seqs * l.max_blocks)
			ng = (uint64_t)max_seqs * l.max_blocks; /* more could never be used */
		if (l.n_global && ng < l.max_blocks)
			ng = l.max_blocks;
		if (ng > UINT32_MAX / 2 || nl > UINT32_MAX / 2)
			return err_set(ERR_RANGE, "kv: %" PRIu64 " bytes make too many blocks", budget);
		l.n_gblocks = (uint32_t)ng;
		l.n_lblocks = (uint32_t)nl;
	}
	l.bytes = (uint64_t)l.n_gblocks * l.gblock_bytes + (uint64_t)l.n_lblocks * l.lblock_bytes;
	*out = l;
	return 0;
}

int kv_parse_bytes(const char *s, uint64_t *out)
{
	*out = 0;
	if (!s || !*s)
		return err_set(ERR_INVAL, "kv: empty byte count");
	if (!strcasecmp(s, "auto"))
		return 0;
	uint64_t v = 0;
	const char *p = s;
	if (*p < '0' || *p > '9')
		return err_set(ERR_INVAL, "kv: '%s' is not a byte count (e.g. 512M, 2G, auto)", s);
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return err_set(ERR_INVAL, "kv: '%s' overflows", s);
		v = v * 10 + (uint64_t)(*p - '0');
	}
	unsigned shift = 0;
	if (*p) {
		const char *u = "KMGT";
		const char *q = strchr(u, *p >= 'a' && *p <= 'z' ? *p - 32 : *p);
		if (!q || !*q)
			return err_set(ERR_INVAL, "kv: '%s': unknown unit (use K, M, G or T)", s);
		shift = 10u * (unsigned)(q - u + 1);
		p++;
		if (*p == 'i' || *p == 'I')
			p++;
		if (*p == 'b' || *p == 'B')
			p++;
		if (*p)
			return err_set(ERR_INVAL, "kv: '%s': trailing characters", s);
	}
	if (shift && v > (UINT64_MAX >> shift))
		return err_set(ERR_INVAL, "kv: '%s' overflows", s);
	*out = v << shift;
	if (!*out)
		return err_set(ERR_INVAL, "kv: '%s' is zero bytes", s);
	return 0;
}
