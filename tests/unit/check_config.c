/* The config loader (config.h): one named test per rule and per default.  A
   reject row names the fragment (key path and reason) its message must
   contain; no message may echo a string value.  */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "text/config.h"

#include "sp_check.h"

/* A block, and an enabled block with one repository (two: REPOS2) plus
   extra members.  */
#define BLOCK(members)   "{\"sealedProbes\":{" members "}}"
#define ENABLED(members) BLOCK ("\"enabled\":true,\"privateRepos\":[\"octo/hello\"]" members)
#define REPOS2(members)  BLOCK ("\"enabled\":true,\"privateRepos\":[\"a/a\",\"b/b\"]" members)

static struct sp_config *
parse_ok (const char *doc)
{
  sp_error_t err = NULL;
  struct sp_config *c = NULL;
  int ret = sp_config_parse (doc, strlen (doc), &c, &err);

  ck_assert_msg (ret == 0, "rejected: %s", sp_error_message (err));
  ck_assert_ptr_nonnull (c);
  return c;
}

static void
expect_reject (const char *doc, size_t len, const char *fragment)
{
  SP_CHECK_PARSE_REFUSED (sp_config_parse, struct sp_config, doc, len, fragment, "CANARY");
}

static void
expect_reject_exact (const char *doc, size_t len, const char *message)
{
  sp_error_t err = NULL;
  struct sp_config *c = (struct sp_config *)1;

  ck_assert_int_eq (sp_config_parse (doc, len, &c, &err), -1);
  ck_assert_ptr_null (c);
  ck_assert_str_eq (sp_error_message (err), message);
  sp_error_release (&err);
}

/* name, document, a statement about the parsed config `c` */
#define ACCEPT_ROWS(X)                                                                                       \
  X (absent_block_means_disabled, "{}", ck_assert (!c->enabled && c->n_private_repos == 0))                  \
  X (absent_block_is_told_from_a_disabled_one, "{\"agentFirewall\":{}}", ck_assert (!c->has_block))          \
  X (disabled_block_is_present, BLOCK ("\"enabled\":false"), ck_assert (c->has_block && !c->enabled))        \
  X (empty_block_is_present, BLOCK (""), ck_assert (c->has_block))                                           \
  X (keys_two_edits_from_the_block_are_the_host_applications,                                                \
     "{\"sealedProb\":1,\"sealedPorbe\":1,\"sealed_Probe\":1,\"xsealedProbesx\":1,\"SEALEDPROBESXY\":1}",    \
     ck_assert (!c->has_block && !c->enabled))                                                               \
  X (keys_two_edits_away_beside_the_block_are_ignored,                                                       \
     "{\"sealedProb\":1,\"sealedProbes\":{\"timeout\":9}}",                                                  \
     ck_assert (c->has_block && c->timeout_seconds == 9))                                                    \
  X (host_keys_at_top_level_are_ignored,                                                                     \
     "{\"agentFirewall\":{\"rules\":[1,2.5,1e9,null]},\"other\":\"x\",\"n\":-0.0}", ck_assert (!c->enabled)) \
  X (host_keys_beside_an_enabled_block_are_ignored,                                                          \
     "{\"host\":{\"timeout\":\"x\"},\"sealedProbes\":{"                                                      \
     "\"enabled\":true,\"privateRepos\":[\"octo/hello\"]}}",                                                 \
     ck_assert (c->enabled))                                                                                 \
  X (empty_block_means_disabled, BLOCK (""), ck_assert (!c->enabled))                                        \
  X (enabled_defaults_to_false, BLOCK ("\"privateRepos\":[\"octo/hello\"]"),                                 \
     ck_assert (!c->enabled && c->n_private_repos == 0))                                                     \
  X (enabled_false_means_disabled, BLOCK ("\"enabled\":false,\"privateRepos\":[\"octo/hello\"]"),            \
     ck_assert (!c->enabled && !sp_config_allows_repo (c, (const uint8_t *)"octo/hello", 10)))               \
  X (disabled_block_may_have_empty_repos, BLOCK ("\"enabled\":false,\"privateRepos\":[]"),                   \
     ck_assert (!c->enabled))                                                                                \
  X (disabled_block_keeps_other_settings, BLOCK ("\"timeout\":7"),                                           \
     ck_assert_uint_eq (c->timeout_seconds, 7))                                                              \
  X (enabled_with_one_repo_is_accepted, ENABLED (""),                                                        \
     ck_assert (c->enabled && c->n_private_repos == 1 && strcmp (c->private_repos[0], "octo/hello") == 0))   \
  X (repos_keep_document_order, BLOCK ("\"enabled\":true,\"privateRepos\":[\"b/b\",\"a/a\",\"c/c\"]"),       \
     ck_assert (strcmp (c->private_repos[0], "b/b") == 0 && strcmp (c->private_repos[2], "c/c") == 0))       \
  X (enabled_after_repos_in_document_order_is_accepted,                                                      \
     BLOCK ("\"privateRepos\":[\"octo/hello\"],\"enabled\":true"), ck_assert (c->enabled))                   \
  X (default_runtime_is_docker, ENABLED (""), ck_assert_int_eq (c->runtime, SP_RUNTIME_DOCKER))              \
  X (default_timeout_is_30, ENABLED (""),                                                                    \
     ck_assert_uint_eq (c->timeout_seconds, SP_TIMEOUT_DEFAULT_SECONDS))                                     \
  X (default_memory_limit_is_512m, ENABLED (""),                                                             \
     ck_assert (strcmp (c->memory_limit, "512m") == 0 && c->memory_limit_bytes == 536870912ULL))             \
  X (default_interpreter_is_python3, ENABLED (""),                                                           \
     ck_assert_int_eq (c->interpreter, SP_INTERPRETER_PYTHON3))                                              \
  X (default_max_invocations_is_the_firewalls_32, ENABLED (""), ck_assert_uint_eq (c->max_invocations, 32))  \
  X (defaults_apply_when_disabled_too, "{}",                                                                 \
     ck_assert (c->runtime == SP_RUNTIME_DOCKER && c->timeout_seconds == 30 && c->max_invocations == 32      \
                && strcmp (c->memory_limit, "512m") == 0))                                                   \
  X (runtime_docker_is_accepted, ENABLED (",\"runtime\":\"docker\""),                                        \
     ck_assert_int_eq (c->runtime, SP_RUNTIME_DOCKER))                                                       \
  X (runtime_gvisor_is_accepted, ENABLED (",\"runtime\":\"gvisor\""),                                        \
     ck_assert_int_eq (c->runtime, SP_RUNTIME_GVISOR))                                                       \
  X (runtime_sbx_is_accepted, ENABLED (",\"runtime\":\"sbx\""),                                              \
     ck_assert_int_eq (c->runtime, SP_RUNTIME_SBX))                                                          \
  X (runtime_runc_is_accepted, ENABLED (",\"runtime\":\"runc\""),                                            \
     ck_assert_int_eq (c->runtime, SP_RUNTIME_RUNC))                                                         \
  X (timeout_minimum_is_accepted, ENABLED (",\"timeout\":1"), ck_assert_uint_eq (c->timeout_seconds, 1))     \
  X (timeout_maximum_is_accepted, ENABLED (",\"timeout\":300"), ck_assert_uint_eq (c->timeout_seconds, 300)) \
  X (memory_minimum_is_accepted, ENABLED (",\"memoryLimit\":\"64m\""),                                       \
     ck_assert_uint_eq (c->memory_limit_bytes, 64ULL << 20))                                                 \
  X (memory_maximum_in_g_is_accepted, ENABLED (",\"memoryLimit\":\"8g\""),                                   \
     ck_assert (c->memory_limit_bytes == (8ULL << 30) && strcmp (c->memory_limit, "8g") == 0))               \
  X (memory_maximum_in_m_is_accepted, ENABLED (",\"memoryLimit\":\"8192m\""),                                \
     ck_assert_uint_eq (c->memory_limit_bytes, 8ULL << 30))                                                  \
  X (memory_one_g_is_accepted, ENABLED (",\"memoryLimit\":\"1g\""),                                          \
     ck_assert_uint_eq (c->memory_limit_bytes, 1ULL << 30))                                                  \
  X (memory_uppercase_g_means_lowercase_g, ENABLED (",\"memoryLimit\":\"2G\""),                              \
     ck_assert (c->memory_limit_bytes == (2ULL << 30) && strcmp (c->memory_limit, "2G") == 0))               \
  X (memory_uppercase_m_means_lowercase_m, ENABLED (",\"memoryLimit\":\"256M\""),                            \
     ck_assert (c->memory_limit_bytes == (256ULL << 20) && strcmp (c->memory_limit, "256M") == 0))           \
  X (memory_uppercase_minimum_is_accepted, ENABLED (",\"memoryLimit\":\"64M\""),                             \
     ck_assert_uint_eq (c->memory_limit_bytes, 64ULL << 20))                                                 \
  X (memory_limit_is_kept_as_written, ENABLED (",\"memoryLimit\":\"1024m\""),                                \
     ck_assert (strcmp (c->memory_limit, "1024m") == 0 && c->memory_limit_bytes == (1ULL << 30)))            \
  X (interpreter_python3_is_accepted, ENABLED (",\"interpreter\":\"python3\""),                              \
     ck_assert_int_eq (c->interpreter, SP_INTERPRETER_PYTHON3))                                              \
  X (max_invocations_minimum_is_accepted, ENABLED (",\"maxInvocations\":1"),                                 \
     ck_assert_uint_eq (c->max_invocations, 1))                                                              \
  X (max_invocations_maximum_is_accepted, ENABLED (",\"maxInvocations\":100000"),                            \
     ck_assert_uint_eq (c->max_invocations, 100000))                                                         \
  X (every_key_together_is_accepted,                                                                         \
     ENABLED (",\"runtime\":\"runc\",\"timeout\":60,\"memoryLimit\":\"2g\",\"interpreter\":\"python3\","     \
              "\"maxInvocations\":500"),                                                                     \
     ck_assert (c->runtime == SP_RUNTIME_RUNC && c->timeout_seconds == 60 && c->max_invocations == 500))     \
  X (submodules_default_to_omit, REPOS2 (""),                                                                \
     ck_assert (c->submodules[0] == SP_SUBMODULES_OMIT && c->submodules[1] == SP_SUBMODULES_OMIT))           \
  X (submodules_reject_applies_to_the_listed_repository_only,                                                \
     REPOS2 (",\"submodules\":{\"reject\":[\"b/b\"]}"),                                                      \
     ck_assert (c->submodules[0] == SP_SUBMODULES_OMIT && c->submodules[1] == SP_SUBMODULES_REJECT))         \
  X (submodules_omit_may_be_written_out,                                                                     \
     REPOS2 (",\"submodules\":{\"omit\":[\"a/a\"],\"reject\":[\"b/b\"]}"),                                   \
     ck_assert (c->submodules[0] == SP_SUBMODULES_OMIT && c->submodules[1] == SP_SUBMODULES_REJECT))         \
  X (submodules_before_private_repos_in_document_order_are_accepted,                                         \
     BLOCK ("\"submodules\":{\"reject\":[\"b/b\"]},\"enabled\":true,\"privateRepos\":[\"a/a\",\"b/b\"]"),    \
     ck_assert (c->submodules[1] == SP_SUBMODULES_REJECT))                                                   \
  X (submodules_empty_object_is_accepted, REPOS2 (",\"submodules\":{}"),                                     \
     ck_assert (c->submodules[0] == SP_SUBMODULES_OMIT))                                                     \
  X (submodules_empty_lists_are_accepted, REPOS2 (",\"submodules\":{\"omit\":[],\"reject\":[]}"),            \
     ck_assert (c->submodules[0] == SP_SUBMODULES_OMIT && c->submodules[1] == SP_SUBMODULES_OMIT))           \
  X (submodules_when_disabled_are_checked_then_dropped,                                                      \
     BLOCK ("\"privateRepos\":[\"a/a\"],\"submodules\":{\"reject\":[\"a/a\"]}"),                             \
     ck_assert (!c->enabled && c->n_private_repos == 0 && c->submodules == NULL))                            \
  X (submodule_policy_names_round_trip, ENABLED (""),                                                        \
     ck_assert (strcmp (sp_submodule_policy_name (SP_SUBMODULES_OMIT), "omit") == 0                          \
                && strcmp (sp_submodule_policy_name (SP_SUBMODULES_REJECT), "reject") == 0))

#define REPOS(items) BLOCK ("\"enabled\":true,\"privateRepos\":[" items "]")
#define BAD_TIMEOUT  "sealedProbes.timeout: must be an integer from 1 to 300"
#define BAD_MEMORY   "sealedProbes.memoryLimit: must be a string of digits then \"m\", \"M\", \"g\" or \"G\""
#define LOW_MEMORY                                                                                           \
  "sealedProbes.memoryLimit: must be at least \"64m\": this proxy's bound, tighter than the firewall's"
#define HIGH_MEMORY "sealedProbes.memoryLimit: must be at most \"8g\": this proxy's bound"
#define HIGH_TIMEOUT                                                                                         \
  "sealedProbes.timeout: must be at most 300 seconds: this proxy's bound, tighter than the firewall's"
#define BAD_INVOKE  "sealedProbes.maxInvocations: must be an integer from 1 to 100000"
#define BAD_RUNTIME "sealedProbes.runtime: must be one of \"docker\", \"gvisor\", \"sbx\", \"runc\""
#define BAD_INTERP  "sealedProbes.interpreter: must be \"python3\""
#define BAD_ENABLED "sealedProbes.enabled: must be true or false"
#define BAD_SUBMODULES                                                                                       \
  "sealedProbes.submodules: must be an object of \"omit\" and \"reject\" lists of \"owner/repo\" strings "   \
  "(omit: the default)"
/* The whole message for a misspelt block key (quoted as written).  */
#define MISSPELT(quoted)                                                                                     \
  "(document): key " quoted " is refused as a misspelling: did you mean \"sealedProbes\"?"
#define AMBIGUOUS " (the document holds \"sealedProbes\" too, so which block counts is ambiguous)"
#define ON        "{\"enabled\":true,\"privateRepos\":[\"octo/hello\"]}"

/* name, document, fragment */
#define REJECT_ROWS(X)                                                                                       \
  X (root_array_is_rejected, "[]", "(document): must be an object")                                          \
  X (root_string_is_rejected, "\"sealedProbes\"", "(document): must be an object")                           \
  X (root_null_is_rejected, "null", "(document): must be an object")                                         \
  X (block_null_is_rejected, "{\"sealedProbes\":null}", "sealedProbes: must be an object")                   \
  X (block_array_is_rejected, "{\"sealedProbes\":[]}", "sealedProbes: must be an object")                    \
  X (block_true_is_rejected, "{\"sealedProbes\":true}", "sealedProbes: must be an object")                   \
  X (unknown_key_in_block_is_rejected, ENABLED (",\"timout\":30"), "sealedProbes: unknown key \"timout\"")   \
  X (unknown_key_when_disabled_is_rejected, BLOCK ("\"enabled\":false,\"extra\":1"),                         \
     "sealedProbes: unknown key \"extra\"")                                                                  \
  X (case_variant_key_is_rejected, BLOCK ("\"Enabled\":true"), "sealedProbes: unknown key \"Enabled\"")      \
  X (unknown_key_is_quoted_safely, BLOCK ("\"a\\u001b[2Jb\":1"), "unknown key \"a\\u001B[2Jb\"")             \
  X (duplicate_key_in_block_is_rejected, ENABLED (",\"timeout\":30,\"timeout\":60"),                         \
     "sealedProbes: duplicate key \"timeout\"")                                                              \
  X (duplicate_key_when_disabled_is_rejected, BLOCK ("\"enabled\":false,\"enabled\":false"),                 \
     "sealedProbes: duplicate key \"enabled\"")                                                              \
  X (duplicate_top_level_key_is_rejected, "{\"sealedProbes\":{},\"sealedProbes\":{}}",                       \
     "(document): duplicate key \"sealedProbes\"")                                                           \
  X (duplicate_key_in_host_section_is_rejected, "{\"host\":{\"a\":[{\"x\":1,\"x\":2}]}}",                    \
     "host.a[0]: duplicate key \"x\"")                                                                       \
  X (escaped_duplicate_key_is_rejected, BLOCK ("\"enabled\":false,\"\\u0065nabled\":false"),                 \
     "sealedProbes: duplicate key \"enabled\"")                                                              \
  X (enabled_string_is_rejected, BLOCK ("\"enabled\":\"true\""), BAD_ENABLED)                                \
  X (enabled_number_is_rejected, BLOCK ("\"enabled\":1"), BAD_ENABLED)                                       \
  X (enabled_null_is_rejected, BLOCK ("\"enabled\":null"), BAD_ENABLED)                                      \
  X (enabled_without_repos_is_rejected, BLOCK ("\"enabled\":true"),                                          \
     "sealedProbes.privateRepos: required when enabled is true")                                             \
  X (enabled_with_empty_repos_is_rejected, REPOS (""),                                                       \
     "sealedProbes.privateRepos: must not be empty when enabled is true")                                    \
  X (enabled_after_empty_repos_is_rejected, BLOCK ("\"privateRepos\":[],\"enabled\":true"),                  \
     "sealedProbes.privateRepos: must not be empty")                                                         \
  X (repos_string_is_rejected, BLOCK ("\"enabled\":true,\"privateRepos\":\"octo/hello\""),                   \
     "sealedProbes.privateRepos: must be an array of \"owner/repo\" strings or {\"repo\", \"sensitivity\"} " \
     "objects")                                                                                              \
  X (repos_null_is_rejected, BLOCK ("\"privateRepos\":null"), "sealedProbes.privateRepos: must be an array") \
  X (repos_object_is_rejected, BLOCK ("\"privateRepos\":{}"), "sealedProbes.privateRepos: must be an array") \
  X (repo_number_is_rejected, REPOS ("1"), "sealedProbes.privateRepos[0]: must be a string")                 \
  X (repo_null_is_rejected, REPOS ("\"octo/hello\",null"), "sealedProbes.privateRepos[1]: must be a string") \
  X (repo_array_is_rejected, REPOS ("[\"octo/hello\"]"), "sealedProbes.privateRepos[0]: must be a string")   \
  X (repo_with_uppercase_is_rejected, REPOS ("\"Octo/hello\""),                                              \
     "sealedProbes.privateRepos[0]: must be lowercase \"owner/repo\" (found an uppercase letter)")           \
  X (repo_url_is_rejected, REPOS ("\"octo/a\",\"https://github.com/octo/hello\""),                           \
     "sealedProbes.privateRepos[1]: must be \"owner/repo\", not a URL")                                      \
  X (repo_with_credentials_is_rejected, REPOS ("\"https://x:ghp_CANARY@github.com/octo/hello\""),            \
     "sealedProbes.privateRepos[0]: must be \"owner/repo\", not a URL with credentials")                     \
  X (repo_with_git_suffix_is_rejected, REPOS ("\"octo/hello.git\""),                                         \
     "privateRepos[0]: must be \"owner/repo\" "                                                              \
     "without a \".git\" suffix")                                                                            \
  X (repo_with_wildcard_is_rejected, REPOS ("\"octo/*\""),                                                   \
     "sealedProbes.privateRepos[0]: must be one exact")                                                      \
  X (repo_with_escaped_nul_is_rejected, REPOS ("\"octo/a\\u0000\""), "(document): escape decodes to NUL")    \
  X (repo_with_escaped_uppercase_is_rejected, REPOS ("\"\\u004Fcto/hello\""), "found an uppercase letter")   \
  X (repo_empty_string_is_rejected, REPOS ("\"\""), "sealedProbes.privateRepos[0]: must be \"owner/repo\"")  \
  X (invalid_repo_when_disabled_is_rejected, BLOCK ("\"enabled\":false,\"privateRepos\":[\"Octo/x\"]"),      \
     "sealedProbes.privateRepos[0]: must be lowercase")                                                      \
  X (duplicate_repo_is_rejected, REPOS ("\"octo/hello\",\"octo/hello\""),                                    \
     "sealedProbes.privateRepos[1]: duplicate of sealedProbes.privateRepos[0]")                              \
  X (non_adjacent_duplicate_repo_is_rejected, REPOS ("\"a/a\",\"b/b\",\"c/c\",\"b/b\",\"a/a\""),             \
     "sealedProbes.privateRepos[3]: duplicate of sealedProbes.privateRepos[1]")                              \
  X (escaped_duplicate_repo_is_rejected, REPOS ("\"octo/hello\",\"octo\\/hello\""),                          \
     "sealedProbes.privateRepos[1]: duplicate of sealedProbes.privateRepos[0]")                              \
  X (runtime_unknown_is_rejected, ENABLED (",\"runtime\":\"kata\""), BAD_RUNTIME)                            \
  X (runtime_uppercase_is_rejected, ENABLED (",\"runtime\":\"RUNC\""), BAD_RUNTIME)                          \
  X (runtime_runsc_alias_is_rejected, ENABLED (",\"runtime\":\"runsc\""), BAD_RUNTIME)                       \
  X (runtime_null_is_rejected, ENABLED (",\"runtime\":null"), BAD_RUNTIME)                                   \
  X (runtime_value_is_not_echoed, ENABLED (",\"runtime\":\"ghp_CANARY\""), BAD_RUNTIME)                      \
  X (timeout_zero_is_rejected, ENABLED (",\"timeout\":0"), BAD_TIMEOUT)                                      \
  X (timeout_above_maximum_names_the_bound, ENABLED (",\"timeout\":301"), HIGH_TIMEOUT)                      \
  X (timeout_negative_is_rejected, ENABLED (",\"timeout\":-30"), BAD_TIMEOUT)                                \
  X (timeout_with_fraction_is_rejected, ENABLED (",\"timeout\":30.0"), BAD_TIMEOUT)                          \
  X (timeout_with_exponent_is_rejected, ENABLED (",\"timeout\":3e1"), BAD_TIMEOUT)                           \
  X (timeout_string_is_rejected, ENABLED (",\"timeout\":\"30\""), BAD_TIMEOUT)                               \
  X (timeout_null_is_rejected, ENABLED (",\"timeout\":null"), BAD_TIMEOUT)                                   \
  X (timeout_bool_is_rejected, ENABLED (",\"timeout\":true"), BAD_TIMEOUT)                                   \
  X (timeout_beyond_int64_names_the_bound, ENABLED (",\"timeout\":99999999999999999999"), HIGH_TIMEOUT)      \
  X (timeout_huge_fraction_is_not_an_integer, ENABLED (",\"timeout\":99999999999999999999.5"), BAD_TIMEOUT)  \
  X (timeout_when_disabled_is_still_checked, BLOCK ("\"timeout\":0"), BAD_TIMEOUT)                           \
  X (memory_below_minimum_names_the_bound, ENABLED (",\"memoryLimit\":\"63m\""), LOW_MEMORY)                 \
  X (memory_uppercase_below_minimum_names_the_bound, ENABLED (",\"memoryLimit\":\"63M\""), LOW_MEMORY)       \
  X (memory_above_maximum_in_m_names_the_bound, ENABLED (",\"memoryLimit\":\"8193m\""), HIGH_MEMORY)         \
  X (memory_above_maximum_in_g_names_the_bound, ENABLED (",\"memoryLimit\":\"9G\""), HIGH_MEMORY)            \
  X (memory_zero_is_rejected, ENABLED (",\"memoryLimit\":\"0g\""), BAD_MEMORY)                               \
  X (memory_leading_zero_is_rejected, ENABLED (",\"memoryLimit\":\"0512m\""), BAD_MEMORY)                    \
  X (memory_uppercase_two_letter_unit_is_rejected, ENABLED (",\"memoryLimit\":\"512MB\""), BAD_MEMORY)       \
  X (memory_without_unit_is_rejected, ENABLED (",\"memoryLimit\":\"536870912\""), BAD_MEMORY)                \
  X (memory_unit_only_is_rejected, ENABLED (",\"memoryLimit\":\"m\""), BAD_MEMORY)                           \
  X (memory_two_letter_unit_is_rejected, ENABLED (",\"memoryLimit\":\"512mb\""), BAD_MEMORY)                 \
  X (memory_kilobytes_are_rejected, ENABLED (",\"memoryLimit\":\"65536k\""), BAD_MEMORY)                     \
  X (memory_with_space_is_rejected, ENABLED (",\"memoryLimit\":\"512 m\""), BAD_MEMORY)                      \
  X (memory_with_fraction_is_rejected, ENABLED (",\"memoryLimit\":\"1.5g\""), BAD_MEMORY)                    \
  X (memory_with_sign_is_rejected, ENABLED (",\"memoryLimit\":\"+512m\""), BAD_MEMORY)                       \
  X (memory_empty_is_rejected, ENABLED (",\"memoryLimit\":\"\""), BAD_MEMORY)                                \
  X (memory_number_is_rejected, ENABLED (",\"memoryLimit\":536870912"), BAD_MEMORY)                          \
  X (memory_huge_digits_name_the_bound, ENABLED (",\"memoryLimit\":\"99999999999999999999999g\""),           \
     HIGH_MEMORY)                                                                                            \
  X (memory_huge_digits_with_junk_are_malformed, ENABLED (",\"memoryLimit\":\"99999999999999999999x9g\""),   \
     BAD_MEMORY)                                                                                             \
  X (interpreter_python_is_rejected, ENABLED (",\"interpreter\":\"python\""), BAD_INTERP)                    \
  X (interpreter_uppercase_is_rejected, ENABLED (",\"interpreter\":\"Python3\""), BAD_INTERP)                \
  X (interpreter_path_is_rejected, ENABLED (",\"interpreter\":\"/usr/bin/python3\""), BAD_INTERP)            \
  X (interpreter_null_is_rejected, ENABLED (",\"interpreter\":null"), BAD_INTERP)                            \
  X (max_invocations_zero_is_rejected, ENABLED (",\"maxInvocations\":0"), BAD_INVOKE)                        \
  X (max_invocations_above_maximum_is_rejected, ENABLED (",\"maxInvocations\":100001"), BAD_INVOKE)          \
  X (max_invocations_with_fraction_is_rejected, ENABLED (",\"maxInvocations\":100.0"), BAD_INVOKE)           \
  X (max_invocations_string_is_rejected, ENABLED (",\"maxInvocations\":\"100\""), BAD_INVOKE)                \
  X (first_bad_key_in_document_order_is_named, BLOCK ("\"maxInvocations\":0,\"timeout\":0"), BAD_INVOKE)     \
  X (submodules_array_is_rejected, ENABLED (",\"submodules\":[\"octo/hello\"]"), BAD_SUBMODULES)             \
  X (submodules_string_is_rejected, ENABLED (",\"submodules\":\"reject\""), BAD_SUBMODULES)                  \
  X (submodules_null_is_rejected, ENABLED (",\"submodules\":null"), BAD_SUBMODULES)                          \
  X (submodules_unknown_policy_is_rejected, ENABLED (",\"submodules\":{\"follow\":[\"octo/hello\"]}"),       \
     "sealedProbes.submodules: key 0: must be \"omit\" or \"reject\", each the key of a list of "            \
     "\"owner/repo\" strings ({\"reject\": [\"owner/repo\"]})")                                              \
  X (submodules_uppercase_policy_is_rejected, ENABLED (",\"submodules\":{\"reject\":[],\"Reject\":[]}"),     \
     "sealedProbes.submodules: key 1: must be \"omit\" or \"reject\"")                                       \
  X (submodules_repository_as_a_key_is_rejected_unechoed,                                                    \
     ENABLED (",\"submodules\":{\"https://x:ghp_CANARY@github.com/octo/hello\":\"reject\"}"),                \
     "sealedProbes.submodules: key 0: must be \"omit\" or \"reject\"")                                       \
  X (submodules_list_string_is_rejected, ENABLED (",\"submodules\":{\"reject\":\"octo/hello\"}"),            \
     "sealedProbes.submodules.reject: must be an array of \"owner/repo\" strings")                           \
  X (submodules_list_item_number_is_rejected, ENABLED (",\"submodules\":{\"omit\":[1]}"),                    \
     "sealedProbes.submodules.omit[0]: must be a string \"owner/repo\"")                                     \
  X (submodules_repository_not_in_private_repos_is_rejected,                                                 \
     ENABLED (",\"submodules\":{\"reject\":[\"octo/hello\",\"octo/other\"]}"),                               \
     "sealedProbes.submodules.reject[1]: is not in sealedProbes.privateRepos")                               \
  X (submodules_without_private_repos_are_rejected, BLOCK ("\"submodules\":{\"omit\":[\"octo/hello\"]}"),    \
     "sealedProbes.submodules.omit[0]: is not in sealedProbes.privateRepos")                                 \
  X (submodules_unknown_repository_when_disabled_is_rejected,                                                \
     BLOCK ("\"enabled\":false,\"privateRepos\":[\"a/a\"],\"submodules\":{\"reject\":[\"b/b\"]}"),           \
     "sealedProbes.submodules.reject[0]: is not in sealedProbes.privateRepos")                               \
  X (submodules_bad_name_is_named_by_position,                                                               \
     ENABLED (",\"submodules\":{\"reject\":[\"octo/hello\",\"Octo/x\"]}"),                                   \
     "sealedProbes.submodules.reject[1]: must be lowercase \"owner/repo\" (found an uppercase letter)")      \
  X (submodules_credential_url_is_not_echoed,                                                                \
     ENABLED (",\"submodules\":{\"reject\":[\"https://x:ghp_CANARY@github.com/octo/hello\"]}"),              \
     "sealedProbes.submodules.reject[0]: must be \"owner/repo\", not a URL with credentials")                \
  X (submodules_duplicate_in_a_list_is_rejected,                                                             \
     ENABLED (",\"submodules\":{\"reject\":[\"octo/hello\",\"octo/hello\"]}"),                               \
     "sealedProbes.submodules.reject[1]: duplicate of sealedProbes.submodules.reject[0]")                    \
  X (submodules_repository_in_both_lists_is_rejected,                                                        \
     REPOS2 (",\"submodules\":{\"omit\":[\"a/a\",\"b/b\"],\"reject\":[\"b/b\"]}"),                           \
     "sealedProbes.submodules.reject[0]: also in sealedProbes.submodules.omit[1]")                           \
  X (submodules_duplicate_policy_key_is_rejected,                                                            \
     ENABLED (",\"submodules\":{\"reject\":[],\"reject\":[\"octo/hello\"]}"),                                \
     "sealedProbes.submodules: duplicate key \"reject\"")                                                    \
  X (submodules_bad_name_comes_before_an_unknown_repository,                                                 \
     ENABLED (",\"submodules\":{\"omit\":[\"octo/other\"],\"reject\":[\"Octo/hello\"]}"),                    \
     "sealedProbes.submodules.reject[0]: must be lowercase")                                                 \
  X (invalid_json_is_rejected, "{\"sealedProbes\":{\"enabled\":true,}}", "sealedProbes: invalid JSON")       \
  X (comment_is_rejected, "{\"sealedProbes\":{} /* x */}", "(document): invalid JSON")                       \
  X (trailing_garbage_is_rejected, "{} {}", "(document): invalid JSON")                                      \
  X (byte_order_mark_is_rejected, "\xef\xbb\xbf{}", "(document): byte order mark")                           \
  X (empty_document_is_rejected, "", "(document): empty document")

/* A misspelt block, its message exactly: name, document, message.  */
#define NEAR_MISS_ROWS(X)                                                                                    \
  X (misspelt_block_singular_is_named, "{\"sealedProbe\":" ON "}", MISSPELT ("\"sealedProbe\""))             \
  X (misspelt_block_lower_case_is_named, "{\"sealedprobes\":" ON "}", MISSPELT ("\"sealedprobes\""))         \
  X (misspelt_block_upper_case_is_named, "{\"SEALEDPROBES\":" ON "}", MISSPELT ("\"SEALEDPROBES\""))         \
  X (misspelt_block_case_and_one_deletion_is_named, "{\"sealedprobe\":" ON "}",                              \
     MISSPELT ("\"sealedprobe\""))                                                                           \
  X (misspelt_block_one_insertion_is_named, "{\"sealed_probes\":" ON "}", MISSPELT ("\"sealed_probes\""))    \
  X (misspelt_block_one_substitution_is_named, "{\"sealedPr0bes\":" ON "}", MISSPELT ("\"sealedPr0bes\""))   \
  X (misspelt_block_adjacent_swap_is_named, "{\"sealedPorbes\":" ON "}", MISSPELT ("\"sealedPorbes\""))      \
  X (misspelt_block_case_and_adjacent_swap_is_named, "{\"SealedPrboes\":" ON "}",                            \
     MISSPELT ("\"SealedPrboes\""))                                                                          \
  X (misspelt_block_one_non_ascii_character_is_named, "{\"sealedProbe\xc5\x9b\":" ON "}",                    \
     MISSPELT ("\"sealedProbe\\u015B\""))                                                                    \
  X (misspelt_block_zero_width_insertion_is_named, "{\"sealed\\u200bProbes\":" ON "}",                       \
     MISSPELT ("\"sealed\\u200BProbes\""))                                                                   \
  X (misspelt_block_key_is_quoted_safely, "{\"sealedProbe\\u001b\":1}", MISSPELT ("\"sealedProbe\\u001B\"")) \
  X (misspelt_block_is_refused_whatever_its_value, "{\"SealedProbes\":null}", MISSPELT ("\"SealedProbes\"")) \
  X (misspelt_block_when_disabled_is_named, "{\"sealedProbe\":{\"enabled\":false}}",                         \
     MISSPELT ("\"sealedProbe\""))                                                                           \
  X (misspelt_block_after_the_block_is_ambiguous, "{\"sealedProbes\":" ON ",\"sealedprobes\":{}}",           \
     MISSPELT ("\"sealedprobes\"") AMBIGUOUS)                                                                \
  X (misspelt_block_before_the_block_is_ambiguous, "{\"sealedProbe\":{},\"sealedProbes\":" ON "}",           \
     MISSPELT ("\"sealedProbe\"") AMBIGUOUS)                                                                 \
  X (misspelt_block_is_named_before_the_blocks_own_errors,                                                   \
     "{\"sealedProbes\":{\"timeout\":0},\"sealedProbe\":{}}", MISSPELT ("\"sealedProbe\"") AMBIGUOUS)        \
  X (first_misspelt_block_in_document_order_is_named, "{\"host\":1,\"sealedprobe\":{},\"SealedProbes\":{}}", \
     MISSPELT ("\"sealedprobe\""))

/* Sensitivity classes and the firewall's enclaves document (issue 31):
   name, document, a statement about the parsed config `c`.  */
#define CLASSED(cls) "{\"repo\":\"octo/hello\",\"sensitivity\":\"" cls "\"}"
#define ENCLAVE(members)                                                                                     \
  "{\"enclaves\":[{\"script\":{},\"repos\":[{\"repo\":\"octo/hello\",\"sensitivity\":\"internal\"}]" members \
  "}]}"
#define ENCLAVE_ENTRY "{\"script\":{},\"repos\":[" CLASSED ("internal") "]}"
#define CLASS_ACCEPT_ROWS(X)                                                                                 \
  X (string_entry_has_no_class_and_no_class_budget, ENABLED (""), {                                          \
    uint64_t bits = 99;                                                                                      \
    ck_assert (c->sensitivity[0] == SP_SENSITIVITY_NONE && !sp_config_repo_class_bits (c, 0, &bits)          \
               && bits == 99);                                                                               \
  })                                                                                                         \
  X (internal_defaults_to_64_bits, REPOS (CLASSED ("internal")), {                                           \
    uint64_t bits = 0;                                                                                       \
    ck_assert (sp_config_repo_class_bits (c, 0, &bits) && bits == 64);                                       \
  })                                                                                                         \
  X (confidential_defaults_to_8_bits, REPOS (CLASSED ("confidential")), {                                    \
    uint64_t bits = 0;                                                                                       \
    ck_assert (sp_config_repo_class_bits (c, 0, &bits) && bits == 8);                                        \
  })                                                                                                         \
  X (sealed_is_metered_at_0_bits, REPOS (CLASSED ("sealed")), {                                              \
    uint64_t bits = 9;                                                                                       \
    ck_assert (sp_config_repo_class_bits (c, 0, &bits) && bits == 0);                                        \
  })                                                                                                         \
  X (public_is_unmetered_by_default, REPOS (CLASSED ("public")), {                                           \
    uint64_t bits = 9;                                                                                       \
    ck_assert (!sp_config_repo_class_bits (c, 0, &bits));                                                    \
  })                                                                                                         \
  X (public_with_a_budget_is_metered,                                                                        \
     BLOCK ("\"enabled\":true,\"privateRepos\":[" CLASSED (                                                  \
         "public") "],\"sensitivityBudgets\":{\"public\":5}"),                                               \
     {                                                                                                       \
       uint64_t bits = 0;                                                                                    \
       ck_assert (sp_config_repo_class_bits (c, 0, &bits) && bits == 5);                                     \
     })                                                                                                      \
  X (internal_budget_is_overridden,                                                                          \
     BLOCK ("\"enabled\":true,\"privateRepos\":[" CLASSED (                                                  \
         "internal") "],\"sensitivityBudgets\":{\"internal\":1000000}"),                                     \
     {                                                                                                       \
       uint64_t bits = 0;                                                                                    \
       ck_assert (sp_config_repo_class_bits (c, 0, &bits) && bits == 1000000);                               \
     })                                                                                                      \
  X (mixed_forms_keep_each_entrys_class, REPOS ("\"a/a\"," CLASSED ("sealed")),                              \
     ck_assert (c->sensitivity[0] == SP_SENSITIVITY_NONE && c->sensitivity[1] == SP_SENSITIVITY_SEALED))     \
  X (repo_index_finds_each_repository, REPOS ("\"a/a\"," CLASSED ("sealed")),                                \
     ck_assert (sp_config_repo_index (c, (const uint8_t *)"octo/hello", 10) == 1                             \
                && sp_config_repo_index (c, (const uint8_t *)"a/a", 3) == 0                                  \
                && sp_config_repo_index (c, (const uint8_t *)"octo/hell", 9) == -1))                         \
  X (block_form_is_recorded_with_the_largest_script, ENABLED (""),                                           \
     ck_assert (c->form == SP_CONFIG_FORM_BLOCK && c->max_script_bytes == SP_SCRIPT_MAX_BYTES))              \
  X (enclaves_document_is_read_onto_the_settings,                                                            \
     ENCLAVE (",\"timeout\":45,\"runtime\":\"gvisor\",\"memoryLimit\":\"1g\",\"maxInvocations\":3"),         \
     ck_assert (c->form == SP_CONFIG_FORM_ENCLAVES && c->enabled && c->has_block && c->timeout_seconds == 45 \
                && c->runtime == SP_RUNTIME_GVISOR && c->memory_limit_bytes == (1ULL << 30)                  \
                && c->max_invocations == 3 && c->sensitivity[0] == SP_SENSITIVITY_INTERNAL))                 \
  X (enclaves_script_bytes_lower_the_largest_script,                                                         \
     "{\"enclaves\":[{\"script\":{\"maxScriptBytes\":100},\"repos\":[" CLASSED ("public") "]}]}",            \
     ck_assert (c->max_script_bytes == 100))                                                                 \
  X (enclaves_fixed_limits_looser_than_ours_are_accepted,                                                    \
     ENCLAVE (",\"pidsLimit\":64,\"cpuLimit\":\"1\",\"tmpfsLimit\":\"16m\",\"maxOutputBytes\":8192"),        \
     ck_assert (c->enabled))                                                                                 \
  X (enclaves_fixed_limits_in_other_spellings_are_accepted,                                                  \
     ENCLAVE (",\"cpuLimit\":\"01.000\",\"tmpfsLimit\":\"16384K\""), ck_assert (c->enabled))

#define CLASS_REJECT_ROWS(X)                                                                                 \
  X (object_entry_needs_a_sensitivity, REPOS ("{\"repo\":\"octo/hello\"}"),                                  \
     "sealedProbes.privateRepos[0].sensitivity: required")                                                   \
  X (object_entry_class_must_be_known, REPOS ("{\"repo\":\"octo/hello\",\"sensitivity\":\"CANARY\"}"),       \
     "sealedProbes.privateRepos[0].sensitivity: must be one of")                                             \
  X (object_entry_repo_name_is_checked,                                                                      \
     REPOS ("{\"repo\":\"https://CANARY@x/y\",\"sensitivity\":\"sealed\"}"),                                 \
     "sealedProbes.privateRepos[0].repo: must be")                                                           \
  X (string_and_object_naming_one_repo_are_duplicates, REPOS ("\"octo/hello\"," CLASSED ("internal")),       \
     "sealedProbes.privateRepos[1]: duplicate of sealedProbes.privateRepos[0]")                              \
  X (sealed_budget_cannot_be_overridden, ENABLED (",\"sensitivityBudgets\":{\"sealed\":1}"),                 \
     "sealedProbes.sensitivityBudgets.sealed: cannot be overridden")                                         \
  X (zero_budget_is_refused, ENABLED (",\"sensitivityBudgets\":{\"internal\":0}"),                           \
     "sealedProbes.sensitivityBudgets.internal: must be an integer from 1 to 1000000")                       \
  X (budget_above_the_bound_is_refused, ENABLED (",\"sensitivityBudgets\":{\"confidential\":1000001}"),      \
     "sealedProbes.sensitivityBudgets.confidential: must be an integer from 1 to 1000000")                   \
  X (both_forms_are_refused, "{\"sealedProbes\":{},\"enclaves\":[]}", "(document): holds both")              \
  X (enclaves_agent_entry_is_refused, "{\"enclaves\":[{\"agent\":{\"model\":\"CANARY\"},\"repos\":[]}]}",    \
     "enclaves[0].agent: is refused: an agent entry runs a model")                                           \
  X (enclaves_second_script_entry_is_refused, "{\"enclaves\":[" ENCLAVE_ENTRY "," ENCLAVE_ENTRY "]}",        \
     "enclaves[1]: is a second \"script\" entry")                                                            \
  X (enclaves_pids_below_ours_is_refused, ENCLAVE (",\"pidsLimit\":63"),                                     \
     "enclaves[0].pidsLimit: 63 is stricter than 64 processes")                                              \
  X (enclaves_cpu_below_one_is_refused, ENCLAVE (",\"cpuLimit\":\"0.999\""),                                 \
     "enclaves[0].cpuLimit: asks less than \"1\"")                                                           \
  X (enclaves_tmpfs_below_ours_is_refused, ENCLAVE (",\"tmpfsLimit\":\"16383k\""),                           \
     "enclaves[0].tmpfsLimit: asks less than \"16m\"")                                                       \
  X (enclaves_output_below_ours_is_refused, ENCLAVE (",\"maxOutputBytes\":8191"),                            \
     "enclaves[0].maxOutputBytes: 8191 is stricter than 8192 bytes")                                         \
  X (enclaves_runc_is_not_a_firewall_runtime, ENCLAVE (",\"runtime\":\"runc\""),                             \
     "enclaves[0].runtime: must be one of \"docker\", \"gvisor\", \"sbx\"")                                  \
  X (enclaves_timeout_above_ours_is_refused, ENCLAVE (",\"timeout\":540"),                                   \
     "enclaves[0].timeout: must be at most 300 seconds")                                                     \
  X (enclaves_string_repo_is_refused, "{\"enclaves\":[{\"script\":{},\"repos\":[\"octo/hello\"]}]}",         \
     "enclaves[0].repos[0]: must be an object")                                                              \
  X (enclaves_unknown_key_is_named, ENCLAVE (",\"tools\":[]"), "enclaves[0]: unknown key \"tools\"")

#define DEFINE_ACCEPT(name, doc, check)                                                                      \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    cleanup_config struct sp_config *c = parse_ok (doc);                                                     \
    check;                                                                                                   \
  }                                                                                                          \
  END_TEST
#define DEFINE_REJECT(name, doc, fragment)                                                                   \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    expect_reject (doc, sizeof (doc) - 1, fragment);                                                         \
  }                                                                                                          \
  END_TEST

#define DEFINE_REJECT_EXACT(name, doc, message)                                                              \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    expect_reject_exact (doc, sizeof (doc) - 1, message);                                                    \
  }                                                                                                          \
  END_TEST

ACCEPT_ROWS (DEFINE_ACCEPT)
REJECT_ROWS (DEFINE_REJECT)
NEAR_MISS_ROWS (DEFINE_REJECT_EXACT)
CLASS_ACCEPT_ROWS (DEFINE_ACCEPT)
CLASS_REJECT_ROWS (DEFINE_REJECT)

START_TEST (sensitivity_names_are_the_firewalls)
{
  ck_assert_str_eq (sp_sensitivity_name (SP_SENSITIVITY_NONE), "none");
  ck_assert_str_eq (sp_sensitivity_name (SP_SENSITIVITY_PUBLIC), "public");
  ck_assert_str_eq (sp_sensitivity_name (SP_SENSITIVITY_INTERNAL), "internal");
  ck_assert_str_eq (sp_sensitivity_name (SP_SENSITIVITY_CONFIDENTIAL), "confidential");
  ck_assert_str_eq (sp_sensitivity_name (SP_SENSITIVITY_SEALED), "sealed");
  ck_assert_str_eq (sp_sensitivity_name ((enum sp_sensitivity)99), "unknown");
}
END_TEST

/* The rule itself, at its edges: equal ignoring ASCII case, or one edit
   (insert, delete, substitute a code point, or swap two adjacent ones)
   ignoring ASCII case, and never the block's own name.  */
static const struct
{
  const char *key;
  bool near;
} near_miss_edges[] = {
  { "sealedProbes", false },               /* the block itself */
  { "SEALEDPROBES", true },                /* case only */
  { "sealedprobe", true },                 /* case and a deletion */
  { "ealedProbes", true },                 /* deletion, first */
  { "sealedProbe", true },                 /* deletion, last */
  { "xsealedProbes", true },               /* insertion, first */
  { "sealedProbesx", true },               /* insertion, last */
  { "sealedProbes ", true },               /* a trailing space */
  { "Xealedprobes", true },                /* substitution and case */
  { "esaledProbes", true },                /* swap, first two */
  { "sealedProbse", true },                /* swap, last two */
  { "sealedProb", false },                 /* two deletions */
  { "sealedPorbe", false },                /* a swap and a deletion */
  { "sealedPrboesx", false },              /* a swap and an insertion */
  { "xsealedProbesx", false },             /* two insertions */
  { "sealedPxxbes", false },               /* two substitutions */
  { "saeledPorbes", false },               /* two swaps */
  { "sealedProbesProbes", false },         /* far longer */
  { "sealed", false },                     /* half of it */
  { "privateRepos", false },               /* another key of the config */
  { "", false },                           /* nothing */
  { "sealedProbe\xc5\x9b", true },         /* one code point, two bytes */
  { "sealedProb\xc5\x9b\xc5\x9b", false }, /* two code points */
  { "\u017fealedProbes", true },           /* U+017F is not folded, still one edit */
  { "\u017fealedProbe\u017f", false },     /* ASCII folding only: two edits */
  { "sealedProbe\xff", true },             /* an invalid byte is one character */
  { "sealedProbe\xf0\x9f\x98\x80", true }, /* one code point, four bytes */
};

START_TEST (near_miss_rule_edges)
{
  for (size_t i = 0; i < sizeof (near_miss_edges) / sizeof (near_miss_edges[0]); i++)
    {
      const char *k = near_miss_edges[i].key;
      ck_assert_msg (sp_config_key_is_near_miss (k, strlen (k)) == near_miss_edges[i].near,
                     "\"%s\" should %sbe a near miss", k, near_miss_edges[i].near ? "" : "not ");
    }
}
END_TEST

/* n repositories "o/rK"; extra members may follow.  */
static char *
repos_doc (size_t n, bool duplicate_last)
{
  size_t cap = 64 + n * 16;
  char *doc = malloc (cap);
  size_t used;

  ck_assert_ptr_nonnull (doc);
  used = (size_t)snprintf (doc, cap, "{\"sealedProbes\":{\"enabled\":true,\"privateRepos\":[");
  for (size_t i = 0; i < n; i++)
    used += (size_t)snprintf (doc + used, cap - used, "%s\"o/r%zu\"", i ? "," : "",
                              duplicate_last && i == n - 1 ? (size_t)0 : i);
  snprintf (doc + used, cap - used, "]}}");
  return doc;
}

START_TEST (repos_at_the_maximum_are_accepted)
{
  cleanup_free char *doc = repos_doc (SP_CONFIG_MAX_REPOS, false);
  cleanup_config struct sp_config *c = parse_ok (doc);

  ck_assert_uint_eq (c->n_private_repos, 256);
}
END_TEST

START_TEST (repos_above_the_maximum_are_rejected)
{
  cleanup_free char *doc = repos_doc (SP_CONFIG_MAX_REPOS + 1, false);
  expect_reject (doc, strlen (doc), "sealedProbes.privateRepos: must hold at most 256 repositories");
}
END_TEST

/* n repositories "o/rK" to reject (privateRepos holds the first 256 of
   them).  */
static char *
submodules_doc (size_t n)
{
  size_t cap = 128 + n * 40;
  char *doc = malloc (cap);
  size_t used;

  ck_assert_ptr_nonnull (doc);
  used = (size_t)snprintf (doc, cap, "{\"sealedProbes\":{\"enabled\":true,\"privateRepos\":[");
  for (size_t i = 0; i < SP_CONFIG_MAX_REPOS; i++)
    used += (size_t)snprintf (doc + used, cap - used, "%s\"o/r%zu\"", i ? "," : "", i);
  used += (size_t)snprintf (doc + used, cap - used, "],\"submodules\":{\"reject\":[");
  for (size_t i = 0; i < n; i++)
    used += (size_t)snprintf (doc + used, cap - used, "%s\"o/r%zu\"", i ? "," : "", i);
  snprintf (doc + used, cap - used, "]}}}");
  return doc;
}

START_TEST (submodules_for_every_repository_at_the_maximum_are_accepted)
{
  cleanup_free char *doc = submodules_doc (SP_CONFIG_MAX_REPOS);
  cleanup_config struct sp_config *c = parse_ok (doc);

  for (size_t i = 0; i < SP_CONFIG_MAX_REPOS; i++)
    ck_assert_int_eq (c->submodules[i], SP_SUBMODULES_REJECT);
}
END_TEST

START_TEST (submodules_above_the_maximum_are_rejected)
{
  cleanup_free char *doc = submodules_doc (SP_CONFIG_MAX_REPOS + 1);
  expect_reject (doc, strlen (doc), "sealedProbes.submodules.reject: must hold at most 256 repositories");
}
END_TEST

START_TEST (duplicate_at_the_end_of_the_maximum_is_rejected)
{
  cleanup_free char *doc = repos_doc (SP_CONFIG_MAX_REPOS, true);
  expect_reject (doc, strlen (doc),
                 "sealedProbes.privateRepos[255]: duplicate of sealedProbes.privateRepos[0]");
}
END_TEST

START_TEST (nesting_deeper_than_64_is_rejected)
{
  char doc[256];
  size_t used = (size_t)snprintf (doc, sizeof doc, "{\"host\":");

  /* The root object is level 1, so 64 arrays make 65 levels.  */
  for (int i = 0; i < 64; i++)
    doc[used++] = '[';
  for (int i = 0; i < 64; i++)
    doc[used++] = ']';
  doc[used++] = '}';
  doc[used] = '\0';
  expect_reject (doc, used, "(document): nesting deeper than 64");
  doc[8] = ' ', doc[used - 2] = ' '; /* 64 levels */
  {
    cleanup_config struct sp_config *c = parse_ok (doc);
    ck_assert (!c->enabled);
  }
}
END_TEST

START_TEST (allows_repo_matches_bytes_exactly)
{
  cleanup_config struct sp_config *c = parse_ok (REPOS ("\"octo/hello\",\"a/b\""));

  ck_assert (sp_config_allows_repo (c, (const uint8_t *)"octo/hello", 10));
  ck_assert (sp_config_allows_repo (c, (const uint8_t *)"a/b", 3));
  ck_assert (!sp_config_allows_repo (c, (const uint8_t *)"Octo/hello", 10));
  ck_assert (!sp_config_allows_repo (c, (const uint8_t *)"octo/hello ", 11));
  ck_assert (!sp_config_allows_repo (c, (const uint8_t *)"octo/hello\0", 11));
  ck_assert (!sp_config_allows_repo (c, (const uint8_t *)"octo/hell", 9));
  ck_assert (!sp_config_allows_repo (c, (const uint8_t *)"octo/hello.git", 14));
  ck_assert (!sp_config_allows_repo (c, (const uint8_t *)"", 0));
  ck_assert (!sp_config_allows_repo (NULL, (const uint8_t *)"a/b", 3));
}
END_TEST

START_TEST (disabled_config_allows_no_repo)
{
  cleanup_config struct sp_config *c = parse_ok (BLOCK ("\"privateRepos\":[\"a/b\"]"));
  ck_assert (!sp_config_allows_repo (c, (const uint8_t *)"a/b", 3));
}
END_TEST

START_TEST (runtime_names_round_trip)
{
  ck_assert_str_eq (sp_runtime_name (SP_RUNTIME_DOCKER), "docker");
  ck_assert_str_eq (sp_runtime_name (SP_RUNTIME_GVISOR), "gvisor");
  ck_assert_str_eq (sp_runtime_name (SP_RUNTIME_SBX), "sbx");
  ck_assert_str_eq (sp_runtime_name (SP_RUNTIME_RUNC), "runc");
  ck_assert_str_eq (sp_interpreter_name (SP_INTERPRETER_PYTHON3), "python3");
}
END_TEST

START_TEST (bounds_match_the_documented_values)
{
  ck_assert_int_eq (SP_TIMEOUT_MIN_SECONDS, 1);
  ck_assert_int_eq (SP_TIMEOUT_MAX_SECONDS, 300);
  ck_assert_int_eq (SP_TIMEOUT_DEFAULT_SECONDS, 30);
  ck_assert_uint_eq (SP_MEMORY_MIN_BYTES, 64ULL << 20);
  ck_assert_uint_eq (SP_MEMORY_MAX_BYTES, 8ULL << 30);
  ck_assert_int_eq (SP_INVOCATIONS_MIN, 1);
  ck_assert_int_eq (SP_INVOCATIONS_MAX, 100000);
  ck_assert_int_eq (SP_INVOCATIONS_DEFAULT, 32);
  ck_assert_int_eq (SP_CONFIG_MAX_REPOS, 256);
  ck_assert_int_eq (SP_CONFIG_MAX_BYTES, 1048576);
  ck_assert_int_eq (SP_CONFIG_MAX_DEPTH, 64);
}
END_TEST

START_TEST (sample_config_loads_with_runc_and_sample_repo)
{
  cleanup_free char *path = sp_check_data_path ("../../examples/sealed-probes.json");
  cleanup_config struct sp_config *c = NULL;
  sp_error_t err = NULL;

  ck_assert_msg (sp_config_load (path, &c, &err) == 0, "%s", sp_error_message (err));
  ck_assert (c->enabled);
  ck_assert_int_eq (c->runtime, SP_RUNTIME_RUNC);
  ck_assert_uint_eq (c->n_private_repos, 1);
  ck_assert_str_eq (c->private_repos[0], "sample/hello");
}
END_TEST

START_TEST (missing_file_names_the_path)
{
  cleanup_free char *path = sp_check_data_path ("config/no-such-file.json");
  struct sp_config *c = NULL;
  sp_error_t err = NULL;

  ck_assert_int_eq (sp_config_load (path, &c, &err), -1);
  ck_assert_ptr_null (c);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "no-such-file.json"));
  ck_assert_int_ne (err->status, 0);
  sp_error_release (&err);
}
END_TEST

START_TEST (parse_errors_from_a_file_do_not_name_the_file)
{
  cleanup_free char *path = NULL;
  struct sp_config *c = NULL;
  sp_error_t err = NULL;
  char tmpl[] = "/tmp/check_config_XXXXXX";
  int fd = mkstemp (tmpl);

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, "{\"sealedProbes\":{\"timeout\":0}}", 30), 30);
  close (fd);
  ck_assert_int_eq (sp_config_load (tmpl, &c, &err), -1);
  unlink (tmpl);
  ck_assert_str_eq (sp_error_message (err), BAD_TIMEOUT);
  sp_error_release (&err);
}
END_TEST

START_TEST (oversized_file_is_rejected)
{
  char tmpl[] = "/tmp/check_config_XXXXXX";
  int fd = mkstemp (tmpl);
  struct sp_config *c = NULL;
  sp_error_t err = NULL;

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (ftruncate (fd, SP_CONFIG_MAX_BYTES + 1), 0);
  close (fd);
  ck_assert_int_eq (sp_config_load (tmpl, &c, &err), -1);
  unlink (tmpl);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "larger than 1048576 bytes"));
  sp_error_release (&err);
}
END_TEST

#define ADD_ROW(name, ...) tcase_add_test (tc, name);

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("check_config");
  TCase *tc = tcase_create ("config");

  ACCEPT_ROWS (ADD_ROW)
  REJECT_ROWS (ADD_ROW)
  NEAR_MISS_ROWS (ADD_ROW)
  CLASS_ACCEPT_ROWS (ADD_ROW)
  CLASS_REJECT_ROWS (ADD_ROW)
  tcase_add_test (tc, sensitivity_names_are_the_firewalls);
  tcase_add_test (tc, near_miss_rule_edges);
  tcase_add_test (tc, repos_at_the_maximum_are_accepted);
  tcase_add_test (tc, repos_above_the_maximum_are_rejected);
  tcase_add_test (tc, duplicate_at_the_end_of_the_maximum_is_rejected);
  tcase_add_test (tc, submodules_for_every_repository_at_the_maximum_are_accepted);
  tcase_add_test (tc, submodules_above_the_maximum_are_rejected);
  tcase_add_test (tc, nesting_deeper_than_64_is_rejected);
  tcase_add_test (tc, allows_repo_matches_bytes_exactly);
  tcase_add_test (tc, disabled_config_allows_no_repo);
  tcase_add_test (tc, runtime_names_round_trip);
  tcase_add_test (tc, bounds_match_the_documented_values);
  tcase_add_test (tc, sample_config_loads_with_runc_and_sample_repo);
  tcase_add_test (tc, missing_file_names_the_path);
  tcase_add_test (tc, parse_errors_from_a_file_do_not_name_the_file);
  tcase_add_test (tc, oversized_file_is_rejected);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
