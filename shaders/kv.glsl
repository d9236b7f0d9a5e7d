// kv.glsl (attn.glsl, rope_kv.glsl): the KV cache's element type, one compiled
// variant per type (the Makefile builds attn*/rope_kv* with -DKV_TYPE=1 as
// <name>_f16 and -DKV_TYPE=2 as <name>_q8; ipc/kvlayout.h enum kv_type):
//   0 f32 (the includer's own float/vec4 declarations, as before),
//   1 f16: two values per 32-bit word, low half first,
//   2 q8_0 in ggml's block layout: per 32 values (never across heads:
//     head_dim is a multiple of 32) 34 bytes, an f16 scale d then 32 int8 q,
//     value = q * d; rows are whole blocks back to back, so element e of the
//     cache (row * n_kv * head_dim + offset) lives in block e / 32.
// No 8/16-bit storage features: everything is read and written as uint words.
// Values are addressed as the includer's vec4 index q (elements 4q..4q+3) or
// element index e. The includer binds the K cache at 1, the V cache at 2.
#ifndef KV_GLSL
#define KV_GLSL
#ifndef KV_TYPE
#define KV_TYPE 0
#endif


#if KV_TYPE == 1
vec4 kv_h4(uvec2 w) { return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
float kv_h1(uint w, uint e) { return unpackHalf2x16(w >> ((e & 1u) << 4)).x; }
// the value the cache gives back for x
float kv_round(float x) { return unpackHalf2x16(packHalf2x16(vec2(x, 0.0))).x; }
#elif KV_TYPE == 2
// the 4 bytes at byte b (even) from the words holding them
uint kv_q8w(uint w0, uint w1, uint b) { return (b & 2u) != 0u ? (w0 >> 16) | (w1 << 16) : w0; }
float kv_q8d(uint w, uint b) { return unpackHalf2x16(w >> ((b & 2u) << 3)).x; }
vec4 kv_q8v(uint w, float d)
{
	int s = int(w);
	return vec4(float(bitfieldExtract(s, 0, 8)), float(bitfieldExtract(s, 8, 8)), float(bitfieldExtract(s, 16, 8)),
		    float(bitfieldExtract(s, 24, 8))) * d;
}
float kv_q8s(uint w, uint b) { return float(bitfieldExtract(int(w), int((b & 3u) << 3), 8)); }
// ggml's quantize_row_q8_0_ref: d = amax / 127, q = round(x / d) half away
// from zero, the scale stored as f16; the value back is q * f16(d)
float kv_q8_scale(float amax) { return amax / 127.0; }
int kv_q8_code(float x, float id) { float v = x * id; return int(sign(v) * floor(abs(v) + 0.5)); }
float kv_q8_d16(float d) { return unpackHalf2x16(packHalf2x16(vec2(d, 0.0))).x; }
// One 32-value block of x to q8_0: its codes in c[], its scale returned.
float kv_q8_block(float x[32], out int c[32])
{
	float amax = 0.0;
	for (uint i = 0u; i < 32u; i++)
		amax = max(amax, abs(x[i]));
	float d = kv_q8_scale(amax), id = d != 0.0 ? 1.0 / d : 0.0;
	for (uint i = 0u; i < 32u; i++)
		c[i] = kv_q8_code(x[i], id);
	return d;
}
// Store a word of which only the bits in mask are this block's (a
// neighbour's bits may be written concurrently by another invocation):
// clear ours, then set them; the two blocks' masks are disjoint, so any
// interleaving ends in both blocks' bits.
#define KV_Q8_PART(buf, wi, mask, bits) { atomicAnd(buf[wi], ~(mask)); atomicOr(buf[wi], (bits) & (mask)); }
// Write block blk (32 codes c[], scale d) at its bytes blk * 34: the whole
// words plainly, the one word shared with a neighbouring block by halves.
#define KV_Q8_STORE(buf, blk, c, d) {                                                        \
	uint b0_ = (blk) * 34u, w0_ = b0_ >> 2;                                                \
	uint dh_ = packHalf2x16(vec2(d, 0.0)) & 0xffffu;                                       \
	if ((b0_ & 2u) == 0u) {                                                                \
		buf[w0_] = dh_ | (uint(c[0] & 255) << 16) | (uint(c[1] & 255) << 24);          \
		for (uint j_ = 0u; j_ < 7u; j_++)                                              \
			buf[w0_ + 1u + j_] = uint(c[2u + 4u * j_] & 255) |                     \
				(uint(c[3u + 4u * j_] & 255) << 8) |                           \
				(uint(c[4u + 4u * j_] & 255) << 16) |                          \
				(uint(c[5u + 4u * j_] & 255) << 24);                           \
		KV_Q8_PART(buf, w0_ + 8u, 0xffffu, uint(c[30] & 255) | (uint(c[31] & 255) << 8)); \
	} else {                                                                               \
		KV_Q8_PART(buf, w0_, 0xffff0000u, dh_ << 16);                                  \
		for (uint j_ = 0u; j_ < 8u; j_++)                                              \
			buf[w0_ + 1u + j_] = uint(c[4u * j_] & 255) |                          \
				(uint(c[1u + 4u * j_] & 255) << 8) |                           \
				(uint(c[2u + 4u * j_] & 255) << 16) |                          \
				(uint(c[3u + 4u * j_] & 255) << 24);                           \
	}                                                                                      \
}
#endif

// KV_NO_BIND (rope_kv, which binds the cache elsewhere as kcu[]/vcu[]): the
// helpers above only
#if !defined(KV_NO_BIND) && KV_TYPE != 0
layout(binding = 1) readonly buffer KCR { uint kcr[]; };
layout(binding = 1) readonly buffer KCR2 { uvec2 kcr2[]; };
layout(binding = 1) buffer KCU { uint kcu[]; };
layout(binding = 2) readonly buffer VCR { uint vcr[]; };
layout(binding = 2) readonly buffer VCR2 { uvec2 vcr2[]; };
layout(binding = 2) buffer VCU { uint vcu[]; };
#if KV_TYPE == 1
#define KLOAD4(q) kv_h4(kcr2[q])
#define VLOAD4(q) kv_h4(vcr2[q])
#define KLOAD1(e) kv_h1(kcr[(e) >> 1], e)
#define VLOAD1(e) kv_h1(vcr[(e) >> 1], e)
#else
vec4 kload4(uint q)
{
	uint b0 = (q >> 3) * 34u, b = b0 + 2u + ((q & 7u) << 2), wi = b >> 2;
	return kv_q8v(kv_q8w(kcr[wi], kcr[wi + 1u], b), kv_q8d(kcr[b0 >> 2], b0));
}
vec4 vload4(uint q)
{
	uint b0 = (q >> 3) * 34u, b = b0 + 2u + ((q & 7u) << 2), wi = b >> 2;
	return kv_q8v(kv_q8w(vcr[wi], vcr[wi + 1u], b), kv_q8d(vcr[b0 >> 2], b0));
}
float kload1(uint e)
{
	uint b0 = (e >> 5) * 34u, b = b0 + 2u + (e & 31u);
	return kv_q8s(kcr[b >> 2], b) * kv_q8d(kcr[b0 >> 2], b0);
}
float vload1(uint e)
{
	uint b0 = (e >> 5) * 34u, b = b0 + 2u + (e & 31u);
	return kv_q8s(vcr[b >> 2], b) * kv_q8d(vcr[b0 >> 2], b0);
}
#define KLOAD4(q) kload4(q)
#define VLOAD4(q) vload4(q)
#define KLOAD1(e) kload1(e)
#define VLOAD1(e) vload1(e)
#endif
#endif
#endif
