#include "common/readfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"

int readfile(const char *path, size_t cap, char **text, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "%s: open: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return err_set(ERR_IO, "%s: not a readable regular file", path);
	}
	if ((uint64_t)st.st_size > cap) {
		close(fd);
		return err_set(ERR_RANGE, "%s: %lld bytes (at most %zu)", path, (long long)st.st_size, cap);
	}
	size_t n = (size_t)st.st_size, got = 0;
	char *buf = malloc(n + 1);
	if (!buf) {
		close(fd);
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	}
	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) { /* 0: the file shrank under us */
			int e = r < 0 ? errno : EIO;
			close(fd);
			free(buf);
			return err_set(ERR_IO, "%s: read: %s", path, strerror(e));
		}
		got += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	*text = buf;
	*len = n;
	return 0;
}
