// x16.glsl: a matrix product's input row as 16-bit integers in two bytes
// (x16), for the decode kernels of regrouped q4_0 weights (mul_mvs.glsl with
// X16): the product of a weight nibble and an x byte is an integer, four of
// them one dot-product instruction (SPV_KHR_integer_dot_product), where the
// float kernel spends a logic op, a subtraction and an FMA per element and
// reads 4 bytes of x. rmsnorm.glsl writes it beside its float output;
// gpu_worker/x16.c is the reference and the layout's description on the host.
//
// Why 16 bits: 8-bit x (llama.cpp's q8_1) moved the tiny256 model's logits
// 1.0% from the reference, twice the golden tolerance; 16 bits keep x within
// amax / 65024 of its value, below the float kernel's other rounding.
//
// A row of n elements (n a multiple of X16_GROUP) is n / X16_GROUP groups of
// four 32-element blocks, X16_GROUP_WORDS words each. Block b has the scale
// d = amax / 32512 (amax = max |x| over the block) and x = d q, q =
// round-to-nearest-even(x * 32512 / amax) in [-32512, 32512], split as
// q = 256 hi + lo with hi in [-127, 127] and lo in [-128, 127]. Lane k
// (0..3) of a regrouped q4_0 unit reads quant word k of each block: elements
// 4k..4k+3 (low nibbles) and 16+4k..16+4k+3 (high nibbles). So the group holds
//   word 8k + 2b + h:       the four hi bytes of block b that lane k's
//                           nibbles meet (h = 1: the high nibbles'),
//                           little-endian;
//   word 32 + 8k + 2b + h:  their lo bytes;
//   word 64 + 4k + b:       0x4B400000 - 8 * (sum of those eight q): the q4_0
//                           zero point (nibble - 8) and the bits of 1.5 * 2^23,
//                           so 256 * (hi dot) + (lo dot) plus this word is a
//                           float's bits (|sum| < 2^22: no integer-to-float
//                           conversion);
//   word 80 + b:            d of block b (float bits).
// Lane k reads its words as four 16-byte loads, its corrections as one and
// the four scales as one.
#ifndef X16_GLSL
#define X16_GLSL

#define X16_GROUP 128u        // elements per group
#define X16_GROUP_WORDS 84u   // words per group
#define X16_QMAX 32512.0      // 127 * 256
#define X16_MAGIC 0x4B400000u // the bits of 1.5 * 2^23 (12582912.0)

// Run r of a row's x16 copy: four neighbouring elements whose q bytes fill
// one hi word and one lo word, element x16_run_elem(r) + 0..3: half h = r & 1
// (the low or the high nibbles' elements) of lane k = (r >> 1) & 3 of block
// (r >> 3) & 3 of group r >> 5. The eight runs of a block are 8r'..8r'+7, the
// two of a lane (whose q sum makes its correction word) 2r'' and 2r''+1.
// norm_row.glsl quantizes the runs each thread holds in registers and
// gives each the block's amax; gpu_worker/x16.c is the reference: x *
// (32512 / amax) rounds to nearest even in both.
uint x16_run_elem(uint r)
{
	return 32u * (r >> 3) + 16u * (r & 1u) + 4u * ((r >> 1) & 3u);
}

// The run that starts at element e of the row (a multiple of 4): the inverse
// of x16_run_elem.
uint x16_elem_run(uint e)
{
	uint o = e & 31u;
	return 8u * (e >> 5) + 2u * ((o & 15u) >> 2) + (o >> 4);
}

#ifdef X16_SG
// The amax of a block whose eight runs lie in eight neighbouring invocations
// (local ids 8m..8m+7, one subgroup: the includer enables subgroup shuffles),
// each holding a: three shuffles (a max is exact in any order).
float x16_block_amax(float a)
{
	a = max(a, subgroupShuffleXor(a, 1u));
	a = max(a, subgroupShuffleXor(a, 2u));
	return max(a, subgroupShuffleXor(a, 4u));
}
#endif

#ifdef X16_OUT
// Run r's hi and lo words (the includer defines X16_OUT(w, v), which stores
// word w of the copy; w0: the row's first word), stored where on; returns
// the sum of its four q.
int x16_run_store(uint w0, uint r, vec4 v, float amax, bool on)
{
	uint gw = w0 + (r >> 5) * X16_GROUP_WORDS, b = (r >> 3) & 3u, k = (r >> 1) & 3u, h = r & 1u;
	float id = amax > 0.0 ? X16_QMAX / amax : 0.0;
	int sum = 0;
	uint hw = 0u, lw = 0u;
	for (uint j = 0u; j < 4u; j++) {
		float f = clamp(roundEven(v[j] * id), -X16_QMAX, X16_QMAX);
		int q = int(f), hi = (q + 128) >> 8, lo = q - 256 * hi;
		sum += q;
		hw |= (uint(hi) & 255u) << (8u * j);
		lw |= (uint(lo) & 255u) << (8u * j);
	}
	if (on) {
		X16_OUT(gw + 8u * k + 2u * b + h, hw);
		X16_OUT(gw + 32u + 8u * k + 2u * b + h, lw);
	}
	return sum;
}

// The correction word of the lane whose runs are r and r + 1 (r even; sum:
// their eight q) and, from lane 0, the block's scale.
void x16_lane_store(uint w0, uint r, int sum, float amax)
{
	uint gw = w0 + (r >> 5) * X16_GROUP_WORDS, b = (r >> 3) & 3u, k = (r >> 1) & 3u;
	X16_OUT(gw + 64u + 4u * k + b, X16_MAGIC - uint(8 * sum));
	if (k == 0u)
		X16_OUT(gw + 80u + b, floatBitsToUint(amax / X16_QMAX));
}

#ifdef X16_SG
// Run r of the copy from the invocation that holds its four elements v (on:
// the run is in the row; else v is ignored), where the block's eight runs lie
// in eight neighbouring invocations (x16_block_amax) and the lane's other run
// in the invocation `pair` ids away (one shuffle gives their sum): the
// block's amax, the run's words and, from the lane's even run, its correction
// word and the block's scale. Every invocation takes the shuffles (uniform
// control flow); attention's one-split row and the GLU's groups call it.
void x16_run_copy(uint w0, uint r, vec4 v, bool on, uint pair)
{
	vec4 av = on ? abs(v) : vec4(0.0);
	float amax = x16_block_amax(max(max(av.x, av.y), max(av.z, av.w)));
	int sum = x16_run_store(w0, r, on ? v : vec4(0.0), amax, on);
	sum += subgroupShuffleXor(sum, pair);
	if (on && (r & 1u) == 0u)
		x16_lane_store(w0, r, sum, amax);
}
#endif
#endif

#endif
