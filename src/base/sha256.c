/* SHA-256 as FIPS 180-4 section 6.2 specifies it.  See sha256.h.  */
#include "base/sha256.h"

#include <string.h>

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
compress (uint32_t state[8], const uint8_t block[64])
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
sp_sha256_init (struct sp_sha256 *ctx)
{
  static const uint32_t initial[8] = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
  };

  memcpy (ctx->state, initial, sizeof (initial));
  ctx->total_bytes = 0;
  ctx->block_len = 0;
}

void
sp_sha256_update (struct sp_sha256 *ctx, const void *data, size_t len)
{
  const uint8_t *p = data;

  ctx->total_bytes += len;
  if (ctx->block_len > 0)
    {
      size_t take = 64 - ctx->block_len < len ? 64 - ctx->block_len : len;

      memcpy (ctx->block + ctx->block_len, p, take);
      ctx->block_len += take;
      p += take;
      len -= take;
      if (ctx->block_len < 64)
        return;
      compress (ctx->state, ctx->block);
      ctx->block_len = 0;
    }
  for (; len >= 64; p += 64, len -= 64)
    compress (ctx->state, p);
  memcpy (ctx->block, p, len);
  ctx->block_len = len;
}

void
sp_sha256_final (struct sp_sha256 *ctx, uint8_t digest[SP_SHA256_BYTES])
{
  uint64_t bits = ctx->total_bytes * 8;

  /* Padding: 0x80, zeros up to 56 mod 64, then the bit length big-endian.  */
  ctx->block[ctx->block_len++] = 0x80;
  if (ctx->block_len > 56)
    {
      memset (ctx->block + ctx->block_len, 0, 64 - ctx->block_len);
      compress (ctx->state, ctx->block);
      ctx->block_len = 0;
    }
  memset (ctx->block + ctx->block_len, 0, 56 - ctx->block_len);
  for (unsigned i = 0; i < 8; i++)
    ctx->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
  compress (ctx->state, ctx->block);

  for (unsigned i = 0; i < 8; i++)
    {
      digest[4 * i] = (uint8_t)(ctx->state[i] >> 24);
      digest[4 * i + 1] = (uint8_t)(ctx->state[i] >> 16);
      digest[4 * i + 2] = (uint8_t)(ctx->state[i] >> 8);
      digest[4 * i + 3] = (uint8_t)ctx->state[i];
    }
  memset (ctx, 0, sizeof (*ctx));
}

void
sp_sha256 (const void *data, size_t len, uint8_t digest[SP_SHA256_BYTES])
{
  struct sp_sha256 ctx;

  sp_sha256_init (&ctx);
  sp_sha256_update (&ctx, data, len);
  sp_sha256_final (&ctx, digest);
}

void
sp_sha256_hex (const uint8_t digest[SP_SHA256_BYTES], char out[SP_SHA256_HEX + 1])
{
  static const char hex[] = "0123456789abcdef";

  for (size_t i = 0; i < SP_SHA256_BYTES; i++)
    {
      out[2 * i] = hex[digest[i] >> 4];
      out[2 * i + 1] = hex[digest[i] & 0xf];
    }
  out[SP_SHA256_HEX] = '\0';
}

void
sp_sha256_digest_text (const uint8_t digest[SP_SHA256_BYTES], char out[SP_DIGEST_TEXT_SIZE])
{
  memcpy (out, SP_DIGEST_PREFIX, sizeof (SP_DIGEST_PREFIX) - 1);
  sp_sha256_hex (digest, out + sizeof (SP_DIGEST_PREFIX) - 1);
}
