/* SHA-256's two ways of compressing (base/sha256_blocks.h) give the same
   state: the SHA extensions against the portable code, from the same
   states over the same blocks, one block and many at once.  On a CPU
   without the extensions there is nothing to compare, and the program says
   SKIP with that reason.  */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha256_blocks.h"

#include "sp_check.h"

#define MAX_BLOCKS 37

/* A fixed xorshift, so that a failure repeats.  */
static uint64_t
next_random (uint64_t *x)
{
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

START_TEST (both_ways_give_the_same_state_from_random_states_and_blocks)
{
  static uint8_t blocks[64 * MAX_BLOCKS];
  uint64_t x = 0x9e3779b97f4a7c15ULL + (uint64_t)_i;

  for (unsigned round = 0; round < 64; round++)
    {
      uint32_t portable[8], accelerated[8];
      size_t n = 1 + next_random (&x) % MAX_BLOCKS;

      for (size_t i = 0; i < 64 * n; i++)
        blocks[i] = (uint8_t)next_random (&x);
      for (unsigned i = 0; i < 8; i++)
        portable[i] = accelerated[i] = (uint32_t)next_random (&x);
      sp_sha256_blocks_portable (portable, blocks, n);
      ck_assert (sp_sha256_blocks_accelerated (accelerated, blocks, n));
      ck_assert_msg (memcmp (portable, accelerated, sizeof (portable)) == 0,
                     "seed %d round %u: %zu blocks differ", _i, round, n);
    }
}
END_TEST

/* The bytes that stress each word's byte order: all zero, all ones, one
   bit at a time.  */
START_TEST (both_ways_agree_on_single_bits)
{
  static const uint32_t initial[8] = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
  };

  for (unsigned bit = 0; bit < 64 * 8 + 2; bit++)
    {
      uint8_t block[64];
      uint32_t portable[8], accelerated[8];

      memset (block, bit == 64 * 8 + 1 ? 0xff : 0, sizeof (block));
      if (bit < 64 * 8)
        block[bit / 8] = (uint8_t)(1u << (bit % 8));
      memcpy (portable, initial, sizeof (initial));
      memcpy (accelerated, initial, sizeof (initial));
      sp_sha256_blocks_portable (portable, block, 1);
      ck_assert (sp_sha256_blocks_accelerated (accelerated, block, 1));
      ck_assert_msg (memcmp (portable, accelerated, sizeof (portable)) == 0, "bit %u differs", bit);
    }
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("sha256_blocks");
  TCase *tc = tcase_create ("core");

  tcase_add_loop_test (tc, both_ways_give_the_same_state_from_random_states_and_blocks, 0, 8);
  tcase_add_test (tc, both_ways_agree_on_single_bits);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  uint32_t probe[8] = { 0 };
  uint8_t block[64] = { 0 };

  if (!sp_sha256_blocks_accelerated (probe, block, 1))
    {
      printf ("1..0 # SKIP this CPU (or this build's target) has no SHA extensions: only the portable "
              "compression runs, and check_sha256 tests it\n");
      return EXIT_SUCCESS;
    }
  return sp_check_run (make_suite ());
}
