/* npu_device: probe and kernel-file errors. No NPU exists here, so these check
 * that every miss fails with ERR_DEVICE / ERR_NOTFOUND and the exact guidance.
 * Criterion runs each test in its own process, so setenv stays local. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "npu_worker/npu_device.h"

static char tmpdir[64];

static void make_tmpdir(void)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/unicorn-npu-test-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void rm_tmpdir(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	cr_assert_eq(system(cmd), 0);
}

static void write_file(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "%s", path);
	if (n)
		cr_assert_eq(fwrite(data, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

static void path_in(char *dst, const char *rel)
{
	snprintf(dst, PATH_MAX, "%s/%s", tmpdir, rel);
}

/* Fake sysfs: <tmp>/sys/dev/char/1:3/{subsystem,device/driver} for /dev/null. */
static void fake_sysfs(const char *subsystem, const char *driver)
{
	char p[PATH_MAX], t[PATH_MAX];
	path_in(p, "sys/dev/char/1:3/device");
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
	cr_assert_eq(system(cmd), 0);
	path_in(p, "sys/dev/char/1:3/subsystem");
	snprintf(t, sizeof t, "../../../class/%s", subsystem);
	cr_assert_eq(symlink(t, p), 0);
	path_in(p, "sys/dev/char/1:3/device/driver");
	snprintf(t, sizeof t, "../../../../bus/pci/drivers/%s", driver);
	cr_assert_eq(symlink(t, p), 0);
	path_in(p, "sys");
	cr_assert_eq(setenv("UNICORN_NPU_SYSFS", p, 1), 0);
}

Test(npu, probe_missing_device_exact_guidance)
{
	cr_assert_eq(setenv("UNICORN_NPU_DEVICE", "/nonexistent", 1), 0);
	struct npu_device_info info;
	cr_assert_eq(npu_device_probe(NULL, &info), ERR_DEVICE);
	cr_assert_str_eq(err_msg(),
			 "no AMD XDNA NPU found: /nonexistent does not exist (looked for the amdxdna "
			 "accel device); run the attention stage on the GPU with --attn-backend vulkan");
}

Test(npu, probe_default_path)
{
	unsetenv("UNICORN_NPU_DEVICE");
	cr_assert_str_eq(npu_device_path(NULL), "/dev/accel/accel0");
	cr_assert_str_eq(npu_device_path("/x"), "/x");
	if (access("/dev/accel/accel0", F_OK) == 0)
		cr_skip_test("this machine has /dev/accel/accel0");
	cr_assert_eq(npu_device_probe(NULL, NULL), ERR_DEVICE);
	cr_assert_str_eq(err_msg(),
			 "no AMD XDNA NPU found: /dev/accel/accel0 does not exist (looked for the "
			 "amdxdna accel device); run the attention stage on the GPU with --attn-backend vulkan");
}

Test(npu, probe_regular_file_is_not_a_char_device)
{
	make_tmpdir();
	char p[PATH_MAX];
	path_in(p, "accel0");
	write_file(p, "x", 1);
	cr_assert_eq(npu_device_probe(p, NULL), ERR_DEVICE);
	cr_assert_not_null(strstr(err_msg(), "is not a character device"), "%s", err_msg());
	cr_assert_not_null(strstr(err_msg(), p), "%s", err_msg());
	cr_assert_not_null(strstr(err_msg(), "--attn-backend vulkan"), "%s", err_msg());
	rm_tmpdir();
}

Test(npu, probe_wrong_subsystem)
{
	make_tmpdir();
	fake_sysfs("mem", "amdxdna");
	cr_assert_eq(npu_device_probe("/dev/null", NULL), ERR_DEVICE);
	cr_assert_not_null(strstr(err_msg(), "/dev/null is not an amdxdna device"), "%s", err_msg());
	cr_assert_not_null(strstr(err_msg(), "subsystem 'mem'"), "%s", err_msg());
	rm_tmpdir();
}

Test(npu, probe_wrong_driver)
{
	make_tmpdir();
	fake_sysfs("accel", "intel_vpu");
	cr_assert_eq(npu_device_probe("/dev/null", NULL), ERR_DEVICE);
	cr_assert_not_null(strstr(err_msg(), "bound to driver 'intel_vpu'"), "%s", err_msg());
	rm_tmpdir();
}

/* /dev/null dressed up as an amdxdna accel node: the probe's own checks pass. */
Test(npu, probe_accepts_amdxdna_node)
{
	make_tmpdir();
	fake_sysfs("accel", "amdxdna");
	struct npu_device_info info;
	cr_assert_eq(npu_device_probe("/dev/null", &info), 0, "%s", err_msg());
	cr_assert_str_eq(info.path, "/dev/null");
	cr_assert_str_eq(info.driver, "amdxdna");
	cr_assert_eq(info.major, 1);
	cr_assert_eq(info.minor, 3);
	rm_tmpdir();
}

Test(npu, kernel_files_missing)
{
	make_tmpdir();
	unsetenv("UNICORN_NPU_XCLBIN");
	unsetenv("UNICORN_NPU_INSTS");
	struct npu_kernel_files kf;
	cr_assert_eq(npu_kernel_files_resolve(tmpdir, &kf), ERR_NOTFOUND);
	char want[PATH_MAX];
	path_in(want, "attention.xclbin");
	cr_assert_str_eq(kf.xclbin, want);
	cr_assert_not_null(strstr(err_msg(), want), "%s", err_msg());
	cr_assert_not_null(strstr(err_msg(),
				  "the NPU attention kernel is not built; see npu_kernels/README.md"),
			   "%s", err_msg());

	/* xclbin present, instruction stream missing: the error names insts.bin */
	write_file(want, "xclbin", 6);
	cr_assert_eq(npu_kernel_files_resolve(tmpdir, &kf), ERR_NOTFOUND);
	path_in(want, "insts.bin");
	cr_assert_not_null(strstr(err_msg(), want), "%s", err_msg());

	/* empty instruction stream is as good as none */
	write_file(want, NULL, 0);
	cr_assert_eq(npu_kernel_files_resolve(tmpdir, &kf), ERR_NOTFOUND);
	cr_assert_not_null(strstr(err_msg(), "is empty"), "%s", err_msg());

	uint32_t w = 0;
	write_file(want, &w, sizeof w);
	cr_assert_eq(npu_kernel_files_resolve(tmpdir, &kf), 0, "%s", err_msg());
	cr_assert_str_eq(kf.insts, want);
	rm_tmpdir();
}

Test(npu, kernel_files_default_dir_and_env_override)
{
	unsetenv("UNICORN_NPU_KERNEL_DIR");
	unsetenv("UNICORN_NPU_XCLBIN");
	unsetenv("UNICORN_NPU_INSTS");
	struct npu_kernel_files kf;
	if (access("npu_kernels/build/attention.xclbin", F_OK) != 0) {
		cr_assert_eq(npu_kernel_files_resolve(NULL, &kf), ERR_NOTFOUND);
		cr_assert_str_eq(kf.xclbin, "npu_kernels/build/attention.xclbin");
	}

	make_tmpdir();
	char x[PATH_MAX], i[PATH_MAX];
	path_in(x, "a.xclbin");
	path_in(i, "a.bin");
	write_file(x, "x", 1);
	write_file(i, "iiii", 4);
	cr_assert_eq(setenv("UNICORN_NPU_XCLBIN", x, 1), 0);
	cr_assert_eq(setenv("UNICORN_NPU_INSTS", i, 1), 0);
	cr_assert_eq(npu_kernel_files_resolve("/nonexistent", &kf), 0, "%s", err_msg());
	cr_assert_str_eq(kf.xclbin, x);
	cr_assert_str_eq(kf.insts, i);

	/* a directory where the xclbin should be */
	cr_assert_eq(setenv("UNICORN_NPU_XCLBIN", tmpdir, 1), 0);
	cr_assert_eq(npu_kernel_files_resolve(NULL, &kf), ERR_NOTFOUND);
	cr_assert_not_null(strstr(err_msg(), "not a regular file"), "%s", err_msg());
	rm_tmpdir();
}

Test(npu, insts_load)
{
	make_tmpdir();
	char p[PATH_MAX];
	path_in(p, "insts.bin");
	const uint8_t bytes[8] = {0x01, 0x02, 0x03, 0x04, 0xff, 0x00, 0x00, 0x80};
	write_file(p, bytes, sizeof bytes);
	uint32_t *w = NULL;
	size_t n = 0;
	cr_assert_eq(npu_insts_load(p, &w, &n), 0, "%s", err_msg());
	cr_assert_eq(n, 2);
	cr_assert_eq(w[0], 0x04030201u); /* little-endian words */
	cr_assert_eq(w[1], 0x800000ffu);
	free(w);

	write_file(p, bytes, 6);
	cr_assert_eq(npu_insts_load(p, &w, &n), ERR_INVAL);
	cr_assert_not_null(strstr(err_msg(), "not a multiple of 4"), "%s", err_msg());
	cr_assert_null(w);

	write_file(p, NULL, 0);
	cr_assert_eq(npu_insts_load(p, &w, &n), ERR_INVAL);

	path_in(p, "missing.bin");
	cr_assert_eq(npu_insts_load(p, &w, &n), ERR_NOTFOUND);
	rm_tmpdir();
}
