// xrt_shim: extern "C" wrappers around XRT's C++ API (see xrt_shim.h).
//
// The only C++ file and the only XRT include in Unicorn. Every entry point
// catches every exception and turns it into an ERR_* code plus err_set()
// message, because a C++ exception must never unwind through C frames.

#include "npu_worker/xrt_shim.h"

extern "C" {
#include "common/err.h"
}

#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_kernel.h>

// amdxdna needs xrt::hw_context (XRT >= 2.14 experimental, >= 2.16 stable
// location). Debian 12's XRT 2.13 predates it, so fall back to the legacy
// load_xclbin path there: it compiles and reports itself as "legacy".
#if defined(__has_include)
#if __has_include(<xrt/xrt_hw_context.h>)
#include <xrt/xrt_hw_context.h>
#define XRT_SHIM_HW_CONTEXT 1
#elif __has_include(<xrt/experimental/xrt_hw_context.h>)
#include <xrt/experimental/xrt_hw_context.h>
#define XRT_SHIM_HW_CONTEXT 1
#elif __has_include(<experimental/xrt_hw_context.h>)
#include <experimental/xrt_hw_context.h>
#define XRT_SHIM_HW_CONTEXT 1
#endif
#if __has_include(<xrt/detail/version-slim.h>)
#include <xrt/detail/version-slim.h>
#define XRT_SHIM_HAVE_VERSION 1
#elif __has_include(<version.h>)
#include <version.h>
#define XRT_SHIM_HAVE_VERSION 1
#endif
#endif

#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <system_error>

struct xrt_shim_device {
	xrt::device dev;
};

struct xrt_shim_kernel {
	xrt::device dev; // copies share XRT's refcounted impl
#ifdef XRT_SHIM_HW_CONTEXT
	xrt::hw_context ctx;
#endif
	xrt::kernel kern;
	std::string name;
};

struct xrt_shim_bo {
	xrt::bo bo;
	size_t size;
};

namespace {

// errno values XRT puts in std::system_error -> our codes.
int map_errno(int e)
{
	switch (e) {
	case ENOMEM:
		return ERR_NOMEM;
	case ENOENT:
		return ERR_NOTFOUND;
	case ETIME:
	case ETIMEDOUT:
		return ERR_TIMEOUT;
	case EOPNOTSUPP:
	case ENOSYS:
		return ERR_UNSUP;
	case EINVAL:
		return ERR_INVAL;
	default:
		return ERR_DEVICE;
	}
}

// Call from inside a catch block: classifies the in-flight exception.
int convert_exception(const char *what_call)
{
	try {
		throw;
	} catch (const std::system_error &e) {
		int code = map_errno(e.code().value());
		return err_set(code, "xrt_shim: %s: %s (errno %d)", what_call, e.what(),
			       e.code().value());
	} catch (const std::bad_alloc &) {
		return err_set(ERR_NOMEM, "xrt_shim: %s: out of memory", what_call);
	} catch (const std::exception &e) {
		return err_set(ERR_DEVICE, "xrt_shim: %s: %s", what_call, e.what());
	} catch (...) {
		return err_set(ERR_DEVICE, "xrt_shim: %s: unknown C++ exception", what_call);
	}
}

double us_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b)
{
	return std::chrono::duration<double, std::micro>(b - a).count();
}

const char *state_name(ert_cmd_state s)
{
	switch (s) {
	case ERT_CMD_STATE_NEW: return "NEW";
	case ERT_CMD_STATE_QUEUED: return "QUEUED";
	case ERT_CMD_STATE_RUNNING: return "RUNNING";
	case ERT_CMD_STATE_COMPLETED: return "COMPLETED";
	case ERT_CMD_STATE_ERROR: return "ERROR";
	case ERT_CMD_STATE_ABORT: return "ABORT";
	case ERT_CMD_STATE_SUBMITTED: return "SUBMITTED";
	case ERT_CMD_STATE_TIMEOUT: return "TIMEOUT";
	case ERT_CMD_STATE_NORESPONSE: return "NORESPONSE";
	default: return "other";
	}
}

// aiecc names the kernel "MLIR_AIE"; accept the first that starts with it.
std::string pick_kernel(const xrt::xclbin &xb, const char *want, const char *path)
{
	std::string found;
	for (const auto &k : xb.get_kernels()) {
		std::string n = k.get_name();
		if (want ? n == want : n.rfind("MLIR_AIE", 0) == 0) {
			found = n;
			break;
		}
	}
	if (found.empty())
		throw std::system_error(ENOENT, std::generic_category(),
					std::string(path) + ": no kernel named " +
						(want ? want : "MLIR_AIE*"));
	return found;
}

} // namespace

extern "C" {

const char *xrt_shim_api_name(void)
{
#ifdef XRT_SHIM_HW_CONTEXT
	return "hw_context";
#else
	return "legacy";
#endif
}

const char *xrt_shim_xrt_version(void)
{
#ifdef XRT_SHIM_HAVE_VERSION
	return xrt_build_version;
#else
	return "unknown";
#endif
}

int xrt_shim_device_open(unsigned index, struct xrt_shim_device **out)
{
	if (!out)
		return err_set(ERR_INVAL, "xrt_shim: device_open: out is NULL");
	*out = nullptr;
	try {
		auto *d = new xrt_shim_device{xrt::device(index)};
		*out = d;
		return 0;
	} catch (...) {
		return err_prefix(convert_exception("device_open"), "XRT device %u", index);
	}
}

void xrt_shim_device_close(struct xrt_shim_device *dev)
{
	try {
		delete dev;
	} catch (...) {
		// Destructors of XRT handles should not throw; never let one escape.
	}
}

int xrt_shim_kernel_open(struct xrt_shim_device *dev, const char *xclbin_path,
			 const char *kernel_name, struct xrt_shim_kernel **out)
{
	if (!dev || !xclbin_path || !out)
		return err_set(ERR_INVAL, "xrt_shim: kernel_open: NULL argument");
	*out = nullptr;
	try {
		xrt::xclbin xb(std::string{xclbin_path});
		std::string name = pick_kernel(xb, kernel_name, xclbin_path);
#ifdef XRT_SHIM_HW_CONTEXT
		// amdxdna: register is a no-op; the xclbin is loaded when the
		// hardware context is created.
		dev->dev.register_xclbin(xb);
		xrt::hw_context ctx(dev->dev, xb.get_uuid());
		xrt::kernel kern(ctx, name);
		*out = new xrt_shim_kernel{dev->dev, ctx, kern, name};
#else
		xrt::uuid uuid = dev->dev.load_xclbin(xb);
		xrt::kernel kern(dev->dev, uuid, name);
		*out = new xrt_shim_kernel{dev->dev, kern, name};
#endif
		return 0;
	} catch (...) {
		return err_prefix(convert_exception("kernel_open"), "%s", xclbin_path);
	}
}

void xrt_shim_kernel_close(struct xrt_shim_kernel *k)
{
	try {
		delete k;
	} catch (...) {
	}
}

static int bo_alloc(struct xrt_shim_kernel *k, int arg, xrt::bo::flags flags, size_t bytes,
		    struct xrt_shim_bo **out, const char *what)
{
	if (!k || !out)
		return err_set(ERR_INVAL, "xrt_shim: %s: NULL argument", what);
	*out = nullptr;
	if (bytes == 0)
		return err_set(ERR_INVAL, "xrt_shim: %s: size 0", what);
	try {
		auto grp = static_cast<xrt::memory_group>(k->kern.group_id(arg));
		xrt::bo bo(k->dev, bytes, flags, grp);
		*out = new xrt_shim_bo{bo, bytes};
		return 0;
	} catch (...) {
		return err_prefix(convert_exception(what), "kernel %s arg %d, %zu bytes",
				  k->name.c_str(), arg, bytes);
	}
}

int xrt_shim_bo_alloc_instr(struct xrt_shim_kernel *k, size_t bytes, struct xrt_shim_bo **out)
{
	// amdxdna: cacheable -> device-heap BO, where the instruction stream goes.
	return bo_alloc(k, 1, xrt::bo::flags::cacheable, bytes, out, "bo_alloc_instr");
}

int xrt_shim_bo_alloc_data(struct xrt_shim_kernel *k, unsigned slot, size_t bytes,
			   struct xrt_shim_bo **out)
{
	if (slot >= XRT_SHIM_MAX_DATA_BOS) {
		if (out)
			*out = nullptr;
		return err_set(ERR_RANGE, "xrt_shim: bo_alloc_data: slot %u >= %d", slot,
			       XRT_SHIM_MAX_DATA_BOS);
	}
	// amdxdna: host_only -> SHARE BO (host memory the NPU DMAs).
	return bo_alloc(k, 3 + (int)slot, xrt::bo::flags::host_only, bytes, out, "bo_alloc_data");
}

int xrt_shim_bo_import(struct xrt_shim_device *dev, int dmabuf_fd, struct xrt_shim_bo **out)
{
	if (!dev || !out)
		return err_set(ERR_INVAL, "xrt_shim: bo_import: NULL argument");
	*out = nullptr;
	if (dmabuf_fd < 0)
		return err_set(ERR_INVAL, "xrt_shim: bo_import: bad fd %d", dmabuf_fd);
	try {
		// XRT 2.13 already has bo(device handle, xclBufferExportHandle);
		// whether the kernel driver can import a foreign dma-buf is a
		// separate question (amdxdna PRIME import, see docs/npu.md).
		xrt::bo bo(dev->dev, static_cast<xclBufferExportHandle>(dmabuf_fd));
		size_t size = bo.size();
		*out = new xrt_shim_bo{bo, size};
		return 0;
	} catch (...) {
		return err_prefix(convert_exception("bo_import"), "dma-buf fd %d", dmabuf_fd);
	}
}

int xrt_shim_bo_map(struct xrt_shim_bo *bo, void **out)
{
	if (!bo || !out)
		return err_set(ERR_INVAL, "xrt_shim: bo_map: NULL argument");
	*out = nullptr;
	try {
		void *p = bo->bo.map();
		if (!p)
			return err_set(ERR_DEVICE, "xrt_shim: bo_map: XRT returned NULL");
		*out = p;
		return 0;
	} catch (...) {
		return convert_exception("bo_map");
	}
}

size_t xrt_shim_bo_size(const struct xrt_shim_bo *bo)
{
	return bo ? bo->size : 0;
}

int xrt_shim_bo_sync(struct xrt_shim_bo *bo, enum xrt_shim_sync dir, size_t offset, size_t bytes)
{
	if (!bo)
		return err_set(ERR_INVAL, "xrt_shim: bo_sync: NULL bo");
	if (offset > bo->size)
		return err_set(ERR_RANGE, "xrt_shim: bo_sync: offset %zu > size %zu", offset, bo->size);
	if (bytes == 0)
		bytes = bo->size - offset;
	if (bytes > bo->size - offset)
		return err_set(ERR_RANGE, "xrt_shim: bo_sync: range %zu+%zu > size %zu", offset, bytes,
			       bo->size);
	if (dir != XRT_SHIM_TO_DEVICE && dir != XRT_SHIM_FROM_DEVICE)
		return err_set(ERR_INVAL, "xrt_shim: bo_sync: bad direction %d", (int)dir);
	if (bytes == 0)
		return 0;
	try {
		bo->bo.sync(dir == XRT_SHIM_TO_DEVICE ? XCL_BO_SYNC_BO_TO_DEVICE
						      : XCL_BO_SYNC_BO_FROM_DEVICE,
			    bytes, offset);
		return 0;
	} catch (...) {
		return convert_exception("bo_sync");
	}
}

void xrt_shim_bo_free(struct xrt_shim_bo *bo)
{
	try {
		delete bo;
	} catch (...) {
	}
}

int xrt_shim_run(struct xrt_shim_kernel *k, struct xrt_shim_bo *instr, uint32_t n_instr_words,
		 struct xrt_shim_bo *const *data, unsigned n_data, unsigned timeout_ms,
		 struct xrt_shim_timing *timing)
{
	if (!k || !instr || (n_data && !data))
		return err_set(ERR_INVAL, "xrt_shim: run: NULL argument");
	if (n_data == 0 || n_data > XRT_SHIM_MAX_DATA_BOS)
		return err_set(ERR_RANGE, "xrt_shim: run: %u data buffers (need 1..%d)", n_data,
			       XRT_SHIM_MAX_DATA_BOS);
	if (n_instr_words == 0 || n_instr_words > instr->size / 4)
		return err_set(ERR_RANGE, "xrt_shim: run: %u instruction words do not fit a %zu-byte BO",
			       n_instr_words, instr->size);
	for (unsigned i = 0; i < n_data; i++)
		if (!data[i])
			return err_set(ERR_INVAL, "xrt_shim: run: data buffer %u is NULL", i);
	try {
		auto t0 = std::chrono::steady_clock::now();
		xrt::run run(k->kern);
		// Exact arg widths from the aiecc kernel signature: opcode u64,
		// instr BO, ninstr u32, bo0..bo4.
		uint64_t opcode = XRT_SHIM_OPCODE;
		run.set_arg(0, opcode);
		run.set_arg(1, instr->bo);
		run.set_arg(2, n_instr_words);
		for (unsigned i = 0; i < n_data; i++)
			run.set_arg(3 + (int)i, data[i]->bo);
		run.start();
		auto t1 = std::chrono::steady_clock::now();
		ert_cmd_state st = run.wait(std::chrono::milliseconds{timeout_ms});
		auto t2 = std::chrono::steady_clock::now();
		if (timing) {
			timing->submit_us = us_between(t0, t1);
			timing->wait_us = us_between(t1, t2);
			timing->total_us = us_between(t0, t2);
		}
		if (st == ERT_CMD_STATE_COMPLETED)
			return 0;
		if (st == ERT_CMD_STATE_TIMEOUT || st == ERT_CMD_STATE_NEW ||
		    st == ERT_CMD_STATE_QUEUED || st == ERT_CMD_STATE_RUNNING ||
		    st == ERT_CMD_STATE_SUBMITTED) {
			run.abort(); // XRT leaves aborting a timed-out run to us
			return err_set(ERR_TIMEOUT, "xrt_shim: run: kernel %s: no completion within %u ms (state %s)",
				       k->name.c_str(), timeout_ms, state_name(st));
		}
		return err_set(ERR_DEVICE, "xrt_shim: run: kernel %s ended in state %s (%d)%s",
			       k->name.c_str(), state_name(st), (int)st,
			       st == ERT_CMD_STATE_ABORT ? "; firmware/driver mismatch or bad instruction stream" : "");
	} catch (...) {
		return err_prefix(convert_exception("run"), "kernel %s", k->name.c_str());
	}
}

} // extern "C"
