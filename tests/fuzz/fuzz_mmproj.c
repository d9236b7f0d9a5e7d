/* libFuzzer target for formats/mmproj: parse arbitrary bytes as a vision
 * projector GGUF, then read every bound tensor's bytes (ASan checks they lie
 * inside the input). Seed: `unicorn-mkmodel --vision` with a tiny shape. */
#include <stdint.h>
#include <string.h>

#include "formats/mmproj.h"

static void touch(const struct model_tensor *t)
{
	const volatile uint8_t *b = t->data;
	if (t->nbytes)
		(void)b[0], (void)b[t->nbytes - 1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mmproj *p;
	if (mmproj_parse(data, size, "fuzz.gguf", &p))
		return 0;
	const struct model_tensor *top[] = { p->patch_w, p->patch_b, p->pos, p->post_ln_w, p->post_ln_b,
					     p->soft_norm, p->proj };
	for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
		touch(top[i]);
	for (uint32_t l = 0; l < p->cfg.n_layer; l++) {
		const struct mmproj_layer *L = &p->layers[l];
		const struct model_tensor *all[] = { L->ln1_w, L->ln1_b, L->q_w, L->q_b, L->k_w, L->k_b, L->v_w, L->v_b,
						     L->o_w, L->o_b, L->ln2_w, L->ln2_b, L->up_w, L->up_b, L->down_w, L->down_b };
		for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
			touch(all[i]);
	}
	mmproj_close(p);
	return 0;
}
