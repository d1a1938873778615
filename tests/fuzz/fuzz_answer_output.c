/* libFuzzer harness for sp_answer_schema_validate and
   sp_answer_schema_validate_result (/probe/out's envelope).  Each input is a
   schema's text, a NUL byte, and a script's output (which may hold further
   NULs); an input without a NUL is its own output against a fixed schema.
   Invariants:
   - a refusal has a one-line printable message and no canonical text;
   - an accepted output is at most SP_ANSWER_OUTPUT_MAX_BYTES, and its
     canonical text is NUL-terminated, no longer than the output, free of
     raw bytes below 0x20, and validates again to exactly itself (the
     canonical form is a fixed point);
   - the same output wrapped as {"result":...} (when it fits) is accepted by
     sp_answer_schema_validate_result with the same canonical value, and
     whatever that function accepts of the raw input has a canonical value
     that sp_answer_schema_validate accepts as itself.  */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/bounds.h"
#include "base/error.h"
#include "text/answer_schema.h"

#include "fuzz.h"

/* Every node type, for inputs that carry no schema of their own.  */
static const char fixed_schema[]
    = "{\"type\":\"object\",\"fields\":{"
      "\"n\":{\"type\":\"integer\",\"minimum\":-3,\"maximum\":1000},"
      "\"b\":{\"type\":\"boolean\"},"
      "\"e\":{\"type\":\"enum\",\"values\":[\"a\",\"q\\\"\",\"\\\\\",\"caf\\u00e9\"]},"
      "\"c\":{\"type\":\"const\",\"value\":null},"
      "\"t\":{\"type\":\"tuple\",\"items\":[{\"type\":\"enum\",\"values\":[1,-2]},{\"type\":\"const\","
      "\"value\":true}]},"
      "\"a\":{\"type\":\"array\",\"length\":2,\"items\":{\"type\":\"boolean\"}},"
      "\"u\":{\"type\":\"union\",\"variants\":{\"x\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":3},"
      "\"y\":{\"type\":\"const\",\"value\":\"x\"}}}}}";

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const uint8_t *sep = memchr (data, '\0', size);
  const char *schema_text = fixed_schema;
  size_t schema_len = sizeof fixed_schema - 1;
  const uint8_t *out = data;
  size_t out_len = size;
  struct sp_answer_schema *schema = NULL;
  sp_error_t err = NULL;
  char *schema_copy = NULL, *output, *canonical = NULL, *again = NULL;
  size_t clen = 0, alen = 0;
  int ret;

  if (sep != NULL)
    {
      schema_copy = fuzz_exact_copy (data, (size_t)(sep - data));
      schema_text = schema_copy;
      schema_len = (size_t)(sep - data);
      out = sep + 1;
      out_len = size - schema_len - 1;
    }
  if (sp_answer_schema_parse (schema_text, schema_len, &schema, &err) < 0)
    {
      FUZZ_REQUIRE (sep != NULL); /* the fixed schema is valid */
      sp_error_release (&err);
      free (schema_copy);
      return 0;
    }

  output = fuzz_exact_copy (out, out_len);
  ret = sp_answer_schema_validate (schema, output, out_len, &canonical, &clen, &err);
  FUZZ_REQUIRE (ret == 0 || ret == -1);
  FUZZ_REQUIRE ((ret == 0) == (err == NULL));
  FUZZ_REQUIRE ((ret == 0) == (canonical != NULL));
  if (ret < 0)
    {
      FUZZ_REQUIRE (clen == 0);
      FUZZ_REQUIRE (fuzz_message_ok (sp_error_message (err)));
      sp_error_release (&err);
    }
  else
    {
      FUZZ_REQUIRE (out_len > 0 && out_len <= SP_ANSWER_OUTPUT_MAX_BYTES);
      FUZZ_REQUIRE (clen > 0 && clen <= out_len && canonical[clen] == '\0' && strlen (canonical) == clen);
      for (size_t i = 0; i < clen; i++)
        FUZZ_REQUIRE ((unsigned char)canonical[i] >= 0x20);
      FUZZ_REQUIRE (sp_answer_schema_validate (schema, canonical, clen, &again, &alen, &err) == 0);
      FUZZ_REQUIRE (alen == clen && memcmp (again, canonical, clen) == 0);
      free (again);
      again = NULL;
      if (out_len + 11 <= SP_ANSWER_OUTPUT_MAX_BYTES)
        {
          char *wrapped = malloc (out_len + 11);

          FUZZ_REQUIRE (wrapped != NULL);
          memcpy (wrapped, "{\"result\":", 10);
          memcpy (wrapped + 10, output, out_len);
          wrapped[out_len + 10] = '}';
          FUZZ_REQUIRE (sp_answer_schema_validate_result (schema, wrapped, out_len + 11, &again, &alen, &err)
                        == 0);
          FUZZ_REQUIRE (alen == clen && memcmp (again, canonical, clen) == 0);
          free (again);
          free (wrapped);
        }
      free (canonical);
    }
  canonical = NULL;
  if (sp_answer_schema_validate_result (schema, output, out_len, &canonical, &clen, &err) == 0)
    {
      FUZZ_REQUIRE (sp_answer_schema_validate (schema, canonical, clen, &again, &alen, &err) == 0);
      FUZZ_REQUIRE (alen == clen && memcmp (again, canonical, clen) == 0);
      free (again);
      free (canonical);
    }
  else
    {
      FUZZ_REQUIRE (canonical == NULL && fuzz_message_ok (sp_error_message (err)));
      sp_error_release (&err);
    }
  free (output);
  sp_answer_schema_free (schema);
  free (schema_copy);
  return 0;
}
