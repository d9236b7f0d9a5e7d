// mul_mv.glsl: y = W x for up to NCOLS token columns per workgroup. A group of
// tpr threads (a power of two <= WG, chosen by the host from the row length)
// shares one weight row, so a workgroup covers WG/tpr rows and every weight
// byte is read once per NCOLS tokens.
// The includer defines TYPE (and GLU: rows r and r+nrows of W are gate and up,
// output gelu_tanh(gate.x) * (up.x)).
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"

#define NCOLS 8

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer WBuf { uint wdata[]; };
layout(binding = 1) readonly buffer XBuf { float x[]; };
layout(binding = 2) writeonly buffer YBuf { float y[]; };

// Mirrors struct mv_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint ncols;       // row length (ne[0])
	uint nrows;       // outputs (GLU: outputs, W holds 2*nrows rows)
	uint row_bytes;
	uint x_stride;    // floats between token columns of x
	uint x_off;
	uint y_stride;
	uint y_off;
	uint n_tok;
	uint nrows_valid; // rows >= this output -inf (masked vocabulary)
	uint tpr;         // threads per row
} p;

#include "quant.glsl"

#ifdef GLU
shared float red[2u * NCOLS * WG];
#else
shared float red[NCOLS * WG];
#endif

void main()
{
	uint tid = gl_LocalInvocationID.x;
	uint lane = tid % p.tpr;
	uint rpw = WG / p.tpr;
	uint row = (gl_WorkGroupID.z * gl_NumWorkGroups.x + gl_WorkGroupID.x) * rpw + tid / p.tpr;
	uint t0 = gl_WorkGroupID.y * NCOLS;
	uint nt = min(uint(NCOLS), p.n_tok - t0);
	// inactive threads still take part in the barriers below
	bool live = row < p.nrows && row < p.nrows_valid;
	if (row < p.nrows && row >= p.nrows_valid)
		for (uint j = lane; j < nt; j += p.tpr)
			y[(t0 + j) * p.y_stride + p.y_off + row] = NEG_INF;
	float acc[NCOLS];
	for (uint j = 0u; j < NCOLS; j++)
		acc[j] = 0.0;
	uint roff = live ? row * p.row_bytes : 0u;
#ifdef GLU
	float acc2[NCOLS];
	for (uint j = 0u; j < NCOLS; j++)
		acc2[j] = 0.0;
	uint roff2 = live ? (row + p.nrows) * p.row_bytes : 0u;
#endif
	uint nch = live ? p.ncols / 32u : 0u;
	float w[32];
	for (uint c = lane; c < nch; c += p.tpr) {
		dequant32(roff, c, w);
		for (uint j = 0u; j < NCOLS; j++) {
			if (j < nt) {
				uint xb = p.x_off + (t0 + j) * p.x_stride + c * 32u;
				float s = 0.0;
				for (uint k = 0u; k < 32u; k++)
					s += w[k] * x[xb + k];
				acc[j] += s;
			}
		}
#ifdef GLU
		dequant32(roff2, c, w);
		for (uint j = 0u; j < NCOLS; j++) {
			if (j < nt) {
				uint xb = p.x_off + (t0 + j) * p.x_stride + c * 32u;
				float s = 0.0;
				for (uint k = 0u; k < 32u; k++)
					s += w[k] * x[xb + k];
				acc2[j] += s;
			}
		}
#endif
	}
#if TYPE == TYPE_F32 || TYPE == TYPE_F16 || TYPE == TYPE_BF16
	for (uint i = nch * 32u + lane; live && i < p.ncols; i += p.tpr) {
		float wv = dequant1(roff, i);
#ifdef GLU
		float wv2 = dequant1(roff2, i);
#endif
		for (uint j = 0u; j < NCOLS; j++) {
			if (j < nt) {
				float xv = x[p.x_off + (t0 + j) * p.x_stride + i];
				acc[j] += wv * xv;
#ifdef GLU
				acc2[j] += wv2 * xv;
#endif
			}
		}
	}
#endif
	for (uint j = 0u; j < NCOLS; j++) {
		red[j * WG + tid] = acc[j];
#ifdef GLU
		red[(NCOLS + j) * WG + tid] = acc2[j];
#endif
	}
	barrier();
	for (uint s = p.tpr / 2u; s > 0u; s >>= 1) {
		if (lane < s) {
			for (uint j = 0u; j < NCOLS; j++) {
				red[j * WG + tid] += red[j * WG + tid + s];
#ifdef GLU
				red[(NCOLS + j) * WG + tid] += red[(NCOLS + j) * WG + tid + s];
#endif
			}
		}
		barrier();
	}
	uint r0 = tid - lane;
	for (uint j = lane; live && j < nt; j += p.tpr) {
#ifdef GLU
		float v = gelu_tanh(red[j * WG + r0]) * red[(NCOLS + j) * WG + r0];
#else
		float v = red[j * WG + r0];
#endif
		y[(t0 + j) * p.y_stride + p.y_off + row] = v;
	}
}
