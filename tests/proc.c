#include "tests/proc.h"

#include <criterion/criterion.h>
#include <arpa/inet.h>
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
