/* npu_device: probe the XDNA NPU node and locate the attention kernel files.
 * No XRT here (see npu_device.h). */
#include "npu_worker/npu_device.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/err.h"

#define VULKAN_HINT "run the attention stage on the GPU with --attn-backend vulkan"

const char *npu_device_path(const char *path)
{
	if (path && *path)
		return path;
	const char *env = getenv("UNICORN_NPU_DEVICE");
	if (env && *env)
		return env;
	return NPU_DEVICE_DEFAULT;
}

/* Basename of the symlink at sysfs/dev/char/MAJ:MIN/<rel>, or 0 when it cannot
 * be read (no sysfs, no such link): then we cannot tell and do not guess. */
static int sysfs_link_name(unsigned maj, unsigned min, const char *rel, char *out, size_t cap)
{
	const char *root = getenv("UNICORN_NPU_SYSFS");
	if (!root || !*root)
		root = "/sys";
	char link[PATH_MAX], target[PATH_MAX];
	int n = snprintf(link, sizeof link, "%s/dev/char/%u:%u/%s", root, maj, min, rel);
	if (n < 0 || (size_t)n >= sizeof link)
		return 0;
	ssize_t len = readlink(link, target, sizeof target - 1);
	if (len <= 0)
		return 0;
	target[len] = '\0';
	const char *base = strrchr(target, '/');
	base = base ? base + 1 : target;
	if (!*base || strlen(base) >= cap)
		return 0;
	memcpy(out, base, strlen(base) + 1);
	return 1;
}

int npu_device_probe(const char *path, struct npu_device_info *out)
{
	path = npu_device_path(path);
	if (out)
		memset(out, 0, sizeof *out);
	if (strlen(path) >= PATH_MAX)
		return err_set(ERR_INVAL, "npu device path is too long (%zu bytes)", strlen(path));

	struct stat st;
	if (stat(path, &st) != 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return err_set(ERR_DEVICE,
				       "no AMD XDNA NPU found: %s does not exist (looked for the amdxdna "
				       "accel device); " VULKAN_HINT,
				       path);
		if (errno == EACCES)
			return err_set(ERR_DEVICE,
				       "no AMD XDNA NPU usable: permission denied looking up %s; " VULKAN_HINT,
				       path);
		return err_set(ERR_DEVICE, "no AMD XDNA NPU usable: %s: %s; " VULKAN_HINT, path,
			       strerror(errno));
	}
	if (!S_ISCHR(st.st_mode))
		return err_set(ERR_DEVICE,
			       "no AMD XDNA NPU usable: %s is not a character device (expected the "
			       "amdxdna accel node); " VULKAN_HINT,
			       path);

	unsigned maj = major(st.st_rdev), min = minor(st.st_rdev);
	char subsys[64], driver[64] = "unknown";
	if (sysfs_link_name(maj, min, "subsystem", subsys, sizeof subsys) &&
	    strcmp(subsys, "accel") != 0)
		return err_set(ERR_DEVICE,
			       "no AMD XDNA NPU usable: %s is not an amdxdna device (char device "
			       "%u:%u belongs to subsystem '%s', not accel); " VULKAN_HINT,
			       path, maj, min, subsys);
	if (sysfs_link_name(maj, min, "device/driver", driver, sizeof driver) &&
	    strcmp(driver, "amdxdna") != 0)
		return err_set(ERR_DEVICE,
			       "no AMD XDNA NPU usable: %s is not an amdxdna device (bound to driver "
			       "'%s'); " VULKAN_HINT,
			       path, driver);

	/* XRT opens the node read-write; find a permission problem here, where
	 * the message can say what to fix. */
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		if (errno == EACCES || errno == EPERM)
			return err_set(ERR_DEVICE,
				       "no AMD XDNA NPU usable: permission denied opening %s (add the user "
				       "to the group that owns it, usually 'render', or add a udev rule); " VULKAN_HINT,
				       path);
		return err_set(ERR_DEVICE, "no AMD XDNA NPU usable: cannot open %s: %s; " VULKAN_HINT,
			       path, strerror(errno));
	}
	close(fd);

	if (out) {
		memcpy(out->path, path, strlen(path) + 1);
		memcpy(out->driver, driver, strlen(driver) + 1);
		out->major = maj;
		out->minor = min;
	}
	return 0;
}

/* A kernel file must be a non-empty regular file. */
static int check_kernel_file(const char *path, const char *what)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return err_set(ERR_NOTFOUND,
			       "%s: %s missing (%s): the NPU attention kernel is not built; see "
			       "npu_kernels/README.md",
			       path, what, strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_size == 0)
		return err_set(ERR_NOTFOUND,
			       "%s: %s is %s: the NPU attention kernel is not built; see "
			       "npu_kernels/README.md",
			       path, what, S_ISREG(st.st_mode) ? "empty" : "not a regular file");
	return 0;
}

static int pick_file(char *dst, const char *env_name, const char *dir, const char *name)
{
	const char *env = getenv(env_name);
	int n = (env && *env) ? snprintf(dst, PATH_MAX, "%s", env)
			      : snprintf(dst, PATH_MAX, "%s/%s", dir, name);
	if (n < 0 || n >= PATH_MAX)
		return err_set(ERR_RANGE, "%s: NPU kernel path is too long", env && *env ? env_name : dir);
	return 0;
}

int npu_kernel_files_resolve(const char *dir, struct npu_kernel_files *out)
{
	if (!out)
		return err_set(ERR_INVAL, "npu_kernel_files_resolve: out is NULL");
	memset(out, 0, sizeof *out);
	if (!dir || !*dir) {
		dir = getenv("UNICORN_NPU_KERNEL_DIR");
		if (!dir || !*dir)
			dir = NPU_KERNEL_DIR_DEFAULT;
	}
	int rc = pick_file(out->xclbin, "UNICORN_NPU_XCLBIN", dir, NPU_XCLBIN_NAME);
	if (!rc)
		rc = pick_file(out->insts, "UNICORN_NPU_INSTS", dir, NPU_INSTS_NAME);
	if (!rc)
		rc = check_kernel_file(out->xclbin, "xclbin");
	if (!rc)
		rc = check_kernel_file(out->insts, "instruction stream");
	return rc;
}

int npu_insts_load(const char *path, uint32_t **words, size_t *n_words)
{
	if (!path || !words || !n_words)
		return err_set(ERR_INVAL, "npu_insts_load: NULL argument");
	*words = NULL;
	*n_words = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "%s: %s", path, strerror(errno));
	int rc = 0;
	uint32_t *buf = NULL;
	struct stat st;
	if (fstat(fileno(f), &st) != 0) {
		rc = err_set(ERR_IO, "%s: fstat: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size <= 0) {
		rc = err_set(ERR_INVAL, "%s: instruction stream: empty or not a regular file", path);
		goto out;
	}
	if ((uint64_t)st.st_size > NPU_INSTS_MAX_BYTES) {
		rc = err_set(ERR_RANGE, "%s: instruction stream: %lld bytes exceeds %u", path,
			     (long long)st.st_size, NPU_INSTS_MAX_BYTES);
		goto out;
	}
	if (st.st_size % 4 != 0) {
		rc = err_set(ERR_INVAL, "%s: instruction stream: size %lld is not a multiple of 4 "
			     "(expected raw uint32 words)", path, (long long)st.st_size);
		goto out;
	}
	size_t bytes = (size_t)st.st_size;
	buf = malloc(bytes);
	if (!buf) {
		rc = err_set(ERR_NOMEM, "%s: instruction stream: %zu bytes", path, bytes);
		goto out;
	}
	if (fread(buf, 1, bytes, f) != bytes) {
		rc = err_set(ERR_IO, "%s: instruction stream: short read", path);
		goto out;
	}
	*words = buf;
	*n_words = bytes / 4;
	buf = NULL;
out:
	free(buf);
	fclose(f);
	return rc;
}
