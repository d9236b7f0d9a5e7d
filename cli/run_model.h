/* run_model: `unicorn run MODEL`: find or start the cluster that serves MODEL
 * (an existing .gguf file, a Hugging Face checkpoint directory, or a store
 * repo ORG/NAME[:QUANT]), as `ollama run` does. */
#ifndef UNICORN_CLI_RUN_MODEL_H
#define UNICORN_CLI_RUN_MODEL_H

#include <stdbool.h>
#include <stddef.h>

/* Whether a first positional argument of `unicorn run` names a model rather
 * than starts a prompt: an existing *.gguf file, a directory with a
 * config.json, or (no such file) a valid ORG/NAME[:QUANT] without spaces. */
bool run_model_arg(const char *arg);

/* A cluster serving model: one already running (its ready file names the
 * same path; with name, that cluster), else `unicorn-up --model MODEL --name
 * NAME -d` (NAME: name, or derived from the model) waited for (its progress
 * on stderr). rundir_out gets the cluster's directory. 0 or ERR_* with a
 * message. */
int run_model_cluster(const char *model, const char *name, char *rundir_out, size_t cap);

/* The cluster name derived from a model ("google/gemma-3-1b-it:Q4_K_M" ->
 * "gemma-3-1b-it-Q4_K_M", "/m/tiny.gguf" -> "tiny"): [A-Za-z0-9_-]{1,32}. */
void run_model_name(const char *model, char *out, size_t cap);

#endif
