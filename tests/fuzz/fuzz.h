/* Shared by the libFuzzer harnesses: the entry point and the invariant check.
   A broken invariant aborts, which libFuzzer reports as a crash with the input
   that caused it.  */
#ifndef SP_FUZZ_H
#define SP_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define FUZZ_REQUIRE(cond)                                                                                   \
  do                                                                                                         \
    {                                                                                                        \
      if (!(cond))                                                                                           \
        abort ();                                                                                            \
    }                                                                                                        \
  while (0)

/* A heap copy of exactly size bytes (no NUL after it), so that ASan reports
   a parser reading one byte past, or before, what it was given.  */
static inline char *
fuzz_exact_copy (const void *data, size_t size)
{
  char *copy = malloc (size);

  FUZZ_REQUIRE (copy != NULL || size == 0);
  if (size > 0)
    memcpy (copy, data, size);
  return copy;
}

/* An error message fit for one log line: not empty, printable ASCII only.  */
static inline bool
fuzz_message_ok (const char *msg)
{
  if (msg == NULL || msg[0] == '\0')
    return false;
  for (const char *p = msg; *p; p++)
    if (*p < 0x20 || *p > 0x7e)
      return false;
  return true;
}

/* A commit id: exactly 40 or 64 lowercase hex digits.  */
static inline bool
fuzz_commit_id_ok (const char *s)
{
  size_t n = strspn (s, "0123456789abcdef");

  return s[n] == '\0' && (n == 40 || n == 64);
}

#endif
