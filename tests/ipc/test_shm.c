/* shm + fdpass + rundir: regions created, passed to another process, imported,
 * size/seal checks, range checks, chunked fd passing without leaks, uid check,
 * runtime directory rules. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "ipc/fdpass.h"
#include "ipc/rundir.h"
#include "ipc/shm.h"

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n++;
	closedir(d);
	return n;
}

Test(shm, create_import_roundtrip)
{
	struct shm_region r, i;
	cr_assert_eq(shm_create("test", 10000, &r), 0, "%s", err_msg());
	cr_assert_eq(r.size, 12288); /* page-rounded */
	cr_assert(r.path == SHM_PATH_MEMFD || r.path == SHM_PATH_UDMABUF);
	cr_assert(strlen(r.why) > 0);
	printf("shm: path %s (%s)\n", shm_path_name(r.path), r.why);
	memset(r.addr, 0x5a, r.size);
	cr_assert_eq(shm_import(dup(r.fd), r.size, false, &i), 0, "%s", err_msg());
	cr_assert_eq(((uint8_t *)i.addr)[12287], 0x5a);
	/* sealed: cannot shrink or grow */
	cr_assert_neq(ftruncate(r.fd, 4096), 0);
	cr_assert_neq(ftruncate(r.fd, 1 << 20), 0);
	shm_destroy(&i);
	shm_destroy(&r);
	cr_assert_eq(r.fd, -1);
}

Test(shm, import_rejects)
{
	struct shm_region r, i;
	int before = count_fds();
	cr_assert_eq(shm_create("t2", 8192, &r), 0);
	cr_assert_eq(shm_import(dup(r.fd), 4096, false, &i), ERR_RANGE, "size mismatch accepted");
	cr_assert_eq(shm_import(dup(r.fd), 16384, false, &i), ERR_RANGE);
	/* an unsealed memfd could be truncated under us */
	int u = memfd_create("unsealed", MFD_CLOEXEC);
	cr_assert_eq(ftruncate(u, 4096), 0);
	cr_assert_eq(shm_import(u, 4096, false, &i), ERR_INVAL);
	/* read-only import cannot be written */
	cr_assert_eq(shm_import(dup(r.fd), 8192, false, &i), 0);
	shm_destroy(&i);
	shm_destroy(&r);
	cr_assert_eq(count_fds(), before, "fd leak");
	cr_assert_eq(shm_create("big", SHM_MAX_REGION + 1, &r), ERR_RANGE);
	cr_assert_eq(shm_create("zero", 0, &r), ERR_RANGE);
}

Test(shm, check_range_overflow_safe)
{
	struct shm_region r;
	cr_assert_eq(shm_create("t3", 4096, &r), 0);
	cr_assert_eq(shm_check_range(&r, 0, 4096), 0);
	cr_assert_eq(shm_check_range(&r, 4096, 0), 0);
	cr_assert_eq(shm_check_range(&r, 4095, 2), ERR_RANGE);
	cr_assert_eq(shm_check_range(&r, 4097, 0), ERR_RANGE);
	cr_assert_eq(shm_check_range(&r, 8, UINT64_MAX - 4), ERR_RANGE);
	cr_assert_eq(shm_check_range(&r, UINT64_MAX, 2), ERR_RANGE);
	cr_assert_null(shm_ptr(&r, 4000, 100));
	cr_assert_not_null(shm_ptr(&r, 4000, 96));
	shm_destroy(&r);
}

static char sdir[64], spath[128];

static void mksock(void)
{
	snprintf(sdir, sizeof sdir, "/tmp/unicorn-fdp-XXXXXX");
	cr_assert_not_null(mkdtemp(sdir));
	snprintf(spath, sizeof spath, "%s/loader.sock", sdir);
}

#define NREG 300 /* > 253: two chunks */

Test(fdpass, regions_between_processes_chunked)
{
	mksock();
	int lfd;
	cr_assert_eq(fdpass_listen(spath, &lfd), 0, "%s", err_msg());
	pid_t pid = fork();
	if (pid == 0) {
		/* worker: connect, receive NREG regions, verify each, no leaks */
		int base = count_fds(), s;
		static int fds[NREG];
		char data[64];
		size_t len, n;
		uint32_t tag;
		if (fdpass_connect(spath, &s))
			_exit(3);
		if (fdpass_recv(s, &tag, data, sizeof data, &len, fds, NREG, &n) || tag != 7 || n != NREG ||
		    len != 5 || memcmp(data, "hello", 5))
			_exit(4);
		for (int i = 0; i < NREG; i++) {
			struct shm_region r;
			if (shm_import(fds[i], 4096, false, &r) || ((uint8_t *)r.addr)[0] != (uint8_t)i)
				_exit(5);
			shm_destroy(&r);
		}
		/* a second transfer with too small an fd array: error, nothing leaks */
		if (fdpass_recv(s, &tag, data, sizeof data, &len, fds, 10, &n) != ERR_RANGE)
			_exit(6);
		close(s);
		_exit(count_fds() == base ? 0 : 7);
	}
	int c;
	cr_assert_eq(fdpass_accept(lfd, 5000, &c), 0, "%s", err_msg());
	static struct shm_region regs[NREG];
	static int fds[NREG];
	for (int i = 0; i < NREG; i++) {
		cr_assert_eq(shm_create("r", 4096, &regs[i]), 0, "%s", err_msg());
		((uint8_t *)regs[i].addr)[0] = (uint8_t)i;
		fds[i] = regs[i].fd;
	}
	cr_assert_eq(fdpass_send(c, 7, "hello", 5, fds, NREG), 0, "%s", err_msg());
	cr_assert_eq(fdpass_send(c, 8, NULL, 0, fds, 20), 0, "%s", err_msg());
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker status %d", WEXITSTATUS(st));
	for (int i = 0; i < NREG; i++)
		shm_destroy(&regs[i]);
	close(c);
	close(lfd);
	unlink(spath);
	rmdir(sdir);
}

Test(fdpass, bad_packets_and_timeout_leak_nothing)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	fdpass_set_timeout(sv[1], 100);
	int base = count_fds();
	int fds[4];
	size_t len, n;
	uint32_t tag;
	char data[16];
	cr_assert_eq(fdpass_recv(sv[1], &tag, data, sizeof data, &len, fds, 4, &n), ERR_TIMEOUT);
	/* garbage packet carrying an fd: rejected and the fd closed */
	int f = memfd_create("x", MFD_CLOEXEC);
	char junk[24] = "not a header at all....";
	struct iovec iov = { junk, sizeof junk };
	union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; } u;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
			     .msg_controllen = sizeof u.b };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &f, sizeof f);
	cr_assert_eq(sendmsg(sv[0], &mh, 0), (ssize_t)sizeof junk);
	close(f);
	int before = count_fds();
	cr_assert_eq(fdpass_recv(sv[1], &tag, data, sizeof data, &len, fds, 4, &n), ERR_INVAL);
	cr_assert_eq(count_fds(), before, "received fd leaked");
	/* data larger than the buffer */
	cr_assert_eq(fdpass_send(sv[0], 1, "0123456789abcdefXYZ", 19, NULL, 0), 0);
	cr_assert_eq(fdpass_recv(sv[1], &tag, data, sizeof data, &len, fds, 4, &n), ERR_RANGE);
	close(sv[0]);
	cr_assert_eq(fdpass_recv(sv[1], &tag, data, sizeof data, &len, fds, 4, &n), ERR_IO);
	close(sv[1]);
	cr_assert_eq(count_fds(), base - 2);
}

Test(fdpass, peer_uid_checked)
{
	/* A different uid needs root to fake; here: our own peer passes, and a
	 * connect to a missing socket fails cleanly. (The refusal path is the
	 * SO_PEERCRED comparison in check_peer.) */
	mksock();
	int s;
	cr_assert_eq(fdpass_connect(spath, &s), ERR_NOTFOUND);
	if (geteuid() == 0) {
		int lfd;
		cr_assert_eq(fdpass_listen(spath, &lfd), 0);
		chmod(sdir, 0755); /* let the other uid reach the socket */
		chmod(spath, 0666);
		pid_t pid = fork();
		if (pid == 0) {
			if (setuid(65534))
				_exit(9);
			int t;
			_exit(fdpass_connect(spath, &t) == ERR_INVAL ? 0 : 1); /* server is root: refused */
		}
		int c;
		int rc = fdpass_accept(lfd, 2000, &c);
		cr_assert_eq(rc, ERR_INVAL, "peer of another uid accepted");
		int st;
		waitpid(pid, &st, 0);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		close(lfd);
	}
	unlink(spath);
	rmdir(sdir);
}

Test(rundir, resolve_create_check)
{
	char base[64], d[128], p[128];
	snprintf(base, sizeof base, "/tmp/unicorn-rd-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	setenv("XDG_RUNTIME_DIR", base, 1);
	cr_assert_eq(rundir_resolve(NULL, d, sizeof d), 0);
	snprintf(p, sizeof p, "%s/unicorn/default", base);
	cr_assert_str_eq(d, p);
	cr_assert_eq(rundir_resolve("bad/name", d, sizeof d), ERR_INVAL);
	cr_assert_eq(rundir_resolve("", d, sizeof d), ERR_INVAL);
	cr_assert_eq(rundir_resolve("a23456789012345678901234567890123", d, sizeof d), ERR_INVAL);
	cr_assert_eq(rundir_resolve("my-model_2", d, sizeof d), 0);
	cr_assert_eq(rundir_create(d), 0, "%s", err_msg());
	struct stat st;
	cr_assert_eq(stat(d, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700);
	cr_assert_eq(rundir_create(d), 0, "existing dir: %s", err_msg());
	chmod(d, 0755);
	cr_assert_eq(rundir_check(d), ERR_INVAL);
	cr_assert(strstr(err_msg(), "0755"), "%s", err_msg());
	chmod(d, 0700);
	cr_assert_eq(rundir_url(d, RUNDIR_GPU, p, sizeof p), 0);
	cr_assert(!strncmp(p, "ipc:///", 7) && strstr(p, "/gpu.ipc"));
	/* pid file */
	pid_t pid;
	cr_assert_eq(rundir_pid_read(d, &pid), ERR_NOTFOUND);
	cr_assert_eq(rundir_pid_write(d), 0, "%s", err_msg());
	cr_assert_eq(rundir_pid_read(d, &pid), 0);
	cr_assert_eq(pid, getpid());
	rundir_pid_remove(d);
	cr_assert_eq(rundir_pid_read(d, &pid), ERR_NOTFOUND);
	unsetenv("XDG_RUNTIME_DIR");
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", base);
	(void)!system(cmd);
}
