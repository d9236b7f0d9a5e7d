/* up_model: which model unicorn-up serves (docs/models.md).
 *
 * --model PATH           that file or checkpoint directory
 * --model ORG/NAME[:Q]   from the model store; pulled first when it is missing
 * no --model             the most recently pulled model, else the demo model
 *                        next to the binaries (bin/unicorn-demo.gguf: random
 *                        weights, Gemma 3's real tokenizer) */
#ifndef UNICORN_UP_MODEL_H
#define UNICORN_UP_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#define UP_DEMO_MODEL "unicorn-demo.gguf"

/* arg NULL = no --model. out receives an absolute path; *demo is set when it
 * is the demo model. Pull progress and notes go to stderr. */
int up_model_resolve(const char *arg, char *out, size_t cap, bool *demo);

#endif
