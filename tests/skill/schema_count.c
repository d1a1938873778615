/* schema_count SCHEMA: parses SCHEMA with the proxy's own parser
   (sp_answer_schema_parse) and prints its cardinality N in decimal and its
   content bits, ceil(log2(N + 1)), as "N BITS"; or the refusal on stderr
   and exit 1.  tests/skill/test_skill.py runs it on every example schema of
   the generated SKILL.md, so that the N and bits the text states are the
   proxy's own.  */
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "text/answer_schema.h"

int
main (int argc, char **argv)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_answer_schema struct sp_answer_schema *schema = NULL;
  char n[SP_BIGNUM_DECIMAL_MAX];

  if (argc != 2)
    {
      fputs ("usage: schema_count SCHEMA\n", stderr);
      return 2;
    }
  if (sp_answer_schema_parse (argv[1], strlen (argv[1]), &schema, &err) < 0)
    {
      fprintf (stderr, "refused: %s\n", sp_error_message (err));
      return 1;
    }
  if (sp_bignum_decimal (sp_answer_schema_cardinality (schema), n, sizeof (n)) == 0)
    {
      fputs ("N does not fit\n", stderr);
      return 1;
    }
  printf ("%s %u\n", n, sp_answer_schema_content_bits (schema));
  return 0;
}
