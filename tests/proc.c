#include "tests/proc.h"
#include "ipc/rundir.h"

#include <string.h>
#include "tests/golden.h"

#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *proc_bin_dir(void)
{
	const char *b = getenv("UNICORN_BIN");
	return b && *b ? b : "bin";
}

pid_t proc_spawn(char *const argv[], const char *errfile)
{
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0)
			dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

int proc_wait_ms(pid_t pid, int ms)
{
	for (int t = 0; t < ms; t += 10) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		struct timespec ts = { 0, 10000000L };
		nanosleep(&ts, NULL);
	}
	return -1;
}

const char *proc_bin_dir_or_skip(void)
{
	const char *b = getenv("UNICORN_BIN");
	if (!b || !*b)
		cr_skip_test("UNICORN_BIN not set (run through `make test`)");
	return b;
}

double proc_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int proc_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	socklen_t l = sizeof a;
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	close(fd);
	return ntohs(a.sin_port);
}

int proc_cluster_lock(void)
{
	int fd = open("/tmp/unicorn-cluster-tests.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(flock(fd, LOCK_EX), 0);
	return fd;
}

void proc_tail(const char *path, int lines)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "tail -n %d '%s' >&2", lines, path);
	if (system(cmd)) {
		/* nothing to add: this only decorates a failure */
	}
}

bool proc_log_has(const char *path, const char *what)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	bool found = false;
	while (f && !found && fgets(line, sizeof line, f))
		found = strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return found;
}

void proc_cluster_start(struct proc_cluster *c, const char *prefix, const char *const *extra)
{
	const char *bin = proc_bin_dir_or_skip();
	memset(c, 0, sizeof *c);
	c->lock_fd = proc_cluster_lock();
	snprintf(c->tmp, sizeof c->tmp, "/tmp/unicorn-%s-XXXXXX", prefix);
	cr_assert_not_null(mkdtemp(c->tmp));
	snprintf(c->name, sizeof c->name, "%.8s%d", prefix, (int)getpid());
	snprintf(c->dir, sizeof c->dir, "%s/unicorn/%s", c->tmp, c->name);
	snprintf(c->log, sizeof c->log, "%s/up.log", c->tmp);
	setenv("XDG_RUNTIME_DIR", c->tmp, 1);
	unsetenv("UNICORN_API_KEY");
	c->port = proc_free_port();
	char up[512], model[512], port[16];
	snprintf(up, sizeof up, "%s/unicorn-up", bin);
	snprintf(model, sizeof model, "%s/golden/gemma3-tiny-q4_0.gguf", golden_shared_dir());
	snprintf(port, sizeof port, "%d", c->port);
	char *argv[7 + 8 + 1] = { up, "--model", model, "--name", c->name, "--port", port };
	int n = 7;
	for (int i = 0; extra && extra[i]; i++) {
		cr_assert_lt(i, 8, "at most 8 extra unicorn-up arguments");
		argv[n++] = (char *)extra[i];
	}
	argv[n] = NULL;
	c->sup = proc_spawn(argv, c->log);
	cr_assert_gt(c->sup, 0);
	/* ready: the coordinator's file, and the API process's unless HTTP is off */
	bool http = true;
	for (int i = 0; extra && extra[i]; i++)
		http &= strcmp(extra[i], "--no-http") != 0;
	char ready[256], api_ready[256];
	snprintf(ready, sizeof ready, "%s/ready", c->dir);
	snprintf(api_ready, sizeof api_ready, "%s/" RUNDIR_API_READY, c->dir);
	double end = proc_now_s() + 90;
	while (access(ready, F_OK) || (http && access(api_ready, F_OK))) {
		int st;
		if (waitpid(c->sup, &st, WNOHANG) == c->sup) {
			proc_tail(c->log, 40);
			cr_assert_fail("unicorn-up exited (status %d) before ready", st);
		}
		if (proc_now_s() > end) {
			proc_tail(c->log, 40);
			cr_assert_fail("cluster not ready within 90 s");
		}
		usleep(50 * 1000);
	}
}

void proc_cluster_stop(struct proc_cluster *c)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s/unicorn down --name %s >/dev/null", proc_bin_dir_or_skip(), c->name);
	cr_assert_eq(system(cmd), 0, "unicorn down failed");
	int ws;
	double end = proc_now_s() + 15;
	pid_t r;
	while ((r = waitpid(c->sup, &ws, WNOHANG)) == 0 && proc_now_s() < end)
		usleep(20 * 1000);
	cr_assert_eq(r, c->sup, "unicorn-up still running");
	snprintf(cmd, sizeof cmd, "rm -rf %s", c->tmp);
	if (system(cmd)) {}
	close(c->lock_fd);
}

/* pid's parent and state from /proc/PID/stat (the name may hold spaces and
 * parentheses: parse after the last ')'); false if it is gone. */
static bool stat_of(pid_t pid, int *ppid, char *state)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *rp = strrchr(buf, ')');
	return rp && sscanf(rp + 1, " %c %d", state, ppid) == 2;
}

int proc_children(pid_t sup, pid_t *out, int cap)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while (n < cap && (e = readdir(d))) {
		pid_t pid = (pid_t)atoi(e->d_name);
		int ppid;
		char state;
		if (pid > 0 && stat_of(pid, &ppid, &state) && ppid == sup && state != 'Z')
			out[n++] = pid;
	}
	closedir(d);
	return n;
}

pid_t proc_child_of(pid_t sup, const char *exe)
{
	pid_t kids[64];
	int n = proc_children(sup, kids, 64);
	for (int i = 0; i < n; i++) {
		char path[64], cmd[512];
		snprintf(path, sizeof path, "/proc/%d/cmdline", (int)kids[i]);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t k = fread(cmd, 1, sizeof cmd - 1, f);
		fclose(f);
		cmd[k] = 0;
		const char *base = strrchr(cmd, '/');
		if (!strcmp(base ? base + 1 : cmd, exe))
			return kids[i];
	}
	return 0;
}

int proc_sh(const char *cmd, char *out, size_t cap)
{
	char full[1024];
	snprintf(full, sizeof full, "%s 2>&1", cmd);
	FILE *f = popen(full, "r");
	cr_assert_not_null(f);
	size_t n = fread(out, 1, cap - 1, f);
	out[n] = 0;
	int st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
