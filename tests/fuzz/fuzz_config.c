/* libFuzzer target: config.json parsing on raw bytes. */
#include <stddef.h>
#include <stdint.h>

#include "formats/hf_config.h"
#include "formats/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gemma3_config cfg;
	if (hf_config_parse((const char *)data, size, "fuzz/config.json", &cfg) == 0) {
		/* Whatever is accepted must satisfy the invariants the engine relies on. */
		if (!cfg.n_layer || cfg.n_layer > MODEL_MAX_LAYERS || !cfg.n_head_kv ||
		    cfg.n_head % cfg.n_head_kv || !cfg.head_dim || cfg.head_dim % 2 || !(cfg.eps > 0) ||
		    cfg.n_vocab_text > cfg.n_vocab || !(cfg.rope_scale_global > 0))
			__builtin_trap();
	}
	return 0;
}
