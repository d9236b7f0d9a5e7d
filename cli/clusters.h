/* clusters: the clusters running under this user's runtime directory
 * ($XDG_RUNTIME_DIR/unicorn/NAME or /tmp/unicorn-UID/NAME, ipc/rundir.h), for
 * `unicorn ps` and `unicorn run MODEL`. */
#ifndef UNICORN_CLI_CLUSTERS_H
#define UNICORN_CLI_CLUSTERS_H

#include <stddef.h>
#include <sys/types.h>

#include "ipc/rundir.h"

struct cluster_info {
	char name[RUNDIR_NAME_MAX + 1];
	char dir[RUNDIR_PATH_MAX];
	pid_t pid;            /* the supervisor (alive when listed) */
	char model[4096];     /* the model path from DIR/ready; "" while it starts */
};

/* The directory that holds the clusters' runtime directories. */
int clusters_base(char *out, size_t cap);
/* The clusters whose supervisor is alive, sorted by name, into a malloc'ed
 * array (*n may be 0; free(*out)). No base directory is no cluster. */
int clusters_list(struct cluster_info **out, size_t *n);
/* The model path a cluster serves (first line of DIR/ready): 0, or
 * ERR_NOTFOUND while it is not ready. */
int clusters_model(const char *dir, char *out, size_t cap);

#endif
