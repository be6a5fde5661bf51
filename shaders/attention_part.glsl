// The split form of the attention kernels (attention.comp, attention_cm.comp: ops/attention.py key_split) and
// its merge (attention_merge.comp): KSPLIT parts of a row block's key tiles, part ks taking tiles
// [ks * KTILES / KSPLIT, (ks + 1) * KTILES / KSPLIT) of BK keys, and writing row r = b * N + i's unnormalised
// [m, l, acc[DV]] (float32) at PART_ROW(r, ks).
#ifndef KSPLIT
#define KSPLIT 1
#endif
#define KTILES ((M + BK - 1) / BK)
#define PART_BEGIN(ks) ((ks) * KTILES / KSPLIT * BK)
#define PART_END(ks) min(M, ((ks) + 1) * KTILES / KSPLIT * BK)
#define PART_ROW(r, ks) (((r) * KSPLIT + (ks)) * (DV + 2))
