"""Where a fresh process's Vulkan device open goes, step by step, and what the driver loads.

    python -m benchmarks.archive.device_open_probe [--repeat 3]

Each row is measured in a fresh process (the driver's per-process start-up is the point), under a few
loader/driver settings.  Also times the CUDA driver's own context creation (libcuda, through ctypes)
when it exists, as a yardstick for what any GPU API pays on this host.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

STEPS = r"""
import json, os, sys, time
T = {}
t = time.perf_counter()
import vulkan as vk
T["import_vulkan"] = time.perf_counter() - t

def maps():
    out = {}
    for line in open("/proc/self/maps"):
        p = line.split()
        if len(p) >= 6 and p[5].startswith("/") and ".so" in p[5]:
            out[p[5]] = 1
    return set(out)

before = maps()
app = vk.VkApplicationInfo(pApplicationName="probe", apiVersion=vk.VK_MAKE_VERSION(1, 1, 0))
info = vk.VkInstanceCreateInfo(pApplicationInfo=app)
t = time.perf_counter()
inst = vk.vkCreateInstance(info, None)
T["vkCreateInstance"] = time.perf_counter() - t
libs = sorted(maps() - before)
t = time.perf_counter()
pds = vk.vkEnumeratePhysicalDevices(inst)
T["vkEnumeratePhysicalDevices"] = time.perf_counter() - t
t = time.perf_counter()
props = [vk.vkGetPhysicalDeviceProperties(p) for p in pds]
exts = vk.vkEnumerateDeviceExtensionProperties(pds[0], None)
fams = vk.vkGetPhysicalDeviceQueueFamilyProperties(pds[0])
T["queries"] = time.perf_counter() - t
fam = [i for i, f in enumerate(fams) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT]
only_compute = [i for i, f in enumerate(fams) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT
                and not f.queueFlags & vk.VK_QUEUE_GRAPHICS_BIT]
which = os.environ.get("PROBE_FAMILY", "first")
family = (only_compute or fam)[0] if which == "compute_only" else fam[0]
prio = [1.0]
q = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=family, queueCount=1, pQueuePriorities=prio)
qs = [q]
dinfo = vk.VkDeviceCreateInfo(queueCreateInfoCount=1, pQueueCreateInfos=qs)
t = time.perf_counter()
dev = vk.vkCreateDevice(pds[0], dinfo, None)
T["vkCreateDevice"] = time.perf_counter() - t
queue = vk.vkGetDeviceQueue(dev, family, 0)
t = time.perf_counter()
pool = vk.vkCreateCommandPool(dev, vk.VkCommandPoolCreateInfo(queueFamilyIndex=family), None)
cb = vk.vkAllocateCommandBuffers(dev, vk.VkCommandBufferAllocateInfo(commandPool=pool, level=0, commandBufferCount=1))[0]
vk.vkBeginCommandBuffer(cb, vk.VkCommandBufferBeginInfo())
vk.vkEndCommandBuffer(cb)
fence = vk.vkCreateFence(dev, vk.VkFenceCreateInfo(), None)
cbs = [cb]
si = vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=cbs)
vk.vkQueueSubmit(queue, 1, [si], fence)
vk.vkWaitForFences(dev, 1, [fence], vk.VK_TRUE, 10**10)
T["first_submit"] = time.perf_counter() - t
t = time.perf_counter()
dev2 = vk.vkCreateDevice(pds[0], dinfo, None)
T["vkCreateDevice_again"] = time.perf_counter() - t
vk.vkDestroyDevice(dev2, None)
vk.vkDestroyFence(dev, fence, None)
vk.vkDestroyCommandPool(dev, pool, None)
vk.vkDestroyDevice(dev, None)
t = time.perf_counter()
vk.vkDestroyInstance(inst, None)
T["vkDestroyInstance"] = time.perf_counter() - t
t = time.perf_counter()
inst2 = vk.vkCreateInstance(info, None)
pds2 = vk.vkEnumeratePhysicalDevices(inst2)
dev3 = vk.vkCreateDevice(pds2[0], dinfo, None)
T["instance+device_again"] = time.perf_counter() - t
out = {k: v * 1e3 for k, v in T.items()}
out["libs"] = [os.path.basename(l) + f" ({os.path.getsize(l) >> 20} MiB)" for l in libs]
out["devices"] = [p.deviceName for p in props]
out["families"] = [(i, int(f.queueFlags), f.queueCount) for i, f in enumerate(fams)]
print(json.dumps(out))
"""

CUDA = r"""
import ctypes, json, time
t = time.perf_counter()
cu = ctypes.CDLL("libcuda.so.1")
t1 = time.perf_counter()
assert cu.cuInit(0) == 0
t2 = time.perf_counter()
dev = ctypes.c_int(); assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
ctx = ctypes.c_void_p()
t3 = time.perf_counter()
r = cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
assert r == 0, r
r = cu.cuCtxSetCurrent(ctx); assert r == 0, r
p = ctypes.c_void_p(); r = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20)); assert r == 0, r
t4 = time.perf_counter()
print(json.dumps({"dlopen_libcuda": (t1 - t) * 1e3, "cuInit": (t2 - t1) * 1e3, "ctx+alloc": (t4 - t3) * 1e3}))
"""

DLOPEN = r"""
import ctypes, json, os, time, glob
paths = [os.environ.get("VK_DRIVER_FILES", "")] + glob.glob("/usr/share/vulkan/icd.d/*.json") + glob.glob("/etc/vulkan/icd.d/*.json")
lib = None
for j in paths:
    if j and os.path.exists(j):
        lib = json.load(open(j))["ICD"]["library_path"]; break
t = time.perf_counter()
ctypes.CDLL(lib)
print(json.dumps({"icd": lib, "dlopen_icd_ms": (time.perf_counter() - t) * 1e3}))
"""

VARIANTS = {
    "default": {},
    "nv disk cache off": {"__GL_SHADER_DISK_CACHE": "0"},
    "implicit layers off": {"VK_LOADER_LAYERS_DISABLE": "~implicit~"},
    "compute-only family": {"PROBE_FAMILY": "compute_only"},
}


def fresh(code, env):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, **env))
    if r.returncode:
        return {"error": (r.stderr or "").strip().splitlines()[-1:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    first = None
    for name, env in VARIANTS.items():
        rows = [fresh(STEPS, env) for _ in range(a.repeat)]
        ok = [r for r in rows if "error" not in r]
        if not ok:
            print(f"{name}: {rows[0]}")
            continue
        first = first or ok[0]
        keys = [k for k, v in ok[0].items() if isinstance(v, float)]
        print(f"== {name} (median of {len(ok)} fresh processes, ms)")
        for k in keys:
            print(f"   {k:<28} {statistics.median(r[k] for r in ok):9.2f}")
    if first:
        print("devices:", first["devices"], "queue families (index, flags, count):", first["families"])
        print("libraries the driver loaded at vkCreateInstance:", ", ".join(first["libs"]))
    print("ICD dlopen alone:", [fresh(DLOPEN, {}) for _ in range(2)])
    print("CUDA driver, for scale:", [fresh(CUDA, {}) for _ in range(2)])


if __name__ == "__main__":
    main()
