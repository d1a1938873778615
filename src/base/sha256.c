/* SHA-256 as FIPS 180-4 section 6.2 specifies it.  See sha256.h.  */
#include "base/sha256.h"

#include <string.h>

#include "base/sha256_blocks.h"

/* n whole blocks, with the CPU's SHA extensions where it has them.  */
static void
compress (uint32_t state[8], const uint8_t *p, size_t n)
{
  if (!sp_sha256_blocks_accelerated (state, p, n))
    sp_sha256_blocks_portable (state, p, n);
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
      compress (ctx->state, ctx->block, 1);
      ctx->block_len = 0;
    }
  if (len >= 64)
    {
      compress (ctx->state, p, len / 64);
      p += len - len % 64;
      len %= 64;
    }
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
      compress (ctx->state, ctx->block, 1);
      ctx->block_len = 0;
    }
  memset (ctx->block + ctx->block_len, 0, 56 - ctx->block_len);
  for (unsigned i = 0; i < 8; i++)
    ctx->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
  compress (ctx->state, ctx->block, 1);

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
