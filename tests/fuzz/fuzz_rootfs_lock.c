/* libFuzzer harness for the rootfs lock parser.  Beyond "no crash, no leak":
   a parsed lock holds at least one entry, no name twice, and every entry's
   .deb file name stays a plain name (no '/', never "." or "..").  */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "rootfs/lock.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct sp_lock lock = { 0 };
  sp_error_t err = NULL;

  if (size > SP_LOCK_MAX_BYTES)
    return 0;
  if (sp_lock_parse ((const char *)data, size, &lock, &err) < 0)
    {
      FUZZ_REQUIRE (err != NULL && sp_error_message (err)[0] != '\0');
      sp_error_release (&err);
      return 0;
    }
  FUZZ_REQUIRE (err == NULL && lock.count >= 1);
  for (size_t i = 0; i < lock.count; i++)
    {
      char name[SP_LOCK_DEB_NAME_SIZE];

      sp_lock_deb_filename (&lock.entries[i], name);
      FUZZ_REQUIRE (strchr (name, '/') == NULL && strcmp (name, ".") != 0 && strcmp (name, "..") != 0);
      for (size_t j = 0; j < i; j++)
        FUZZ_REQUIRE (strcmp (lock.entries[i].name, lock.entries[j].name) != 0);
    }
  sp_lock_release (&lock);
  return 0;
}
