/* Sensitivity classes at serve time (docs/config.md, "Sensitivity
   classes"; docs/threat-model.md): what each repository's class lets its
   calls carry, beside --bit-budget, and what serve refuses to start with. */
#include <inttypes.h>

#include "serve/serve.h"

uint64_t
sp_serve_repo_bit_budget_millibits (const struct sp_serve *s, size_t repo_index)
{
  uint64_t option = s->opt->bit_budget_millibits, class_bits;

  if (!sp_config_repo_class_bits (s->config, repo_index, &class_bits) || class_bits == 0)
    return option;
  /* Both bound the repository: the smaller wins.  */
  if (option == 0 || class_bits * 1000 < option)
    return class_bits * 1000;
  return option;
}

int
sp_serve_check_sensitivity (const struct sp_config *config, const struct sp_serve_options *opt,
                            sp_error_t *err)
{
  size_t runnable = 0;

  for (size_t i = 0; i < config->n_private_repos; i++)
    {
      uint64_t bits;
      bool metered = sp_config_repo_class_bits (config, i, &bits);

      if (config->sensitivity != NULL && config->sensitivity[i] == SP_SENSITIVITY_SEALED)
        continue;
      runnable++;
      /* Immediate release leaks timing without bound: no call fits a
         budget, and a class's budget is not one to drop in silence.  */
      if (metered && opt->release == SP_RELEASE_IMMEDIATE)
        return sp_make_error (
            err, 0,
            "--release immediate: repository `%s` is `%s`, whose calls have a budget of %" PRIu64
            " bits, and immediate release leaks timing without bound, so no call fits it; "
            "use bucketed or fixed",
            config->private_repos[i], sp_sensitivity_name (config->sensitivity[i]), bits);
    }
  if (config->enabled && config->n_private_repos > 0 && runnable == 0)
    return sp_make_error (err, 0,
                          "every repository is `sealed`, so no call could ever run (and the confinement "
                          "self-check needs one that may)");
  return 0;
}
