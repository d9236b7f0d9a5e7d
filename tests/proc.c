#include "tests/proc.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
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
