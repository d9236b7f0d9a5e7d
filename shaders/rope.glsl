// rope.glsl (rope_kv.comp, attn.comp): one head's q/k RMSNorm + NEOX RoPE over
// shared memory. Both kernels run this same source so that a head normalized
// and rotated inside attn (fused decode) is bitwise the head rope_kv writes
// (prefill chunks): the batched, chunked and lone paths must agree exactly.
// `precise` keeps the driver from contracting differently in the two shaders.
// With SG (attn_sg, rope_kv_sg) the norm's sum is reduced by subgroups.
// The includer declares WG and: shared float rv[] (the head in, the result
// out) and rw[] (the norm weight), each of at least head_dim, and rr[WG].
#ifndef ROPE_GLSL
#define ROPE_GLSL

// ROPE_TWO (attn): the includer also declares rv2[], rw2[] and rr2[WG], and
// norm_rope takes `two`: a second head there (the token's own key beside q)
// is normalized and rotated in the same pass, with its own sum and the same
// angles, each head by the arithmetic of a call of its own (rope_kv's).
#ifdef ROPE_TWO
#define ROPE_TWO_ARG , bool two
#else
#define ROPE_TWO_ARG
#endif
void norm_rope(uint hd, uint pos, float eps, float base, float freq_scale ROPE_TWO_ARG)
{
	uint tid = gl_LocalInvocationID.x, half_d = hd / 2u;
	precise float ss = 0.0;
	for (uint i = tid; i < hd; i += WG)
		ss += rv[i] * rv[i];
#ifdef ROPE_TWO
	precise float ss2 = 0.0;
	if (two)
		for (uint i = tid; i < hd; i += WG)
			ss2 += rv2[i] * rv2[i];
#endif
#ifdef SG
	precise float sg = subgroupAdd(ss);
	if (subgroupElect())
		rr[gl_SubgroupID] = sg;
#ifdef ROPE_TWO
	if (two) {
		precise float sg2 = subgroupAdd(ss2);
		if (subgroupElect())
			rr2[gl_SubgroupID] = sg2;
	}
#endif
	barrier();
	precise float tot = rr[0];
	for (uint i = 1u; i < gl_NumSubgroups; i++)
		tot += rr[i];
	precise float r = inversesqrt(tot / float(hd) + eps);
#ifdef ROPE_TWO
	precise float tot2 = rr2[0];
	for (uint i = 1u; two && i < gl_NumSubgroups; i++)
		tot2 += rr2[i];
	precise float r2 = inversesqrt(tot2 / float(hd) + eps);
#endif
#else
	rr[tid] = ss;
#ifdef ROPE_TWO
	rr2[tid] = ss2;
#endif
	barrier();
	for (uint s = WG / 2u; s > 0u; s >>= 1) {
		if (tid < s) {
			rr[tid] += rr[tid + s];
#ifdef ROPE_TWO
			rr2[tid] += rr2[tid + s];
#endif
		}
		barrier();
	}
	precise float r = inversesqrt(rr[0] / float(hd) + eps);
#ifdef ROPE_TWO
	precise float r2 = inversesqrt(rr2[0] / float(hd) + eps);
#endif
#endif
	// a thread owns the pair (i, i + half_d): it reads both before writing
	for (uint i = tid; i < half_d; i += WG) {
		precise float x0 = rv[i] * r * rw[i], x1 = rv[i + half_d] * r * rw[i + half_d];
		float inv = pow(base, -2.0 * float(i) / float(hd)) * freq_scale;
		float th = float(pos) * inv;
		float c = cos(th), sn = sin(th);
		precise float y0 = x0 * c - x1 * sn, y1 = x0 * sn + x1 * c;
		rv[i] = y0;
		rv[i + half_d] = y1;
#ifdef ROPE_TWO
		if (two) {
			precise float k0 = rv2[i] * r2 * rw2[i], k1 = rv2[i + half_d] * r2 * rw2[i + half_d];
			precise float z0 = k0 * c - k1 * sn, z1 = k0 * sn + k1 * c;
			rv2[i] = z0;
			rv2[i + half_d] = z1;
		}
#endif
	}
	barrier();
}

#endif
