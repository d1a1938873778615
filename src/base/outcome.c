/* Outcome rules: see src/base/outcome.h.  */
#include "base/outcome.h"

#include "base/utf8.h"

/* Code points that would make the outcome render other than it reads:
   controls break lines or move the cursor; separators break lines in
   JSON-aware viewers; bidi controls reorder what follows them.  */
bool
sp_outcome_char_forbidden (uint32_t cp)
{
  if (cp < 0x20 || cp == 0x7F) /* C0, DEL */
    return true;
  if (cp >= 0x80 && cp <= 0x9F) /* C1 */
    return true;
  if (cp == 0x2028 || cp == 0x2029) /* line, paragraph separator */
    return true;
  if (cp == 0x061C || cp == 0x200E || cp == 0x200F) /* ALM, LRM, RLM */
    return true;
  if (cp >= 0x202A && cp <= 0x202E) /* LRE, RLE, PDF, LRO, RLO */
    return true;
  if (cp >= 0x2066 && cp <= 0x2069) /* LRI, RLI, FSI, PDI */
    return true;
  return false;
}

int
sp_outcome_check (struct sp_bytes outcome, sp_error_t *err)
{
  size_t off = 0;

  if (outcome.len == 0)
    return sp_make_error (err, 0, "empty");
  if (outcome.len > SP_OUTCOME_MAX_BYTES)
    return sp_make_error (err, 0, "%zu bytes, above %d", outcome.len, SP_OUTCOME_MAX_BYTES);
  while (off < outcome.len)
    {
      uint32_t cp;
      size_t n = sp_utf8_decode (outcome.data + off, outcome.len - off, &cp);

      if (n == 0)
        return sp_make_error (err, 0, "invalid UTF-8 at byte %zu", off);
      if (sp_outcome_char_forbidden (cp))
        return sp_make_error (err, 0, "control or formatting character U+%04X at byte %zu", (unsigned)cp,
                              off);
      off += n;
    }
  if (sp_bytes_equal_str (outcome, SP_OUTCOME_RESERVED))
    return sp_make_error (err, 0, "the answer reserved for failures");
  return 0;
}

int
sp_outcomes_check (const struct sp_bytes outcomes[SP_OUTCOME_COUNT], sp_error_t *err)
{
  for (size_t i = 0; i < SP_OUTCOME_COUNT; i++)
    {
      if (sp_outcome_check (outcomes[i], err) < 0)
        return sp_error_wrap (err, "outcome %zu", i + 1);
    }
  for (size_t i = 0; i < SP_OUTCOME_COUNT; i++)
    for (size_t j = i + 1; j < SP_OUTCOME_COUNT; j++)
      if (sp_bytes_equal (outcomes[i], outcomes[j]))
        return sp_make_error (err, 0, "outcome %zu: same as outcome %zu", j + 1, i + 1);
  return 0;
}
