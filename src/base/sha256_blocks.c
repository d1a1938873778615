/* SHA-256's compression (FIPS 180-4, 6.2.2) over whole blocks: the
   portable code, and the x86 SHA extensions (SHA256RNDS2, MSG1, MSG2),
   several times faster, where most of serve's start and of staging goes
   to digests.  The instructions work on the state split as ABEF and CDGH,
   two rounds at a time, and on the message schedule four words at a
   time.  */
#include "base/sha256_blocks.h"

static const uint32_t round_constants[64] = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t
rotr (uint32_t x, unsigned n)
{
  return (x >> n) | (x << (32 - n));
}

static void
compress_portable (uint32_t state[8], const uint8_t block[64])
{
  uint32_t w[64];
  uint32_t a, b, c, d, e, f, g, h;

  for (unsigned t = 0; t < 16; t++)
    w[t] = (uint32_t)block[4 * t] << 24 | (uint32_t)block[4 * t + 1] << 16 | (uint32_t)block[4 * t + 2] << 8
           | (uint32_t)block[4 * t + 3];
  for (unsigned t = 16; t < 64; t++)
    {
      uint32_t s0 = rotr (w[t - 15], 7) ^ rotr (w[t - 15], 18) ^ (w[t - 15] >> 3);
      uint32_t s1 = rotr (w[t - 2], 17) ^ rotr (w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }

  a = state[0], b = state[1], c = state[2], d = state[3];
  e = state[4], f = state[5], g = state[6], h = state[7];
  for (unsigned t = 0; t < 64; t++)
    {
      uint32_t big_s1 = rotr (e, 6) ^ rotr (e, 11) ^ rotr (e, 25);
      uint32_t choose = (e & f) ^ (~e & g);
      uint32_t t1 = h + big_s1 + choose + round_constants[t] + w[t];
      uint32_t big_s0 = rotr (a, 2) ^ rotr (a, 13) ^ rotr (a, 22);
      uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = big_s0 + majority;

      h = g, g = f, f = e, e = d + t1;
      d = c, c = b, b = a, a = t1 + t2;
    }
  state[0] += a, state[1] += b, state[2] += c, state[3] += d;
  state[4] += e, state[5] += f, state[6] += g, state[7] += h;
}

void
sp_sha256_blocks_portable (uint32_t state[8], const uint8_t *p, size_t n)
{
  for (; n > 0; n--, p += 64)
    compress_portable (state, p);
}

#if defined(__x86_64__) || defined(__i386__)

#include <cpuid.h>
#include <immintrin.h>

#define CPUID_LEAF_FEATURES 1
#define CPUID_ECX_SSSE3     (1u << 9)
#define CPUID_ECX_SSE4_1    (1u << 19)
#define CPUID_LEAF_EXTENDED 7
#define CPUID_EBX_SHA       (1u << 29)

/* Asked once: cpuid is slow in a VM (it traps to the hypervisor).  0 not
   asked yet, 1 yes, 2 no; a race asks twice and stores the same.  */
static int has_sha_extensions;

static bool
cpu_has_sha_extensions (void)
{
  int known = __atomic_load_n (&has_sha_extensions, __ATOMIC_RELAXED);

  if (known == 0)
    {
      unsigned a, b, c, d;
      bool yes = __get_cpuid (CPUID_LEAF_FEATURES, &a, &b, &c, &d) && (c & CPUID_ECX_SSSE3)
                 && (c & CPUID_ECX_SSE4_1) && __get_cpuid_count (CPUID_LEAF_EXTENDED, 0, &a, &b, &c, &d)
                 && (b & CPUID_EBX_SHA);

      known = yes ? 1 : 2;
      __atomic_store_n (&has_sha_extensions, known, __ATOMIC_RELAXED);
    }
  return known == 1;
}

__attribute__ ((target ("sha,sse4.1,ssse3"))) static void
blocks_sha (uint32_t state[8], const uint8_t *p, size_t n)
{
  /* Each 32-bit word of the block is big-endian.  */
  const __m128i byte_swap = _mm_set_epi64x (0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  /* Lanes are listed lowest first.  ABEF is F,E,B,A and CDGH is H,G,D,C,
     as the instructions take them.  */
  __m128i t0 = _mm_shuffle_epi32 (_mm_loadu_si128 ((const __m128i *)&state[0]), 0xb1); /* B,A,D,C */
  __m128i t1 = _mm_shuffle_epi32 (_mm_loadu_si128 ((const __m128i *)&state[4]), 0x1b); /* H,G,F,E */
  __m128i abef = _mm_alignr_epi8 (t0, t1, 8);
  __m128i cdgh = _mm_blend_epi16 (t1, t0, 0xf0);

  for (; n > 0; n--, p += 64)
    {
      const __m128i abef_in = abef, cdgh_in = cdgh;
      /* The schedule's last four groups: m[k % 4] holds W[4k..4k+3].  */
      __m128i m[4];

      for (unsigned k = 0; k < 16; k++)
        {
          __m128i words, wk;

          if (k < 4)
            words = _mm_shuffle_epi8 (_mm_loadu_si128 ((const __m128i *)(p + 16 * k)), byte_swap);
          else
            {
              /* W[i] = W[i-16] + s0(W[i-15]) + W[i-7] + s1(W[i-2]).  */
              words = _mm_sha256msg1_epu32 (m[k % 4], m[(k - 3) % 4]);
              words = _mm_add_epi32 (words, _mm_alignr_epi8 (m[(k - 1) % 4], m[(k - 2) % 4], 4));
              words = _mm_sha256msg2_epu32 (words, m[(k - 1) % 4]);
            }
          m[k % 4] = words;
          wk = _mm_add_epi32 (words, _mm_loadu_si128 ((const __m128i *)&round_constants[4 * k]));
          /* Two rounds on the low two words, two on the high two; each
             call returns the new ABEF, and the old one becomes CDGH.  */
          cdgh = _mm_sha256rnds2_epu32 (cdgh, abef, wk);
          abef = _mm_sha256rnds2_epu32 (abef, cdgh, _mm_shuffle_epi32 (wk, 0x0e));
        }
      abef = _mm_add_epi32 (abef, abef_in);
      cdgh = _mm_add_epi32 (cdgh, cdgh_in);
    }

  /* Back to A,B,C,D and E,F,G,H.  */
  t0 = _mm_shuffle_epi32 (abef, 0x1b); /* A,B,E,F */
  t1 = _mm_shuffle_epi32 (cdgh, 0xb1); /* G,H,C,D */
  _mm_storeu_si128 ((__m128i *)&state[0], _mm_blend_epi16 (t0, t1, 0xf0));
  _mm_storeu_si128 ((__m128i *)&state[4], _mm_alignr_epi8 (t1, t0, 8));
}

bool
sp_sha256_blocks_accelerated (uint32_t state[8], const uint8_t *p, size_t n)
{
  if (!cpu_has_sha_extensions ())
    return false;
  blocks_sha (state, p, n);
  return true;
}

#else

bool
sp_sha256_blocks_accelerated (uint32_t state[8], const uint8_t *p, size_t n)
{
  (void)state, (void)p, (void)n;
  return false;
}

#endif
