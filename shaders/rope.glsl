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

void norm_rope(uint hd, uint pos, float eps, float base, float freq_scale)
{
	uint tid = gl_LocalInvocationID.x, half_d = hd / 2u;
	precise float ss = 0.0;
	for (uint i = tid; i < hd; i += WG)
		ss += rv[i] * rv[i];
#ifdef SG
	precise float sg = subgroupAdd(ss);
	if (subgroupElect())
		rr[gl_SubgroupID] = sg;
	barrier();
	precise float tot = rr[0];
	for (uint i = 1u; i < gl_NumSubgroups; i++)
		tot += rr[i];
	precise float r = inversesqrt(tot / float(hd) + eps);
#else
	rr[tid] = ss;
	barrier();
	for (uint s = WG / 2u; s > 0u; s >>= 1) {
		if (tid < s)
			rr[tid] += rr[tid + s];
		barrier();
	}
	precise float r = inversesqrt(rr[0] / float(hd) + eps);
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
	}
	barrier();
}

#endif
