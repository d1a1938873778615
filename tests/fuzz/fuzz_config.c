/* libFuzzer harness for the config loader (sp_config_parse, and with it the
   JSON pre-pass, the yajl tree, the repository-name rules, and both forms:
   the block and the firewall's enclaves list).  Beyond "no
   crash, no leak", it checks what a success promises, a submodule policy
   for every repository among it.  */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/repo_name.h"
#include "text/config.h"
#include "text/json.h"

#include "fuzz.h"

static void
check_success (const struct sp_config *c)
{
  uint64_t unit;

  FUZZ_REQUIRE (c->timeout_seconds >= SP_TIMEOUT_MIN_SECONDS && c->timeout_seconds <= SP_TIMEOUT_MAX_SECONDS);
  FUZZ_REQUIRE (c->max_invocations >= SP_INVOCATIONS_MIN && c->max_invocations <= SP_INVOCATIONS_MAX);
  FUZZ_REQUIRE (c->memory_limit_bytes >= SP_MEMORY_MIN_BYTES && c->memory_limit_bytes <= SP_MEMORY_MAX_BYTES);
  FUZZ_REQUIRE (c->memory_limit != NULL && strlen (c->memory_limit) >= 2);
  /* Either case of either suffix: "512m", "512M", "1g", "1G".  */
  switch (c->memory_limit[strlen (c->memory_limit) - 1])
    {
    case 'g':
    case 'G':
      unit = 1ULL << 30;
      break;
    case 'm':
    case 'M':
      unit = 1ULL << 20;
      break;
    default:
      FUZZ_REQUIRE (!"memoryLimit kept without its unit");
    }
  FUZZ_REQUIRE (strtoull (c->memory_limit, NULL, 10) * unit == c->memory_limit_bytes);
  FUZZ_REQUIRE (strcmp (sp_runtime_name (c->runtime), "unknown") != 0);
  FUZZ_REQUIRE (c->interpreter == SP_INTERPRETER_PYTHON3);
  FUZZ_REQUIRE (c->max_script_bytes >= 1 && c->max_script_bytes <= SP_SCRIPT_MAX_BYTES);
  FUZZ_REQUIRE (c->form == SP_CONFIG_FORM_BLOCK || (c->form == SP_CONFIG_FORM_ENCLAVES && c->enabled));
  /* sealed is metered at 0 whatever the document says; the others within
     the budget bound when metered.  */
  FUZZ_REQUIRE (c->class_metered[SP_SENSITIVITY_SEALED] && c->class_bits[SP_SENSITIVITY_SEALED] == 0);
  for (int s = SP_SENSITIVITY_PUBLIC; s < SP_SENSITIVITY_SEALED; s++)
    FUZZ_REQUIRE (!c->class_metered[s] || (c->class_bits[s] >= 1 && c->class_bits[s] <= SP_BIT_BUDGET_MAX));

  if (!c->enabled)
    {
      FUZZ_REQUIRE (c->n_private_repos == 0 && c->submodules == NULL);
      return;
    }
  FUZZ_REQUIRE (c->n_private_repos >= 1 && c->n_private_repos <= SP_CONFIG_MAX_REPOS);
  FUZZ_REQUIRE (c->submodules != NULL);
  for (size_t i = 0; i < c->n_private_repos; i++)
    {
      const char *r = c->private_repos[i];
      sp_error_t err = NULL;

      uint64_t bits = 1;

      FUZZ_REQUIRE (c->submodules[i] == SP_SUBMODULES_OMIT || c->submodules[i] == SP_SUBMODULES_REJECT);
      FUZZ_REQUIRE (c->sensitivity[i] >= SP_SENSITIVITY_NONE && c->sensitivity[i] <= SP_SENSITIVITY_SEALED);
      FUZZ_REQUIRE (c->form == SP_CONFIG_FORM_BLOCK || c->sensitivity[i] != SP_SENSITIVITY_NONE);
      if (c->sensitivity[i] == SP_SENSITIVITY_NONE)
        FUZZ_REQUIRE (!sp_config_repo_class_bits (c, i, &bits));
      if (c->sensitivity[i] == SP_SENSITIVITY_SEALED)
        FUZZ_REQUIRE (sp_config_repo_class_bits (c, i, &bits) && bits == 0);
      FUZZ_REQUIRE (sp_config_repo_index (c, (const uint8_t *)r, strlen (r)) == (ssize_t)i);
      FUZZ_REQUIRE (sp_repo_name_check (r, strlen (r), &err) == 0);
      FUZZ_REQUIRE (sp_config_allows_repo (c, (const uint8_t *)r, strlen (r)));
      for (size_t j = 0; j < i; j++)
        FUZZ_REQUIRE (strcmp (r, c->private_repos[j]) != 0);
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct sp_config *config = NULL;
  sp_error_t err = NULL;
  int ret;

  /* The loader never sees more than this; the JSON layer has no cap of its own.  */
  if (size > SP_CONFIG_MAX_BYTES)
    return 0;

  ret = sp_config_parse ((const char *)data, size, &config, &err);
  if (ret == 0)
    {
      cleanup_json struct sp_json *doc = NULL;
      sp_error_t json_err = NULL;

      FUZZ_REQUIRE (config != NULL && err == NULL);
      check_success (config);
      /* A valid config is a valid document with an object at the root.  */
      FUZZ_REQUIRE (sp_json_parse ((const char *)data, size, SP_CONFIG_MAX_DEPTH, &doc, &json_err) == 0);
      FUZZ_REQUIRE (doc->type == SP_JSON_OBJECT);
    }
  else
    {
      FUZZ_REQUIRE (ret == -1 && config == NULL && err != NULL);
      FUZZ_REQUIRE (sp_error_message (err)[0] != '\0');
    }
  sp_config_free (config);
  sp_error_release (&err);
  return 0;
}
