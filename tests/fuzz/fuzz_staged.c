/* libFuzzer harness for the staged.json parser (sp_staged_parse: exactly
   what sp_staged_load runs on the file's bytes).  Invariants:
   - a failure leaves no seeds and sets a one-line printable message;
   - a success holds 1 to SP_CONFIG_MAX_REPOS seeds and a run id; each seed
     a repository name, an index below SP_CONFIG_MAX_REPOS, a 40 or 64 hex
     commit, a sha256:<hex> digest, and (a local seed's, when known) at most
     SP_SEED_SUBMODULES_MAX omitted paths as sp_quote_name writes them; no
     repository or index twice;
   - a success renders (sp_staged_render, what sp_staged_write writes), and
     the rendering parses to the same values and renders to the same bytes.  */
#include <stdint.h>
#include <string.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/quote.h"
#include "base/repo_name.h"
#include "base/sha256.h"
#include "bundle/bundle.h"
#include "stage/seed_store.h"

#include "fuzz.h"

static void
check_seeds (const struct sp_staged *s)
{
  FUZZ_REQUIRE (s->n >= 1 && s->n <= SP_CONFIG_MAX_REPOS && s->seeds != NULL);
  FUZZ_REQUIRE (sp_bundle_id_valid (s->run));
  for (size_t i = 0; i < s->n; i++)
    {
      const struct sp_seed *seed = &s->seeds[i];
      cleanup_error sp_error_t err = NULL;
      const char *hex = seed->digest + strlen (SP_DIGEST_PREFIX);

      FUZZ_REQUIRE (sp_repo_name_check (seed->repo, strlen (seed->repo), &err) == 0);
      FUZZ_REQUIRE (seed->index < SP_CONFIG_MAX_REPOS);
      FUZZ_REQUIRE (seed->source == SP_SEED_LOCAL || seed->source == SP_SEED_GITHUB);
      FUZZ_REQUIRE (fuzz_commit_id_ok (seed->commit));
      FUZZ_REQUIRE (strncmp (seed->digest, SP_DIGEST_PREFIX, strlen (SP_DIGEST_PREFIX)) == 0);
      FUZZ_REQUIRE (strlen (hex) == SP_SHA256_HEX && strspn (hex, "0123456789abcdef") == SP_SHA256_HEX);
      FUZZ_REQUIRE (sp_staged_find (s, seed->repo) == seed);
      FUZZ_REQUIRE (seed->omitted_known || seed->n_omitted == 0);
      FUZZ_REQUIRE (seed->n_omitted <= SP_SEED_SUBMODULES_MAX);
      FUZZ_REQUIRE (seed->n_omitted == 0 || seed->source == SP_SEED_LOCAL);
      for (size_t k = 0; k < seed->n_omitted; k++)
        FUZZ_REQUIRE (sp_quote_name_ok (seed->omitted[k]));
      for (size_t j = 0; j < i; j++)
        FUZZ_REQUIRE (s->seeds[j].index != seed->index);
    }
}

static void
check_same (const struct sp_staged *a, const struct sp_staged *b)
{
  FUZZ_REQUIRE (strcmp (a->run, b->run) == 0 && a->n == b->n);
  for (size_t i = 0; i < a->n; i++)
    {
      const struct sp_seed *x = &a->seeds[i], *y = &b->seeds[i];

      FUZZ_REQUIRE (strcmp (x->repo, y->repo) == 0 && x->index == y->index && x->source == y->source);
      FUZZ_REQUIRE (strcmp (x->commit, y->commit) == 0 && strcmp (x->digest, y->digest) == 0);
      FUZZ_REQUIRE (x->omitted_known == y->omitted_known && x->n_omitted == y->n_omitted);
      for (size_t k = 0; k < x->n_omitted; k++)
        FUZZ_REQUIRE (strcmp (x->omitted[k], y->omitted[k]) == 0);
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct sp_staged staged, again;
  cleanup_free char *buf = NULL;
  cleanup_free char *text = NULL;
  cleanup_free char *text_again = NULL;
  cleanup_free char *text_copy = NULL;
  size_t len = 0, len_again = 0;
  sp_error_t err = NULL;

  /* sp_staged_load reads no more than this.  */
  if (size > SP_STAGED_MAX_BYTES)
    return 0;
  buf = fuzz_exact_copy (data, size);
  if (sp_staged_parse (buf, size, &staged, &err) < 0)
    {
      FUZZ_REQUIRE (err != NULL && staged.n == 0 && staged.seeds == NULL);
      FUZZ_REQUIRE (fuzz_message_ok (sp_error_message (err)));
      sp_error_release (&err);
      return 0;
    }
  FUZZ_REQUIRE (err == NULL);
  check_seeds (&staged);

  FUZZ_REQUIRE (sp_staged_render (&staged, &text, &len, &err) == 0);
  FUZZ_REQUIRE (len <= SP_STAGED_MAX_BYTES);
  text_copy = fuzz_exact_copy (text, len);
  FUZZ_REQUIRE (sp_staged_parse (text_copy, len, &again, &err) == 0);
  check_same (&staged, &again);
  FUZZ_REQUIRE (sp_staged_render (&again, &text_again, &len_again, &err) == 0);
  FUZZ_REQUIRE (len_again == len && memcmp (text, text_again, len) == 0);

  sp_staged_release (&again);
  sp_staged_release (&staged);
  return 0;
}
