"""Arena planner: no two tensors that are live at once overlap; the plan is near the lower bound."""
import numpy as np

from gpuc.compiler.memory_plan import align, lower_bound, plan_arena


def check_plan(life, nbytes):
    plan, arena = plan_arena(life, nbytes)
    items = list(plan.items())
    for i, (a, pa) in enumerate(items):
        assert pa.offset % 256 == 0 and pa.offset + nbytes[a] <= arena
        for b, pb in items[i + 1:]:
            if not (pa.last < pb.first or pb.last < pa.first):
                assert pa.offset + align(nbytes[a]) <= pb.offset or pb.offset + align(nbytes[b]) <= pa.offset, (a, b)
    return arena


def test_chain_reuses_memory():
    life = {i: (i - 1, i) for i in range(10)}          # each tensor lives for two kernels
    nbytes = {i: 1024 for i in range(10)}
    arena = check_plan(life, nbytes)
    assert arena == 2 * 1024 == lower_bound(life, nbytes)


def test_random_lifetimes():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 40))
        life = {}
        for t in range(n):
            a = int(rng.integers(-1, 30))
            life[t] = (a, a + int(rng.integers(0, 6)))
        nbytes = {t: int(rng.integers(1, 5000)) for t in range(n)}
        arena = check_plan(life, nbytes)
        assert arena >= lower_bound(life, nbytes)


def test_several_orders_reach_the_bound_where_size_order_does_not():
    from gpuc.compiler.memory_plan import _place
    life = {0: (3, 5), 1: (5, 5), 2: (1, 2), 3: (5, 5), 4: (2, 3)}
    nbytes = {0: 256, 1: 512, 2: 768, 3: 512, 4: 512}
    by_size = _place(sorted(life, key=lambda t: (-nbytes[t], life[t][0], t)), life, nbytes)[1]
    assert by_size == 1536 > lower_bound(life, nbytes) == 1280
    assert check_plan(life, nbytes) == 1280


def test_never_worse_than_size_order():
    from gpuc.compiler.memory_plan import _place
    rng = np.random.default_rng(1)
    for _ in range(50):
        n = int(rng.integers(1, 30))
        life = {t: (a, a + int(rng.integers(0, 6))) for t, a in enumerate(rng.integers(-1, 25, n).tolist())}
        nbytes = {t: int(rng.integers(1, 9000)) for t in range(n)}
        by_size = _place(sorted(life, key=lambda t: (-align(max(nbytes[t], 4)), life[t][0], t)), life, nbytes)[1]
        assert check_plan(life, nbytes) <= by_size
