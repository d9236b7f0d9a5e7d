/* rundir: runtime directory resolution, creation and checks, pid file. */
#include "ipc/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"

int rundir_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n < 1 || n > RUNDIR_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

static int base_dir(char *out, size_t cap)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;
	if (xdg && *xdg) {
		if (xdg[0] != '/')
			return err_set(ERR_INVAL, "rundir: XDG_RUNTIME_DIR '%s' is not absolute", xdg);
		n = snprintf(out, cap, "%s/unicorn", xdg);
	} else {
		n = snprintf(out, cap, "/tmp/unicorn-%u", (unsigned)geteuid());
	}
	if (n < 0 || (size_t)n >= cap)
		return err_set(ERR_RANGE, "rundir: base directory path too long");
	return 0;
}

int rundir_resolve(const char *name, char *out, size_t cap)
{
	if (!name)
		name = RUNDIR_DEFAULT_NAME;
	if (!rundir_name_valid(name))
		return err_set(ERR_INVAL, "rundir: name '%s': must be 1-%d characters of A-Z a-z 0-9 _ -",
			       name, RUNDIR_NAME_MAX);
	char base[RUNDIR_PATH_MAX];
	int rc = base_dir(base, sizeof base);
	if (rc)
		return rc;
	int n = snprintf(out, cap, "%s/%s", base, name);
	/* Leave room for the longest file name inside (coordinator.ipc). */
	if (n < 0 || (size_t)n >= cap || (size_t)n + 1 + sizeof RUNDIR_COORDINATOR > RUNDIR_PATH_MAX)
		return err_set(ERR_RANGE, "rundir: %s/%s: too long for a unix socket path", base, name);
	return 0;
}

int rundir_check(const char *dir)
{
	struct stat st;
	if (lstat(dir, &st) < 0)
		return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "rundir: %s: %s", dir,
			       strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return err_set(ERR_INVAL, "rundir: %s: not a directory (a symlink or file is refused)", dir);
	if (st.st_uid != geteuid())
		return err_set(ERR_INVAL, "rundir: %s: owned by uid %u, not us (%u): refused", dir,
			       (unsigned)st.st_uid, (unsigned)geteuid());
	if ((st.st_mode & 07777) != 0700)
		return err_set(ERR_INVAL, "rundir: %s: mode %04o, must be 0700: refused (chmod 700 it)", dir,
			       (unsigned)(st.st_mode & 07777));
	return 0;
}

static int make_one(const char *dir)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return err_set(ERR_IO, "rundir: mkdir %s: %s", dir, strerror(errno));
	return rundir_check(dir);
}

int rundir_create(const char *dir)
{
	char parent[RUNDIR_PATH_MAX];
	if (!dir || dir[0] != '/' || strlen(dir) >= sizeof parent)
		return err_set(ERR_INVAL, "rundir: '%s': not an absolute path that fits", dir ? dir : "");
	snprintf(parent, sizeof parent, "%s", dir);
	char *slash = strrchr(parent, '/');
	int rc;
	if (slash && slash != parent) {
		*slash = 0;
		/* Our own level ($XDG_RUNTIME_DIR/unicorn or /tmp/unicorn-UID) must
		 * be ours and 0700 too, or another user could swap NAME under us.
		 * A custom --rundir elsewhere only needs its parent to exist. */
		char base[RUNDIR_PATH_MAX];
		if (base_dir(base, sizeof base) == 0 && !strcmp(base, parent)) {
			if ((rc = make_one(parent)))
				return rc;
		}
	}
	return make_one(dir);
}

void rundir_log_hint(const char *dir, char *out, size_t cap)
{
	char path[RUNDIR_PATH_MAX];
	if (dir && rundir_path(dir, RUNDIR_LOG, path, sizeof path) == 0 && access(path, R_OK) == 0)
		snprintf(out, cap, "the cluster log %s", path);
	else
		snprintf(out, cap, "the output of unicorn-up (a cluster started with -d logs to %s/%s)",
			 dir ? dir : "RUNDIR", RUNDIR_LOG);
}

int rundir_path(const char *dir, const char *file, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s", dir, file);
	if (n < 0 || (size_t)n >= cap || (size_t)n >= RUNDIR_PATH_MAX)
		return err_set(ERR_RANGE, "rundir: %s/%s: longer than a unix socket path (%d)", dir, file,
			       RUNDIR_PATH_MAX - 1);
	return 0;
}

int rundir_url(const char *dir, const char *file, char *out, size_t cap)
{
	char path[RUNDIR_PATH_MAX];
	int rc = rundir_path(dir, file, path, sizeof path);
	if (rc)
		return rc;
	int n = snprintf(out, cap, "ipc://%s", path);
	if (n < 0 || (size_t)n >= cap)
		return err_set(ERR_RANGE, "rundir: url buffer too small");
	return 0;
}

int rundir_pid_read(const char *dir, pid_t *pid)
{
	*pid = 0;
	char path[RUNDIR_PATH_MAX], buf[32];
	int rc = rundir_path(dir, RUNDIR_PIDFILE, path, sizeof path);
	if (rc)
		return rc;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "rundir: %s: %s", path,
			       strerror(errno));
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return err_set(ERR_INVAL, "rundir: %s: empty", path);
	buf[n] = 0;
	char *end;
	errno = 0;
	long v = strtol(buf, &end, 10);
	if (errno || end == buf || (*end && *end != '\n') || v <= 0 || v > 0x3fffffff)
		return err_set(ERR_INVAL, "rundir: %s: not a pid", path);
	if (kill((pid_t)v, 0) == 0 || errno == EPERM)
		*pid = (pid_t)v;
	return 0;
}

int rundir_pid_write(const char *dir)
{
	pid_t other;
	int rc = rundir_pid_read(dir, &other);
	if (rc == 0 && other && other != getpid())
		return err_set(ERR_STATE, "rundir: %s: cluster already running (supervisor pid %d)", dir,
			       (int)other);
	char path[RUNDIR_PATH_MAX], tmp[RUNDIR_PATH_MAX + 16];
	if ((rc = rundir_path(dir, RUNDIR_PIDFILE, path, sizeof path)))
		return rc;
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return err_set(ERR_IO, "rundir: %s: %s", tmp, strerror(errno));
	char buf[32];
	int n = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
	int ok = write(fd, buf, (size_t)n) == n;
	ok = !close(fd) && ok;
	if (!ok || rename(tmp, path) < 0) {
		unlink(tmp);
		return err_set(ERR_IO, "rundir: %s: write: %s", path, strerror(errno));
	}
	return 0;
}

void rundir_pid_remove(const char *dir)
{
	pid_t pid;
	char path[RUNDIR_PATH_MAX];
	if (rundir_pid_read(dir, &pid) == 0 && pid == getpid() &&
	    rundir_path(dir, RUNDIR_PIDFILE, path, sizeof path) == 0)
		unlink(path);
}
