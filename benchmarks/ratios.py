"""gpuc against its PyTorch peer, per harness row: throughput ratio = torch median / gpuc median
(same model, same batch; above 1: gpuc is faster).  torch-fp32 and torch-tf32 are compared with the
gpuc-fp32 rows, torch-fp16 with the gpuc-fp16 rows; each torch row against both gpuc paths, plain
run() (numpy in, numpy out) and run_in_place (input written once into input_view: the span the
torch rows time)."""
from __future__ import annotations

GPUC_FOR = {"torch-fp32": "gpuc-fp32", "torch-tf32": "gpuc-fp32", "torch-fp16": "gpuc-fp16"}
IN_PLACE = "-in-place"


def attach(rows: list) -> list:
    """Adds to every timed torch row `throughput_ratio`: {gpuc system: torch median / gpuc median} for the
    matching timed gpuc rows (run() and in-place); returns the rows."""
    timed = {(r["model"], r.get("batch", 1), r["system"]): r for r in rows if "median_ms" in r}
    for r in rows:
        gpuc = GPUC_FOR.get(r["system"])
        if gpuc is None or "median_ms" not in r:
            continue
        ratio = {}
        for system in (gpuc, gpuc + IN_PLACE):
            g = timed.get((r["model"], r.get("batch", 1), system))
            if g is not None and g["median_ms"] > 0:
                ratio[system] = r["median_ms"] / g["median_ms"]
        r["throughput_ratio"] = ratio
    return rows


def cell(ratio: dict, system: str) -> str:
    v = ratio.get(system)
    return "-" if v is None else f"{v:.2f}"


def ms(row) -> str:
    return "-" if row is None else f"{row['median_ms']:.3f}"


def table(rows: list) -> list[str]:
    """Lines of the gpuc-vs-torch table: one per timed torch row that has a ratio."""
    peers = [r for r in rows if r.get("throughput_ratio")]
    if not peers:
        return []
    timed = {(r["model"], r.get("batch", 1), r["system"]): r for r in rows if "median_ms" in r}
    lines = ["gpuc vs PyTorch: throughput ratio = torch median / gpuc median (above 1: gpuc faster)",
             f"{'model':<32} {'batch':>5} {'torch':<11} {'torch ms':>9} {'gpuc':<10} {'run() ms':>9} {'ratio':>6} "
             f"{'in-place ms':>11} {'ratio':>6}"]
    for r in peers:
        gpuc = GPUC_FOR[r["system"]]
        key = (r["model"], r.get("batch", 1))
        run, ip = timed.get(key + (gpuc,)), timed.get(key + (gpuc + IN_PLACE,))
        lines.append(f"{r['model']:<32} {r.get('batch', 1):>5} {r['system']:<11} {r['median_ms']:>9.3f} {gpuc:<10} "
                     f"{ms(run):>9} {cell(r['throughput_ratio'], gpuc):>6} "
                     f"{ms(ip):>11} {cell(r['throughput_ratio'], gpuc + IN_PLACE):>6}")
    return lines
