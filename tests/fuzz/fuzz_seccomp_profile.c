/* libFuzzer harness for the seccomp profile loader.  Beyond "no crash, no
   leak": a loaded profile re-emits canonically, and its canonical form loads
   again to the very same bytes.  */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "seccomp/profile.h"
#include "text/yajl_util.h"

#include "fuzz.h"

/* The profile's canonical bytes, or NULL.  */
static char *
canonical (const struct sp_seccomp_profile *profile, size_t *len)
{
  cleanup_yajl_gen yajl_gen g = yajl_gen_alloc (NULL);
  const unsigned char *buf;
  char *copy;

  FUZZ_REQUIRE (g != NULL);
  FUZZ_REQUIRE (sp_seccomp_profile_gen (profile, g) == 0);
  FUZZ_REQUIRE (yajl_gen_get_buf (g, &buf, len) == yajl_gen_status_ok);
  copy = malloc (*len);
  FUZZ_REQUIRE (copy != NULL);
  memcpy (copy, buf, *len);
  return copy;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  cleanup_seccomp_profile struct sp_seccomp_profile *profile = NULL;
  cleanup_seccomp_profile struct sp_seccomp_profile *again = NULL;
  cleanup_free char *first = NULL;
  cleanup_free char *second = NULL;
  sp_error_t err = NULL;
  size_t first_len, second_len;

  if (sp_seccomp_profile_load ((const char *)data, size, &profile, &err) < 0)
    {
      FUZZ_REQUIRE (profile == NULL && err != NULL && sp_error_message (err)[0] != '\0');
      sp_error_release (&err);
      return 0;
    }
  FUZZ_REQUIRE (profile != NULL && err == NULL);
  first = canonical (profile, &first_len);
  FUZZ_REQUIRE (sp_seccomp_profile_load (first, first_len, &again, &err) == 0);
  second = canonical (again, &second_len);
  FUZZ_REQUIRE (first_len == second_len && memcmp (first, second, first_len) == 0);
  return 0;
}
