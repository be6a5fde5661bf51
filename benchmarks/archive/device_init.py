"""Vulkan start-up cost: instance, physical-device query and logical device, timed step by step,
then N create/close cycles of gpuc's Device in one process (each must succeed).

    python benchmarks/device_init.py [--cycles 20] [--device N|NAME]

Run it in a fresh process (and under different loader settings, e.g. VK_LOADER_LAYERS_DISABLE=~implicit~)
to see what the driver's start-up costs before any bundle is touched.
"""
import argparse
import statistics
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--device")
    a = ap.parse_args()
    t0 = time.perf_counter()
    import vulkan as vk
    from gpuc.runtime import device as D
    print(f"import vulkan + gpuc.runtime.device   {(time.perf_counter() - t0) * 1e3:8.2f} ms")
    t0 = time.perf_counter()
    inst, unhook = D._instance()
    t1 = time.perf_counter()
    pds = vk.vkEnumeratePhysicalDevices(inst)
    t2 = time.perf_counter()
    names = [vk.vkGetPhysicalDeviceProperties(p).deviceName for p in pds]
    t3 = time.perf_counter()
    unhook()
    vk.vkDestroyInstance(inst, None)
    t4 = time.perf_counter()
    print(f"vkCreateInstance                      {(t1 - t0) * 1e3:8.2f} ms")
    print(f"vkEnumeratePhysicalDevices            {(t2 - t1) * 1e3:8.2f} ms  ({', '.join(names)})")
    print(f"properties                            {(t3 - t2) * 1e3:8.2f} ms")
    print(f"vkDestroyInstance                     {(t4 - t3) * 1e3:8.2f} ms")
    times, fails = [], []
    for i in range(a.cycles):
        t0 = time.perf_counter()
        try:
            d = D.Device(a.device)
        except Exception as e:                     # noqa: BLE001 - report every failure
            fails.append(f"cycle {i}: {type(e).__name__}: {e}")
            continue
        times.append((time.perf_counter() - t0) * 1e3)
        d.close()
    if times:
        print(f"Device() x{len(times)}: first {times[0]:.2f} ms, median {statistics.median(times):.2f} ms, "
              f"min {min(times):.2f} ms")
    print(f"failures: {len(fails)}" + "".join(f"\n  {f}" for f in fails[:5]))
    return 1 if fails else 0


if __name__ == "__main__":
    raise SystemExit(main())
