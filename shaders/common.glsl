// common.glsl: helpers shared by every shader. Weight buffers are read as
// 32-bit words with manual unpacking (portable: needs no 8/16-bit storage).
#ifndef COMMON_GLSL
#define COMMON_GLSL

#define TYPE_F32 0
#define TYPE_F16 1
#define TYPE_Q4_0 2
#define TYPE_Q4_1 3
#define TYPE_Q5_0 6
#define TYPE_Q5_1 7
#define TYPE_Q8_0 8
#define TYPE_Q2_K 10
#define TYPE_Q3_K 11
#define TYPE_Q4_K 12
#define TYPE_Q5_K 13
#define TYPE_Q6_K 14
#define TYPE_IQ4_NL 20
#define TYPE_IQ4_XS 23
#define TYPE_BF16 30
// Q4_0 regrouped by the engine at upload (gpu_worker/regroup.h): not a GGUF type
#define TYPE_Q4_0G 1000

#define NEG_INF uintBitsToFloat(0xff800000u)

// The per-step values (one submission per token reads them; never push constants,
// so a recorded command buffer can be replayed). Mirrors struct engine_step in C.
// Every token t has its own record (token id, position, first block-table
// entry of its sequence), so one step can hold tokens of different sequences at
// different positions (engine_forward_batch); a single-sequence step fills
// pos = pos0 + t and base = seq * table_len for every t.
#define STEP_POS0 0
#define STEP_N 1
#define STEP_K 2
#define STEP_KV_BASE 3
#define STEP_TOKENS 4
#define STEP_TOK(t) (STEP_TOKENS + 4u * (t))
#define STEP_TPOS(t) (STEP_TOKENS + 4u * (t) + 1u)
#define STEP_TBASE(t) (STEP_TOKENS + 4u * (t) + 2u)

// Paged KV cache (ipc/kvlayout.h): position p of a sequence lives in row
// blk * KV_BLOCK + p % KV_BLOCK of the layer's cache, blk being entry
// base + tab_off + (p / KV_BLOCK) % tab_mod of the block table. Global layers
// use tab_off 0, tab_mod max_blocks; sliding-window layers the ring after it.
#define KV_BLOCK 16u
#define KV_ROW(tab, base, off, mod, p) ((tab)[(base) + (off) + ((p) / KV_BLOCK) % (mod)] * KV_BLOCK + (p) % KV_BLOCK)

// Keys per attention split of a token whose visible range holds len keys
// (attn.comp, attn_combine.comp): a range of at most one_len keys is one split,
// which attn normalizes and writes itself (attn_combine skips it); a longer
// one is cut into n_split slices of at least min_chunk keys. A function of
// len alone, so a token's numbers do not depend on the step it is in.
uint attn_chunk(uint len, uint n_split, uint min_chunk, uint one_len)
{
	return len <= one_len ? len : max((len + n_split - 1u) / n_split, min_chunk);
}

float gelu_tanh(float x)
{
	const float c = 0.7978845608028654; // sqrt(2/pi)
	float u = c * (x + 0.044715 * x * x * x);
	// tanh via exp, clamped so exp never overflows
	float t = clamp(u, -15.0, 15.0);
	float e = exp(2.0 * t);
	return 0.5 * x * (1.0 + (e - 1.0) / (e + 1.0));
}

#endif
