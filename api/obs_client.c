/* obs_client: see obs_client.h. */
#include "api/obs_client.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "coordinator/obs_server.h"
#include "ipc/bus.h"
#include "ipc/rundir.h"

#define OBS_TIMEOUT_MS 5000 /* a trace export of a busy minute takes a while */

int obs_client_fetch(void *rundir, const char *what, char **body, size_t *len)
{
	*body = NULL;
	*len = 0;
	char url[BUS_URL_MAX];
	struct bus *b = NULL;
	int rc = rundir_url(rundir, RUNDIR_OBS, url, sizeof url);
	if (rc || (rc = bus_dial(url, BUS_REQ, &b)) || (rc = bus_set_recv_max(b, OBS_MAX_ANSWER))) {
		bus_close(b);
		return rc;
	}
	void *rep = NULL;
	size_t n = 0;
	rc = bus_call_bytes(b, what, strlen(what), OBS_TIMEOUT_MS, &rep, &n);
	bus_close(b);
	if (rc)
		return rc;
	char *a = rep, *nl = memchr(a, '\n', n);
	if (!nl || nl - a != 3) {
		free(a);
		return err_set(ERR_INVAL, "obs: malformed answer from the coordinator");
	}
	if (memcmp(a, "200", 3)) {
		rc = err_set(ERR_NOTFOUND, "obs: %.*s", (int)(n - 4 < 200 ? n - 4 : 200), nl + 1);
		free(a);
		return rc;
	}
	size_t k = n - 4;
	memmove(a, nl + 1, k + 1); /* the NUL bus_call_bytes added comes along */
	*body = a;
	*len = k;
	return 0;
}
