/* obs_client: the API process's side of RUNDIR/obs.ipc
 * (coordinator/obs_server.h): metrics and traces live in the coordinator,
 * the API serves them over HTTP (api/dashboard.h). */
#ifndef UNICORN_OBS_CLIENT_H
#define UNICORN_OBS_CLIENT_H

#include <stddef.h>

/* Ask the coordinator of the cluster in rundir (arg) for what ("metrics",
 * "metrics.json", "trace SINCE_NS"): 0 and a malloc'ed NUL-terminated body,
 * ERR_IO/ERR_TIMEOUT when the coordinator does not answer (restarting),
 * ERR_NOTFOUND when it answers that it has nothing (503). A
 * dashboard_source_fn. */
int obs_client_fetch(void *rundir, const char *what, char **body, size_t *len);

#endif
