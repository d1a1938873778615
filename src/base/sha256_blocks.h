/* SHA-256's compression over whole 64-byte blocks, two ways: the portable
   one, and the x86 SHA extensions where the CPU has them (asked of cpuid
   once; sha256.c tries them first on every call).  Apart so that a unit
   test holds the two to the same answers.  */
#ifndef SP_BASE_SHA256_BLOCKS_H
#define SP_BASE_SHA256_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Compresses n blocks of 64 bytes at p into state.  */
void sp_sha256_blocks_portable (uint32_t state[8], const uint8_t *p, size_t n);

/* The same with the SHA extensions: false, and state untouched, where this
   CPU (or this build's target) has none.  */
bool sp_sha256_blocks_accelerated (uint32_t state[8], const uint8_t *p, size_t n);

#endif
