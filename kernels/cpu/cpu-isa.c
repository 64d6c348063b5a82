/* Which SIMD level this CPU can run: cpuid for the instructions, XGETBV for the OS
 * (a kernel that does not save YMM or ZMM state makes those instructions unusable
 * even where cpuid lists them), and for AMX the process's permission to use tile
 * data, which Linux grants on request (arch_prctl) and a VM or seccomp may refuse.
 * Nothing here assumes AVX512-FP16. */
#include "backend.h"

#include <strings.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define ISA_X86 1
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define ISA_AMX_LINUX 1
#endif
#endif

static const char *const isa_names[ALLM_CPU_ISA_COUNT] = {
	[ALLM_CPU_ISA_AUTO] = "auto",
	[ALLM_CPU_ISA_PORTABLE] = "portable",
	[ALLM_CPU_ISA_AVX2] = "avx2",
	[ALLM_CPU_ISA_AVX2_VNNI] = "avx2-vnni",
	[ALLM_CPU_ISA_AVX512] = "avx512",
	[ALLM_CPU_ISA_AVX512_VNNI] = "avx512-vnni",
	[ALLM_CPU_ISA_AVX512_BF16] = "avx512-bf16",
	[ALLM_CPU_ISA_AMX_BF16] = "amx-bf16",
	[ALLM_CPU_ISA_AMX_INT8] = "amx-int8",
};

const char *allm_cpu_isa_name(enum allm_cpu_isa isa)
{
	return (unsigned)isa < ALLM_CPU_ISA_COUNT ? isa_names[isa] : "?";
}

int allm_cpu_isa_parse(const char *s, enum allm_cpu_isa *ret)
{
	for (int i = 0; i < ALLM_CPU_ISA_COUNT; i++)
		if (!strcasecmp(s, isa_names[i])) {
			*ret = (enum allm_cpu_isa)i;
			return 0;
		}
	return -EINVAL;
}

#ifdef ISA_X86
struct x86_features {
	bool avx2, fma, f16c, avx_vnni; /* usable: the OS saves YMM state */
	bool avx512; /* F + BW + VL, and the OS saves opmask and ZMM state */
	bool avx512_vnni, avx512_bf16;
	bool amx_bf16; /* AMX-TILE + AMX-BF16, tile state saved, permission granted */
	bool amx_int8; /* the same with AMX-INT8 */
};

static uint64_t xgetbv0(void)
{
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

/* Linux hands out the 8 KiB of tile state only to a process that asks (5.16+);
 * once granted it holds for every thread. */
static bool amx_permission(void)
{
#ifdef ISA_AMX_LINUX
	enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
	return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
	return false;
#endif
}

static struct x86_features x86_detect(void)
{
	struct x86_features f = {0};
	unsigned a, b, c, d, max = __get_cpuid_max(0, NULL);
	if (max < 7 || !__get_cpuid(1, &a, &b, &c, &d))
		return f;
	bool osxsave = c & bit_OSXSAVE, avx = c & bit_AVX;
	bool fma = c & bit_FMA, f16c = c & bit_F16C;
	if (!osxsave || !avx)
		return f;
	uint64_t xcr0 = xgetbv0();
	bool ymm_os = (xcr0 & 0x6) == 0x6; /* SSE + AVX state */
	bool zmm_os = (xcr0 & 0xe6) == 0xe6; /* + opmask, ZMM_Hi256, Hi16_ZMM */
	if (!ymm_os)
		return f;
	__cpuid_count(7, 0, a, b, c, d);
	unsigned ebx7 = b, ecx7 = c, edx7 = d, eax7_1 = 0;
	if (a >= 1) {
		__cpuid_count(7, 1, a, b, c, d);
		eax7_1 = a;
	}
	f.avx2 = ebx7 & bit_AVX2;
	f.fma = fma;
	f.f16c = f16c;
	f.avx_vnni = eax7_1 & (1u << 4);
	f.avx512 = zmm_os && (ebx7 & bit_AVX512F) && (ebx7 & bit_AVX512BW) && (ebx7 & bit_AVX512VL);
	f.avx512_vnni = f.avx512 && (ecx7 & (1u << 11));
	f.avx512_bf16 = f.avx512 && (eax7_1 & (1u << 5));
	bool tiles_os = (xcr0 & 0x60000) == 0x60000; /* XTILECFG + XTILEDATA */
	f.amx_bf16 = f.avx512_bf16 && (edx7 & (1u << 24)) && (edx7 & (1u << 22)) && tiles_os &&
		     amx_permission();
	f.amx_int8 = f.amx_bf16 && (edx7 & (1u << 25));
	return f;
}
#endif

bool allm_cpu_isa_supported(enum allm_cpu_isa isa)
{
	if (isa == ALLM_CPU_ISA_AUTO || isa == ALLM_CPU_ISA_PORTABLE)
		return true;
#ifdef ISA_X86
	static struct x86_features f;
	static bool done;
	if (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) { /* idempotent: races are harmless */
		f = x86_detect();
		__atomic_store_n(&done, true, __ATOMIC_RELEASE);
	}
	bool base = f.avx2 && f.fma && f.f16c;
	switch (isa) {
	case ALLM_CPU_ISA_AVX2: return base;
	case ALLM_CPU_ISA_AVX2_VNNI: return base && f.avx_vnni;
	case ALLM_CPU_ISA_AVX512: return base && f.avx512;
	case ALLM_CPU_ISA_AVX512_VNNI: return base && f.avx512_vnni;
	/* every CPU with AVX512_BF16 has AVX512_VNNI; the level builds on both */
	case ALLM_CPU_ISA_AVX512_BF16: return base && f.avx512_vnni && f.avx512_bf16;
	case ALLM_CPU_ISA_AMX_BF16: return base && f.avx512_vnni && f.amx_bf16;
	case ALLM_CPU_ISA_AMX_INT8: return base && f.avx512_vnni && f.amx_int8;
	default: return false;
	}
#else
	return false;
#endif
}

#ifdef ISA_X86
static bool x86_vendor_amd(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(0, &a, &b, &c, &d))
		return false;
	return b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163; /* "AuthenticAMD" */
}
#endif

/* The best level is the highest supported one, except avx512-bf16 off AMD: on the
 * Intel Xeon we measured, vdpbf16ps retires one per 2 cycles (16 bf16 MACs a cycle)
 * where FMA does two (32 f32 MACs), so bf16 weights are faster converted to f32;
 * on AMD Zen 4/5 it runs as fast as an FMA with twice the MACs. Still testable and
 * selectable there with --cpu-isa avx512-bf16. Where AMX is usable (Intel Xeon 4th
 * generation on), the AMX levels come first: a tile multiply does 16 x 16 x 32 MACs
 * (bf16) or 16 x 16 x 64 (int8); every such CPU has both, so amx-int8 it is. */
enum allm_cpu_isa allm_cpu_isa_best(void)
{
	for (int i = ALLM_CPU_ISA_COUNT - 1; i > ALLM_CPU_ISA_PORTABLE; i--) {
		if (!allm_cpu_isa_supported((enum allm_cpu_isa)i))
			continue;
#ifdef ISA_X86
		if (i == ALLM_CPU_ISA_AVX512_BF16 && !x86_vendor_amd())
			continue;
#endif
		return (enum allm_cpu_isa)i;
	}
	return ALLM_CPU_ISA_PORTABLE;
}
