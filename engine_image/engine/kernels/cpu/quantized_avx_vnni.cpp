// The int panel kernel by AVX-VNNI's 256-bit vpdpbusd, for CPUs with VNNI but no AVX-512 (Intel
// Alder Lake and later client cores, AMD Zen 5 client parts): int_panel_avx2.h compiled for it.

#define GOMGR_INT_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define GOMGR_INT_VNNI 1
#define GOMGR_INT_PANEL int_panel_avx_vnni
#include "int_panel_avx2.h"
