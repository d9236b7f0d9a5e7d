/* store: the local model store (docs/models.md).
 *
 *   $UNICORN_MODELS (default ~/.cache/unicorn/models)/
 *     ORG/NAME/FILE.gguf         a pulled GGUF (one per quant)
 *     ORG/NAME/FILE.gguf.part    a download in progress or interrupted (resumed)
 *     ORG/NAME/                  a pulled Hugging Face checkpoint: config.json,
 *                                *.safetensors, tokenizer files
 *     ORG/.NAME.pull/            a checkpoint being pulled (renamed to NAME when whole)
 *
 * Names starting with '.' and *.part files are never models. The most recently
 * pulled model is the entry with the newest modification time (a pull sets it). */
#ifndef UNICORN_STORE_H
#define UNICORN_STORE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "hub/hub.h"

/* $UNICORN_MODELS, else $HOME/.cache/unicorn/models. Not created. */
int store_dir(char *out, size_t cap);

struct store_entry {
	char name[HUB_REPO_MAX + HUB_QUANT_MAX + 2]; /* "org/name:QUANT" or "org/name" (checkpoint) */
	char repo[HUB_REPO_MAX];
	char quant[HUB_QUANT_MAX];  /* "Q4_K_M", "BF16", ... or "-" */
	char path[PATH_MAX];
	uint64_t size;              /* bytes (a checkpoint: all its files) */
	double mtime;               /* seconds since the epoch, with nanoseconds */
	bool is_dir;
};

/* Every model in the store, sorted by name. An absent store is empty. */
int store_list(const char *store, struct store_entry **out, size_t *n);

/* The model a reference names: quant chosen among the repo's local GGUF files
 * with hub_choose's rule (or its checkpoint directory). ERR_NOTFOUND when the
 * store does not have it; ERR_INVAL when the choice is ambiguous. */
int store_find(const char *store, const struct hub_ref *r, struct store_entry *e);

/* The most recently pulled model. ERR_NOTFOUND when the store is empty. */
int store_latest(const char *store, struct store_entry *e);

/* Remove a model (NAME as listed: org/name:QUANT, or org/name when the repo
 * holds one model) and the folders it leaves empty. removed receives its path. */
int store_remove(const char *store, const char *name, char *removed, size_t cap);

/* Mark path as just pulled (its mtime = now). */
int store_touch(const char *path);

/* mkdir -p (mode 0755). */
int store_mkdirs(const char *dir);
/* rm -r without following symlinks. */
int store_remove_tree(const char *path);

/* Remove dir, then its parent, while they are empty and below store. */
void store_prune(const char *store, const char *dir);

#endif
