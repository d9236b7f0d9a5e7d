/* ref_vision: CPU reference Gemma 3 vision tower (see ref_vision.h). */
#include "ref/ref_vision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

static int load(const struct model_tensor *t, uint64_t n, float **dst)
{
	if (!t)
		return err_set(ERR_NOTFOUND, "ref_vision: tensor missing");
	if (model_tensor_nelems(t) != n || n > SIZE_MAX / sizeof(float))
		return err_set(ERR_INVAL, "ref_vision: %s: %llu elements, expected %llu", t->name,
			       (unsigned long long)model_tensor_nelems(t), (unsigned long long)n);
	float *b = malloc((size_t)n * sizeof(float));
	if (!b)
		return err_set(ERR_NOMEM, "ref_vision: %s: out of memory", t->name);
	int rc = model_tensor_rows_f32(t, 0, n / t->ne[0], b);
	if (rc) {
		free(b);
		return err_prefix(rc, "ref_vision");
	}
	*dst = b;
	return 0;
}

void ref_vision_destroy(struct ref_vision *r)
{
	if (!r)
		return;
	if (r->layers) {
		for (uint32_t i = 0; i < r->cfg.n_layer; i++) {
			struct ref_vision_layer *L = &r->layers[i];
			float *all[] = { L->ln1_w, L->ln1_b, L->q_w, L->q_b, L->k_w, L->k_b, L->v_w, L->v_b,
					 L->o_w, L->o_b, L->ln2_w, L->ln2_b, L->up_w, L->up_b, L->down_w, L->down_b };
			for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
				free(all[k]);
		}
		free(r->layers);
	}
	free(r->patch_w);
	free(r->patch_b);
	free(r->pos);
	free(r->post_w);
	free(r->post_b);
	free(r->soft_norm);
	free(r->proj);
	free(r);
}

int ref_vision_create(const struct mmproj *p, struct ref_vision **out)
{
	*out = NULL;
	int rc = mmproj_check_config("ref_vision", &p->cfg);
	if (rc)
		return rc;
	struct ref_vision *r = calloc(1, sizeof *r);
	if (!r)
		return err_set(ERR_NOMEM, "ref_vision: out of memory");
	r->cfg = p->cfg;
	const struct vision_config *c = &r->cfg;
	uint64_t d = c->n_embd, f = c->n_ff;
	r->layers = calloc(c->n_layer, sizeof *r->layers);
	if (!r->layers) {
		ref_vision_destroy(r);
		return err_set(ERR_NOMEM, "ref_vision: out of memory");
	}
	rc = load(p->patch_w, d * 3 * c->patch_size * c->patch_size, &r->patch_w);
	if (!rc) rc = load(p->patch_b, d, &r->patch_b);
	if (!rc) rc = load(p->pos, d * c->n_patches, &r->pos);
	if (!rc) rc = load(p->post_ln_w, d, &r->post_w);
	if (!rc) rc = load(p->post_ln_b, d, &r->post_b);
	if (!rc) rc = load(p->soft_norm, d, &r->soft_norm);
	if (!rc) rc = load(p->proj, d * c->proj_dim, &r->proj);
	for (uint32_t i = 0; i < c->n_layer && !rc; i++) {
		const struct mmproj_layer *S = &p->layers[i];
		struct ref_vision_layer *L = &r->layers[i];
		if (!rc) rc = load(S->ln1_w, d, &L->ln1_w);
		if (!rc) rc = load(S->ln1_b, d, &L->ln1_b);
		if (!rc) rc = load(S->q_w, d * d, &L->q_w);
		if (!rc) rc = load(S->q_b, d, &L->q_b);
		if (!rc) rc = load(S->k_w, d * d, &L->k_w);
		if (!rc) rc = load(S->k_b, d, &L->k_b);
		if (!rc) rc = load(S->v_w, d * d, &L->v_w);
		if (!rc) rc = load(S->v_b, d, &L->v_b);
		if (!rc) rc = load(S->o_w, d * d, &L->o_w);
		if (!rc) rc = load(S->o_b, d, &L->o_b);
		if (!rc) rc = load(S->ln2_w, d, &L->ln2_w);
		if (!rc) rc = load(S->ln2_b, d, &L->ln2_b);
		if (!rc) rc = load(S->up_w, d * f, &L->up_w);
		if (!rc) rc = load(S->up_b, f, &L->up_b);
		if (!rc) rc = load(S->down_w, f * d, &L->down_w);
		if (!rc) rc = load(S->down_b, d, &L->down_b);
	}
	if (rc) {
		ref_vision_destroy(r);
		return rc;
	}
	*out = r;
	return 0;
}

static void layer_norm(const float *x, const float *w, const float *b, uint32_t n, float eps, float *out)
{
	double mean = 0, var = 0;
	for (uint32_t i = 0; i < n; i++)
		mean += x[i];
	mean /= n;
	for (uint32_t i = 0; i < n; i++)
		var += ((double)x[i] - mean) * ((double)x[i] - mean);
	var /= n;
	double inv = 1.0 / sqrt(var + eps);
	for (uint32_t i = 0; i < n; i++)
		out[i] = (float)(((double)x[i] - mean) * inv) * w[i] + b[i];
}

/* out[o] = b[o] + sum_i W[o][i] x[i], W row-major [n_out][n_in] */
static void linear(const float *W, const float *b, const float *x, uint32_t n_in, uint32_t n_out, float *out)
{
	for (uint32_t o = 0; o < n_out; o++) {
		const float *w = W + (size_t)o * n_in;
		double s = 0;
		for (uint32_t i = 0; i < n_in; i++)
			s += (double)w[i] * x[i];
		out[o] = (float)s + (b ? b[o] : 0.0f);
	}
}

static float gelu_tanh(float x)
{
	const double k = 0.7978845608028654; /* sqrt(2/pi) */
	double xd = x;
	return (float)(0.5 * xd * (1.0 + tanh(k * (xd + 0.044715 * xd * xd * xd))));
}

int ref_vision_tower(const struct ref_vision *r, const float *pixels, float *hidden)
{
	const struct vision_config *c = &r->cfg;
	uint32_t d = c->n_embd, f = c->n_ff, np = c->n_patches, ps = c->patch_size, pps = c->patches_per_side;
	uint32_t S = c->image_size, H = c->n_head, hd = c->head_dim;
	size_t nd = (size_t)np * d;
	float *xn = malloc(nd * sizeof(float)), *q = malloc(nd * sizeof(float)), *k = malloc(nd * sizeof(float)),
	      *v = malloc(nd * sizeof(float)), *att = malloc(nd * sizeof(float)), *tmp = malloc(d * sizeof(float)),
	      *hb = malloc((size_t)f * sizeof(float));
	double *sc = malloc((size_t)np * sizeof(double));
	int rc = 0;
	if (!xn || !q || !k || !v || !att || !tmp || !hb || !sc) {
		rc = err_set(ERR_NOMEM, "ref_vision: out of memory for %u patches", np);
		goto out;
	}
	/* patch embedding: a stride-patch convolution over the three planes */
	for (uint32_t py = 0; py < pps; py++)
		for (uint32_t px = 0; px < pps; px++) {
			float *x = hidden + ((size_t)py * pps + px) * d;
			for (uint32_t o = 0; o < d; o++) {
				double s = r->patch_b[o];
				for (uint32_t ch = 0; ch < 3; ch++)
					for (uint32_t ky = 0; ky < ps; ky++) {
						const float *w = r->patch_w + (((size_t)o * 3 + ch) * ps + ky) * ps;
						const float *pix = pixels + ((size_t)ch * S + (size_t)py * ps + ky) * S +
								   (size_t)px * ps;
						for (uint32_t kx = 0; kx < ps; kx++)
							s += (double)w[kx] * pix[kx];
					}
				x[o] = (float)s + r->pos[((size_t)py * pps + px) * d + o];
			}
		}
	double scale = 1.0 / sqrt((double)hd);
	for (uint32_t il = 0; il < c->n_layer; il++) {
		const struct ref_vision_layer *L = &r->layers[il];
		for (uint32_t p = 0; p < np; p++) {
			layer_norm(hidden + (size_t)p * d, L->ln1_w, L->ln1_b, d, c->eps, xn + (size_t)p * d);
			linear(L->q_w, L->q_b, xn + (size_t)p * d, d, d, q + (size_t)p * d);
			linear(L->k_w, L->k_b, xn + (size_t)p * d, d, d, k + (size_t)p * d);
			linear(L->v_w, L->v_b, xn + (size_t)p * d, d, d, v + (size_t)p * d);
		}
		for (uint32_t p = 0; p < np; p++)
			for (uint32_t h = 0; h < H; h++) {
				const float *qh = q + (size_t)p * d + (size_t)h * hd;
				double mx = -INFINITY, sum = 0;
				for (uint32_t j = 0; j < np; j++) {
					const float *kh = k + (size_t)j * d + (size_t)h * hd;
					double s = 0;
					for (uint32_t e = 0; e < hd; e++)
						s += (double)qh[e] * kh[e];
					sc[j] = s * scale;
					if (sc[j] > mx)
						mx = sc[j];
				}
				for (uint32_t j = 0; j < np; j++)
					sum += (sc[j] = exp(sc[j] - mx));
				float *oh = att + (size_t)p * d + (size_t)h * hd;
				for (uint32_t e = 0; e < hd; e++) {
					double s = 0;
					for (uint32_t j = 0; j < np; j++)
						s += sc[j] * v[(size_t)j * d + (size_t)h * hd + e];
					oh[e] = (float)(s / sum);
				}
			}
		for (uint32_t p = 0; p < np; p++) {
			float *x = hidden + (size_t)p * d;
			linear(L->o_w, L->o_b, att + (size_t)p * d, d, d, tmp);
			for (uint32_t i = 0; i < d; i++)
				x[i] += tmp[i];
			layer_norm(x, L->ln2_w, L->ln2_b, d, c->eps, tmp);
			linear(L->up_w, L->up_b, tmp, d, f, hb);
			for (uint32_t i = 0; i < f; i++)
				hb[i] = gelu_tanh(hb[i]);
			linear(L->down_w, L->down_b, hb, f, d, tmp);
			for (uint32_t i = 0; i < d; i++)
				x[i] += tmp[i];
		}
	}
	for (uint32_t p = 0; p < np; p++) {
		memcpy(tmp, hidden + (size_t)p * d, d * sizeof(float));
		layer_norm(tmp, r->post_w, r->post_b, d, c->eps, hidden + (size_t)p * d);
	}
out:
	free(xn);
	free(q);
	free(k);
	free(v);
	free(att);
	free(tmp);
	free(hb);
	free(sc);
	return rc;
}

int ref_vision_project(const struct ref_vision *r, const float *hidden, float *out)
{
	const struct vision_config *c = &r->cfg;
	uint32_t d = c->n_embd, pps = c->patches_per_side, m = c->merge, tps = c->tokens_per_side;
	double *acc = malloc(d * sizeof(double));
	float *t = malloc(d * sizeof(float));
	if (!acc || !t) {
		free(acc);
		free(t);
		return err_set(ERR_NOMEM, "ref_vision: out of memory");
	}
	for (uint32_t ty = 0; ty < tps; ty++)
		for (uint32_t tx = 0; tx < tps; tx++) {
			for (uint32_t i = 0; i < d; i++)
				acc[i] = 0;
			for (uint32_t dy = 0; dy < m; dy++)
				for (uint32_t dx = 0; dx < m; dx++) {
					const float *x = hidden + ((size_t)(ty * m + dy) * pps + tx * m + dx) * d;
					for (uint32_t i = 0; i < d; i++)
						acc[i] += x[i];
				}
			double ss = 0;
			for (uint32_t i = 0; i < d; i++) {
				acc[i] /= (double)m * m;
				ss += acc[i] * acc[i];
			}
			double inv = 1.0 / sqrt(ss / d + c->eps);
			for (uint32_t i = 0; i < d; i++)
				t[i] = (float)(acc[i] * inv) * r->soft_norm[i];
			float *o = out + ((size_t)ty * tps + tx) * c->proj_dim;
			for (uint32_t j = 0; j < c->proj_dim; j++) {
				double s = 0;
				for (uint32_t i = 0; i < d; i++)
					s += (double)t[i] * r->proj[(size_t)i * c->proj_dim + j];
				o[j] = (float)s;
			}
		}
	free(acc);
	free(t);
	return 0;
}

int ref_vision_encode(const struct ref_vision *r, const float *pixels, float *out)
{
	size_t n = (size_t)r->cfg.n_patches * r->cfg.n_embd;
	float *hidden = malloc(n * sizeof(float));
	if (!hidden)
		return err_set(ERR_NOMEM, "ref_vision: out of memory");
	int rc = ref_vision_tower(r, pixels, hidden);
	if (!rc)
		rc = ref_vision_project(r, hidden, out);
	free(hidden);
	return rc;
}
