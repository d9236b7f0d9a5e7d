/* x16: see x16.h and shaders/x16.glsl. */
#include "gpu_worker/x16.h"

#include <math.h>
#include <string.h>

void x16_quantize(const float *x, uint32_t n, uint32_t *out)
{
	for (uint32_t g = 0; g < n / X16_GROUP; g++) {
		uint32_t *gw = out + (uint64_t)g * X16_GROUP_WORDS;
		for (uint32_t b = 0; b < 4; b++) {
			const float *blk = x + (uint64_t)g * X16_GROUP + 32 * b;
			float amax = 0.0f;
			for (uint32_t j = 0; j < 32; j++)
				amax = fmaxf(amax, fabsf(blk[j]));
			/* as the shader: x * (32512 / amax), to nearest even */
			float id = amax > 0.0f ? X16_QMAX / amax : 0.0f, d = amax / X16_QMAX;
			for (uint32_t k = 0; k < 4; k++) {
				int32_t sum = 0;
				for (uint32_t h = 0; h < 2; h++) {
					uint32_t hw = 0, lw = 0;
					for (uint32_t j = 0; j < 4; j++) {
						float v = rintf(blk[16 * h + 4 * k + j] * id);
						int32_t q = v > X16_QMAX ? 32512 : v < -X16_QMAX ? -32512 : (int32_t)v;
						int32_t hi = (q + 128) >> 8, lo = q - 256 * hi;
						sum += q;
						hw |= ((uint32_t)hi & 255u) << (8 * j);
						lw |= ((uint32_t)lo & 255u) << (8 * j);
					}
					gw[8 * k + 2 * b + h] = hw;
					gw[32 + 8 * k + 2 * b + h] = lw;
				}
				gw[64 + 4 * k + b] = X16_MAGIC - (uint32_t)(8 * sum);
			}
			memcpy(&gw[80 + b], &d, sizeof d);
		}
	}
}

int32_t x16_q(const uint32_t *row, uint32_t i, float *d)
{
	const uint32_t *gw = row + (uint64_t)(i / X16_GROUP) * X16_GROUP_WORDS;
	uint32_t e = i % X16_GROUP, b = e / 32, r = e % 32, h = r / 16, k = (r % 16) / 4, j = r % 4;
	memcpy(d, &gw[80 + b], sizeof *d);
	int32_t hi = (int8_t)(uint8_t)(gw[8 * k + 2 * b + h] >> (8 * j));
	int32_t lo = (int8_t)(uint8_t)(gw[32 + 8 * k + 2 * b + h] >> (8 * j));
	return 256 * hi + lo;
}
