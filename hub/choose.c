/* choose: model references, the Hub's file list and which files to pull
 * (hub.h). No I/O here: these are pure functions of their input (tested and
 * fuzzed without a server). */
#include "hub/hub.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "common/err.h"

#define HUB_PART_MAX 96 /* the Hub's own limit on org and repo names */

static bool ref_part_ok(const char *s, size_t n)
{
	if (n == 0 || n > HUB_PART_MAX || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
			return false;
	return memmem(s, n, "..", 2) == NULL;
}

int hub_ref_parse(const char *s, struct hub_ref *r)
{
	static const char *const prefixes[] = {
		"https://huggingface.co/", "http://huggingface.co/", "https://hf.co/", "hf.co/",
		"huggingface.co/",
	};
	memset(r, 0, sizeof *r);
	if (!s || !*s)
		return err_set(ERR_INVAL, "empty model name (expected ORG/NAME[:QUANT])");
	const char *p = s;
	for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
		if (!strncasecmp(p, prefixes[i], strlen(prefixes[i]))) {
			p += strlen(prefixes[i]);
			break;
		}
	const char *slash = strchr(p, '/');
	const char *colon = strchr(p, ':');
	if (!slash || (colon && colon < slash))
		return err_set(ERR_INVAL, "'%s': expected a Hugging Face repo ORG/NAME[:QUANT]", s);
	const char *name = slash + 1;
	size_t org_n = (size_t)(slash - p);
	size_t name_n = colon ? (size_t)(colon - name) : strlen(name);
	if (!ref_part_ok(p, org_n) || !ref_part_ok(name, name_n))
		return err_set(ERR_INVAL, "'%s': a repo is ORG/NAME, each 1-%d characters of A-Z a-z 0-9 . _ - "
			       "(not starting with . or -)", s, HUB_PART_MAX);
	memcpy(r->repo, p, org_n + 1 + name_n);
	r->repo[org_n + 1 + name_n] = 0;
	if (colon) {
		const char *q = colon + 1;
		size_t qn = strlen(q);
		if (qn == 0 || qn >= HUB_QUANT_MAX)
			return err_set(ERR_INVAL, "'%s': the quant after ':' must be 1-%d characters", s,
				       HUB_QUANT_MAX - 1);
		for (size_t i = 0; i < qn; i++)
			if (!isalnum((unsigned char)q[i]) && q[i] != '.' && q[i] != '_' && q[i] != '-')
				return err_set(ERR_INVAL, "'%s': the quant '%s' may hold only A-Z a-z 0-9 . _ -",
					       s, q);
		memcpy(r->quant, q, qn + 1);
	}
	return 0;
}

void hub_ref_format(const struct hub_ref *r, char *out, size_t cap)
{
	if (r->quant[0])
		snprintf(out, cap, "%s:%s", r->repo, r->quant);
	else
		snprintf(out, cap, "%s", r->repo);
}

/* A file name from the server is used to build a URL and (its last component)
 * a path in the store: relative, no "." or ".." components, printable, and not
 * hidden (.gitattributes; the store keeps its own work in dot-names). */
static bool file_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= HUB_FILE_MAX || s[0] == '/' || s[n - 1] == '/')
		return false;
	const char *base = strrchr(s, '/');
	if ((base ? base[1] : s[0]) == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f || c == '\\')
			return false;
	}
	const char *c = s;
	while (*c) {
		size_t k = strcspn(c, "/");
		if (k == 0 || (k == 1 && c[0] == '.') || (k == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c += k;
		if (*c == '/')
			c++;
	}
	return true;
}

void hub_files_free(struct hub_files *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->names[i]);
	free(f->names);
	f->names = NULL;
	f->n = 0;
}

int hub_files_parse(const char *json, size_t len, const char *repo, struct hub_files *out)
{
	memset(out, 0, sizeof *out);
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return err_set(ERR_INVAL, "the file list of %s is not JSON (line %d: %s)", repo, je.line,
			       je.text);
	int rc = 0;
	json_t *sib = json_is_object(root) ? json_object_get(root, "siblings") : NULL;
	if (!json_is_array(sib)) {
		rc = err_set(ERR_INVAL, "the answer for %s has no \"siblings\" list of files", repo);
		goto out_root;
	}
	size_t n = json_array_size(sib);
	if (n > HUB_MAX_FILES) {
		rc = err_set(ERR_RANGE, "%s lists %zu files (more than %d)", repo, n, HUB_MAX_FILES);
		goto out_root;
	}
	out->names = calloc(n ? n : 1, sizeof *out->names);
	if (!out->names) {
		rc = err_set(ERR_NOMEM, "out of memory");
		goto out_root;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(sib, i);
		json_t *fn = json_is_object(e) ? json_object_get(e, "rfilename") : NULL;
		const char *s = json_string_value(fn);
		/* jansson strings may hold NUL: the length must match. */
		if (!s || strlen(s) != json_string_length(fn) || !file_name_ok(s))
			continue;
		if (!(out->names[out->n] = strdup(s))) {
			rc = err_set(ERR_NOMEM, "out of memory");
			hub_files_free(out);
			goto out_root;
		}
		out->n++;
	}
out_root:
	json_decref(root);
	return rc;
}

static bool ends_with_ci(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcasecmp(s + n - k, suffix);
}

static const char *base_name(const char *s)
{
	const char *b = strrchr(s, '/');
	return b ? b + 1 : s;
}

static bool contains_ci(const char *hay, const char *needle)
{
	size_t k = strlen(needle);
	for (const char *p = hay; *p; p++)
		if (!strncasecmp(p, needle, k))
			return true;
	return k == 0;
}

/* Quant tokens are the parts of a name between '-' and '.' (Q4_K_M keeps its
 * underscores): the last one that looks like a llama.cpp type. */
void hub_quant_of(const char *file, char *out, size_t cap)
{
	char stem[HUB_FILE_MAX];
	snprintf(stem, sizeof stem, "%s", base_name(file));
	if (ends_with_ci(stem, ".gguf"))
		stem[strlen(stem) - 5] = 0;
	out[0] = 0;
	char *save = NULL;
	for (char *t = strtok_r(stem, "-.", &save); t; t = strtok_r(NULL, "-.", &save)) {
		const char *u = t;
		bool q = (toupper((unsigned char)u[0]) == 'I' && toupper((unsigned char)u[1]) == 'Q' &&
			  isdigit((unsigned char)u[2])) ||
			 (toupper((unsigned char)u[0]) == 'Q' && isdigit((unsigned char)u[1])) ||
			 (toupper((unsigned char)u[0]) == 'T' && toupper((unsigned char)u[1]) == 'Q' &&
			  isdigit((unsigned char)u[2])) ||
			 !strcasecmp(u, "f16") || !strcasecmp(u, "f32") || !strcasecmp(u, "bf16");
		if (q && strlen(u) < cap) {
			size_t i = 0;
			for (; u[i]; i++)
				out[i] = (char)toupper((unsigned char)u[i]);
			out[i] = 0;
		}
	}
}

void hub_choice_free(struct hub_choice *c)
{
	free(c->files);
	memset(c, 0, sizeof *c);
}

/* "a, b, c" of the names for which keep() holds, at most cap bytes. */
static void list_names(const struct hub_files *f, bool (*keep)(const char *), char *out, size_t cap)
{
	size_t len = 0;
	out[0] = 0;
	for (size_t i = 0; i < f->n && len + 8 < cap; i++) {
		if (!keep(f->names[i]))
			continue;
		int k = snprintf(out + len, cap - len, "%s%s", len ? ", " : "", f->names[i]);
		if (k < 0 || (size_t)k >= cap - len) {
			snprintf(out + (cap > 5 ? cap - 5 : 0), cap > 5 ? 5 : cap, " ...");
			return;
		}
		len += (size_t)k;
	}
}

static bool is_gguf(const char *s)
{
	return ends_with_ci(s, ".gguf") && strncasecmp(base_name(s), "mmproj", 6);
}

static bool any_file(const char *s)
{
	(void)s;
	return true;
}

static bool is_checkpoint_file(const char *s)
{
	static const char *const names[] = {
		"config.json", "generation_config.json", "tokenizer.json", "tokenizer.model",
		"tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
		"model.safetensors.index.json",
	};
	if (strchr(s, '/'))
		return false; /* subfolders (original/, onnx/) are other formats */
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(s, names[i]))
			return true;
	return ends_with_ci(s, ".safetensors");
}

static bool has_file(const struct hub_files *f, const char *name)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->names[i], name))
			return true;
	return false;
}

/* Split GGUFs ("-00001-of-00003.gguf") need every part; the engine reads one file. */
static bool is_split_gguf(const char *s)
{
	const char *of = strstr(base_name(s), "-of-");
	return of && of > base_name(s) + 5 && isdigit((unsigned char)of[-1]) && isdigit((unsigned char)of[4]);
}

int hub_choose(const struct hub_files *f, const char *repo, const char *quant, struct hub_choice *c)
{
	memset(c, 0, sizeof *c);
	char have[1024];
	size_t n_gguf = 0;
	for (size_t i = 0; i < f->n; i++)
		n_gguf += is_gguf(f->names[i]);
	c->files = calloc(f->n ? f->n : 1, sizeof *c->files);
	if (!c->files)
		return err_set(ERR_NOMEM, "out of memory");
	if (n_gguf) {
		list_names(f, is_gguf, have, sizeof have);
		static const char *const defaults[] = { "Q4_K_M", "Q4_0" };
		const char *pick = NULL;
		if (quant && *quant) {
			size_t hits = 0;
			for (size_t i = 0; i < f->n; i++)
				if (is_gguf(f->names[i]) && contains_ci(base_name(f->names[i]), quant)) {
					hits++;
					pick = f->names[i];
				}
			if (hits == 0) {
				hub_choice_free(c);
				return err_set(ERR_NOTFOUND, "%s has no GGUF file matching '%s'; it has: %s", repo,
					       quant, have);
			}
			if (hits > 1) {
				hub_choice_free(c);
				return err_set(ERR_INVAL, "'%s' matches %zu GGUF files of %s; name one more "
					       "precisely (REPO:QUANT) — it has: %s", quant, hits, repo, have);
			}
		} else {
			for (size_t d = 0; d < 2 && !pick; d++) {
				size_t hits = 0;
				const char *last = NULL;
				for (size_t i = 0; i < f->n; i++)
					if (is_gguf(f->names[i]) && contains_ci(base_name(f->names[i]), defaults[d])) {
						hits++;
						last = f->names[i];
					}
				if (hits == 1)
					pick = last;
				else if (hits > 1) {
					hub_choice_free(c);
					return err_set(ERR_INVAL, "%s has %zu %s GGUF files; choose one with "
						       "REPO:QUANT — it has: %s", repo, hits, defaults[d], have);
				}
			}
			if (!pick && n_gguf == 1)
				for (size_t i = 0; i < f->n; i++)
					if (is_gguf(f->names[i]))
						pick = f->names[i];
			if (!pick) {
				hub_choice_free(c);
				return err_set(ERR_INVAL, "%s has %zu GGUF files and none is Q4_K_M or Q4_0; "
					       "choose one with REPO:QUANT — it has: %s", repo, n_gguf, have);
			}
		}
		if (is_split_gguf(pick)) {
			hub_choice_free(c);
			return err_set(ERR_UNSUP, "%s: %s is one part of a split GGUF; split GGUFs are not "
				       "supported (choose a single-file quant) — the repo has: %s", repo,
				       pick, have);
		}
		c->kind = HUB_GGUF;
		c->files[c->n++] = pick;
		return 0;
	}
	size_t n_st = 0;
	for (size_t i = 0; i < f->n; i++)
		n_st += !strchr(f->names[i], '/') && ends_with_ci(f->names[i], ".safetensors");
	bool tok = has_file(f, "tokenizer.json") || has_file(f, "tokenizer.model");
	if (!has_file(f, "config.json") || !n_st || !tok) {
		list_names(f, any_file, have, sizeof have);
		hub_choice_free(c);
		return err_set(ERR_NOTFOUND, "%s has no GGUF file and no Hugging Face checkpoint (config.json, "
			       "*.safetensors and tokenizer.json or tokenizer.model); it has: %s", repo,
			       f->n ? have : "no files");
	}
	if (quant && *quant) {
		list_names(f, any_file, have, sizeof have);
		hub_choice_free(c);
		return err_set(ERR_INVAL, "%s is a Hugging Face checkpoint (no GGUF files): it is pulled "
			       "whole, without ':%s'", repo, quant);
	}
	c->kind = HUB_HF_DIR;
	for (size_t i = 0; i < f->n; i++)
		if (is_checkpoint_file(f->names[i]))
			c->files[c->n++] = f->names[i];
	return 0;
}

const char *hub_choose_mmproj(const struct hub_files *f)
{
	static const char *const pref[] = { "f16", "bf16", "f32" };
	const char *first = NULL;
	for (size_t k = 0; k < 3; k++)
		for (size_t i = 0; i < f->n; i++) {
			const char *b = base_name(f->names[i]);
			if (strncasecmp(b, "mmproj", 6) || !ends_with_ci(b, ".gguf"))
				continue;
			if (!first || strcmp(f->names[i], first) < 0)
				first = f->names[i];
			char tag[16];
			/* "-F16.gguf" / "-f16.gguf", but not "-bf16" for "f16" */
			snprintf(tag, sizeof tag, "-%s.gguf", pref[k]);
			if (ends_with_ci(b, tag))
				return f->names[i];
		}
	return first;
}
