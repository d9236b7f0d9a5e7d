/* hub: model references, the Hub's file list, the quant choice, and
 * `unicorn pull/list/rm` against a loopback server with the Hub's layout
 * (tests/hubserver.c): redirects, resumed downloads, checksums, 401/404. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "hub/hub.h"
#include "hub/sha256.h"
#include "hub/store.h"
#include "tests/hubserver.h"
#include "tests/proc.h"

/* ---- references ---------------------------------------------------------- */

Test(hub, ref_parse)
{
	struct hub_ref r;
	cr_assert_eq(hub_ref_parse("ggml-org/gemma-3-1b-it-GGUF", &r), 0);
	cr_assert_str_eq(r.repo, "ggml-org/gemma-3-1b-it-GGUF");
	cr_assert_str_eq(r.quant, "");
	cr_assert_eq(hub_ref_parse("hf.co/org/name:q4_k_m", &r), 0);
	cr_assert_str_eq(r.repo, "org/name");
	cr_assert_str_eq(r.quant, "q4_k_m");
	cr_assert_eq(hub_ref_parse("https://huggingface.co/org/m.v2:Q8_0", &r), 0);
	cr_assert_str_eq(r.repo, "org/m.v2");
	char buf[256];
	hub_ref_format(&r, buf, sizeof buf);
	cr_assert_str_eq(buf, "org/m.v2:Q8_0");
	static const char *const bad[] = {
		"", "name", "org/", "/name", "org/na/me", "org/..", "../x", "org/.hidden", "org/-x",
		"org/name:", "org/name:Q4/0", "org/na me", "org:q/name", "o\001/n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_eq(hub_ref_parse(bad[i], &r), ERR_INVAL, "'%s' accepted", bad[i]);
}

/* ---- the file list --------------------------------------------------------- */

Test(hub, files_parse_checks_hostile_json)
{
	struct hub_files f;
	static const char ok[] = "{\"siblings\":[{\"rfilename\":\"a-Q4_0.gguf\"},{\"rfilename\":\"../evil.gguf\"},"
				 "{\"rfilename\":\"/abs.gguf\"},{\"rfilename\":\"sub/./x.gguf\"},{\"rfilename\":7},"
				 "{\"x\":1},\"str\",{\"rfilename\":\".gitattributes\"},{\"rfilename\":\"d/.x.gguf\"},{\"rfilename\":\"d/b.gguf\"},"
				 "{\"rfilename\":\"c\\nd.gguf\"},{\"rfilename\":\"x\\\\y.gguf\"}]}";
	cr_assert_eq(hub_files_parse(ok, strlen(ok), "o/n", &f), 0, "%s", err_msg());
	cr_assert_eq(f.n, 2);
	cr_assert_str_eq(f.names[0], "a-Q4_0.gguf");
	cr_assert_str_eq(f.names[1], "d/b.gguf");
	hub_files_free(&f);
	static const char *const bad[] = { "", "[]", "{}", "{\"siblings\":{}}", "{\"siblings\":[", "null",
					   "{\"siblings\":[],\"siblings\":[]}",
					   "{\"siblings\":[{\"rfilename\":\"a\\u0000b.gguf\"}]}" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_neq(hub_files_parse(bad[i], strlen(bad[i]), "o/n", &f), 0, "'%s' accepted", bad[i]);
		cr_assert_not_null(strstr(err_msg(), "o/n"), "message does not name the repo: %s", err_msg());
	}
}

static void files_of(struct hub_files *f, const char *const *names)
{
	f->n = 0;
	while (names[f->n])
		f->n++;
	f->names = calloc(f->n + 1, sizeof *f->names);
	for (size_t i = 0; i < f->n; i++)
		f->names[i] = strdup(names[i]);
}

static const char *choose(const char *const *names, const char *quant, int *rc)
{
	static char pick[256];
	struct hub_files f;
	struct hub_choice c;
	files_of(&f, names);
	*rc = hub_choose(&f, "o/n", quant, &c);
	pick[0] = 0;
	if (!*rc) {
		cr_assert_eq(c.kind, HUB_GGUF);
		cr_assert_eq(c.n, 1);
		snprintf(pick, sizeof pick, "%s", c.files[0]);
		hub_choice_free(&c);
	}
	hub_files_free(&f);
	return pick;
}

Test(hub, choose_quant)
{
	static const char *const repo[] = { "README.md", "m-Q4_0.gguf", "m-Q4_K_M.gguf", "m-Q8_0.gguf",
					    "mmproj-m-f16.gguf", "m-F16.gguf", NULL };
	int rc;
	cr_assert_str_eq(choose(repo, NULL, &rc), "m-Q4_K_M.gguf");
	cr_assert_str_eq(choose(repo, "q8_0", &rc), "m-Q8_0.gguf");
	cr_assert_str_eq(choose(repo, "f16", &rc), "m-F16.gguf", "mmproj is never chosen");
	choose(repo, "Q4", &rc);
	cr_assert_eq(rc, ERR_INVAL, "Q4 matches two files");
	cr_assert_not_null(strstr(err_msg(), "m-Q4_0.gguf"), "%s", err_msg());
	cr_assert_not_null(strstr(err_msg(), "m-Q4_K_M.gguf"), "%s", err_msg());
	choose(repo, "Q5_K", &rc);
	cr_assert_eq(rc, ERR_NOTFOUND);
	cr_assert_not_null(strstr(err_msg(), "m-Q8_0.gguf"), "the message lists what the repo has: %s",
			   err_msg());
	static const char *const no_km[] = { "m-Q4_0.gguf", "m-Q8_0.gguf", NULL };
	cr_assert_str_eq(choose(no_km, NULL, &rc), "m-Q4_0.gguf");
	static const char *const only[] = { "x/model-bf16.gguf", "mmproj.gguf", NULL };
	cr_assert_str_eq(choose(only, NULL, &rc), "x/model-bf16.gguf");
	static const char *const none[] = { "m-Q8_0.gguf", "m-F16.gguf", NULL };
	choose(none, NULL, &rc);
	cr_assert_eq(rc, ERR_INVAL, "no default among several");
	static const char *const split[] = { "m-Q4_0-00001-of-00002.gguf", "m-Q4_0-00002-of-00002.gguf", NULL };
	choose(split, "00001", &rc);
	cr_assert_eq(rc, ERR_UNSUP);
}

Test(hub, choose_checkpoint)
{
	static const char *const ck[] = { "README.md", "config.json", "model-00001-of-00002.safetensors",
					  "model-00002-of-00002.safetensors", "model.safetensors.index.json",
					  "tokenizer.json", "tokenizer_config.json", "original/params.json",
					  "onnx/model.safetensors", NULL };
	struct hub_files f;
	struct hub_choice c;
	files_of(&f, ck);
	cr_assert_eq(hub_choose(&f, "o/n", NULL, &c), 0, "%s", err_msg());
	cr_assert_eq(c.kind, HUB_HF_DIR);
	cr_assert_eq(c.n, 6, "config, 2 shards, index, 2 tokenizer files: %zu", c.n);
	for (size_t i = 0; i < c.n; i++)
		cr_assert(!strchr(c.files[i], '/') && strcmp(c.files[i], "README.md"), "%s", c.files[i]);
	hub_choice_free(&c);
	cr_assert_eq(hub_choose(&f, "o/n", "Q4_0", &c), ERR_INVAL);
	hub_files_free(&f);
	static const char *const no_tok[] = { "config.json", "model.safetensors", NULL };
	files_of(&f, no_tok);
	cr_assert_eq(hub_choose(&f, "o/n", NULL, &c), ERR_NOTFOUND);
	cr_assert_not_null(strstr(err_msg(), "model.safetensors"), "%s", err_msg());
	hub_files_free(&f);
}

Test(hub, quant_of_file_names)
{
	char q[HUB_QUANT_MAX];
	static const char *const cases[][2] = {
		{ "gemma-3-1b-it-Q4_K_M.gguf", "Q4_K_M" }, { "gemma-3-1b-it-q4_0.gguf", "Q4_0" },
		{ "model.Q8_0.gguf", "Q8_0" }, { "gemma-3-27b-it-IQ2_XXS.gguf", "IQ2_XXS" },
		{ "sub/gemma-3-4b-it-bf16.gguf", "BF16" }, { "model.gguf", "" }, { "gemma-3-1b.gguf", "" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		hub_quant_of(cases[i][0], q, sizeof q);
		cr_assert_str_eq(q, cases[i][1], "%s", cases[i][0]);
	}
}

Test(hub, sha256_known_answer)
{
	struct hub_sha256 *h = hub_sha256_new();
	char hex[65];
	cr_assert_not_null(h);
	cr_assert_eq(hub_sha256_update(h, "abc", 3), 0);
	cr_assert_eq(hub_sha256_final(h, hex), 0);
	cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	hub_sha256_free(h);
}

/* ---- unicorn pull / list / rm against the loopback Hub ------------------- */

struct env {
	struct hubserver s;
	char store[64];
	char out[16384];
};

static void env_start(struct env *e)
{
	proc_bin_dir_or_skip();
	hs_start(&e->s);
	snprintf(e->store, sizeof e->store, "/tmp/unicorn-hub-XXXXXX");
	cr_assert_not_null(mkdtemp(e->store));
}

static void env_stop(struct env *e)
{
	hs_stop(&e->s);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", e->store);
	if (system(cmd)) {}
}

/* Run `unicorn ARGS` with the store and endpoint (env: extra assignments);
 * stdout+stderr into e->out; the exit status. */
static int cli(struct env *e, const char *env, const char *args)
{
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "UNICORN_MODELS=%s HF_ENDPOINT=%s HF_TOKEN= %s %s/unicorn %s 2>&1", e->store,
		 e->s.url, env ? env : "", proc_bin_dir(), args);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t n = fread(e->out, 1, sizeof e->out - 1, f);
	e->out[n] = 0;
	int st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static unsigned char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *p = malloc((size_t)n + 1);
	*len = fread(p, 1, (size_t)n, f);
	fclose(f);
	return p;
}

static void assert_file(const char *path, const struct hs_file *f)
{
	size_t n;
	unsigned char *p = read_all(path, &n);
	cr_assert_not_null(p, "%s is missing", path);
	cr_assert_eq(n, f->len, "%s: %zu bytes, expected %zu", path, n, f->len);
	cr_assert(!memcmp(p, f->data, n), "%s: content differs", path);
	free(p);
}

static int n_entries;
static int count_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)p;
	(void)sb;
	(void)flag;
	if (ftw->level > 0)
		n_entries++;
	return 0;
}

/* Files and folders under the store (0 when it is empty or absent). */
static int store_count(const char *store)
{
	n_entries = 0;
	nftw(store, count_one, 8, FTW_PHYS);
	return n_entries;
}

#define MIB (1u << 20)

Test(hub, pull_follows_redirect_then_list_and_rm, .timeout = 60)
{
	struct env e;
	env_start(&e);
	unsigned char *d = hs_bytes(3 * MIB + 123, 1);
	hs_add(&e.s, "acme/tiny-GGUF", "tiny-Q8_0.gguf", d, 1000);
	struct hs_file *f = hs_add(&e.s, "acme/tiny-GGUF", "tiny-Q4_K_M.gguf", d, 3 * MIB + 123);
	hs_add(&e.s, "acme/tiny-GGUF", "README.md", "hi", 2);
	free(d);
	cr_assert_eq(cli(&e, NULL, "pull acme/tiny-GGUF"), 0, "%s", e.out);
	char path[256];
	snprintf(path, sizeof path, "%s/acme/tiny-GGUF/tiny-Q4_K_M.gguf", e.store);
	assert_file(path, f);
	cr_assert_not_null(strstr(e.out, path), "%s", e.out);
	cr_assert_eq(hs_count(&e.s, "GET /api/models/acme/tiny-GGUF ", NULL), 1, "%s", hs_dump(&e.s));
	cr_assert_eq(hs_count(&e.s, "GET /acme/tiny-GGUF/resolve/main/tiny-Q4_K_M.gguf", NULL), 1, "%s",
		     hs_dump(&e.s));
	cr_assert_eq(hs_count(&e.s, "GET /cdn/1 ", NULL), 1, "the 302 was not followed:\n%s", hs_dump(&e.s));
	cr_assert_eq(hs_count(&e.s, "auth=Bearer", NULL), 0, "no HF_TOKEN, no Authorization");
	cr_assert_eq(hs_count(&e.s, "Q8_0", NULL), 0, "only the chosen file is fetched");
	snprintf(path, sizeof path, "%s/acme/tiny-GGUF/tiny-Q4_K_M.gguf.part", e.store);
	cr_assert_neq(access(path, F_OK), 0, ".part left behind");

	/* a second pull downloads nothing */
	cr_assert_eq(cli(&e, NULL, "pull hf.co/acme/tiny-GGUF:q4_k_m"), 0, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "already in the store"), "%s", e.out);
	cr_assert_eq(hs_count(&e.s, "/cdn/", NULL), 1);

	cr_assert_eq(cli(&e, NULL, "pull --quiet acme/tiny-GGUF:Q8_0"), 0, "%s", e.out);
	cr_assert_eq(cli(&e, NULL, "list"), 0, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "acme/tiny-GGUF:Q4_K_M"), "%s", e.out);
	cr_assert_not_null(strstr(e.out, "* acme/tiny-GGUF:Q8_0"), "the latest pull is marked: %s", e.out);
	cr_assert_not_null(strstr(e.out, "3.00 MiB"), "%s", e.out);
	cr_assert_eq(cli(&e, NULL, "list --json"), 0, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "\"quant\": \"Q8_0\""), "%s", e.out);

	cr_assert_eq(cli(&e, NULL, "rm acme/tiny-GGUF"), 1, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "acme/tiny-GGUF:Q4_K_M"), "ambiguous rm lists the models: %s", e.out);
	cr_assert_eq(cli(&e, NULL, "rm acme/tiny-GGUF:Q8_0 acme/tiny-GGUF:Q4_K_M"), 0, "%s", e.out);
	cr_assert_eq(store_count(e.store), 0, "rm leaves nothing: %s", e.out);
	cr_assert_eq(cli(&e, NULL, "rm acme/tiny-GGUF"), 1, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "not in the model store"), "%s", e.out);
	cr_assert_eq(cli(&e, NULL, "list"), 0, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "no models"), "%s", e.out);
	env_stop(&e);
}

Test(hub, pull_resumes_a_cut_download, .timeout = 60)
{
	struct env e;
	env_start(&e);
	size_t len = 4 * MIB + 7;
	unsigned char *d = hs_bytes(len, 2);
	struct hs_file *f = hs_add(&e.s, "acme/cut-GGUF", "cut-Q4_0.gguf", d, len);
	free(d);
	f->cuts = 1;
	f->cut_at = len / 2 + 1;
	/* in the same run: retried at once, from where it broke */
	cr_assert_eq(cli(&e, NULL, "pull acme/cut-GGUF"), 0, "%s\n%s", e.out, hs_dump(&e.s));
	char path[256], want[64];
	snprintf(path, sizeof path, "%s/acme/cut-GGUF/cut-Q4_0.gguf", e.store);
	assert_file(path, f);
	snprintf(want, sizeof want, "range=bytes=%zu-", f->cut_at);
	cr_assert_eq(hs_count(&e.s, "/cdn/0", want), 1, "no resume at %zu:\n%s", f->cut_at, hs_dump(&e.s));
	cr_assert_not_null(strstr(e.out, "retrying"), "%s", e.out);

	/* across runs: the first gives up and keeps the .part, the next resumes it */
	cr_assert_eq(cli(&e, NULL, "rm acme/cut-GGUF"), 0, "%s", e.out);
	f->cuts = 1;
	f->cut_at = len / 3;
	cr_assert_eq(cli(&e, NULL, "pull --retries 0 acme/cut-GGUF"), 1, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "cut-Q4_0.gguf of acme/cut-GGUF"), "the error names the file: %s",
			   e.out);
	char part[300];
	snprintf(part, sizeof part, "%s.part", path);
	struct stat sb;
	cr_assert_eq(stat(part, &sb), 0, "no .part kept: %s", e.out);
	cr_assert_eq((size_t)sb.st_size, f->cut_at);
	cr_assert_neq(access(path, F_OK), 0, "an incomplete file was put in place");
	cr_assert_eq(cli(&e, NULL, "list"), 0, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "no models"), "a .part is not a model: %s", e.out);
	cr_assert_eq(cli(&e, NULL, "pull acme/cut-GGUF"), 0, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "resuming"), "%s", e.out);
	snprintf(want, sizeof want, "range=bytes=%zu-", f->cut_at);
	cr_assert_eq(hs_count(&e.s, "/cdn/0", want), 1, "%s", hs_dump(&e.s));
	assert_file(path, f);
	cr_assert_neq(access(part, F_OK), 0);
	env_stop(&e);
}

Test(hub, pull_rejects_a_wrong_checksum, .timeout = 60)
{
	struct env e;
	env_start(&e);
	unsigned char *d = hs_bytes(MIB, 3);
	struct hs_file *bad = hs_add(&e.s, "acme/bad-GGUF", "bad-Q4_0.gguf", d, MIB);
	bad->sum = HS_WRONG;
	struct hs_file *etag_bad = hs_add(&e.s, "acme/etag-GGUF", "e-Q4_0.gguf", d, MIB);
	etag_bad->sum = HS_ETAG_WRONG;
	struct hs_file *etag_ok = hs_add(&e.s, "acme/etagok-GGUF", "e-Q4_0.gguf", d, MIB);
	etag_ok->sum = HS_ETAG;
	free(d);
	cr_assert_eq(cli(&e, NULL, "pull acme/bad-GGUF"), 1, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "sha256 mismatch"), "%s", e.out);
	cr_assert_not_null(strstr(e.out, "bad-Q4_0.gguf of acme/bad-GGUF"), "%s", e.out);
	cr_assert_eq(store_count(e.store), 0, "something was left in the store");
	/* without X-Linked-Etag, the ETag is the checksum */
	cr_assert_eq(cli(&e, NULL, "pull acme/etag-GGUF"), 1, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "sha256 mismatch"), "%s", e.out);
	cr_assert_eq(store_count(e.store), 0, "something was left in the store");
	cr_assert_eq(cli(&e, NULL, "pull acme/etagok-GGUF"), 0, "%s", e.out);
	cr_assert_null(strstr(e.out, "not verified"), "%s", e.out);
	env_stop(&e);
}

Test(hub, pull_errors_name_status_and_repo, .timeout = 60)
{
	struct env e;
	env_start(&e);
	unsigned char *d = hs_bytes(1000, 4);
	hs_add(&e.s, "acme/gated-GGUF", "g-Q4_0.gguf", d, 1000);
	hs_add(&e.s, "acme/two-GGUF", "m-Q4_0.gguf", d, 1000);
	hs_add(&e.s, "acme/two-GGUF", "m-Q4_K_S.gguf", d, 1000);
	hs_add(&e.s, "acme/docs", "README.md", d, 10);
	free(d);
	snprintf(e.s.gated, sizeof e.s.gated, "acme/gated-GGUF");
	snprintf(e.s.token, sizeof e.s.token, "hf_secret");

	cr_assert_eq(cli(&e, NULL, "pull acme/missing"), 1, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "404"), "%s", e.out);
	cr_assert_not_null(strstr(e.out, "acme/missing"), "%s", e.out);

	cr_assert_eq(cli(&e, NULL, "pull acme/gated-GGUF"), 1, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "401"), "%s", e.out);
	cr_assert_not_null(strstr(e.out, "HF_TOKEN"), "%s", e.out);
	cr_assert_not_null(strstr(e.out, "acme/gated-GGUF"), "%s", e.out);
	cr_assert_eq(cli(&e, "HF_TOKEN=wrong", "pull acme/gated-GGUF"), 1, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "refused"), "%s", e.out);
	cr_assert_eq(cli(&e, "HF_TOKEN=hf_secret", "pull acme/gated-GGUF"), 0, "%s", e.out);
	cr_assert_eq(hs_count(&e.s, "/resolve/main/g-Q4_0.gguf", "auth=Bearer hf_secret"), 1, "%s",
		     hs_dump(&e.s));

	cr_assert_eq(cli(&e, NULL, "pull acme/two-GGUF:Q4"), 1, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "m-Q4_0.gguf"), "%s", e.out);
	cr_assert_not_null(strstr(e.out, "m-Q4_K_S.gguf"), "%s", e.out);
	cr_assert_eq(hs_count(&e.s, "/acme/two-GGUF/resolve", NULL), 0, "nothing is downloaded");
	cr_assert_eq(cli(&e, NULL, "pull acme/two-GGUF:Q5_K_M"), 1, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "no GGUF file matching 'Q5_K_M'"), "%s", e.out);

	cr_assert_eq(cli(&e, NULL, "pull acme/docs"), 1, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "README.md"), "%s", e.out);

	cr_assert_eq(cli(&e, "HF_TOKEN=\"$(printf 'a\\nb')\"", "pull acme/gated-GGUF"), 1, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "HF_TOKEN holds a control character"), "%s", e.out);
	cr_assert_eq(cli(&e, NULL, "pull not-a-repo"), 2, "%s", e.out);
	cr_assert_eq(cli(&e, NULL, "pull ../x/y"), 2, "%s", e.out);

	/* a file the list names but the server does not have */
	struct hub_opts o;
	hub_opts_default(&o);
	o.endpoint = e.s.url;
	o.token = "";
	o.quiet = true;
	char dest[128];
	snprintf(dest, sizeof dest, "%s/gone.gguf", e.store);
	cr_assert_eq(hub_download(&o, "acme/two-GGUF", "gone.gguf", dest), ERR_NOTFOUND);
	cr_assert_not_null(strstr(err_msg(), "404"), "%s", err_msg());
	cr_assert_not_null(strstr(err_msg(), "gone.gguf of acme/two-GGUF"), "%s", err_msg());

	/* the store only holds the gated model */
	cr_assert_eq(cli(&e, NULL, "list"), 0, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "acme/gated-GGUF:Q4_0"), "%s", e.out);
	cr_assert_null(strstr(e.out, "two-GGUF"), "%s", e.out);
	env_stop(&e);
}

Test(hub, pull_checkpoint_whole, .timeout = 60)
{
	struct env e;
	env_start(&e);
	unsigned char *d = hs_bytes(2 * MIB, 5);
	static const char cfg[] = "{\"architectures\":[\"Gemma3ForCausalLM\"],\"torch_dtype\":\"bfloat16\"}";
	hs_add(&e.s, "acme/ck", "config.json", cfg, strlen(cfg))->sum = HS_NONE;
	struct hs_file *s1 = hs_add(&e.s, "acme/ck", "model-00001-of-00002.safetensors", d, MIB);
	struct hs_file *s2 = hs_add(&e.s, "acme/ck", "model-00002-of-00002.safetensors", d + MIB, MIB);
	hs_add(&e.s, "acme/ck", "model.safetensors.index.json", "{}", 2)->sum = HS_NONE;
	hs_add(&e.s, "acme/ck", "tokenizer.json", "{}", 2)->sum = HS_ETAG;
	hs_add(&e.s, "acme/ck", "README.md", "# ck", 4);
	free(d);
	s2->cuts = 1;
	s2->cut_at = MIB / 2;
	cr_assert_eq(cli(&e, NULL, "pull acme/ck"), 0, "%s\n%s", e.out, hs_dump(&e.s));
	char p[256];
	snprintf(p, sizeof p, "%s/acme/ck/model-00001-of-00002.safetensors", e.store);
	assert_file(p, s1);
	snprintf(p, sizeof p, "%s/acme/ck/model-00002-of-00002.safetensors", e.store);
	assert_file(p, s2);
	static const char *const others[] = { "config.json", "model.safetensors.index.json", "tokenizer.json" };
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof p, "%s/acme/ck/%s", e.store, others[i]);
		cr_assert_eq(access(p, F_OK), 0, "%s missing", p);
	}
	snprintf(p, sizeof p, "%s/acme/ck/README.md", e.store);
	cr_assert_neq(access(p, F_OK), 0, "README.md is not part of a checkpoint");
	snprintf(p, sizeof p, "%s/acme/.ck.pull", e.store);
	cr_assert_neq(access(p, F_OK), 0, "the staging folder is left");
	cr_assert_eq(cli(&e, NULL, "list"), 0, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "acme/ck "), "%s", e.out);
	cr_assert_not_null(strstr(e.out, "BF16"), "%s", e.out);
	cr_assert_eq(cli(&e, NULL, "rm acme/ck"), 0, "%s", e.out);
	cr_assert_eq(store_count(e.store), 0);

	/* a wrong shard: nothing of the checkpoint stays */
	s1->sum = HS_WRONG;
	cr_assert_eq(cli(&e, NULL, "pull acme/ck"), 1, "%s", e.out);
	cr_assert_not_null(strstr(e.out, "sha256 mismatch"), "%s", e.out);
	cr_assert_eq(store_count(e.store), 0, "something was left in the store");
	env_stop(&e);
}

Test(hub, every_command_has_help)
{
	struct env e;
	env_start(&e);
	static const char *const cmds[] = { "pull --help", "list --help", "rm --help" };
	for (size_t i = 0; i < 3; i++) {
		cr_assert_eq(cli(&e, NULL, cmds[i]), 0, "%s: %s", cmds[i], e.out);
		cr_assert_not_null(strstr(e.out, "usage: unicorn"), "%s", e.out);
	}
	cr_assert_eq(cli(&e, NULL, "pull"), 2, "%s", e.out);
	cr_assert_eq(cli(&e, NULL, "rm"), 2, "%s", e.out);
	env_stop(&e);
}

/* ---- the vision projector ---------------------------------------------- */

Test(hub, choose_mmproj)
{
	struct hub_files f;
	static const char *const a[] = { "m-Q4_K_M.gguf", "mmproj-BF16.gguf", "mmproj-F32.gguf", "mmproj-F16.gguf", NULL };
	files_of(&f, a);
	cr_assert_str_eq(hub_choose_mmproj(&f), "mmproj-F16.gguf");
	hub_files_free(&f);
	static const char *const b[] = { "m-Q4_K_M.gguf", "mmproj-model-bf16.gguf", "mmproj-z.gguf", NULL };
	files_of(&f, b);
	cr_assert_str_eq(hub_choose_mmproj(&f), "mmproj-model-bf16.gguf");
	hub_files_free(&f);
	static const char *const c[] = { "m-Q4_K_M.gguf", "mmproj-b.gguf", "mmproj-a.gguf", NULL };
	files_of(&f, c);
	cr_assert_str_eq(hub_choose_mmproj(&f), "mmproj-a.gguf");
	hub_files_free(&f);
	static const char *const none[] = { "m-Q4_K_M.gguf", "README.md", NULL };
	files_of(&f, none);
	cr_assert_null(hub_choose_mmproj(&f));
	hub_files_free(&f);
}

Test(hub, pull_fetches_the_mmproj_beside, .timeout = 60)
{
	struct env e;
	env_start(&e);
	unsigned char *d = hs_bytes(MIB, 5);
	struct hs_file *m = hs_add(&e.s, "acme/vis-GGUF", "vis-Q4_K_M.gguf", d, MIB);
	struct hs_file *p = hs_add(&e.s, "acme/vis-GGUF", "mmproj-vis-f16.gguf", d + 10, 4000);
	hs_add(&e.s, "acme/vis-GGUF", "mmproj-vis-f32.gguf", d, 9000);
	free(d);
	cr_assert_eq(cli(&e, NULL, "pull acme/vis-GGUF"), 0, "%s", e.out);
	char path[256];
	snprintf(path, sizeof path, "%s/acme/vis-GGUF/vis-Q4_K_M.gguf", e.store);
	assert_file(path, m);
	snprintf(path, sizeof path, "%s/acme/vis-GGUF/mmproj-vis-f16.gguf", e.store);
	assert_file(path, p);
	cr_assert_eq(hs_count(&e.s, "f32", NULL), 0, "one projector only:\n%s", hs_dump(&e.s));
	cr_assert_eq(cli(&e, NULL, "list"), 0, "%s", e.out);
	cr_assert_null(strstr(e.out, "mmproj"), "the projector is not a model: %s", e.out);
	cr_assert_eq(cli(&e, NULL, "rm acme/vis-GGUF"), 0, "%s", e.out);
	cr_assert_eq(store_count(e.store), 0, "rm of the last model takes its projector: %s", e.out);
	env_stop(&e);
}
