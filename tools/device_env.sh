# device_env.sh — sourced by the device_*.sh scripts on the GPU machine: the
# carried Vulkan loader (.gl), the shared libraries our binaries need
# (.devlibs) and the NVIDIA ICD; $OUT gets the results.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export LD_LIBRARY_PATH=$PWD/.devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_DRIVER_FILES=$icd
# (the device's own curl and python stay on the device's libraries: run them
# as `env -u LD_LIBRARY_PATH curl ...`; .devlibs' libcurl is older than its curl)
