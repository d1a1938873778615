/* SHA-256 against the FIPS 180-2 example vectors, split at every
   block boundary, and against sha256sum on data long enough to span blocks.  */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/sha256.h"

#include "sp_check.h"

static const struct
{
  const char *name;
  const char *input;
  const char *hex;
} vectors[] = {
  { "empty", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
  { "abc", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
  { "two_blocks", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
  { "four_blocks",
    "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrst"
    "no"
    "pqrstu",
    "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1" },
};

static void
hex_of (const char *input, size_t len, size_t split, char out[SP_SHA256_HEX + 1])
{
  struct sp_sha256 ctx;
  uint8_t digest[SP_SHA256_BYTES];

  sp_sha256_init (&ctx);
  sp_sha256_update (&ctx, input, split);
  sp_sha256_update (&ctx, input + split, len - split);
  sp_sha256_final (&ctx, digest);
  sp_sha256_hex (digest, out);
}

START_TEST (test_vector_at_every_split)
{
  const char *input = vectors[_i].input;
  size_t len = strlen (input);

  for (size_t split = 0; split <= len; split++)
    {
      char hex[SP_SHA256_HEX + 1];

      hex_of (input, len, split, hex);
      ck_assert_msg (strcmp (hex, vectors[_i].hex) == 0, "%s split at %zu: %s", vectors[_i].name, split, hex);
    }
}
END_TEST

START_TEST (test_million_a)
{
  /* The third FIPS 180-2 example: one million 'a', fed in odd-sized pieces.  */
  static char chunk[997];
  struct sp_sha256 ctx;
  uint8_t digest[SP_SHA256_BYTES];
  char hex[SP_SHA256_HEX + 1];
  size_t left = 1000000;

  memset (chunk, 'a', sizeof (chunk));
  sp_sha256_init (&ctx);
  while (left > 0)
    {
      size_t n = left < sizeof (chunk) ? left : sizeof (chunk);
      sp_sha256_update (&ctx, chunk, n);
      left -= n;
    }
  sp_sha256_final (&ctx, digest);
  sp_sha256_hex (digest, hex);
  ck_assert_str_eq (hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

START_TEST (test_padding_boundaries_match_sha256sum)
{
  /* Lengths around 55/56 and 64 straddle the padding rule; compare with
     coreutils' sha256sum rather than with constants copied from elsewhere.  */
  static const size_t lengths[] = { 55, 56, 63, 64, 65, 119, 120, 128 };

  for (size_t i = 0; i < sizeof (lengths) / sizeof (lengths[0]); i++)
    {
      char path[] = "/tmp/sp-sha256-XXXXXX";
      char data[128], line[256];
      char expected[SP_SHA256_HEX + 1] = "";
      char hex[SP_SHA256_HEX + 1];
      uint8_t digest[SP_SHA256_BYTES];
      FILE *p;
      int fd;

      for (size_t j = 0; j < lengths[i]; j++)
        data[j] = (char)('0' + j % 10);
      fd = mkstemp (path);
      ck_assert_int_ge (fd, 0);
      ck_assert_int_eq (write (fd, data, lengths[i]), (ssize_t)lengths[i]);
      close (fd);
      snprintf (line, sizeof (line), "/usr/bin/sha256sum %s", path);
      p = popen (line, "r");
      ck_assert_ptr_nonnull (p);
      ck_assert_int_eq (fscanf (p, "%64s", expected), 1);
      pclose (p);
      unlink (path);

      sp_sha256 (data, lengths[i], digest);
      sp_sha256_hex (digest, hex);
      ck_assert_msg (strcmp (hex, expected) == 0, "length %zu: %s != %s", lengths[i], hex, expected);
    }
}
END_TEST

START_TEST (test_digest_text_form)
{
  uint8_t digest[SP_SHA256_BYTES];
  char text[SP_DIGEST_TEXT_SIZE];

  sp_sha256 ("abc", 3, digest);
  sp_sha256_digest_text (digest, text);
  ck_assert_str_eq (text, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  ck_assert_uint_eq (strlen (text) + 1, SP_DIGEST_TEXT_SIZE);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("sha256");
  TCase *tc = tcase_create ("core");

  tcase_add_loop_test (tc, test_vector_at_every_split, 0, sizeof (vectors) / sizeof (vectors[0]));
  tcase_add_test (tc, test_million_a);
  tcase_add_test (tc, test_padding_boundaries_match_sha256sum);
  tcase_add_test (tc, test_digest_text_form);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
