/* imagefile: pixels through the run directory (imagefile.h). */
#include "ipc/imagefile.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"

void imagefile_hex(const uint8_t digest[MSG_DIGEST], char *hex)
{
	static const char x[] = "0123456789abcdef";
	for (int i = 0; i < MSG_DIGEST; i++) {
		hex[2 * i] = x[digest[i] >> 4];
		hex[2 * i + 1] = x[digest[i] & 15];
	}
	hex[2 * MSG_DIGEST] = 0;
}

int imagefile_path(const char *rundir, const uint8_t digest[MSG_DIGEST], char *out, size_t cap)
{
	char hex[2 * MSG_DIGEST + 1];
	imagefile_hex(digest, hex);
	/* not rundir_path: its limit is a socket's, and these are no sockets */
	int n = snprintf(out, cap, "%s/images/%s", rundir, hex);
	return n < 0 || (size_t)n >= cap ? err_set(ERR_RANGE, "imagefile: run directory path too long") : 0;
}

int imagefile_write(const char *rundir, const uint8_t digest[MSG_DIGEST], const float *px, size_t n)
{
	char dir[IMAGEFILE_PATH_MAX], path[IMAGEFILE_PATH_MAX], tmp[IMAGEFILE_PATH_MAX + 32];
	int rc = imagefile_path(rundir, digest, path, sizeof path);
	if (rc)
		return rc;
	snprintf(dir, sizeof dir, "%s/images", rundir);
	if (mkdir(dir, 0700) && errno != EEXIST)
		return err_set(ERR_IO, "imagefile: mkdir %s: %s", dir, strerror(errno));
	struct stat st;
	if (stat(path, &st) == 0 && (size_t)st.st_size == n * sizeof *px)
	{
		(void)utimensat(AT_FDCWD, path, NULL, 0); /* fresh again for imagefile_trim */
		return 0;
	}
	snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_set(ERR_IO, "imagefile: %s: %s", tmp, strerror(errno));
	const char *p = (const char *)px;
	size_t left = n * sizeof *px;
	while (left) {
		ssize_t w = write(fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = err_set(ERR_IO, "imagefile: write %s: %s", tmp, strerror(errno));
			break;
		}
		p += w;
		left -= (size_t)w;
	}
	if (close(fd) && !rc)
		rc = err_set(ERR_IO, "imagefile: close %s: %s", tmp, strerror(errno));
	if (!rc && rename(tmp, path))
		rc = err_set(ERR_IO, "imagefile: rename %s: %s", path, strerror(errno));
	if (rc)
		unlink(tmp);
	else
		imagefile_trim(dir, IMAGEFILE_MAX);
	return rc;
}

void imagefile_trim(const char *dir, uint32_t keep)
{
	/* the oldest (by mtime) go while more than keep are there */
	for (int round = 0; round < 64; round++) {
		DIR *d = opendir(dir);
		if (!d)
			return;
		struct dirent *de;
		char oldest[IMAGEFILE_PATH_MAX] = "", p[IMAGEFILE_PATH_MAX];
		struct timespec t0 = { 0, 0 };
		uint32_t count = 0;
		while ((de = readdir(d))) {
			if (strlen(de->d_name) != 2 * MSG_DIGEST)
				continue;
			struct stat st;
			if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p || stat(p, &st))
				continue;
			count++;
			if (!oldest[0] || st.st_mtim.tv_sec < t0.tv_sec ||
			    (st.st_mtim.tv_sec == t0.tv_sec && st.st_mtim.tv_nsec < t0.tv_nsec)) {
				t0 = st.st_mtim;
				memcpy(oldest, p, sizeof p);
			}
		}
		closedir(d);
		if (count <= keep || !oldest[0])
			return;
		unlink(oldest);
	}
}

int imagefile_read(const char *rundir, const uint8_t digest[MSG_DIGEST], float *px, size_t n)
{
	char path[IMAGEFILE_PATH_MAX];
	int rc = imagefile_path(rundir, digest, path, sizeof path);
	if (rc)
		return rc;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "imagefile: %s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != (uint64_t)n * sizeof *px) {
		close(fd);
		return err_set(ERR_INVAL, "imagefile: %s: not %zu bytes of pixels", path, n * sizeof *px);
	}
	char *p = (char *)px;
	size_t left = n * sizeof *px;
	while (left) {
		ssize_t r = read(fd, p, left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			close(fd);
			return err_set(ERR_IO, "imagefile: read %s: %s", path, r ? strerror(errno) : "short");
		}
		p += r;
		left -= (size_t)r;
	}
	close(fd);
	return 0;
}
