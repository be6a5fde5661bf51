"""Where load time goes: instance+device, bundle read/verify, buffers+weights, pipelines, descriptors, record.

    python benchmarks/load_breakdown.py BUNDLE [--device N|NAME]
"""
import sys
import time

T = []


def mark(name, t0):
    T.append((name, (time.perf_counter() - t0) * 1e3))
    return time.perf_counter()


def main():
    t = time.perf_counter()
    import numpy  # noqa: F401
    import vulkan  # noqa: F401
    t = mark("import numpy+vulkan", t)
    from gpuc.runtime import read_bundle_file
    from gpuc.runtime.bundle import read_bundle
    from gpuc.runtime.device import Device
    from gpuc.runtime import executor as ex
    t = mark("import gpuc.runtime", t)
    data = read_bundle_file(sys.argv[1])
    t = mark("read file", t)
    b = read_bundle(data)
    t = mark("verify+parse bundle", t)
    d = Device(sys.argv[2] if len(sys.argv) > 2 else None)
    t = mark("instance+device", t)
    m = ex.LoadedModel.__new__(ex.LoadedModel)
    m.bundle, m._own_device, m.device, m._objs, m.dev, m.load_info = b, False, d, [], d.device, {}
    import threading
    m._lock = threading.Lock()
    m._in_specs, in_bytes = ex._layout_io(b, b.inputs)
    m._out_specs, out_bytes = ex._layout_io(b, b.outputs)
    m._arena, _, _ = m._buffer(b.arena_bytes, ex._STORAGE | ex._SRC | ex._DST)
    m._weights, _, _ = m._buffer(b.weights.nbytes, ex._STORAGE | ex._DST)
    m._in_buf, in_mem, in_size = m._buffer(in_bytes, ex._SRC, host_visible=True)
    m._out_buf, out_mem, out_size = m._buffer(out_bytes, ex._DST, host_visible=True)
    m._in_map = vulkan.vkMapMemory(m.dev, in_mem, 0, in_size, 0)
    m._out_map = vulkan.vkMapMemory(m.dev, out_mem, 0, out_size, 0)
    t = mark("buffers", t)
    m._upload_weights()
    t = mark("weights upload", t)
    m._make_pipelines()
    t = mark(f"pipelines ({m.load_info})", t)
    m._make_descriptors()
    t = mark("descriptors", t)
    m._record()
    m._fence = m._keep(vulkan.vkDestroyFence, vulkan.vkCreateFence(m.dev, vulkan.VkFenceCreateInfo(), None))
    t = mark("record", t)
    xs = [numpy.zeros(s.shape, s.dtype) for s in m.inputs]
    m.run(xs)
    t = mark("first run", t)
    m.run(xs)
    mark("second run", t)
    for name, ms in T:
        print(f"{name:<40} {ms:9.2f} ms")


if __name__ == "__main__":
    main()
