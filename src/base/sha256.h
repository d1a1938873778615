/* SHA-256 (FIPS 180-4), for package, rootfs, seed and script digests.  Pure;
   no I/O.  The build takes no crypto library, so this is the project's own.  */
#ifndef SP_BASE_SHA256_H
#define SP_BASE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SP_SHA256_BYTES 32
#define SP_SHA256_HEX   (2 * SP_SHA256_BYTES)
/* "sha256:" + 64 lowercase hex digits + NUL: the text form of every digest
   this project records.  */
#define SP_DIGEST_PREFIX    "sha256:"
#define SP_DIGEST_TEXT_SIZE (sizeof (SP_DIGEST_PREFIX) - 1 + SP_SHA256_HEX + 1)

struct sp_sha256
{
  uint32_t state[8];
  uint64_t total_bytes;
  uint8_t block[64];
  size_t block_len;
};

void sp_sha256_init (struct sp_sha256 *ctx);
void sp_sha256_update (struct sp_sha256 *ctx, const void *data, size_t len);
void sp_sha256_final (struct sp_sha256 *ctx, uint8_t digest[SP_SHA256_BYTES]);

/* One-shot digest of data[0..len).  */
void sp_sha256 (const void *data, size_t len, uint8_t digest[SP_SHA256_BYTES]);

/* Lowercase hex, NUL-terminated: out has SP_SHA256_HEX + 1 bytes.  */
void sp_sha256_hex (const uint8_t digest[SP_SHA256_BYTES], char out[SP_SHA256_HEX + 1]);

/* "sha256:<hex>", NUL-terminated: out has SP_DIGEST_TEXT_SIZE bytes.  */
void sp_sha256_digest_text (const uint8_t digest[SP_SHA256_BYTES], char out[SP_DIGEST_TEXT_SIZE]);

#endif
