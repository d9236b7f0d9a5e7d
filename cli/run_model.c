/* run_model: see run_model.h. */
#include "cli/run_model.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/clusters.h"
#include "common/exe_path.h"
#include "common/err.h"
#include "hub/hub.h"
#include "hub/store.h"

static bool ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), k = strlen(suf);
	return n >= k && !strcasecmp(s + n - k, suf);
}

bool run_model_arg(const char *arg)
{
	struct stat sb;
	if (!arg || !*arg)
		return false;
	if (stat(arg, &sb) == 0) {
		if (S_ISREG(sb.st_mode))
			return ends_with(arg, ".gguf");
		if (S_ISDIR(sb.st_mode)) {
			char cfg[PATH_MAX];
			return snprintf(cfg, sizeof cfg, "%s/config.json", arg) < (int)sizeof cfg &&
			       access(cfg, F_OK) == 0;
		}
		return false;
	}
	struct hub_ref r;
	return arg[0] != '/' && arg[0] != '.' && !strpbrk(arg, " \t\n") && hub_ref_parse(arg, &r) == 0;
}

void run_model_name(const char *model, char *out, size_t cap)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%s", model);
	size_t n = strlen(tmp);
	while (n > 1 && tmp[n - 1] == '/')
		tmp[--n] = 0;
	if (ends_with(tmp, ".gguf"))
		tmp[n - 5] = 0;
	const char *b = strrchr(tmp, '/');
	b = b ? b + 1 : tmp;
	size_t k = 0;
	for (; *b && k + 1 < cap && k < RUNDIR_NAME_MAX; b++) {
		char c = *b;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			  c == '_' || c == '-';
		out[k++] = ok ? c : '-';
	}
	out[k] = 0;
	if (!k || !rundir_name_valid(out))
		snprintf(out, cap, "model");
}

/* The absolute path the cluster would serve, or "" when the store does not
 * have the repo yet (unicorn-up pulls it). */
static int model_path(const char *model, char *out, size_t cap)
{
	struct stat sb;
	out[0] = 0;
	if (stat(model, &sb) == 0) {
		char rp[PATH_MAX];
		if (!realpath(model, rp))
			return err_set(ERR_IO, "%s: %s", model, strerror(errno));
		if (snprintf(out, cap, "%s", rp) >= (int)cap)
			return err_set(ERR_RANGE, "%s: path too long", rp);
		return 0;
	}
	struct hub_ref r;
	int rc = hub_ref_parse(model, &r);
	if (rc)
		return rc;
	char store[PATH_MAX], rp[PATH_MAX];
	struct store_entry e;
	if ((rc = store_dir(store, sizeof store)))
		return rc;
	rc = store_find(store, &r, &e);
	if (rc == ERR_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (realpath(e.path, rp) && snprintf(out, cap, "%s", rp) < (int)cap)
		return 0;
	return err_set(ERR_IO, "%s: %s", e.path, strerror(errno));
}

/* unicorn-up next to our own executable. */
static int up_path(char *out, size_t cap)
{
	return exe_sibling("unicorn-up", out, cap);
}

static int start(const char *model, const char *name)
{
	char up[PATH_MAX];
	int rc = up_path(up, sizeof up);
	if (rc)
		return rc;
	fprintf(stderr, "unicorn run: starting cluster '%s' for %s (stop it with: unicorn down --name %s)\n",
		name, model, name);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0)
		return err_set(ERR_IO, "fork: %s", strerror(errno));
	if (pid == 0) {
		/* its progress goes to our stderr: stdout is the reply's */
		dup2(STDERR_FILENO, STDOUT_FILENO);
		execl(up, up, "--model", model, "--name", name, "-d", (char *)NULL);
		fprintf(stderr, "unicorn run: %s: %s\n", up, strerror(errno));
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return err_set(ERR_IO, "waitpid: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return err_set(ERR_STATE, "unicorn-up --model %s --name %s -d failed (exit status %d; "
			       "its message is above)", model, name, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return 0;
}

int run_model_cluster(const char *model, const char *name, char *rundir_out, size_t cap)
{
	char path[PATH_MAX];
	int rc = model_path(model, path, sizeof path);
	if (rc)
		return rc;
	struct cluster_info *cl;
	size_t n;
	if ((rc = clusters_list(&cl, &n)))
		return rc;
	/* --name N: that cluster, if it runs, must serve this model */
	if (name) {
		if (!rundir_name_valid(name)) {
			free(cl);
			return err_set(ERR_INVAL, "--name '%s': 1-%d characters of A-Z a-z 0-9 _ -", name,
				       RUNDIR_NAME_MAX);
		}
		for (size_t i = 0; i < n; i++)
			if (!strcmp(cl[i].name, name)) {
				bool same = *path && !strcmp(cl[i].model, path);
				rc = same ? 0 : err_set(ERR_STATE, "cluster '%s' serves %s, not %s (another "
							"--name, or unicorn down --name %s first)", name,
							*cl[i].model ? cl[i].model : "a model still starting",
							model, name);
				if (!rc && snprintf(rundir_out, cap, "%s", cl[i].dir) >= (int)cap)
					rc = err_set(ERR_RANGE, "path too long");
				free(cl);
				return rc;
			}
		free(cl);
		if ((rc = start(*path ? path : model, name)))
			return rc;
		return rundir_resolve(name, rundir_out, cap);
	}
	/* a running cluster that serves it */
	for (size_t i = 0; *path && i < n; i++)
		if (!strcmp(cl[i].model, path)) {
			snprintf(rundir_out, cap, "%s", cl[i].dir);
			free(cl);
			return 0;
		}
	/* a free name: the model's, then NAME-2 .. NAME-9 */
	char base[RUNDIR_NAME_MAX + 1], pick[RUNDIR_NAME_MAX + 1];
	run_model_name(model, base, sizeof base);
	snprintf(pick, sizeof pick, "%s", base);
	for (int k = 2;; k++) {
		bool taken = false;
		for (size_t i = 0; i < n; i++)
			taken |= !strcmp(cl[i].name, pick);
		if (!taken)
			break;
		if (k > 9) {
			free(cl);
			return err_set(ERR_STATE, "clusters '%s' to '%s-9' all run other models; give --name",
				       base, base);
		}
		snprintf(pick, sizeof pick, "%.29s-%d", base, k);
	}
	free(cl);
	if ((rc = start(*path ? path : model, pick)))
		return rc;
	return rundir_resolve(pick, rundir_out, cap);
}
