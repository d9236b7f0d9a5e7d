/* store: the local model store (store.h, docs/models.md). */
#include "hub/store.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <fcntl.h>
#include <ftw.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "common/err.h"

int store_dir(char *out, size_t cap)
{
	const char *s = getenv("UNICORN_MODELS");
	int k;
	if (s && *s) {
		k = snprintf(out, cap, "%s", s);
	} else {
		const char *home = getenv("HOME");
		if (!home || !*home) {
			struct passwd *pw = getpwuid(getuid());
			home = pw ? pw->pw_dir : NULL;
		}
		if (!home)
			return err_set(ERR_NOTFOUND, "no model store: set UNICORN_MODELS (HOME is not set)");
		k = snprintf(out, cap, "%s/.cache/unicorn/models", home);
	}
	if (k < 0 || (size_t)k >= cap)
		return err_set(ERR_RANGE, "the model store's path is too long");
	size_t n = (size_t)k;
	while (n > 1 && out[n - 1] == '/')
		out[--n] = 0;
	return 0;
}

int store_mkdirs(const char *dir)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
		return err_set(ERR_RANGE, "%s: path too long", dir);
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;
		*s = 0;
		if (mkdir(p, 0755) && errno != EEXIST)
			return err_set(ERR_IO, "cannot create %s: %s", p, strerror(errno));
		*s = c;
		if (!c)
			break;
	}
	struct stat sb;
	if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
		return err_set(ERR_IO, "%s is not a directory", dir);
	return 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	int r = flag == FTW_DP ? rmdir(path) : unlink(path);
	return r && errno != ENOENT ? -1 : 0;
}

int store_remove_tree(const char *path)
{
	if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS))
		return err_set(ERR_IO, "cannot remove %s: %s", path, strerror(errno));
	return 0;
}

int store_touch(const char *path)
{
	if (utimensat(AT_FDCWD, path, NULL, 0))
		return err_set(ERR_IO, "%s: %s", path, strerror(errno));
	return 0;
}

void store_prune(const char *store, const char *dir)
{
	char p[PATH_MAX];
	size_t sl = strlen(store);
	if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
		return;
	for (;;) {
		size_t n = strlen(p);
		if (n <= sl + 1 || strncmp(p, store, sl) || p[sl] != '/')
			return;
		if (rmdir(p) && errno != ENOENT)
			return; /* not empty: stop */
		char *slash = strrchr(p, '/');
		if (!slash)
			return;
		*slash = 0;
	}
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcasecmp(s + n - k, suffix);
}

/* Entries of a growing array. */
struct entries {
	struct store_entry *v;
	size_t n, cap;
};

static struct store_entry *entries_add(struct entries *e)
{
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 16;
		struct store_entry *v = realloc(e->v, cap * sizeof *v);
		if (!v)
			return NULL;
		e->v = v;
		e->cap = cap;
	}
	struct store_entry *s = &e->v[e->n++];
	memset(s, 0, sizeof *s);
	return s;
}

/* "BF16" from config.json's torch_dtype, "-" otherwise. */
static void checkpoint_dtype(const char *dir, char *out, size_t cap)
{
	char p[PATH_MAX];
	snprintf(out, cap, "-");
	if (snprintf(p, sizeof p, "%s/config.json", dir) >= (int)sizeof p)
		return;
	json_t *j = json_load_file(p, 0, NULL);
	const char *t = j && json_is_object(j) ? json_string_value(json_object_get(j, "torch_dtype")) : NULL;
	if (t && !strcmp(t, "bfloat16"))
		snprintf(out, cap, "BF16");
	else if (t && !strcmp(t, "float16"))
		snprintf(out, cap, "F16");
	else if (t && !strcmp(t, "float32"))
		snprintf(out, cap, "F32");
	json_decref(j);
}

/* The models of one repo folder ORG/NAME. */
static int scan_repo(const char *store, const char *org, const char *name, struct entries *e)
{
	char dir[PATH_MAX], p[PATH_MAX];
	if (strlen(org) > 96 || strlen(name) > 96 ||
	    snprintf(dir, sizeof dir, "%s/%s/%s", store, org, name) >= (int)sizeof dir)
		return 0; /* not a name the Hub gives: not ours */
	struct stat sb;
	bool checkpoint = snprintf(p, sizeof p, "%s/config.json", dir) < (int)sizeof p && stat(p, &sb) == 0;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	struct store_entry *ck = NULL;
	if (checkpoint) {
		if (!(ck = entries_add(e))) {
			closedir(d);
			return err_set(ERR_NOMEM, "out of memory");
		}
		snprintf(ck->repo, sizeof ck->repo, "%.96s/%.96s", org, name);
		snprintf(ck->name, sizeof ck->name, "%s", ck->repo);
		snprintf(ck->path, sizeof ck->path, "%s", dir);
		checkpoint_dtype(dir, ck->quant, sizeof ck->quant);
		ck->is_dir = true;
		if (stat(dir, &sb) == 0)
			ck->mtime = (double)sb.st_mtim.tv_sec + sb.st_mtim.tv_nsec * 1e-9;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p || lstat(p, &sb) ||
		    !S_ISREG(sb.st_mode))
			continue;
		if (ck) {
			ck->size += (uint64_t)sb.st_size;
			continue;
		}
		/* a vision projector (mmproj-*.gguf) goes with the models beside it */
		if (!ends_with(de->d_name, ".gguf") || !strncasecmp(de->d_name, "mmproj", 6))
			continue;
		struct store_entry *s = entries_add(e);
		if (!s) {
			closedir(d);
			return err_set(ERR_NOMEM, "out of memory");
		}
		snprintf(s->repo, sizeof s->repo, "%.96s/%.96s", org, name);
		hub_quant_of(de->d_name, s->quant, sizeof s->quant);
		if (!s->quant[0]) {
			/* no quant in the name: the name itself tells the files apart */
			int stem = (int)strlen(de->d_name) - 5;
			snprintf(s->quant, sizeof s->quant, "%.*s",
				 stem < (int)sizeof s->quant - 1 ? stem : (int)sizeof s->quant - 1, de->d_name);
			for (char *c = s->quant; *c; c++)
				if (*c == ':')
					*c = '_';
		}
		snprintf(s->name, sizeof s->name, "%s:%s", s->repo, s->quant);
		snprintf(s->path, sizeof s->path, "%s", p);
		s->size = (uint64_t)sb.st_size;
		s->mtime = (double)sb.st_mtim.tv_sec + sb.st_mtim.tv_nsec * 1e-9;
	}
	closedir(d);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	const struct store_entry *x = a, *y = b;
	int c = strcasecmp(x->name, y->name);
	return c ? c : strcmp(x->path, y->path);
}

int store_list(const char *store, struct store_entry **out, size_t *n)
{
	struct entries e = { 0 };
	*out = NULL;
	*n = 0;
	DIR *d = opendir(store);
	if (!d)
		return errno == ENOENT ? 0 : err_set(ERR_IO, "%s: %s", store, strerror(errno));
	struct dirent *org;
	int rc = 0;
	while (!rc && (org = readdir(d))) {
		if (org->d_name[0] == '.')
			continue;
		char p[PATH_MAX];
		if (snprintf(p, sizeof p, "%s/%s", store, org->d_name) >= (int)sizeof p)
			continue;
		DIR *od = opendir(p);
		if (!od)
			continue;
		struct dirent *nm;
		while (!rc && (nm = readdir(od)))
			if (nm->d_name[0] != '.')
				rc = scan_repo(store, org->d_name, nm->d_name, &e);
		closedir(od);
	}
	closedir(d);
	if (rc) {
		free(e.v);
		return rc;
	}
	if (e.n)
		qsort(e.v, e.n, sizeof *e.v, by_name);
	*out = e.v;
	*n = e.n;
	return 0;
}

/* The entries of one repo, copied into a new array. */
static int repo_entries(const char *store, const char *repo, struct store_entry **out, size_t *n)
{
	struct store_entry *all;
	size_t na;
	int rc = store_list(store, &all, &na);
	if (rc)
		return rc;
	size_t k = 0;
	for (size_t i = 0; i < na; i++)
		if (!strcmp(all[i].repo, repo))
			all[k++] = all[i];
	*out = all;
	*n = k;
	return 0;
}

/* Choose among a repo's local GGUF files with the Hub's rule. */
static int choose_local(const struct store_entry *v, size_t n, const struct hub_ref *r, size_t *pick)
{
	struct hub_files f = { .n = 0, .names = calloc(n ? n : 1, sizeof(char *)) };
	if (!f.names)
		return err_set(ERR_NOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		f.names[f.n++] = strrchr(v[i].path, '/') + 1;
	struct hub_choice c;
	int rc = hub_choose(&f, r->repo, r->quant, &c);
	if (!rc) {
		for (size_t i = 0; i < n; i++)
			if (f.names[i] == c.files[0])
				*pick = i;
		hub_choice_free(&c);
	}
	free(f.names); /* the names belong to v */
	return rc;
}

int store_find(const char *store, const struct hub_ref *r, struct store_entry *e)
{
	struct store_entry *v;
	size_t n;
	int rc = repo_entries(store, r->repo, &v, &n);
	if (rc)
		return rc;
	if (n == 0) {
		free(v);
		return err_set(ERR_NOTFOUND, "%s is not in the model store %s", r->repo, store);
	}
	size_t pick = 0;
	if (v[0].is_dir) {
		if (r->quant[0])
			rc = err_set(ERR_INVAL, "%s is a Hugging Face checkpoint in the store (no quants): "
				     "name it without ':%s'", r->repo, r->quant);
	} else {
		rc = choose_local(v, n, r, &pick);
		if (rc)
			err_prefix(rc, "in the model store %s", store);
	}
	if (!rc)
		*e = v[pick];
	free(v);
	return rc;
}

int store_latest(const char *store, struct store_entry *e)
{
	struct store_entry *v;
	size_t n;
	int rc = store_list(store, &v, &n);
	if (rc)
		return rc;
	if (n == 0) {
		free(v);
		return err_set(ERR_NOTFOUND, "the model store %s is empty", store);
	}
	size_t best = 0;
	for (size_t i = 1; i < n; i++)
		if (v[i].mtime > v[best].mtime)
			best = i;
	*e = v[best];
	free(v);
	return 0;
}

static void remove_projectors(const char *dir)
{
	char pat[PATH_MAX];
	if (snprintf(pat, sizeof pat, "%s/mmproj*.gguf", dir) >= (int)sizeof pat)
		return;
	glob_t gl;
	if (glob(pat, 0, NULL, &gl) == 0) {
		for (size_t i = 0; i < gl.gl_pathc; i++)
			(void)unlink(gl.gl_pathv[i]);
		globfree(&gl);
	}
}

int store_remove(const char *store, const char *name, char *removed, size_t cap)
{
	struct hub_ref r;
	int rc = hub_ref_parse(name, &r);
	if (rc)
		return rc;
	struct store_entry *v;
	size_t n;
	if ((rc = repo_entries(store, r.repo, &v, &n)))
		return rc;
	size_t pick = n;
	for (size_t i = 0; i < n; i++)
		if (!strcasecmp(v[i].name, name))
			pick = i;
	if (pick == n && n == 0)
		rc = err_set(ERR_NOTFOUND, "%s is not in the model store %s (see unicorn list)", name, store);
	else if (pick == n && !r.quant[0] && n == 1)
		pick = 0;
	else if (pick == n && !r.quant[0]) {
		char names[1024] = "";
		size_t len = 0;
		for (size_t i = 0; i < n && len + 4 < sizeof names; i++) {
			int k = snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", v[i].name);
			len = k > 0 ? len + (size_t)k : len;
		}
		rc = err_set(ERR_INVAL, "%s has %zu models in the store: %s; name the one to remove", r.repo,
			     n, names);
	} else if (pick == n && !v[0].is_dir) {
		rc = choose_local(v, n, &r, &pick);
		if (rc)
			err_prefix(rc, "in the model store %s", store);
	} else if (pick == n) {
		rc = err_set(ERR_NOTFOUND, "%s is not in the model store %s (see unicorn list)", name, store);
	}
	if (!rc) {
		snprintf(removed, cap, "%s", v[pick].path);
		if (v[pick].is_dir)
			rc = store_remove_tree(v[pick].path);
		else if (unlink(v[pick].path))
			rc = err_set(ERR_IO, "cannot remove %s: %s", v[pick].path, strerror(errno));
		if (!rc) {
			char dir[PATH_MAX];
			snprintf(dir, sizeof dir, "%s/%s", store, r.repo);
			if (!v[pick].is_dir && n == 1)
				remove_projectors(dir); /* the repo's last model: its mmproj goes too */
			store_prune(store, dir);
		}
	}
	free(v);
	return rc;
}
