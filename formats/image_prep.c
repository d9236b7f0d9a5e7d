/* image_prep: resize and normalize for the vision tower (see image_prep.h). */
#include "formats/image_prep.h"

#include <math.h>
#include <stdlib.h>

#include "common/err.h"

/* PIL's resampling coefficients for one axis: for each output index, the
 * first input index, the count and the normalized weights (at most kmax). */
struct axis {
	uint32_t *first, *count;
	float *w;
	uint32_t kmax;
};

static void axis_free(struct axis *a)
{
	free(a->first);
	free(a->count);
	free(a->w);
}

static int axis_init(struct axis *a, uint32_t in, uint32_t out)
{
	double scale = (double)in / out;
	double fs = scale > 1.0 ? scale : 1.0; /* widen the filter when shrinking */
	double support = fs;                    /* the triangle's support is 1 */
	a->kmax = (uint32_t)ceil(support) * 2 + 1;
	a->first = malloc(out * sizeof *a->first);
	a->count = malloc(out * sizeof *a->count);
	a->w = malloc((size_t)out * a->kmax * sizeof *a->w);
	if (!a->first || !a->count || !a->w) {
		axis_free(a);
		return err_set(ERR_NOMEM, "image: out of memory resizing");
	}
	for (uint32_t o = 0; o < out; o++) {
		double center = (o + 0.5) * scale;
		int64_t lo = (int64_t)(center - support + 0.5), hi = (int64_t)(center + support + 0.5);
		if (lo < 0)
			lo = 0;
		if (hi > in)
			hi = in;
		if (hi - lo > a->kmax)
			hi = lo + a->kmax;
		float *w = a->w + (size_t)o * a->kmax;
		double sum = 0;
		uint32_t n = 0;
		for (int64_t x = lo; x < hi; x++, n++) {
			double t = fabs(((double)x - center + 0.5) / fs);
			w[n] = (float)(t < 1.0 ? 1.0 - t : 0.0);
			sum += w[n];
		}
		if (n == 0) { /* cannot happen for in >= 1; keep the nearest pixel */
			lo = (int64_t)center < in ? (int64_t)center : in - 1;
			w[0] = 1, n = 1, sum = 1;
		}
		for (uint32_t i = 0; i < n; i++)
			w[i] = sum > 0 ? (float)(w[i] / sum) : 0.0f;
		a->first[o] = (uint32_t)lo;
		a->count[o] = n;
	}
	return 0;
}

int image_prep(const uint8_t *rgb, uint32_t w, uint32_t h, const struct vision_config *c, float *out)
{
	if (!w || !h)
		return err_set(ERR_INVAL, "image: empty (%u x %u)", w, h);
	uint32_t S = c->image_size;
	struct axis ax = { 0 }, ay = { 0 };
	int rc = axis_init(&ax, w, S);
	if (!rc)
		rc = axis_init(&ay, h, S);
	/* horizontal pass: h rows of S pixels, 3 channels, in [0, 255] */
	float *mid = rc ? NULL : malloc((size_t)h * S * 3 * sizeof(float));
	if (!rc && !mid)
		rc = err_set(ERR_NOMEM, "image: out of memory resizing %u x %u", w, h);
	if (rc)
		goto out;
	for (uint32_t y = 0; y < h; y++) {
		const uint8_t *row = rgb + (size_t)y * w * 3;
		for (uint32_t o = 0; o < S; o++) {
			const float *wt = ax.w + (size_t)o * ax.kmax;
			float s0 = 0, s1 = 0, s2 = 0;
			for (uint32_t i = 0; i < ax.count[o]; i++) {
				const uint8_t *px = row + (size_t)(ax.first[o] + i) * 3;
				s0 += wt[i] * px[0];
				s1 += wt[i] * px[1];
				s2 += wt[i] * px[2];
			}
			float *m = mid + ((size_t)y * S + o) * 3;
			m[0] = s0, m[1] = s1, m[2] = s2;
		}
	}
	for (uint32_t oy = 0; oy < S; oy++) {
		const float *wt = ay.w + (size_t)oy * ay.kmax;
		for (uint32_t x = 0; x < S; x++) {
			float s[3] = { 0, 0, 0 };
			for (uint32_t i = 0; i < ay.count[oy]; i++) {
				const float *m = mid + ((size_t)(ay.first[oy] + i) * S + x) * 3;
				s[0] += wt[i] * m[0];
				s[1] += wt[i] * m[1];
				s[2] += wt[i] * m[2];
			}
			for (int ch = 0; ch < 3; ch++) {
				/* PIL hands back 8-bit pixels: round and clamp as it does */
				float v = floorf(s[ch] + 0.5f);
				v = v < 0 ? 0 : v > 255 ? 255 : v;
				out[((size_t)ch * S + oy) * S + x] = (v / 255.0f - c->image_mean[ch]) / c->image_std[ch];
			}
		}
	}
out:
	free(mid);
	axis_free(&ax);
	axis_free(&ay);
	return rc;
}
