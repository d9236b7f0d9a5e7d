// mul_mm.glsl: Y = W X for many token columns (prefill, wide decode). A
// workgroup of 256 threads computes a tile of 64 weight rows x BN tokens (BN
// a specialization constant: 16, 32 or 64, so a batch of 16 rows does not
// compute 48 padding columns): per K step of 64 it dequantizes the 64x64
// weight tile into shared memory once (128 threads, one 32-element block
// each) and stages the 64xBN slice of X, then every thread accumulates a 4
// rows x BN/16 tokens block. Weights are thus read once per BN tokens instead
// of once per token. Every output accumulates over K in the same order
// whatever BN, the tile it falls in and the other columns are, so a column's
// result depends only on its own x and the weights (engine_forward_chunks
// relies on it). Requires ncols % 32 == 0 (the host uses mul_mv otherwise).
// Same push constants as mul_mv (tpr unused). The includer defines TYPE.
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"

#define BM 64u
#define BK 64u
layout(constant_id = 0) const uint BN = 64u; // tokens per tile: 16, 32 or 64
#define TN (BN / 16u)                         // tokens per thread

layout(local_size_x = 256) in;

#include "mv_io.glsl"

#include "quant.glsl"

shared float Ws[BK * BM]; // [k][row]
shared float Xs[BK * BN]; // [k][token]

void main()
{
	uint tid = gl_LocalInvocationID.x;
	uint row0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BN;
	uint tr = tid % 16u, tc = tid / 16u;
	uint nb = p.ncols / 32u;
	vec4 acc[4];
	[[unroll]] for (uint i = 0u; i < 4u; i++)
		acc[i] = vec4(0.0);
	for (uint k0 = 0u; k0 < p.ncols; k0 += BK) {
		if (tid < 2u * BM) {
			uint r = tid % BM, ch = tid / BM;
			uint c = k0 / 32u + ch;
			float wv[32];
			if (row0 + r < p.nrows && c < nb) {
				dequant32((row0 + r) * p.row_bytes, c, wv);
			} else {
				[[unroll]] for (uint k = 0u; k < 32u; k++)
					wv[k] = 0.0;
			}
			[[unroll]] for (uint k = 0u; k < 32u; k++)
				Ws[(ch * 32u + k) * BM + r] = wv[k];
		}
		for (uint i = 0u; i < TN; i++) {
			uint idx = tid + i * 256u;
			uint tok = idx % BN, k4 = idx / BN;
			uint kk = k0 + 4u * k4;
			vec4 v = vec4(0.0);
			if (t0 + tok < p.n_tok && kk < p.ncols)
				v = x4[(p.x_off + (t0 + tok) * p.x_stride + kk) >> 2];
			Xs[(4u * k4) * BN + tok] = v.x;
			Xs[(4u * k4 + 1u) * BN + tok] = v.y;
			Xs[(4u * k4 + 2u) * BN + tok] = v.z;
			Xs[(4u * k4 + 3u) * BN + tok] = v.w;
		}
		barrier();
		[[unroll]] for (uint k = 0u; k < BK; k++) {
			vec4 a = vec4(Ws[k * BM + tr * 4u], Ws[k * BM + tr * 4u + 1u], Ws[k * BM + tr * 4u + 2u],
				      Ws[k * BM + tr * 4u + 3u]);
			[[unroll]] for (uint j = 0u; j < 4u; j++)
				if (j < TN)
					acc[j] += a * Xs[k * BN + tc * TN + j];
		}
		barrier();
	}
	[[unroll]] for (uint j = 0u; j < 4u; j++) {
		uint t = t0 + tc * TN + j;
		if (j >= TN || t >= p.n_tok)
			continue;
		[[unroll]] for (uint i = 0u; i < 4u; i++) {
			uint row = row0 + tr * 4u + i;
			if (row < p.nrows)
				y[t * p.y_stride + p.y_off + row] = row < p.nrows_valid ? acc[j][i] : NEG_INF;
		}
	}
}
