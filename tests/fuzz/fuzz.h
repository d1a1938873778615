/* Shared by the libFuzzer harnesses: the entry point and the invariant check.
   A broken invariant aborts, which libFuzzer reports as a crash with the input
   that caused it.  */
#ifndef SP_FUZZ_H
#define SP_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define FUZZ_REQUIRE(cond)                                                                                   \
  do                                                                                                         \
    {                                                                                                        \
      if (!(cond))                                                                                           \
        abort ();                                                                                            \
    }                                                                                                        \
  while (0)

#endif
