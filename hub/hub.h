/* hub: pulling models from a Hugging Face Hub (or a server with its layout)
 * into the local model store (hub/store.h).
 *
 * HTTP goes through libcurl (TLS, redirects, proxies); sha256 through OpenSSL's
 * libcrypto (EVP). Everything the server sends — the file list (JSON), status
 * codes, ETag/X-Linked-Etag, Content-Range, sizes — is hostile input and is
 * checked. Library code: returns ERR_* codes with a message naming the repo,
 * file and HTTP status (err.h), never exits. docs/models.md has the whole story. */
#ifndef UNICORN_HUB_H
#define UNICORN_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HUB_DEFAULT_ENDPOINT "https://huggingface.co"
#define HUB_REPO_MAX 200     /* "org/name" */
#define HUB_QUANT_MAX 48
#define HUB_FILE_MAX 1024    /* a file name inside a repo (rfilename) */
#define HUB_MAX_FILES 100000 /* siblings beyond this are refused */

/* A model reference: REPO[:QUANT], REPO = org/name, optionally prefixed with
 * hf.co/, huggingface.co/ or https://huggingface.co/. */
struct hub_ref {
	char repo[HUB_REPO_MAX];
	char quant[HUB_QUANT_MAX]; /* "" = the default choice */
};

/* Parse and validate (org and name: [A-Za-z0-9._-], not starting with '.' or
 * '-', at most 96 each; QUANT: [A-Za-z0-9._-]). ERR_INVAL with a sentence. */
int hub_ref_parse(const char *s, struct hub_ref *r);
/* "org/name" or "org/name:QUANT" back into text. */
void hub_ref_format(const struct hub_ref *r, char *out, size_t cap);

/* ---- the repo's file list (GET {endpoint}/api/models/{repo}) ---- */

struct hub_files {
	size_t n;
	char **names; /* rfilename, validated: relative, no "..", no control characters */
};

/* Parse the API's JSON answer: siblings[].rfilename. Invalid names (absolute,
 * "..", control characters, too long) are skipped; a body that is not an
 * object with a siblings array is ERR_INVAL. */
int hub_files_parse(const char *json, size_t len, const char *repo, struct hub_files *out);
void hub_files_free(struct hub_files *f);

/* ---- which files to pull ---- */

enum hub_kind { HUB_GGUF = 1, HUB_HF_DIR = 2 };

struct hub_choice {
	enum hub_kind kind;
	size_t n;
	const char **files; /* point into the hub_files; GGUF: exactly one */
};

/* GGUF repos: the .gguf whose name contains quant (case-insensitive); with no
 * quant Q4_K_M, then Q4_0, then the only one (mmproj-* projectors are never
 * chosen). A repo without GGUF but with config.json, *.safetensors and a
 * tokenizer (tokenizer.json or tokenizer.model) is taken whole (its top-level
 * config, weights, index and tokenizer files). Ambiguous or missing choices
 * are ERR_NOTFOUND / ERR_INVAL with a message listing what the repo has. */
int hub_choose(const struct hub_files *f, const char *repo, const char *quant, struct hub_choice *c);
void hub_choice_free(struct hub_choice *c);

/* The vision projector of a GGUF repo, pulled beside the model (docs/models.md):
 * an mmproj*.gguf file, F16 preferred, then BF16, then F32, then the first
 * by name; NULL when the repo has none. */
const char *hub_choose_mmproj(const struct hub_files *f);

/* The quant named in a GGUF file name ("gemma-3-1b-it-Q4_K_M.gguf" ->
 * "Q4_K_M", upper-cased), "" when none is recognised. */
void hub_quant_of(const char *file, char *out, size_t cap);

/* ---- HTTP ---- */

struct hub_opts {
	const char *endpoint;  /* NULL: $HF_ENDPOINT, else HUB_DEFAULT_ENDPOINT */
	const char *token;     /* NULL: $HF_TOKEN; sent as "Authorization: Bearer" */
	const char *store;     /* NULL: store_dir() */
	FILE *progress;        /* NULL: stderr */
	bool quiet;            /* no progress bars, no notes */
	int retries;           /* transient failures (cut connections, 5xx, 429) retried, resuming */
	int retry_delay_ms;    /* first backoff, doubled each time (max 30 s) */
};

/* Defaults: environment, 5 retries, 1 s. */
void hub_opts_default(struct hub_opts *o);

/* GET the file list of repo. 401/403/404 and other statuses are errors naming
 * the repo and the status (401 mentions HF_TOKEN). */
int hub_list(const struct hub_opts *o, const char *repo, struct hub_files *out);

/* Download {endpoint}/{repo}/resolve/main/{file} to dest: into dest.part
 * (resumed with Range when it exists), sha256 checked against X-Linked-Etag
 * (else an ETag that is a sha256), renamed to dest only when complete and
 * correct. A wrong checksum removes dest.part. */
int hub_download(const struct hub_opts *o, const char *repo, const char *file, const char *dest);

/* The whole of `unicorn pull`: list, choose, download into the store. path
 * receives the model's path (a .gguf file or a checkpoint directory). A GGUF
 * repo's vision projector (hub_choose_mmproj) is pulled into the same folder.
 * Already present: nothing is downloaded (the entry becomes the most recent). */
int hub_pull(const struct hub_opts *o, const struct hub_ref *r, char *path, size_t cap);

/* Lower-case hex sha256 of a file (65 bytes out). */
int hub_sha256_file(const char *path, char out[65]);

#endif
