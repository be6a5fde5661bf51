"""Soak: many inferences of one bundle; host RSS and device memory use at start and end.

    python -m benchmarks.soak BUNDLE_OR_MODEL [--runs 10000] [--device N|NAME]
"""
import argparse

import numpy as np

import gpuc

from benchmarks.timing import once


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def device_used_bytes(device):
    """Sum of heapUsage from VK_EXT_memory_budget, or None where the device lacks it."""
    import vulkan as vk
    exts = [e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(device.physical, None)]
    if "VK_EXT_memory_budget" not in exts:
        return None
    budget = vk.ffi.new("VkPhysicalDeviceMemoryBudgetPropertiesEXT*")
    budget.sType = vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT
    props = vk.ffi.new("VkPhysicalDeviceMemoryProperties2*")
    props.sType = vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2
    props.pNext = budget
    vk.lib.vkGetPhysicalDeviceMemoryProperties2(device.physical, props)
    return sum(budget.heapUsage[i] for i in range(props.memoryProperties.memoryHeapCount))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--device")
    a = ap.parse_args()
    bundle = gpuc.compile(a.path) if a.path.endswith(".tflite") else a.path
    m = gpuc.load(bundle, device=a.device)
    xs = [np.random.default_rng(0).uniform(-1, 1, s.shape).astype(s.dtype) for s in m.inputs]
    m.run(xs)
    r0, d0 = rss_kib(), device_used_bytes(m.device)

    def soak():
        first = m.run(xs)
        for _ in range(a.runs - 1):
            out = m.run(xs)
        return first, out
    (first, out), dt = once(soak)
    r1, d1 = rss_kib(), device_used_bytes(m.device)
    same = all(np.array_equal(x, y) for x, y in zip(first, out))
    print(f"device: {m.device.name}; {a.runs} runs in {dt:.1f} s ({a.runs / dt:.0f}/s); identical outputs: {same}")
    print(f"host RSS: {r0} KiB -> {r1} KiB ({r1 - r0:+d} KiB)")
    if d0 is None:
        print("device memory: VK_EXT_memory_budget not available")
    else:
        print(f"device memory in use: {d0} B -> {d1} B ({d1 - d0:+d} B)")
    m.close()


if __name__ == "__main__":
    main()
