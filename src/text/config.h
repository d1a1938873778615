/* The `sealedProbes` block of the agent firewall's config document, written
   in JSON or in YAML, or the firewall's current `enclaves` list read onto
   the same settings (config_enclaves.h).
   docs/config.md is the reference; docs/config.schema.json says the same in
   JSON Schema, and tests/schema/ keeps the two in agreement.  */
#ifndef SP_TEXT_CONFIG_H
#define SP_TEXT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"

enum sp_runtime
{
  SP_RUNTIME_DOCKER,
  SP_RUNTIME_GVISOR,
  SP_RUNTIME_SBX,
  SP_RUNTIME_RUNC,
};

enum sp_interpreter
{
  SP_INTERPRETER_PYTHON3,
};

/* What staging does with a repository's submodules (sealedProbes.submodules;
   docs/staging.md, "Submodules").  */
enum sp_submodule_policy
{
  SP_SUBMODULES_OMIT,   /* the default: each gitlink an empty directory, recorded */
  SP_SUBMODULES_REJECT, /* the repository is refused, naming the gitlink */
};

/* A repository's sensitivity class (docs/config.md, "Sensitivity
   classes"): the firewall's four, and NONE for a plain string entry, which
   behaves as before classes existed (no class budget).  */
enum sp_sensitivity
{
  SP_SENSITIVITY_NONE,
  SP_SENSITIVITY_PUBLIC,
  SP_SENSITIVITY_INTERNAL,
  SP_SENSITIVITY_CONFIDENTIAL,
  SP_SENSITIVITY_SEALED,
};
#define SP_SENSITIVITY_COUNT (SP_SENSITIVITY_SEALED + 1)

/* Which document the settings came from.  Both give the same struct, and
   `config` prints both the same way.  */
enum sp_config_form
{
  SP_CONFIG_FORM_BLOCK,    /* a `sealedProbes` block, or none (has_block) */
  SP_CONFIG_FORM_ENCLAVES, /* the firewall's `enclaves` list, one script entry */
};

/* The effective settings, defaults applied.  When enabled is false nothing is
   enabled: private_repos is empty and sp_config_allows_repo is always false
   (the other fields still hold what was written, or the defaults).  has_block
   tells a document without the block (legitimate in the firewall's config)
   from one whose block says enabled is false, so that neither is reported as
   the other.  */
struct sp_config
{
  bool has_block;
  bool enabled;
  char **private_repos; /* each passed sp_repo_name_check; no duplicates */
  size_t n_private_repos;
  /* One per private_repos[i]: SP_SUBMODULES_OMIT unless the block's
     `submodules` names the repository.  */
  enum sp_submodule_policy *submodules;
  /* One per private_repos[i]: SP_SENSITIVITY_NONE for a plain string.  */
  enum sp_sensitivity *sensitivity;
  /* Per class, indexed by enum sp_sensitivity: whether the class is
     metered and its budget in whole bits (sealed: metered, 0; public:
     unmetered unless sensitivityBudgets gives it a number; NONE: never).  */
  bool class_metered[SP_SENSITIVITY_COUNT];
  uint64_t class_bits[SP_SENSITIVITY_COUNT];
  enum sp_config_form form;
  enum sp_runtime runtime;
  uint32_t timeout_seconds;
  uint64_t memory_limit_bytes;
  char *memory_limit; /* as written, e.g. "512m" */
  enum sp_interpreter interpreter;
  uint32_t max_invocations;
  /* The largest script this config accepts, bytes: SP_SCRIPT_MAX_BYTES
     unless an enclaves document's script.maxScriptBytes lowers it.  */
  size_t max_script_bytes;
};

/* The syntax a document is read in.  SNIFF is the agent firewall's rule for
   standard input and unknown names: a text that is JSON by its syntax (the
   lexical pre-pass and yajl's grammar accept it) is JSON, and what is
   refused then is final; only a text that fails as JSON syntax is read as
   YAML.  A text that is neither fails with one message naming both:
   `(document): neither JSON (<why>) nor YAML (<why>)`.  */
enum sp_config_syntax
{
  SP_CONFIG_SYNTAX_JSON,
  SP_CONFIG_SYNTAX_YAML,
  SP_CONFIG_SYNTAX_SNIFF,
};

/* By the path's name: `.json` is JSON, `.yaml` and `.yml` are YAML, and
   standard input ("-") and any other name are SNIFF.  Pure.  */
enum sp_config_syntax sp_config_syntax_for_path (const char *path);

/* Parses a whole config document in the given syntax.  Pure: no I/O.  The
   root must be an object; its other top-level keys belong to the host
   application and are ignored, but the whole document must be strict JSON,
   or strict YAML (yaml_tree.h), with no duplicate key anywhere, and no
   top-level key may be a near miss of the block's name
   (sp_config_key_is_near_miss).  On error,
   *err reads "<key path>: <reason>", e.g.
   `sealedProbes.timeout: must be an integer from 1 to 300`, the same in
   both syntaxes; it may echo a key but never a string value.  */
int sp_config_parse_syntax (const char *buf, size_t len, enum sp_config_syntax syntax, struct sp_config **out,
                            sp_error_t *err);

/* True when key[0..len) is a misspelt "sealedProbes": not it byte for byte,
   but equal to it ignoring ASCII case, or one edit from it ignoring ASCII
   case, where an edit inserts, deletes or substitutes one character (a
   Unicode code point) or swaps two adjacent ones.  sp_config_parse_syntax
   refuses such a top-level key, since ignoring it as the host application's
   would leave sealed probes off in silence.  Pure.  */
bool sp_config_key_is_near_miss (const char *key, size_t len);

/* sp_config_parse_syntax with SP_CONFIG_SYNTAX_JSON.  */
int sp_config_parse (const char *buf, size_t len, struct sp_config **out, sp_error_t *err);

/* Reads path (or standard input when path is "-") through one code path,
   capped at SP_CONFIG_MAX_BYTES, then sp_config_parse_syntax with the
   path's syntax.  Parse errors do not name the source, so a file and the
   same bytes on stdin fail identically when both are read the same way
   (a name without `.json`, `.yaml` or `.yml`, like stdin, is sniffed).  */
int sp_config_load (const char *path, struct sp_config **out, sp_error_t *err);

void sp_config_free (struct sp_config *config);

static inline void
sp_config_freep (struct sp_config **config)
{
  sp_config_free (*config);
  *config = NULL;
}
#define cleanup_config __attribute__ ((cleanup (sp_config_freep)))

/* What sp_size_text_parse found.  Below and above are told apart from
   malformed text so that a refusal can name the bound it hit.  */
enum sp_size_verdict
{
  SP_SIZE_OK = 0,
  SP_SIZE_MALFORMED = -1,
  SP_SIZE_BELOW_MIN = -2,
  SP_SIZE_ABOVE_MAX = -3,
};

/* A size as the config writes one: "<digits><unit>", no sign, no leading
   zero, unit "m"/"M" (MiB) or "g"/"G" (GiB): the agent firewall accepts both
   cases, and "2G" means what "2g" means.  Within min_bytes..max_bytes.  Pure
   arithmetic with an early stop, so no text can overflow it.  Returns
   SP_SIZE_OK with *bytes set, or the verdict (negative).  */
int sp_size_text_parse (const char *s, size_t len, uint64_t min_bytes, uint64_t max_bytes, uint64_t *bytes);

/* "docker", "gvisor", "sbx" or "runc".  */
const char *sp_runtime_name (enum sp_runtime runtime);

/* "python3".  */
const char *sp_interpreter_name (enum sp_interpreter interpreter);

/* "omit" or "reject".  */
const char *sp_submodule_policy_name (enum sp_submodule_policy policy);

/* True when the config is enabled and repo[0..len) is byte for byte one of
   its privateRepos.  No normalization: the request must already be exact.  */
bool sp_config_allows_repo (const struct sp_config *config, const uint8_t *repo, size_t len);

/* "none", "public", "internal", "confidential" or "sealed".  */
const char *sp_sensitivity_name (enum sp_sensitivity s);

/* Index of repo[0..len) in private_repos, or -1 (same matching as
   sp_config_allows_repo: enabled, byte for byte).  */
ssize_t sp_config_repo_index (const struct sp_config *c, const uint8_t *repo, size_t len);

/* The class budget of private_repos[i] in whole bits: true with *bits set
   when its class meters it (sealed: *bits = 0), false when unmetered (no
   class, or public without an override).  */
bool sp_config_repo_class_bits (const struct sp_config *c, size_t i, uint64_t *bits);

#endif
