/* clusters: see clusters.h. */
#include "cli/clusters.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

int clusters_base(char *out, size_t cap)
{
	int rc = rundir_resolve(RUNDIR_DEFAULT_NAME, out, cap);
	if (rc)
		return rc;
	char *slash = strrchr(out, '/');
	if (slash)
		*slash = 0;
	return 0;
}

int clusters_model(const char *dir, char *out, size_t cap)
{
	char ready[RUNDIR_PATH_MAX];
	out[0] = 0;
	int rc = rundir_path(dir, "ready", ready, sizeof ready);
	if (rc)
		return rc;
	FILE *f = fopen(ready, "r");
	if (!f)
		return err_set(ERR_NOTFOUND, "%s: not ready", dir);
	if (!fgets(out, (int)cap, f))
		out[0] = 0;
	fclose(f);
	out[strcspn(out, "\n")] = 0;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct cluster_info *)a)->name, ((const struct cluster_info *)b)->name);
}

int clusters_list(struct cluster_info **out, size_t *n)
{
	char base[RUNDIR_PATH_MAX];
	*out = NULL;
	*n = 0;
	int rc = clusters_base(base, sizeof base);
	if (rc)
		return rc;
	DIR *d = opendir(base);
	if (!d)
		return errno == ENOENT ? 0 : err_set(ERR_IO, "%s: %s", base, strerror(errno));
	struct dirent *e;
	size_t cap = 0;
	while ((e = readdir(d))) {
		if (!rundir_name_valid(e->d_name))
			continue;
		char dir[RUNDIR_PATH_MAX];
		pid_t pid = 0;
		if (rundir_resolve(e->d_name, dir, sizeof dir) || rundir_pid_read(dir, &pid) || pid <= 0)
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 8;
			struct cluster_info *p = realloc(*out, cap * sizeof **out);
			if (!p) {
				closedir(d);
				free(*out);
				*out = NULL;
				*n = 0;
				return err_set(ERR_NOMEM, "out of memory");
			}
			*out = p;
		}
		struct cluster_info *c = &(*out)[(*n)++];
		memset(c, 0, sizeof *c);
		memcpy(c->name, e->d_name, strlen(e->d_name) + 1); /* valid: <= RUNDIR_NAME_MAX */
		snprintf(c->dir, sizeof c->dir, "%s", dir);
		c->pid = pid;
		clusters_model(dir, c->model, sizeof c->model);
	}
	closedir(d);
	if (*n)
		qsort(*out, *n, sizeof **out, by_name);
	return 0;
}
