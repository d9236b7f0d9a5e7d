/* rundir: the cluster's runtime directory (docs/cluster.md).
 *
 * $XDG_RUNTIME_DIR/unicorn/NAME when XDG_RUNTIME_DIR is set, else
 * /tmp/unicorn-UID/NAME. Created mode 0700; an existing directory (and its
 * parent) must be a real directory (not a symlink) owned by us with mode 0700,
 * otherwise it is refused: other users must not be able to plant sockets. */
#ifndef UNICORN_RUNDIR_H
#define UNICORN_RUNDIR_H

#include <sys/types.h>

#define RUNDIR_NAME_MAX 32
#define RUNDIR_PATH_MAX 108      /* sockets must fit sun_path */
#define RUNDIR_DEFAULT_NAME "default"

/* Fixed file names inside the directory. */
#define RUNDIR_PIDFILE "supervisor.pid"
#define RUNDIR_CONTROL "control.ipc"
#define RUNDIR_LOADER_SOCK "loader.sock"
#define RUNDIR_COORDINATOR "coordinator.ipc"
#define RUNDIR_GPU "gpu.ipc"
#define RUNDIR_NPU "npu.ipc"
#define RUNDIR_LOG "unicorn.log"       /* unicorn-up -d's log (its LOG_FILE) */
#define RUNDIR_SELFCHECK "selfcheck-"  /* + "gpu"/"npu": the first start's self-check digest (gpu_worker/selfcheck.h) */
#define RUNDIR_OBS "obs.ipc"           /* the coordinator's metrics and traces (coordinator/obs_server.h) */
#define RUNDIR_STATUS "status.json"    /* the supervisor's process table, rewritten when it changes or is asked for */
#define RUNDIR_HTTP "http"             /* the API process's URL while it serves HTTP */
#define RUNDIR_API_READY "api-ready"   /* the API process listens (or knows HTTP is off) */
#define RUNDIR_DRAINING "draining"     /* written by unicorn-up when a drain begins (docs/scale.md) */

/* NAME: [A-Za-z0-9_-]{1,32}. */
int rundir_name_valid(const char *name);

/* Resolve the directory of cluster name (NULL: "default") into out[cap]
 * without touching the file system. */
int rundir_resolve(const char *name, char *out, size_t cap);

/* Create (mkdir -p, mode 0700) and verify dir (owner = us, mode 0700, a
 * directory). Also verifies the parent it creates (/tmp/unicorn-UID or
 * $XDG_RUNTIME_DIR/unicorn). */
int rundir_create(const char *dir);
/* Verify only (for processes that join an existing cluster). */
int rundir_check(const char *dir);

/* "DIR/file" into out[cap]; ERR_RANGE if longer than RUNDIR_PATH_MAX-1. */
/* Where a cluster's log is, for an error's "see the log": "the cluster log
 * DIR/unicorn.log" when unicorn-up -d writes one, else unicorn-up's output
 * (a foreground cluster logs to its stderr). Always fills out. */
void rundir_log_hint(const char *dir, char *out, size_t cap);
int rundir_path(const char *dir, const char *file, char *out, size_t cap);
/* "ipc://DIR/file" into out[cap] (path part within RUNDIR_PATH_MAX-1). */
int rundir_url(const char *dir, const char *file, char *out, size_t cap);

/* Write our pid to DIR/supervisor.pid (atomically via rename). ERR_STATE if
 * the file names a live process other than us. */
int rundir_pid_write(const char *dir);
/* Read the pid file: *pid = the pid if that process is alive, else 0.
 * ERR_NOTFOUND if there is no pid file; ERR_INVAL if it is malformed. */
int rundir_pid_read(const char *dir, pid_t *pid);
/* Remove the pid file if it holds our pid. */
void rundir_pid_remove(const char *dir);

#endif
