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

#endif
