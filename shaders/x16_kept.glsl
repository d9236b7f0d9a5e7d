// x16_kept.glsl: the row a norm keeps in shared memory for its x16 copy
// (each block's scale needs all of its block), and the copy's tasks over it
// (x16.glsl): rmsnorm.glsl's, and mul_mvs.glsl's norm tail, so both write
// bitwise the same copy. The includer defines X16_KEPT_ON (a constant: 0
// shrinks kept[] to one element and nothing may write a copy), X16_KEPT_LEN
// (the elements norm_row may keep: WG * its elements per thread) and
// X16_OUT(w, v) (store word w of the copy, x16_base on); WG is its
// workgroup size. Include it before norm_row.glsl, whose NORM_KEEP it sets.
#ifndef X16_KEPT_GLSL
#define X16_KEPT_GLSL

// a pad word per 32: the x16 tasks of one subgroup read 8 blocks at once,
// which unpadded all fall in one bank
shared float kept[X16_KEPT_ON != 0u ? X16_KEPT_LEN + X16_KEPT_LEN / 32u + 1u : 1u];
#define KEPT(i) ((i) + ((i) >> 5))
#define NORM_KEEP(i, v)                  \
	if (X16_KEPT_ON != 0u)           \
	kept[KEPT(i)] = (v)
#define X16_SRC(i) kept[KEPT(i)]
uint x16_base;  // the row's first word
#include "x16.glsl"

// The x16 copy of the kept row of n elements (a multiple of X16_GROUP) whose
// first element is o in the row buffer: every thread of the workgroup calls
// it, after a barrier that published kept[].
void x16_copy_row(uint o, uint n)
{
	x16_base = o / X16_GROUP * X16_GROUP_WORDS;
	for (uint t = gl_LocalInvocationID.x; t < n / 8u; t += WG)
		x16_task(t);
}

#endif
