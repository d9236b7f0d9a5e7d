/* hf_config: Hugging Face config.json -> struct gemma3_config.
 *
 * Accepts the text-only config (model_type "gemma3_text", keys at the top) and
 * the multimodal one (model_type "gemma3" with the text keys under
 * "text_config"). RoPE may be given the older flat way (rope_theta,
 * rope_local_base_freq, rope_scaling, sliding_window_pattern) or the newer way
 * (rope_parameters keyed by layer type, layer_types list). Keys that are absent
 * take transformers' Gemma3TextConfig defaults, except the few that decide the
 * model's size, which are required. n_vocab_text is set to n_vocab; the caller
 * refines it from the tokenizer. */
#ifndef UNICORN_HF_CONFIG_H
#define UNICORN_HF_CONFIG_H

#include <stddef.h>

#include "formats/model.h"

#define HF_CONFIG_MAX_BYTES (16u << 20)

/* Parse config text (len bytes, need not be NUL-terminated). name is used in
 * errors (e.g. "dir/config.json"). */
int hf_config_parse(const char *text, size_t len, const char *name, struct gemma3_config *cfg);
/* Read and parse a config.json file. */
int hf_config_load(const char *path, struct gemma3_config *cfg);

#endif
